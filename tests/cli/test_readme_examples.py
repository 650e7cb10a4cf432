"""Every example in README.md and docs/*.md runs: the ``sh`` blocks' ``rag-bench`` commands in
order (README first, then the pages by file name) in one empty runs folder, then each ``sql``
statement through ``rag-bench sql`` over what they stored, then each ``python`` block as a script
in the same folder. A new page in docs/ is picked up without a change here.

A block fenced as ``sh``, ``sql`` or ``python`` is a promise that it runs as written; synopses,
output excerpts and other engines' code are fenced ``text`` or without a language, and a
``python`` block whose first line names a file (``# my_components.py``) is that file's contents,
installed by the test of what it shows. A SQL example that reads the Parquet files directly (as
DuckDB would) runs with ``--allow-files``. Lines that install (``make``, ``pip``) are what CI
itself runs and are not repeated here; a ``VAR=value`` prefix sets the variable for that command.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import DOCUMENTS, EXAMPLE, ROOT
from rag_bench.cli.main import cli
from rag_bench.errors import MissingBackendError

pytestmark = pytest.mark.slow

BLOCK = re.compile(r"^```(sh|sql|python)\n(.*?)^```", re.M | re.S)
FILE_BLOCK = re.compile(r"# [\w./-]+\.py\n")  # a python block that is a file's contents
NOT_RUN_HERE = ("make", "pip", "python", "cd", "export")
# commands whose documented purpose includes a non-zero exit: the gate fails on a regression
EXIT_CODES = {"gate": (0, 1)}


@dataclass
class Example:
    where: str  # file:line where it starts
    text: str  # as written (continuations joined)
    argv: list[str]
    env: dict[str, str]


def examples(text: str, language: str, name: str = "README.md") -> list[Example]:
    """The commands (``sh``), statements (``sql``) or scripts (``python``) of one document's
    blocks, in order; ``name`` is the document's path, for the failure lines."""
    found = []
    for block in BLOCK.finditer(text):
        if block.group(1) != language:
            continue
        first = text.count("\n", 0, block.start(2)) + 1
        body = block.group(2)
        if language == "python":
            if not FILE_BLOCK.match(body):
                found.append(Example(f"{name}:{first}", body, [], {}))
            continue
        split = _statements if language == "sql" else _commands
        found += split(body, first, name)
    return found


def every_example(language: str) -> list[Example]:
    """The examples of README.md and of every page in docs/, in reading order."""
    found = []
    for path in DOCUMENTS:
        name = path.relative_to(ROOT).as_posix()
        found += examples(path.read_text(encoding="utf-8"), language, name)
    return found


def _commands(body: str, first: int, name: str) -> list[Example]:
    out, pending, start = [], "", first
    for number, line in enumerate(body.splitlines(), start=first):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        words = shlex.split(text, comments=True)
        env = {}
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            variable, _, value = words.pop(0).partition("=")
            env[variable] = value
        if not words or words[0] in NOT_RUN_HERE:
            continue
        assert words[0] == "rag-bench", f"{name}:{start}: an sh example runs {words[0]!r}"
        out.append(Example(f"{name}:{start}", text, words[1:], env))
    return out


def _statements(body: str, first: int, name: str) -> list[Example]:
    out = []
    offset = 0
    for chunk in body.split(";"):
        line = first + body.count("\n", 0, offset) + (len(chunk) - len(chunk.lstrip("\n")))
        offset += len(chunk) + 1
        code = "\n".join(x for x in chunk.splitlines() if not x.strip().startswith("--")).strip()
        if code:
            reads_files = "read_parquet(" in code or "read_json(" in code  # an engine's view
            argv = ["sql", code, *(["--allow-files"] if reads_files else [])]
            out.append(Example(f"{name}:{line}", code, argv, {}))
    return out


def run_examples(found: list[Example], runs, monkeypatch, extra_env=None) -> list[str]:
    """Run each command example; return one line per failure, naming its file and line."""
    runner = CliRunner()
    failures = []
    for example in found:
        with monkeypatch.context() as env:
            env.setenv("RAG_BENCH_RUNS_DIR", str(runs))
            for name, value in {**(extra_env or {}), **example.env}.items():
                env.setenv(name, value)
            result = runner.invoke(cli, example.argv, catch_exceptions=True)
        allowed = EXIT_CODES.get(example.argv[0], (0,))
        if result.exit_code == MissingBackendError.exit_code and not os.environ.get("CI"):
            continue  # an extra this machine lacks; CI installs every extra, and runs it
        if result.exit_code not in allowed:
            reason = (result.stderr or str(result.exception) or "").strip().splitlines()
            failures.append(
                f"{example.where}: {example.text} -> exit {result.exit_code}: "
                + (reason[-1] if reason else "")
            )
    return failures


def run_scripts(found: list[Example], runs, monkeypatch) -> list[str]:
    """Run each python example as a script; return one line per failure."""
    failures = []
    for example in found:
        with monkeypatch.context() as env:
            env.setenv("RAG_BENCH_RUNS_DIR", str(runs))
            try:
                exec(compile(example.text, example.where, "exec"), {"__name__": "__main__"})
            except Exception as error:  # noqa: BLE001 - every failure is reported, with its line
                failures.append(f"{example.where}: {type(error).__name__}: {error}")
    return failures


@dataclass
class Tour:
    folder: Path  # the working directory; the runs are in folder / "runs"
    failures: list[str]  # of the sh examples


_TOURS: dict[Path, Tour] = {}


@pytest.fixture(scope="module")
def tour_folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs")


@pytest.fixture
def tour(tour_folder, monkeypatch, fake) -> Tour:
    """The folder where every sh example has run, once per module, whichever test asks first
    (so the sql and python tests run alone too, never skip)."""
    monkeypatch.chdir(tour_folder)
    if tour_folder not in _TOURS:
        for name in ("qrels.txt", "run.txt"):  # the `eval` example's files, as README says
            shutil.copy(EXAMPLE / name, tour_folder / name)
        shutil.copy(EXAMPLE / "run.txt", tour_folder / "run.trec")  # what the API page scores
        service = {"RAG_SYSTEM_URL": fake.url + "/ask"}  # the http variant's example service
        failures = run_examples(every_example("sh"), tour_folder / "runs", monkeypatch, service)
        _TOURS[tour_folder] = Tour(tour_folder, failures)
    return _TOURS[tour_folder]


def test_every_sh_example_runs(tour):
    assert not tour.failures, "\n".join(tour.failures)


def test_every_sql_example_runs(tour, monkeypatch):
    found = every_example("sql")
    assert len(found) >= 5  # README's and the pages' ready queries
    assert list((tour.folder / "runs" / "_manifests").glob("*.json")), "no run to query"
    failures = run_examples(found, tour.folder / "runs", monkeypatch)
    assert not failures, "\n".join(failures)


def test_every_python_example_runs(tour, monkeypatch):
    found = every_example("python")
    assert found
    failures = run_scripts(found, tour.folder / "runs", monkeypatch)
    assert not failures, "\n".join(failures)
    assert (tour.folder / "report.html").stat().st_size > 0  # the API page's report


def test_every_page_is_read():
    """Every page of docs/ is one of the documents whose examples run."""
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert pages and set(pages) <= set(DOCUMENTS) and DOCUMENTS[0] == ROOT / "README.md"


def test_a_broken_example_fails_with_its_line(tmp_path, monkeypatch):
    broken = "intro\n```sh\nrag-bench runs\nrag-bench show no-such-run\n```\n"
    found = examples(broken, "sh", "docs/x.md")
    failures = run_examples(found, tmp_path / "runs", monkeypatch)
    assert len(failures) == 1
    assert failures[0].startswith("docs/x.md:4: rag-bench show no-such-run -> exit ")
    script = "```python\nimport rag_bench\nrag_bench.load_dataset('no-such')\n```\n"
    failures = run_scripts(examples(script, "python", "docs/y.md"), tmp_path, monkeypatch)
    assert len(failures) == 1 and failures[0].startswith("docs/y.md:2: DataError: ")


def test_examples_are_found_with_their_lines():
    text = (
        "a\n```sh\nrag-bench run --variant baseline \\\n  --tag smoke  # comment\nmake test\n```\n"
    )
    (found,) = examples(text, "sh")
    assert found.where == "README.md:3"
    assert found.argv == ["run", "--variant", "baseline", "--tag", "smoke"]
    sql = "```sql\n-- first\nSELECT 1;\n\n-- second\nSELECT 2;\n```\n"
    assert [e.argv[1] for e in examples(sql, "sql")] == ["SELECT 1", "SELECT 2"]
    python = "```python\n# my_module.py\nx = 1\n```\n\n```python\nx = 2\n```\n"
    assert [e.text for e in examples(python, "python")] == ["x = 2\n"]


def first_comparison() -> list[str]:
    """The rows of the README's excerpt of ``rag-bench compare`` under "The first comparison"."""
    section = DOCUMENTS[0].read_text(encoding="utf-8").split("## The first comparison", 1)[1]
    excerpt = section.split("```text\n", 1)[1].split("```", 1)[0]
    return [" ".join(line.split()) for line in excerpt.splitlines()[2:]]


def test_the_first_comparison_is_what_compare_prints(shipped_runs, rag_bench, monkeypatch):
    """README's numbers are compare's: the same two runs, compared again at the width the
    excerpt was printed at, print those rows."""
    baseline, hybrid = shipped_runs("kestrel-kb")
    monkeypatch.setenv("COLUMNS", "120")
    out = rag_bench(
        "compare",
        baseline.run_id,
        hybrid.run_id,
        "--metrics",
        "ndcg@10",
        "--slice",
        "category",
        "--runs-dir",
        str(baseline.store),
    )
    printed = {" ".join(line.split()) for line in out.stdout.splitlines()}
    rows = first_comparison()
    assert len(rows) == 4 and not [row for row in rows if row not in printed], out.stdout
