"""Bad input, one case per line of issue 20's lists ("Tracebacks" and "Accepted silently or
explained poorly") and more: each case is one command, its exit code, the one line it prints on
stderr (an error naming the thing and the fix, or a warning) and, unless it is meant to store a
run, a test folder (runs folder, dataset copy, working directory) unchanged to the byte and the
modification time. No case may print a traceback.

``RAG_BENCH_CASES_TABLE=<folder>`` writes each case's row of the closing note's table (case,
command, exit code, message) into that folder, one file per case; ``cat <folder>/*`` joins them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from processes import Process
from runs_helpers import copy_run, fingerprint, locate, manifest_file, table_file

from conftest import EXAMPLE, ROOT, SHIPPED
from rag_bench.experiment.runner import Selection, run_variant

BAD = "20000101-000000-baseline-beef"  # a run whose manifest or part is spoilt
TWIN = "20000101-000000-baseline-0c0c"  # a copy of the good run, to compare with


@pytest.fixture(scope="module")
def store(tmp_path_factory, index_cache):
    """A runs folder with a baseline run on kestrel-kb's smoke queries, a copy of it, and a run
    on another dataset (seed-example); built once for the module and copied for each case."""
    runs = tmp_path_factory.mktemp("store") / "runs"
    good = run_variant(
        "baseline", SHIPPED, selection=Selection(tag="smoke"), runs_dir=runs, cache_dir=index_cache
    )
    copy_run(good.location, runs, TWIN)
    other = run_variant(
        "recorded", SHIPPED.parent / "seed-example", runs_dir=runs, cache_dir=index_cache
    )
    return runs, {"good": good.run_id, "twin": TWIN, "other": other.run_id, "bad": BAD}


# --- what a case does to its folder before the command ----------------------------------------


def _spoil_manifest(change: Callable[[Path], None]) -> Callable[[Path], None]:
    def spoil(runs: Path) -> None:
        copy_run(locate(runs, TWIN), runs, BAD)
        change(manifest_file(runs, BAD))

    return spoil


def _nested(path: Path) -> None:
    path.write_text("[" * 200_000 + "]" * 200_000)


def _schema_version_text(path: Path) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), "schema_version": "2"}))


def _text_values(runs: Path) -> None:
    copy_run(locate(runs, TWIN), runs, BAD)
    part = table_file(locate(runs, BAD), "metrics")
    table = pq.read_table(part)
    index = table.schema.get_field_index("value")
    pq.write_table(table.set_column(index, "value", table["value"].cast(pa.string())), part)


def _manifests_a_file(runs: Path) -> None:
    shutil.rmtree(runs / "_manifests")
    (runs / "_manifests").write_text("")


def _runs_a_file(runs: Path) -> None:
    shutil.rmtree(runs)
    runs.write_text("not a folder\n")


def _no_runs(runs: Path) -> None:
    shutil.rmtree(runs)


def _dataset(edit: Callable[[Path], None]) -> Callable[[Path], None]:
    """A copy of kestrel-kb beside the runs folder (``{data}``), edited."""

    def make(runs: Path) -> None:
        data = runs.parent / "data"
        shutil.copytree(SHIPPED, data)
        edit(data)

    return make


def _grade_1e23(data: Path) -> None:
    qrels = data / "qrels" / "test.tsv"
    header, first, *rest = qrels.read_text().splitlines()
    query, doc, _ = first.split("\t")
    qrels.write_text("\n".join([header, f"{query}\t{doc}\t1e23", *rest]) + "\n")


def _judgements_removed(data: Path) -> None:
    qrels = data / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text().splitlines()[0] + "\n")


def _only_unanswerable(data: Path) -> None:
    queries = data / "queries.jsonl"
    kept = [ln for ln in queries.read_text().splitlines() if json.loads(ln).get("should_refuse")]
    queries.write_text("\n".join(kept) + "\n")
    _judgements_removed(data)
    (data / "answers.jsonl").unlink()  # its answers are to the answerable queries


def _no_faithfulness(runs: Path) -> None:
    """The copy's faithfulness has no defined value for any query, as in a run that refused
    every answer."""
    part = table_file(locate(runs, TWIN), "metrics")
    table = pq.read_table(part).to_pandas()
    table.loc[table["metric"] == "faithfulness", "value"] = None
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), part)


def _qrels_file_1e23(runs: Path) -> None:
    (runs.parent / "qrels.txt").write_text("q1 0 d1 1e23\nq1 0 d2 1\n")


def _outputs(*lines: str) -> Callable[[Path], None]:
    """An outputs file ``{folder}/outputs.jsonl`` of these lines (``RECORD`` is a valid one)."""

    def write(runs: Path) -> None:
        (runs.parent / "outputs.jsonl").write_text("\n".join(lines) + "\n")

    return write


RECORD = '{"query_id": "q-nas-001", "retrieved": ["nas-001"], "answer": "48 TB [nas-001]."'
DIGITS = "1" + "0" * 400  # a number of 401 digits


def _spaced_doc_id(runs: Path) -> None:
    copy_run(locate(runs, TWIN), runs, BAD)
    part = table_file(locate(runs, BAD), "retrieved")
    table = pq.read_table(part).to_pandas()
    table["doc_id"] = table["doc_id"].replace({"nas-001": "nas 001"})
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), part)


# --- the cases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """``args`` may name ``{runs}``, ``{data}``, ``{folder}`` (the test's folder) and the runs
    ``{good}``, ``{twin}`` (same dataset), ``{other}`` (another dataset) and ``{bad}``."""

    name: str
    args: tuple[str, ...]
    code: int
    fragments: tuple[str, ...]
    setup: Callable[[Path], None] | None = None
    said: str = "error"  # stderr's one line: error, warning, stored, wrote or nothing
    stores: bool = False  # the command stores a run: the folder is meant to change
    output: Callable[[str], bool] | None = None  # a check of stdout
    writes: tuple[str, str] | None = None  # a file the command writes (name, a fragment of it)

    @property
    def command(self) -> str:
        shown = {"runs": "runs", "data": "data", "folder": "."}
        shown |= {"good": "RUN", "twin": "RUN2", "other": "RUN_OTHER", "bad": "RUN_BAD"}
        args = (a.format(**shown).replace(f"{ROOT}/", "") for a in self.args)
        return "rag-bench " + shlex.join(args)


def case(name, *args, code=2, said="error", **options) -> Case:
    *command, fragments = args
    return Case(name, tuple(command), code, tuple(fragments), said=said, **options)


SMOKE = ("--tag", "smoke", "--runs-dir", "{runs}")
RUN = ("run", "--variant", "baseline")
PAIR = ("compare", "{good}", "{twin}", "--runs-dir", "{runs}")


def _json_lists(text: str) -> bool:
    rows = json.loads(text)
    return bool(rows) and all(isinstance(row["tags"], list) for row in rows)


def _json_of_every_type(text: str) -> bool:
    [row] = json.loads(text)
    return row == {
        "d": "2020-01-02T00:00:00",
        "b": "78",
        "i": "P1DT0H0M0S",
        "t": "10:30:00",
        "u": "00000000-0000-0000-0000-000000000001",
        "l": [{"a": [1.5]}],
    }


EVERY_TYPE = (
    "SELECT DATE '2020-01-02' AS d, 'x'::BLOB AS b, INTERVAL 1 DAY AS i, TIME '10:30' AS t, "
    "'00000000-0000-0000-0000-000000000001'::UUID AS u, [{{'a': [1.5::DECIMAL(3, 1)]}}] AS l"
)

CASES = [
    # Tracebacks before issue 20
    case("--variant ','", *RUN[:2], ",", *SMOKE, ["--variant ',' names no variant", "e.g. --var"]),
    case("compare --resamples 0", *PAIR, "--resamples", "0", ["--resamples 0", "[1, 1,000,000]"]),
    case("compare --resamples -5", *PAIR, "--resamples", "-5", ["--resamples -5", "[1, 1,000,"]),
    case(
        "compare --resamples 1e9",
        *PAIR,
        "--resamples",
        "1e9",
        ["--resamples 1000000000 is out of range", "whole number in [1, 1,000,000]"],
    ),
    case(
        "qrels grade 1e23 (run)",
        *RUN,
        "--dataset",
        "{data}",
        *SMOKE,
        ["test.tsv:2: grade '1e23' is not a whole number from -127 to 127"],
        code=3,
        setup=_dataset(_grade_1e23),
    ),
    case(
        "qrels grade 1e23 (eval)",
        "eval",
        "--qrels",
        "{folder}/qrels.txt",
        "--run",
        str(EXAMPLE / "run.txt"),
        ["qrels.txt:1: grade '1e23' is not a whole number", "fix: "],
        code=3,
        setup=_qrels_file_1e23,
    ),
    case(
        "report when a metric has no defined value in a run",
        "report",
        "{good}",
        "{twin}",
        "--resamples",
        "50",
        "-o",
        "{folder}/report.html",
        "--runs-dir",
        "{runs}",
        [],
        code=0,
        said="wrote",
        setup=_no_faithfulness,
        writes=("report.html", "<b>faithfulness</b> has no defined value in"),
    ),
    # `sql` interrupted with Ctrl-C: test_ctrl_c_stops_sql_in_one_line below (a subprocess).
    # `rm` on a read-only runs folder: needs a read-only mount when the tests run as root, see
    # tests/runs/test_robustness_store.py::test_a_read_only_runs_folder_is_a_one_line_error_and_
    # stays_readable (exit 2, "could not remove run ... from ...").
    *(
        case(
            f"_manifests a file ({command[0]})",
            *command,
            "--runs-dir",
            "{runs}",
            ["_manifests is a file", "move that file away"],
            setup=_manifests_a_file,
        )
        for command in (("runs",), ("sql", "SELECT 1"), ("show", "latest"), ("rm", "x", "--yes"))
    ),
    case(
        "manifest nested 200,000 deep (runs)",
        "runs",
        "--runs-dir",
        "{runs}",
        ["skipped: run 20000101-000000-baseline-beef", "nested too deep", "remove the run"],
        code=0,
        said="warning",
        setup=_spoil_manifest(_nested),
    ),
    *(
        case(
            f"manifest nested 200,000 deep ({command[0]})",
            *command,
            "--runs-dir",
            "{runs}",
            ["run 20000101-000000-baseline-beef has an unreadable manifest", "nested too deep"],
            setup=_spoil_manifest(_nested),
        )
        for command in (("show", "{bad}"), ("compare", "{good}", "{bad}"), ("diff", "{bad}"))
    ),
    case(
        "manifest nested 200,000 deep (sql)",
        "sql",
        "SELECT count(DISTINCT run_id) AS n FROM metrics",
        "--runs-dir",
        "{runs}",
        ["skipped: run 20000101-000000-baseline-beef", "nested too deep"],
        code=0,
        said="warning",
        setup=_spoil_manifest(_nested),
        output=lambda text: text.split() == ["n", "-", "3"],
    ),
    case(
        "a metrics part whose value column is VARCHAR (sql)",
        "sql",
        "SELECT count(DISTINCT run_id) AS n FROM metrics",
        "--runs-dir",
        "{runs}",
        ["skipped: run 20000101-000000-baseline-beef", "column value is string"],
        code=0,
        said="warning",
        setup=_text_values,
        output=lambda text: text.split() == ["n", "-", "3"],
    ),
    case(
        "a metrics part whose value column is VARCHAR (show)",
        "show",
        "{bad}",
        "--runs-dir",
        "{runs}",
        ["run 20000101-000000-baseline-beef", "column value is string", "rag-bench rm"],
        setup=_text_values,
    ),
    # Ctrl-C pressed repeatedly at commit: tests/experiment/test_robustness.py::
    # test_a_second_interrupt_does_not_cut_the_clean_up_short and tests/runs/
    # test_store_layout.py::test_ctrl_c_between_placing_tables_and_committing_takes_them_back.
    case(
        "sql --format json over list columns",
        "sql",
        "SELECT run_id, tags FROM queries",
        "--format",
        "json",
        "--runs-dir",
        "{runs}",
        [],
        code=0,
        said="nothing",
        output=_json_lists,
    ),
    case(
        "sql --format json over dates, blobs, intervals, UUIDs, structs",
        "sql",
        EVERY_TYPE,
        "--format",
        "json",
        "--runs-dir",
        "{runs}",
        [],
        code=0,
        said="nothing",
        output=_json_of_every_type,
    ),
    case(
        "sql --format json over infinities and NaN",
        "sql",
        "SELECT log(0) AS x, ['inf'::DOUBLE, 'nan'::DOUBLE] AS l",
        "--format",
        "json",
        "--runs-dir",
        "{runs}",
        [],
        code=0,
        said="nothing",
        output=lambda text: json.loads(text) == [{"x": "-inf", "l": ["inf", None]}],
    ),
    # Accepted silently or explained poorly before issue 20
    case("--k ''", *RUN, "--k", "", *SMOKE, ["--k '' is not a list of whole numbers", "--k 1,5"]),
    case(
        "--set chunker.size=12.5",
        *RUN,
        "--set",
        "chunker.size=12.5",
        *SMOKE,
        ["chunker.size=12.5 is not an int", "give chunker.size an int"],
    ),
    case(
        "--set retriever.method=true",
        *RUN,
        "--set",
        "retriever.method=true",
        *SMOKE,
        ["retriever.method=True is not a str"],
    ),
    case(
        "--sample 1000 on 275 queries",
        *RUN,
        "--sample",
        "1000",
        "--runs-dir",
        "{runs}",
        ["--sample 1000 is out of range", "whole number in [1, 275] (the queries selected)"],
    ),
    case(
        "--tag ''",
        *RUN,
        "--tag",
        "",
        "--runs-dir",
        "{runs}",
        ["--tag '' is out of range", "a tag the queries carry"],
    ),
    *(
        case(
            f"--runs-dir '' ({command[0]})",
            *command,
            "--runs-dir",
            "",
            ["the runs folder is named by an empty string", "or none for ./runs"],
        )
        for command in (("runs",), ("sql", "SELECT 1"), (*RUN, "--tag", "smoke"))
    ),
    case(
        "judge-agreement --alpha 0",
        "judge-agreement",
        "--alpha",
        "0",
        ["--alpha 0.0 is out of range", "finite number in (0, 1)"],
    ),
    *(
        case(
            f"a runs folder that is a file ({command[0]})",
            *command,
            "--runs-dir",
            "{runs}",
            ["the runs folder", "runs is a file", "name a folder or a URL"],
            setup=_runs_a_file,
        )
        for command in (("runs",), ("sql", "SELECT 1"), ("show", "latest"))
    ),
    *(
        # listing nothing is an answer, not a mistake: exit 0, with the folder named
        case(
            f"a runs folder that does not exist ({command[0]})",
            *command,
            "--runs-dir",
            "{runs}",
            ["there is no runs folder", "(nothing stored yet)"],
            code=0,
            said="warning",
            setup=_no_runs,
        )
        for command in (("runs",), ("sql", "SELECT count(*) AS n FROM runs"))
    ),
    case(
        "a runs folder that does not exist (show)",
        "show",
        "latest",
        "--runs-dir",
        "{runs}",
        ["no runs in", "rag-bench run"],
        setup=_no_runs,
    ),
    case(
        "diff across datasets",
        "diff",
        "{good}",
        "--against",
        "{other}",
        "--runs-dir",
        "{runs}",
        ["the runs were made on different datasets", "seed-example", "name runs on one dataset"],
    ),
    case(
        "compare across datasets",
        "compare",
        "{good}",
        "{other}",
        "--runs-dir",
        "{runs}",
        ["the runs were made on different datasets", "name runs on one dataset"],
    ),
    case(
        "report -o into _manifests/",
        "report",
        "{good}",
        "-o",
        "{runs}/_manifests/x.json",
        "--runs-dir",
        "{runs}",
        ["the report would be written into the runs folder", "outside the runs folder"],
    ),
    case(
        'schema_version "2" (a string)',
        "show",
        "{bad}",
        "--runs-dir",
        "{runs}",
        ['schema_version "2" is not a number', "remove the run"],
        setup=_spoil_manifest(_schema_version_text),
    ),
    case(
        "a dataset of only unanswerable queries",
        *RUN,
        "--dataset",
        "{data}",
        "--runs-dir",
        "{runs}",
        ["stored run", "(40 queries)"],
        code=0,
        said="stored",
        stores=True,
        setup=_dataset(_only_unanswerable),
        output=lambda text: "unanswerable" in text and "correct_refusal" in text,
    ),
    case(
        "a dataset of answerable queries without judgements",
        *RUN,
        "--dataset",
        "{data}",
        *SMOKE,
        ["qrels/test.tsv: the BEIR qrels file has no records", "after a header line"],
        code=3,
        setup=_dataset(_judgements_removed),
    ),
    # The security finding on numbers (the other two: tests/runs/test_store_sql.py and
    # tests/runs/test_store_hostile.py)
    case("--set retriever.k1=nan", *RUN, "--set", "retriever.k1=nan", *SMOKE, ["k1='nan'"]),
    case(
        "--set retriever.k1=-5",
        *RUN,
        "--set",
        "retriever.k1=-5",
        *SMOKE,
        ["retriever.k1 = -5.0 is out of range", "finite number in [0, 1,000]"],
    ),
    case(
        "gate --max-drop recall@10=nan",
        "gate",
        "{twin}",
        "--baseline",
        "{good}",
        "--max-drop",
        "recall@10=nan",
        "--runs-dir",
        "{runs}",
        ["--max-drop recall@10=nan is out of range", "finite number in [0, ∞)"],
    ),
    # More of the same kinds
    case("compare --resamples 1.5", *PAIR, "--resamples", "1.5", ["'1.5' is not a whole number"]),
    case("compare --alpha abc", *PAIR, "--alpha", "abc", ["--alpha 'abc' is not a number"]),
    case("compare --seed -1", *PAIR, "--seed", "-1", ["--seed -1", "whole number in [0, ∞)"]),
    case("compare --mde nan", *PAIR, "--mde", "nan", ["--mde nan", "finite number in (0, ∞)"]),
    case("run --depth nan", *RUN, "--depth", "nan", *SMOKE, ["--depth 'nan' is not a whole"]),
    case("run --sample 5 --seed -2", *RUN, "--sample", "5", "--seed", "-2", *SMOKE, ["--seed -2"]),
    case("--set retriever.b=2", *RUN, "--set", "retriever.b=2", *SMOKE, ["[0, 1]"]),
    case(
        "--set generator.context_k=0",
        *RUN,
        "--set",
        "generator.context_k=0",
        *SMOKE,
        ["generator.context_k = 0 is out of range", "whole number in [1, ∞)"],
    ),
    case("--variant ''", *RUN[:2], "", *SMOKE, ["--variant '' names no variant"]),
    # issue 27: numbers and structures bounded, sweeps whole, imports and exports checked
    case(
        "--set retriever.k1=1e308",
        *RUN,
        "--set",
        "retriever.k1=1e308",
        *SMOKE,
        ["retriever.k1 = 1e+308 is out of range", "[0, 1,000]", "scores overflow"],
    ),
    case("--set retriever.k1=true", *RUN, "--set", "retriever.k1=true", *SMOKE, ["finite float"]),
    case(
        "--set nested 5000 deep",
        *RUN,
        "--set",
        "retriever.k1=" + "[" * 5000 + "]" * 5000,
        *SMOKE,
        ["--set retriever.k1=… is JSON nested too deep"],
    ),
    case(
        "--set retriever.b=<401 digits>",
        *RUN,
        "--set",
        f"retriever.b={DIGITS}",
        *SMOKE,
        ["retriever.b=100000…000 (401 digits) is not a finite float"],
    ),
    case(
        "--set chunker.size=<401 digits>",
        *RUN,
        "--set",
        f"chunker.size={DIGITS}",
        *SMOKE,
        ["chunker.size=100000…000 (401 digits) is not an int"],
    ),
    case(
        "run --seed <401 digits>",
        *RUN,
        "--seed",
        DIGITS,
        "--sample",
        "3",
        *SMOKE,
        ["--seed 100000…000 (401 digits) is beyond the whole numbers", "9,223,372,036,854,775,807"],
    ),
    case(
        "compare --resamples <401 digits>",
        *PAIR,
        "--resamples",
        DIGITS,
        ["--resamples 100000…000 (401 digits) is beyond the whole numbers it takes"],
    ),
    case(
        "--sweep whose last value is out of range",
        *RUN,
        "--sweep",
        "retriever.k1=1.2,1.5,-1",
        *SMOKE,
        ["sweep point baseline[retriever.k1=-1]", "(nothing of the sweep was run)"],
    ),
    case(
        "--sweep grid beyond --max-points",
        *RUN,
        "--sweep",
        "retriever.k1=" + ",".join(str(k) for k in range(1, 21)),
        "--sweep",
        "retriever.b=" + ",".join(f"0.{b}" for b in range(10)),
        *SMOKE,
        ["--max-points 100 is out of range", "at least the grid's 200 points"],
    ),
    case(
        "import --name baseline",
        "import",
        "{folder}/outputs.jsonl",
        "--name",
        "baseline",
        "--runs-dir",
        "{runs}",
        ["the name 'baseline' is taken by a variant rag-bench runs", "baseline-import"],
    ),
    *(
        case(
            f"import {what}",
            "import",
            "{folder}/outputs.jsonl",
            "--name",
            "mine",
            "--runs-dir",
            "{runs}",
            ["outputs.jsonl:1: ", said],
            code=3,
            setup=_outputs(line),
        )
        for what, line, said in (
            ("latency_ms of 401 digits", RECORD + f', "latency_ms": {DIGITS}}}', "beyond the"),
            ("latency_ms 1e999", RECORD + ', "latency_ms": 1e999}', "is inf, beyond the range"),
            ("latency_ms NaN", RECORD + ', "latency_ms": NaN}', "NaN is not a JSON number"),
            ("cost_usd true", RECORD + ', "cost_usd": true}', "'cost_usd' is a bool"),
            ("a record nested too deep", "[" * 100_000 + "]" * 100_000, "JSON nested too deep"),
        )
    ),
    case(
        "export TREC of a document id with a space",
        "export",
        "{bad}",
        "--runs-dir",
        "{runs}",
        ["the document id 'nas 001' cannot be written to a TREC run file", "--format jsonl"],
        setup=_spaced_doc_id,
    ),
    case(
        "export -o into the runs folder",
        "export",
        "{good}",
        "-o",
        "{runs}/_manifests/{good}.json",
        "--runs-dir",
        "{runs}",
        ["the export would be written into the runs folder", "outside the runs folder"],
    ),
    case(
        "--resume with --variant ','",
        "run",
        "--resume",
        "x",
        "--variant",
        ",",
        "--runs-dir",
        "{runs}",
        ["--variant ',' names no variant"],
    ),
]


def _state(folder: Path) -> str:
    """Every path, byte and modification time under the test's folder."""
    return fingerprint(folder, mtimes=True)


def _record(index: int, case: Case, out, folder: Path) -> None:
    """The case's row of the closing note's table (paths relative to the test's folder), when
    asked for; ``000.md`` is the table's header."""
    target = os.environ.get("RAG_BENCH_CASES_TABLE")
    if not target:
        return
    message = (out.stderr.strip().splitlines() or ["(none)"])[0].replace(f"{folder}/", "")
    cells = [case.name, f"`{case.command}`", str(out.exit_code), message]
    Path(target).mkdir(parents=True, exist_ok=True)
    header = "| case | command | exit code | message |\n|---|---|---|---|\n"
    (Path(target) / "000.md").write_text(header)
    row = "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |\n"
    (Path(target) / f"{index + 1:03d}.md").write_text(row)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
def test_bad_input(store, tmp_path, monkeypatch, rag_bench, index):
    case = CASES[index]
    runs_source, ids = store
    runs = tmp_path / "runs"
    shutil.copytree(runs_source, runs)
    monkeypatch.chdir(tmp_path)  # whatever a command would write by default lands here
    if case.setup:
        case.setup(runs)
    names = {**ids, "runs": runs, "data": tmp_path / "data", "folder": tmp_path}
    before = _state(tmp_path)
    out = rag_bench(*(a.format(**names) for a in case.args))
    _record(index, case, out, tmp_path)
    assert "Traceback" not in out.stdout + out.stderr
    assert out.exit_code == case.code, out.stderr
    lines = out.stderr.strip().splitlines()
    if case.said in ("stored", "wrote"):  # a note after the outcome informs, it is no complaint
        lines = [line for line in lines if not line.startswith("note: ")]
    if case.said == "nothing":
        assert lines == []
    else:
        prefix = {"stored": "stored run ", "wrote": "wrote "}.get(case.said, f"{case.said}: ")
        assert len(lines) == 1, out.stderr
        assert lines[0].startswith(prefix), lines[0]
        if case.said == "error":
            assert "(fix: " in lines[0], lines[0]
        for fragment in case.fragments:
            assert fragment in lines[0], (fragment, lines[0])
    if case.output:
        assert case.output(out.stdout), out.stdout
    if case.writes:
        name, fragment = case.writes
        assert fragment in (tmp_path / name).read_text(encoding="utf-8")
        (tmp_path / name).unlink()
    if not case.stores:
        assert _state(tmp_path) == before


@pytest.mark.signals
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_sql_in_one_line(store, tmp_path, index_cache):
    """Ctrl-C during a long query stops it at once (DuckDB alone would notice it only between
    its tasks): one line, exit 130, the runs folder as it was."""
    runs = tmp_path / "runs"
    shutil.copytree(store[0], runs)
    before = _state(runs)
    endless = "SELECT sum(hash(i) % 7) AS s FROM range(100000000000) t(i)"
    process = Process(
        ["sql", endless, "--runs-dir", runs],
        cache=index_cache,
        env={"RAG_BENCH_TEST_PAUSE": "sql:0.2"},
    )
    process.wait_for("paused at sql")
    time.sleep(1.0)  # the query is running in DuckDB by now
    process.signal(signal.SIGINT)
    assert process.finish(timeout=30) == 130
    assert process.messages() == ["interrupted; nothing was changed"]
    assert process.stdout == ""
    assert _state(runs) == before
