"""Every experiment runs in quick mode, so none of them rots; RESULTS.md is redrawn from CSVs."""
import csv
import importlib

import pytest

pytestmark = pytest.mark.experiments
EXPERIMENTS = ["goals", "codegen_time", "import_time", "call_overhead", "spmv", "spmspv",
               "spmspv_push", "spmspm", "ttm", "sparse_add", "conversion", "graphs",
               "distributed", "scaling_model", "float32", "convolution", "tune"]


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_quick_mode(name):
    if name == "distributed":
        pytest.importorskip("distributed")
    module = importlib.import_module(f"experiments.{name}")
    rows = module.main(["--quick"])
    assert rows, f"{name} produced no rows"
    if hasattr(module, "describe"):
        assert "|" in module.describe([{k: str(v) for k, v in r.items()} for r in rows])


def test_report_redraws_plots_and_embeds_them(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from experiments import common, report
    rows = [{"n": n, "nnz": 10 * n, "scipy_us": 3.0 * n, "spf_tensor_us": 4.0 * n,
             "spf_scipy_us": 9.0 * n, "spf_evaluate_us": 12.0 * n, "spf_c_us": 1.0 * n,
             "spf_tensor_vs_scipy": 4 / 3, "spf_scipy_vs_scipy": 3.0,
             "spf_evaluate_vs_scipy": 4.0, "spf_c_vs_scipy": 1 / 3,
             "cpu": "test cpu", "cores": "2", "date": "today"} for n in (10, 100)]
    with (tmp_path / "call_overhead.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(report, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(report, "OUT", tmp_path.parent / "RESULTS.md")
    report.main()
    text = (tmp_path.parent / "RESULTS.md").read_text()
    for png in ("call_overhead_time.png", "call_overhead_vs_scipy.png"):
        assert (tmp_path / png).stat().st_size > 1000
        assert f"]({tmp_path.name}/{png})" in text
    assert "| 100 | 1000 | 300 |" in text
