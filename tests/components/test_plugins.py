"""The plugin registry: entry points, overrides, error messages, and a third-party package."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from processes import COMMAND

from conftest import DOCUMENTS, ROOT, SHIPPED, assert_one_line_error, require
from rag_bench.components.base import Capability, declared
from rag_bench.components.registry import registry, resolve
from rag_bench.data.dataset import load_dataset
from rag_bench.errors import UnknownNameError, UsageError
from rag_bench.model import Query
from rag_bench.pipeline.compose import Pipeline

DOCS = "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)


def test_builtins_come_through_entry_points():
    reg = registry()
    assert {"baseline", "hybrid", "hybrid_rerank", "recorded"} <= set(reg.variants)
    assert reg.variant("baseline").origin == "rag-bench"
    assert reg.component("retriever", "bm25").origin == "rag-bench"


def test_overrides_are_typed_and_land_in_the_resolved_params():
    spec = registry().variant("hybrid")
    resolved = resolve(spec, ["retriever.k1=1.2", "chunker.size=64", "encoder.dims=32"])
    assert resolved["retriever"]["k1"] == 1.2 and resolved["chunker"]["size"] == 64
    assert resolved["encoder"] == {"name": "lsa", "dims": 32, "seed": 0}
    switched = resolve(spec, ["chunker.name=none"])
    assert switched["chunker"] == {"name": "none"}


@pytest.mark.parametrize(
    ("override", "error", "fragments"),
    [
        ("retrever.k1=1", UnknownNameError, ["retrever", "analyzer", "chunker", "retriever"]),
        ("retriever.k=1", UnknownNameError, ["'k'", "b, k1, method"]),
        ("chunker.name=sliding", UnknownNameError, ["sliding", "fixed, none, recorded, recursive"]),
        ("retriever.k1=fast", UsageError, ["retriever.k1='fast'", "float"]),
        ("retriever", UsageError, ["slot.param=value"]),
    ],
)
def test_bad_overrides_name_the_valid_choices(override, error, fragments):
    with pytest.raises(error) as info:
        resolve(registry().variant("baseline"), [override])
    for fragment in fragments:
        assert fragment in str(info.value)


def readme_block(language: str, first_line: str) -> str:
    """The documentation's code block in ``language`` that starts with ``first_line``."""
    pattern = rf"```{language}\n({re.escape(first_line)}\n.*?)```"
    return re.search(pattern, DOCS, re.DOTALL).group(1)


def entry_points_txt(pyproject: str) -> str:
    """The ``[project.entry-points]`` tables of a pyproject.toml as an ``entry_points.txt``."""
    tomllib = require("tomllib", "Python 3.11 or newer")
    groups = tomllib.loads(pyproject)["project"]["entry-points"]
    return "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
        for group, entries in groups.items()
    )


def distribute(folder, module: str, source: str, entry_points: str) -> None:
    """An installed distribution in ``folder`` (a ``*.dist-info`` beside one module), as pip
    would leave it; importable once ``folder`` is on the path."""
    (folder / f"{module}.py").write_text(source)
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def install(folder, monkeypatch, module: str, source: str, entry_points: str) -> None:
    """A package ``module`` (one module) with its entry points, importable from ``folder``."""
    distribute(folder, module, source, entry_points)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, module, raising=False)


@pytest.fixture
def third_party_plugin(tmp_path, monkeypatch):
    """The example plugin of docs/components.md, installed as the package 'my-components'."""
    source = readme_block("python", "# my_components.py")
    pyproject = readme_block("toml", "# pyproject.toml of your package")
    install(tmp_path, monkeypatch, "my_components", source, entry_points_txt(pyproject))
    registry.cache_clear()
    yield
    registry.cache_clear()
    sys.modules.pop("my_components", None)


SHAKY = """
from rag_bench.components.base import Capability, Generator
from rag_bench.components.registry import ComponentSpec, VariantSpec, component


@component("generator", "eager")
class Eager(Generator):
    capabilities = frozenset({Capability.BATCH})  # without generate_all

    def generate(self, query, context):
        raise NotImplementedError


NOT_A_COMPONENT = "extractive"

fine = VariantSpec(
    "shaky_fine",
    {"chunker": {"name": "fixed"}, "retriever": {"name": "bm25", "k1": 1.2},
     "generator": {"name": "extractive"}},
)
dangling = VariantSpec("shaky_dangling", {"generator": {"name": "eager"}})
taken = VariantSpec("baseline", {"generator": {"name": "extractive", "max_sentences": 1}})
TAKEN = ComponentSpec("generator", "extractive", Eager)
"""
EXITS = "raise SystemExit(0)  # a plugin that ends the process at import\n"

# (entry-point group, entry point, what its warning says)
BREAKAGES = [
    ("components", "shaky_plugin_missing:Thing", "ModuleNotFoundError: No module named 'shaky_p"),
    ("components", "shaky_plugin:Nothing", "AttributeError: module 'shaky_plugin' has no"),
    ("components", "shaky_plugin:NOT_A_COMPONENT", "it names a value of type str, not a"),
    ("components", "shaky_plugin:Eager", "generator 'Eager' breaks the Generator contract: BATCH"),
    ("variants", "shaky_plugin:dangling", "variant 'shaky_dangling': unknown generator 'eager'"),
    ("components", "shaky_exits:Thing", "SystemExit: 0"),
    ("variants", "shaky_exits:fine", "SystemExit: 0"),
    ("variants", "shaky_plugin:taken", "variant 'baseline' is a built-in name, which a plugin"),
    ("components", "shaky_plugin:TAKEN", "generator 'extractive' is a built-in name, which"),
]


def shaky_environment(folder, group: str, broken: str) -> dict[str, str]:
    """The environment of a child process in which the distribution ``shaky-plugin`` is
    installed: the entry point ``broken`` of ``group`` beside a working variant."""
    entry_points = {"components": "", "variants": "fine = shaky_plugin:fine\n"}
    entry_points[group] += f"broken = {broken}\n"
    text = "".join(f"[rag_bench.{g}]\n{lines}\n" for g, lines in entry_points.items() if lines)
    distribute(folder, "shaky_plugin", SHAKY, text)
    (folder / "shaky_exits.py").write_text(EXITS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # the checkout's rag_bench, not whichever is installed
    return {**env, "PYTHONPATH": f"{folder}{os.pathsep}{ROOT}", "COLUMNS": "120"}


def cli(args, env) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *map(str, args)], env=env, capture_output=True, text=True)


@pytest.mark.parametrize(("group", "broken", "problem"), BREAKAGES, ids=[b[1] for b in BREAKAGES])
def test_a_broken_entry_point_is_one_warning_line_and_the_rest_works(
    tmp_path, group, broken, problem
):
    env = shaky_environment(tmp_path, group, broken)
    out = cli(["variants", "--format", "csv"], env)
    assert out.returncode == 0, out.stderr
    [line] = out.stderr.splitlines()
    assert line.startswith(f"warning: plugin shaky-plugin 0.1: entry point 'broken = {broken}'")
    assert f"(rag_bench.{group}) skipped: {problem}" in line, line
    assert "Traceback" not in out.stderr
    assert 'shaky_fine,retriever,bm25,"k1=1.2' in out.stdout  # the same package's good variant
    assert "baseline,retriever,bm25" in out.stdout
    assert "shaky_dangling" not in out.stdout
    assert 'method=lucene",shaky-plugin,\n' in out.stdout  # declares no description
    listing = cli(["components", "generator", "--format", "csv"], env)
    assert listing.returncode == 0 and "extractive" in listing.stdout
    assert "eager" not in listing.stdout and len(listing.stderr.splitlines()) == 1


def test_the_warning_comes_once_per_process_and_runs_still_work(tmp_path):
    env = shaky_environment(tmp_path, "components", "shaky_plugin:Eager")
    runs = tmp_path / "runs"
    args = ["--dataset", SHIPPED, "--runs-dir", runs, "--tag", "smoke", "--format", "csv"]
    out = cli(["run", "--variant", "shaky_fine,baseline", *args], env)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("warning: plugin shaky-plugin") == 1, out.stderr
    assert "all,shaky_fine,30," in out.stdout and "all,baseline,30," in out.stdout
    unknown = cli(["run", "--variant", "shaky_dangling", *args], env)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert unknown.stderr.splitlines()[-1].startswith("error: unknown variant 'shaky_dangling'")


def test_third_party_variant_is_listed_and_runs(third_party_plugin, rag_bench, tmp_path):
    listing = rag_bench("variants", "--format", "csv").stdout
    assert "bm25_title_first,reranker,title_first,top_n=10,my-components" in listing
    assert "baseline,retriever,bm25" in listing
    out = rag_bench(
        "run",
        "--variant",
        "bm25_title_first",
        "--dataset",
        SHIPPED,
        "--runs-dir",
        tmp_path / "runs",
        "--tag",
        "smoke",
        "--format",
        "csv",
    )
    assert out.exit_code == 0, out.stderr
    assert "all,bm25_title_first,30," in out.stdout


def test_third_party_component_and_variant_are_listed_with_their_docs(
    third_party_plugin, rag_bench
):
    rerankers = json.loads(rag_bench("components", "reranker", "--format", "json").stdout)
    [mine] = [r for r in rerankers if r["component"] == "title_first"]
    assert mine["origin"] == "my-components"
    assert mine["params"] == [{"name": "top_n", "type": "int", "default": 20}]
    source = readme_block("python", "# my_components.py")
    assert f'"""{mine["description"]}"""' in source  # the docstring's first line
    variants = json.loads(rag_bench("variants", "--format", "json").stdout)
    described = {r["variant"]: r["description"] for r in variants}
    assert described["bm25_title_first"] == "BM25, then the candidates with a matching title first"


def test_third_party_component_satisfies_its_contract_and_is_prepared(third_party_plugin):
    spec = registry().component("reranker", "title_first")
    assert spec.origin == "my-components"
    assert spec.params == {"top_n": 20} and spec.types == {"top_n": int}
    assert declared("reranker", spec.factory) == {Capability.PREPARE}
    resolved = resolve(registry().variant("bm25_title_first"), ["reranker.top_n=5"])
    pipeline = Pipeline(resolved)
    pipeline.index(load_dataset(SHIPPED))  # calls prepare, as declared
    query = Query("q", "What is the maximum memory of the KS-440?")
    [stages], _ = pipeline.rank([query], depth=20)
    wanted = set(pipeline.analyzer.terms(query.text))
    titled = [bool(wanted & pipeline.reranker.titles[p]) for p in stages["rerank"].index[:5]]
    assert sorted(stages["rerank"].index[:5]) == sorted(stages["bm25"].index[:5])
    assert titled == [True, True, True, False, False]  # in bm25's order: F, F, T, T, T


def test_unknown_variant_lists_registered_ones(rag_bench, tmp_path):
    out = rag_bench("run", "--variant", "hybird", "--runs-dir", tmp_path)
    assert_one_line_error(out, "hybird", "baseline, http, hybrid, hybrid_rerank, recorded")


def test_component_switch_applies_before_its_parameters_whatever_the_order():
    spec = registry().variant("baseline")
    a = resolve(spec, ["chunker.max_words=50", "chunker.name=recursive"])
    b = resolve(spec, ["chunker.name=recursive", "chunker.max_words=50"])
    assert a["chunker"] == b["chunker"] == {"name": "recursive", "max_words": 50, "overlap": 16}
