"""Slicing by any field of the query records and by a regular expression on ids, and no
second block for a slicing whose one slice holds every query."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from conftest import SHIPPED, assert_one_line_error
from rag_bench.analysis.compare import compare
from rag_bench.analysis.slices import field_labels, query_slices, slice_names
from rag_bench.errors import RagBenchError
from rag_bench.experiment.runner import run_variant
from rag_bench.runs import open_runs


@pytest.fixture(scope="module")
def graded(tmp_path_factory, index_cache):
    """kestrel-kb with a ``difficulty`` field on its queries (by position, a list on some),
    and no categories; baseline and hybrid runs of its smoke tier."""
    folder = tmp_path_factory.mktemp("graded") / "kestrel-graded"
    shutil.copytree(SHIPPED, folder)
    lines = (folder / "queries.jsonl").read_text().splitlines()
    records = []
    for n, line in enumerate(lines):
        record = json.loads(line)
        record.pop("category", None)
        if n % 5:
            record["difficulty"] = ["hard", "long"] if n % 7 == 0 else ("easy" if n % 2 else "hard")
        records.append(record)
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    runs = tmp_path_factory.mktemp("runs")
    for variant in ("baseline", "hybrid"):
        run_variant(variant, folder, runs_dir=runs, cache_dir=index_cache)
    return folder, runs, {r["_id"]: r for r in records}


def test_a_field_of_the_records_slices_as_written(graded):
    folder, _, records = graded
    ids = list(records)[:40]
    labels = field_labels(folder, "difficulty", ids)
    for query_id in ids:
        value = records[query_id].get("difficulty")
        expected = value if isinstance(value, list) else [value] if value else ["(none)"]
        assert labels[query_id] == expected
    with pytest.raises(RagBenchError, match="unknown field .*'level'.*difficulty"):
        field_labels(folder, "level", ids)


def test_compare_by_field_and_by_id_pattern(graded):
    folder, runs, records = graded
    refs = ["latest:baseline", "latest:hybrid"]
    by_field = compare(runs, refs, slice_by="difficulty", metrics=["ndcg@10"], resamples=200)
    rows = by_field.rows.set_index("slice")
    assert set(rows.index) == {"all", "easy", "hard", "long", "(none)"}
    values = open_runs(runs).metrics("latest:hybrid")
    ndcg = values[values["metric"] == "ndcg@10"].set_index("query_id")["value"].dropna()
    easy = [q for q in ndcg.index if records[q].get("difficulty") == "easy"]
    assert rows.loc["easy", "mean_b"] == pytest.approx(ndcg[easy].mean())
    assert rows.loc["easy", "n"] == len(easy)
    by_id = compare(runs, refs, slice_by="id~^q-nas-0[0-4]", metrics=["ndcg@10"], resamples=200)
    counts = by_id.rows.set_index("slice")["n"]
    matching = [q for q in ndcg.index if q.startswith(("q-nas-00", "q-nas-01", "q-nas-02",
                                                        "q-nas-03", "q-nas-04"))]  # fmt: skip
    assert counts["id~^q-nas-0[0-4]"] == len(matching)
    assert counts["(other ids)"] == len(ndcg) - len(matching)


def test_one_category_for_every_query_is_not_shown_twice(graded, rag_bench):
    _, runs, _ = graded
    labels = query_slices(open_runs(runs).queries("latest:baseline"), "category")
    assert set(s for v in labels.values() for s in v) == {"uncategorized"}
    assert slice_names(labels) == ["all"]
    shown = rag_bench("show", "latest:baseline", "--runs-dir", runs, "--format", "csv")
    assert [line.split(",")[0] for line in shown.stdout.splitlines()[1:]] == ["all"]
    diagnosed = pd.read_csv(
        __import__("io").StringIO(
            rag_bench("diagnose", "latest:baseline", "--runs-dir", runs, "--format", "csv").stdout
        )
    )
    assert set(diagnosed["slice"]) == {"all"}


def test_a_bad_pattern_or_field_is_one_line(graded, rag_bench):
    _, runs, _ = graded
    args = ("compare", "latest:baseline", "latest:hybrid", "--runs-dir", runs)
    assert_one_line_error(rag_bench(*args, "--slice", "id~(unclosed"), "no regular expression")
    assert_one_line_error(rag_bench(*args, "--slice", "level"), "unknown field", "difficulty")
