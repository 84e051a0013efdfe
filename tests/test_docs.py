"""The documentation (``docs/*.md`` and ``README.md``): every example runs, every table
generated from code is its source's, every file and docstring reference names something that
exists, and the Sphinx build fails on a broken link or reference."""
from __future__ import annotations

import ast
import importlib
import inspect
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

import spf
from spf import cli
from spf.front.kernel_spec import load_kernel_file
from spf.front.layout_file import parse_layout
from spf.front.layout_path import LAYOUT_DIR

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = [*sorted(DOCS.glob("*.md")), README]
SPMV_FILE = ROOT / "tests" / "data" / "spmv.toml"
# Packages an example may need beyond spf's own dependencies (the test and distributed extras
# install them); a block importing one that is missing is skipped, the rest of its page runs.
OPTIONAL = {"sparse", "dask", "distributed", "graphblas", "matplotlib"}


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int       # of the opening fence


def blocks(path: Path, lang: str | None = None) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order (MyST directives included)."""
    found, fence, start, body = [], None, 0, []
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if fence is None:
            match = re.match(r"^(`{3,})(.*)$", text)
            if match:
                fence, info, start, body = match.group(1), match.group(2).strip(), number, []
        elif text.startswith(fence) and not text.strip("`"):
            found.append(Block(info, "".join(line + "\n" for line in body), start))
            fence = None
        else:
            body.append(text)
    assert fence is None, f"{path}: the fence opened at line {start} is not closed"
    return [b for b in found if lang is None or b.lang == lang]


def page_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ---------------------------------------------------------------------------------------
# Examples: each page's blocks in order, in a fresh temporary directory; each Python block
# in a fresh namespace, run as a script's main module would be.
def missing_optional(code: str) -> list[str]:
    tree = ast.parse(code)
    roots = {alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module}
    return sorted(m for m in roots & OPTIONAL if importlib.util.find_spec(m) is None)


def run_python(page: Path, block: Block) -> None:
    code = compile(block.code, f"{page_id(page)}:{block.line + 1}", "exec")
    exec(code, {"__name__": "__main__"})


def commands(block: Block) -> list[tuple[int, list[str]]]:
    """The command lines of a shell block (continuations joined), split as the shell would."""
    lines, joined, start = [], "", 0
    for offset, text in enumerate(block.code.splitlines(), 1):
        start = start or block.line + offset
        joined += text.rstrip("\\")
        if not text.endswith("\\"):
            words = shlex.split(joined, comments=True)
            if words:
                lines.append((start, words))
            joined, start = "", 0
    return lines


def run_spf(page: Path, line: int, words: list[str], monkeypatch, tmp_path: Path) -> bool:
    """Run a line that calls ``spf`` through the command's entry point; False for other
    programs (``python my_program.py``).  ``spf cache clear`` gets a cache of its own."""
    env = {}
    while "=" in words[0]:
        key, env[key] = words.pop(0).split("=", 1)
    if words[0] != "spf":
        return False
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if words[1:2] == ["cache"]:
        monkeypatch.setenv("SPF_CACHE_DIR", str(tmp_path / "own-cache"))
    status = cli.main(words[1:])
    assert status == 0, f"{page_id(page)}:{line}: `{shlex.join(words)}` exited with {status}"
    return True


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    skipped, ran = [], 0
    for block in blocks(page):
        if block.lang == "python":
            missing = missing_optional(block.code)
            if missing:
                skipped.append(f"line {block.line} needs {', '.join(missing)}")
                continue
            run_python(page, block)
            ran += 1
        elif block.lang == "sh":
            with monkeypatch.context() as env:
                ran += sum(run_spf(page, line, words, env, tmp_path)
                           for line, words in commands(block))
    if skipped:
        pytest.skip(f"{page_id(page)}: ran {ran} examples; skipped {'; '.join(skipped)}")


def test_examples_are_counted():
    """The pages hold the examples this test file runs (a page losing its fences would pass
    silently otherwise)."""
    python = sum(len(blocks(p, "python")) for p in PAGES)
    shell = sum(len(commands(b)) for p in PAGES for b in blocks(p, "sh"))
    assert python >= 25 and shell >= 15, (python, shell)


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, "toml")], ids=page_id)
def test_toml_blocks_are_the_shipped_files(page):
    """A documented layout file is the shipped one (comments aside); a documented kernel file
    is tests/data/spmv.toml; a documented defaults file has only the shipped one's tables."""
    for block in blocks(page, "toml"):
        table = tomllib.loads(block.code)
        if "relation" in table:
            lay = parse_layout(block.code, str(LAYOUT_DIR / f"{table['name']}.toml"))
            shipped = spf.load_layout(table["name"])
            assert str(lay.relation) == str(shipped.relation)
            assert lay.fields == shipped.fields
            assert lay.properties == shipped.properties
            assert (lay.value, lay.shape, lay.packer) == \
                (shipped.value, shipped.shape, shipped.packer)
        elif "expr" not in table:       # a defaults.toml: tables of the shipped one
            shipped = tomllib.loads((LAYOUT_DIR / "defaults.toml").read_text())
            assert set(table) <= set(shipped), sorted(set(table) - set(shipped))
        else:
            assert block.code == SPMV_FILE.read_text()
            assert load_kernel_file(SPMV_FILE).expr.text == table["expr"]


# ---------------------------------------------------------------------------------------
# The README: the two commands first, as CI runs them; short.
def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    first = blocks(README)[0]
    assert first.lang == ""
    assert first.code.splitlines() == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install . && spf demo",
        "python3 -m venv .venv && . .venv/bin/activate && "
        'pip install -e ".[test,distributed,docs]" && python -m pytest -q -n auto',
    ]
    assert text.index(first.code) < text.index("## ")
    assert first.code in (DOCS / "getting-started.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()   # CI runs what the README says
    assert 'python -m pip install --quiet -e ".[test,distributed,docs]"' in ci
    assert "python -m pytest -q -n auto" in ci


def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= 150


def test_benchmark_figures_only_in_results():
    """Speed-ups and timings live in experiments/RESULTS.md; the docs link to it."""
    figure = re.compile(r"\b\d+(\.\d+)?x (scipy|MKL|GraphBLAS|TACO|faster|slower|the)\b"
                        r"|\b\d+(\.\d+)? ?(us|µs)\b|\b\d+\.\d+ ?ms\b")
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            assert not figure.search(line), f"{page_id(page)}:{number}: {line}"


# ---------------------------------------------------------------------------------------
# Tables generated from code
def between(path: Path, start: str, end: str) -> str:
    text = path.read_text()
    assert start in text and end in text, f"{page_id(path)} lacks the markers {start} {end}"
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n")


def test_layouts_table_is_generated(capsys, monkeypatch):
    monkeypatch.delenv("SPF_LAYOUT_PATH", raising=False)
    assert cli.main(["layouts", "--markdown"]) == 0
    table = between(DOCS / "layouts.md", "<!-- layouts table: generated by `spf layouts "
                    "--markdown` -->", "<!-- end layouts table -->")
    assert table == capsys.readouterr().out.strip("\n"), \
        "regenerate the table in docs/layouts.md with `spf layouts --markdown`"


# ---------------------------------------------------------------------------------------
# Names the documentation and the docstrings point at
PATH = re.compile(r"`((?:spf|front|middle|decide|back|runtime|finds|assembly|tests|experiments|"
                  r"layouts|templates|docs|\.ci)/[\w./]*\w)`")
# Paths the pages name that are not in the repository on purpose: a target one could add, the
# build's output, a file an experiment writes.
NOT_FILES = {"back/ispc_printer.py", "docs/_build/index.html", "experiments/results/NAME.csv"}


def _exists(name: str) -> bool:
    """A repository path (module paths may be relative to spf/), or ``dir/module.attr``."""
    if any((base / name).exists() for base in (ROOT, ROOT / "spf")) or \
            any((base / f"{name}.py").exists() for base in (ROOT, ROOT / "spf")):
        return True
    path, _, attr = name.rpartition(".")
    module = path if path.startswith("spf/") else f"spf/{path}"
    return (ROOT / f"{module}.py").exists() and \
        hasattr(importlib.import_module(module.replace("/", ".")), attr)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_paths_named_exist(page):
    """Every repository path a page names in code (`spf/front/storage.py`, `back/lower.py`,
    `decide/options.KernelOptions`, `tests/test_sums.py`) exists."""
    missing = [p for p in PATH.findall(page.read_text()) if p not in NOT_FILES and not _exists(p)]
    assert not missing, f"{page_id(page)} names paths that do not exist: {missing}"


def test_architecture_lists_every_module():
    text = (DOCS / "architecture.md").read_text()
    modules = sorted(p.relative_to(ROOT / "spf").as_posix() for p in (ROOT / "spf").rglob("*.py")
                     if p.name not in ("__init__.py", "__main__.py"))
    missing = [m for m in modules if f"`{m}`" not in text]
    assert not missing, f"docs/architecture.md has no row for {missing}"


ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):`([^`]+)`")


def _names(path: str) -> bool:
    """Whether a dotted path names an importable object (a dataclass field counts)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if part in getattr(obj, "__dataclass_fields__", {}):
                return part == parts[-1]
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def _resolves(target: str, module: str, source: str) -> bool:
    """As Sphinx resolves a role in ``module``'s docstrings: absolute, relative to the module
    (or its package, with a leading dot), to one of its classes, to ``spf``, or a builtin;
    an instance attribute the module assigns (``self.name = ...``) counts for ``:attr:``."""
    target = re.sub(r"^.*<(.+)>$", r"\1", target).lstrip("~!").removesuffix("()")
    if target.startswith("."):
        package = module if (ROOT / module.replace(".", "/")).is_dir() else \
            module.rpartition(".")[0]
        return _names(package + target)
    mod = importlib.import_module(module)
    classes = [f"{module}.{n}" for n, c in vars(mod).items()
               if inspect.isclass(c) and c.__module__ == module]
    return any(_names(f"{base}{target}") for base in
               ("", f"{module}.", "spf.", "builtins.", *(f"{c}." for c in classes))) \
        or re.search(rf"\bself\.{re.escape(target)} = ", source) is not None


def test_docstring_references_exist():
    """Every :mod:/:class:/:func:/:meth:/:attr: role in spf/ names an object that exists, in
    the modules the API reference renders and in the others alike."""
    spf.__getattr__("Kernel")       # the whole API imported
    stale = []
    for path in sorted((ROOT / "spf").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        source = path.read_text()
        for number, line in enumerate(source.splitlines(), 1):
            stale += [f"{path.relative_to(ROOT)}:{number}: {t}" for t in ROLE.findall(line)
                      if not _resolves(t, module, source)]
    assert not stale, "docstring references to nothing:\n" + "\n".join(stale)


# ---------------------------------------------------------------------------------------
# The Sphinx build (also run by .ci/run)
def sphinx(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q",
                           "-b", "html", str(source), str(out)],
                          capture_output=True, text=True, timeout=600)


def test_sphinx_build(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    proc = sphinx(DOCS, tmp_path / "html")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "html" / "api.html").read_text().count('id="spf.') >= len(spf.__all__)


def test_sphinx_refuses_broken_links_and_references(tmp_path):
    """A link to a missing page or heading, a docstring reference to nothing and a name of
    spf.__all__ left out of the API reference each fail the build."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(DOCS / "conf.py", site)
    (site / "index.md").write_text(
        "# Home\n\n## A heading\n\n[fine](other.md#other), [gone](missing.md), "
        "[no heading](other.md#no-such-heading)\n\n```{toctree}\nother\n```\n")
    (site / "other.md").write_text(
        "# Other\n\n[back](index.md#a-heading)\n\n```{eval-rst}\n"
        ".. autofunction:: spf.evaluate\n\n.. py:function:: stale()\n\n"
        "   See :func:`spf.storage.storage_of`.\n```\n")
    proc = sphinx(site, tmp_path / "html")
    assert proc.returncode != 0
    for message in ("'missing.md'", "'no-such-heading'", "spf.storage.storage_of",
                    "spf.Kernel (in spf.__all__) is missing from the API reference"):
        assert message in proc.stderr, (message, proc.stderr)
    assert "'other': 'other'" not in proc.stderr and "'a-heading'" not in proc.stderr

