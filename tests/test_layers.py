"""The package's arrows run one way: a module imports only from layers below its own.

The layers, top to bottom, are the order of ``LAYERS``; the package root's ``__init__`` (the
lazy public API) may name anything. A private name (``_x``) is never imported from another
module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rag_bench"

LAYERS = (
    "cli",
    "testing",
    "report",
    "testsets",
    "analysis",
    "experiment",
    "runs",
    "pipeline",
    "components",
    "evaluation",
    "text",
    "data",
    "io",
    "model",
    "errors",
)
MAX_ROOT_MODULES = 6


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


# A compiled module (rag_bench/io/_scan.c) is private to its folder, whose Python module (its
# only importer) falls back to pyarrow or numpy without it: (package, module name) pairs.
COMPILED = {
    (".".join(source.parent.relative_to(PACKAGE.parent).parts), source.stem)
    for source in PACKAGE.rglob("*.c")
}


def _layer(module: str) -> str:
    """``rag_bench.components.dense`` -> ``components``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(p for p in rel.parts if p != "__init__")


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name, []) for a in node.names)
    return [f for f in found if f[1] == "rag_bench" or f[1].startswith("rag_bench.")]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_downward(path):
    module = _module_name(path)
    if module == "rag_bench":
        return
    here = _layer(module)
    assert here in LAYERS, f"{module}: a module outside the known layers"
    rank = LAYERS.index(here)
    for line, target, names in _imports(path):
        there = _layer(target)
        if target == "rag_bench":
            assert names == ["__version__"], f"{path.name}:{line} imports the public API"
            continue
        assert there in LAYERS, f"{path.name}:{line}: {target}"
        assert LAYERS.index(there) >= rank, (
            f"{module}:{line} imports {target}: {here} may only use the layers below it"
        )
        private = [
            n
            for n in names
            if n.startswith("_")
            and n != "__version__"
            and not ((target, n) in COMPILED and module.rpartition(".")[0] == target)
        ]
        assert not private, f"{module}:{line} imports private {private} from {target}"


def test_package_root_is_small():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


SQL_HOMES = ("analysis", "runs")  # the layers that may hold SQL (the trace reads, the store)
SQL_START = re.compile(r"^\s*(SELECT|WITH|INSERT|UPDATE|DELETE|CREATE|COPY)\s")  # as written here


def _sql_texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal that begins a SQL statement, and of every f-string
    that splices values into an ``IN (...)`` list."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if SQL_START.match(node.value):
                found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            text = "{}".join(str(p) for p in parts)
            if SQL_START.match(text) or re.search(r"\bIN \($", text):
                found.append((node.lineno, text))
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_sql_lives_in_analysis_and_runs(path):
    """Trace SQL is written in analysis/ (and the store's own in runs/); values reach it as
    bound parameters, never spliced into an ``IN`` list."""
    layer = _layer(_module_name(path))
    for line, text in _sql_texts(path):
        assert layer in SQL_HOMES, f"{path.name}:{line}: SQL outside {SQL_HOMES}: {text[:60]!r}"
        assert not re.search(r"\bIN \(\{\}", text), f"{path.name}:{line}: a spliced IN list"
