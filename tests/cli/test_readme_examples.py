"""Every ``sh`` and ``sql`` example in README runs: the ``rag-bench`` commands in order, in one
empty runs folder, then each SQL statement through ``rag-bench sql`` over what they stored.

A block fenced as ``sh`` or ``sql`` is a promise that it runs as written; synopses, output
excerpts and other engines' SQL are fenced ``text`` or without a language. A SQL example that
reads the Parquet files directly (as DuckDB would) runs with ``--allow-files``. Lines that
install (``make``, ``pip``) are what CI itself runs and are not repeated here; a ``VAR=value``
prefix sets the variable for that command.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from conftest import ROOT
from rag_bench.cli.main import cli
from rag_bench.errors import MissingBackendError

pytestmark = pytest.mark.slow

README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(sh|sql)\n(.*?)^```", re.M | re.S)
NOT_RUN_HERE = ("make", "pip", "python", "cd", "export")
# commands whose documented purpose includes a non-zero exit: the gate fails on a regression
EXIT_CODES = {"gate": (0, 1)}


@dataclass
class Example:
    line: int  # where in README it starts
    text: str  # as written (continuations joined)
    argv: list[str]
    env: dict[str, str]


def examples(readme: str, language: str) -> list[Example]:
    """The commands (``sh``) or statements (``sql``) of the README's blocks, in order."""
    found = []
    for block in BLOCK.finditer(readme):
        if block.group(1) != language:
            continue
        first = readme.count("\n", 0, block.start(2)) + 1
        body = block.group(2)
        found += _statements(body, first) if language == "sql" else _commands(body, first)
    return found


def _commands(body: str, first: int) -> list[Example]:
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
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if not words or words[0] in NOT_RUN_HERE:
            continue
        assert words[0] == "rag-bench", f"README.md:{start}: an sh example runs {words[0]!r}"
        out.append(Example(start, text, words[1:], env))
    return out


def _statements(body: str, first: int) -> list[Example]:
    out = []
    offset = 0
    for chunk in body.split(";"):
        line = first + body.count("\n", 0, offset) + (len(chunk) - len(chunk.lstrip("\n")))
        offset += len(chunk) + 1
        code = "\n".join(x for x in chunk.splitlines() if not x.strip().startswith("--")).strip()
        if code:
            reads_files = "read_parquet(" in code or "read_json(" in code  # an engine's view
            argv = ["sql", code, *(["--allow-files"] if reads_files else [])]
            out.append(Example(line, code, argv, {}))
    return out


def run_examples(found: list[Example], runs, monkeypatch, extra_env=None) -> list[str]:
    """Run each example; return one line per failure, naming the README line."""
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
                f"README.md:{example.line}: {example.text} -> exit {result.exit_code}: "
                + (reason[-1] if reason else "")
            )
    return failures


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    """Where the README's commands ran: the runs folder and the working directory."""
    return tmp_path_factory.mktemp("readme")


def test_every_sh_example_runs(tour, monkeypatch, fake):
    monkeypatch.chdir(tour)
    for name in ("qrels.txt", "run.txt"):  # `rag-bench eval`'s example files, as README says
        shutil.copy(ROOT / "data" / "example" / name, tour / name)
    service = {"RAG_SYSTEM_URL": fake.url + "/ask"}  # the http variant's example needs a service
    failures = run_examples(examples(README, "sh"), tour / "runs", monkeypatch, service)
    assert not failures, "\n".join(failures)


def test_every_sql_example_runs(tour, monkeypatch):
    monkeypatch.chdir(tour)
    if not (tour / "runs").is_dir():
        pytest.skip("needs the runs of the sh examples (run the module whole)")
    failures = run_examples(examples(README, "sql"), tour / "runs", monkeypatch)
    assert not failures, "\n".join(failures)


def test_a_broken_example_fails_with_its_readme_line(tmp_path, monkeypatch):
    broken = "intro\n```sh\nrag-bench runs\nrag-bench show no-such-run\n```\n"
    failures = run_examples(examples(broken, "sh"), tmp_path / "runs", monkeypatch)
    assert len(failures) == 1
    assert failures[0].startswith("README.md:4: rag-bench show no-such-run -> exit ")


def test_examples_are_found_with_their_lines():
    text = (
        "a\n```sh\nrag-bench run --variant baseline \\\n  --tag smoke  # comment\nmake test\n```\n"
    )
    (found,) = examples(text, "sh")
    assert found.line == 3 and found.argv == ["run", "--variant", "baseline", "--tag", "smoke"]
    sql = "```sql\n-- first\nSELECT 1;\n\n-- second\nSELECT 2;\n```\n"
    assert [e.argv[1] for e in examples(sql, "sql")] == ["SELECT 1", "SELECT 2"]
