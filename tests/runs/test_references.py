"""References that name a dataset: ``latest:<variant>@<dataset>``, ``runs --dataset``, the
dataset and query count in ``runs``, and errors that name the references that would work."""

from __future__ import annotations

import shutil

import pytest
from runs_helpers import copy_run

from conftest import assert_one_line_error
from rag_bench.errors import RagBenchError
from rag_bench.runs import open_runs

LATER = "2099-01-01T00:00:00+00:00"
OTHER = {"name": "arguana-1a2b", "sha256": "f" * 64, "n_queries": 1401, "n_docs": 8674}


@pytest.fixture
def two_datasets(tmp_path, clean):
    """The clean baseline run on kestrel-kb, a hybrid copy of it on kestrel-kb, and later
    baseline and hybrid copies said to be made on another dataset."""
    runs = tmp_path / "runs"
    shutil.copytree(clean.runs.root, runs)
    manifest = open_runs(runs).get(clean.run_id).manifest
    ids = {"baseline@kestrel": clean.run_id}
    for n, (variant, dataset) in enumerate(
        [("hybrid", manifest["dataset"]), ("baseline", OTHER), ("hybrid", OTHER)], start=1
    ):
        run_id = f"20990101-00000{n}-{variant}-000{n}"
        when = f"2099-01-01T00:00:0{n}+00:00"
        copy_run(clean, runs, run_id, variant=variant, dataset=dataset, created_at=when)
        ids[f"{variant}@{'kestrel' if dataset is manifest['dataset'] else 'arguana'}"] = run_id
    return runs, ids


def test_a_dataset_qualifier_picks_the_latest_run_on_that_dataset(two_datasets):
    runs, ids = two_datasets
    store = open_runs(runs)
    assert store.resolve("latest:baseline+") == ids["baseline@arguana"]
    assert store.resolve("latest:baseline+@kestrel-kb") == ids["baseline@kestrel"]
    assert store.resolve("latest:baseline+@arguana") == ids["baseline@arguana"]  # a prefix
    assert store.resolve("latest:hybrid+@" + "f" * 8) == ids["hybrid@arguana"]  # sha256 prefix
    assert store.resolve("latest@kestrel-kb") == ids["hybrid@kestrel"]
    assert store.resolve(ids["hybrid@arguana"][:17] + "@arguana") == ids["hybrid@arguana"]
    assert [r.run_id for r in store.list(dataset="kestrel")] == [
        ids["baseline@kestrel"],
        ids["hybrid@kestrel"],
    ]
    with pytest.raises(RagBenchError, match="no run on dataset 'scifact'.*stored datasets: "):
        store.resolve("latest:baseline+@scifact")
    with pytest.raises(RagBenchError, match="no run of variant 'rerank' in .* on dataset"):
        store.resolve("latest:rerank@kestrel-kb")


def test_runs_shows_dataset_and_queries_and_filters_by_dataset(two_datasets, rag_bench):
    runs, ids = two_datasets
    shown = rag_bench("runs", "--runs-dir", runs, "--wide")
    head = shown.stdout.splitlines()[0].split()
    assert head[:5] == ["run_id", "variant", "name", "dataset", "queries"]
    row = next(line for line in shown.stdout.splitlines() if ids["hybrid@arguana"] in line)
    assert "arguana-1a2b" in row.split()
    n_smoke = len(open_runs(runs).get(ids["baseline@kestrel"]).manifest["selection"]["query_ids"])
    assert str(n_smoke) in row.split()  # the queries the run scored, not the dataset's 1401
    only = rag_bench("runs", "--runs-dir", runs, "--dataset", "arguana", "--format", "csv")
    listed = [line.split(",")[0] for line in only.stdout.splitlines()[1:]]
    assert listed == [ids["baseline@arguana"], ids["hybrid@arguana"]]


def test_runs_on_different_datasets_point_at_the_references_that_would_work(
    two_datasets, rag_bench
):
    runs, ids = two_datasets
    mixed = rag_bench("compare", ids["baseline@kestrel"], "latest:hybrid+", "--runs-dir", runs)
    assert_one_line_error(
        mixed,
        "different datasets",
        "latest:baseline+@kestrel-kb latest:hybrid+@kestrel-kb or "
        "latest:baseline+@arguana-1a2b latest:hybrid+@arguana-1a2b",
    )
    assert "--allow-mismatch" not in mixed.stderr
    fixed = rag_bench(
        "compare", "latest:baseline+@kestrel-kb", "latest:hybrid+@kestrel-kb", "--runs-dir", runs
    )
    assert fixed.exit_code == 0, fixed.stderr
