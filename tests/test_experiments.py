"""Every experiment runs in quick mode, so none of them rots."""
import importlib

import pytest

EXPERIMENTS = ["codegen_time", "spmv", "spmspv", "spmspm", "ttm", "conversion"]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_quick_mode(name):
    module = importlib.import_module(f"experiments.{name}")
    rows = module.main(["--quick"])
    assert rows, f"{name} produced no rows"
    if hasattr(module, "describe"):
        assert "|" in module.describe([{k: str(v) for k, v in r.items()} for r in rows])
