"""The installed package carries its data: layouts and templates inside the spf namespace."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_data_read_through_importlib_resources():
    from spf.back.templates import TEMPLATE_DIR
    from spf.front.layout_path import LAYOUT_DIR
    assert resources.files("spf.layouts").joinpath("defaults.toml").is_file()
    assert resources.files("spf.templates").joinpath("kernel.c").is_file()
    assert (LAYOUT_DIR / "CSR.toml").is_file() and (TEMPLATE_DIR / "kernel.c").is_file()


@pytest.mark.slow
def test_wheel_holds_layouts_and_templates_inside_spf(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                           "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = tmp_path.glob("spf-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tops = {n.split("/")[0] for n in names}
    assert tops == {"spf", next(t for t in tops if t.endswith(".dist-info"))}, tops
    for folder in ("layouts", "templates"):
        shipped = {p.name for p in (ROOT / folder).iterdir() if p.suffix in (".toml", ".py", ".c")}
        assert shipped and {f"spf/{folder}/{n}" for n in shipped} <= names
    # every module of the package, subpackages included (spf.back, spf.finds, ...)
    modules = {f"spf/{p.relative_to(ROOT / 'spf').as_posix()}"
               for p in (ROOT / "spf").rglob("*.py")}
    assert modules <= names, sorted(modules - names)


def test_version_has_one_source():
    """pyproject.toml defines the version; spf reads it from the installed package, and the
    changelog has a section for it."""
    import tomllib

    import spf
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert spf.__version__ == declared
    assert f"## {declared} " in (ROOT / "CHANGELOG.md").read_text()
    assert "__version__ =" not in (ROOT / "spf" / "__init__.py").read_text()
