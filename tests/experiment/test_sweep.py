"""Parameter sweeps: a grid of runs of one variant, named by their parameters, compared with
the first point in one table."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, assert_one_line_error
from rag_bench.errors import UsageError
from rag_bench.experiment.sweep import point_name, sweep_grid
from rag_bench.runs import open_runs

pytestmark = pytest.mark.slow  # a grid of runs

SEED = ROOT / "data" / "seed-example"


def test_the_grid_is_every_combination_first_axis_slowest():
    grid = sweep_grid(["chunker.size=64,128", "retriever.k1=0.9,1.2,1.5"])
    assert len(grid) == 6
    assert grid[0] == ("chunker.size=64", "retriever.k1=0.9")
    assert grid[1] == ("chunker.size=64", "retriever.k1=1.2")
    assert grid[-1] == ("chunker.size=128", "retriever.k1=1.5")
    assert point_name("baseline", grid[0]) == "baseline[chunker.size=64,retriever.k1=0.9]"


@pytest.mark.parametrize(
    "axes, fragment",
    [
        (["chunker.size"], "is not slot.param=value"),
        (["chunker.size="], "is not slot.param=value"),
        (["size=1,2"], "is not slot.param=value"),
        (["chunker.size=1,,2"], "is not slot.param=value"),
        (["chunker.size=1,1"], "repeats a value"),
        (["chunker.size=1,2", "chunker.size=3"], "swept twice"),
    ],
)
def test_malformed_sweeps_are_refused(axes, fragment):
    with pytest.raises(UsageError, match=fragment):
        sweep_grid(axes)


def test_a_sweep_runs_the_grid_and_prints_one_comparison(rag_bench, tmp_path):
    runs = tmp_path / "runs"
    out = rag_bench(
        "run", "--variant", "baseline", "--dataset", SEED, "--k", "1,2,3", "--runs-dir", runs,
        "--sweep", "chunker.size=48,64", "--sweep", "retriever.k1=0.9,1.2", "--format", "json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    stored = open_runs(runs).list()
    names = sorted(r.manifest["name"] for r in stored)
    assert names == [
        "baseline[chunker.size=48,retriever.k1=0.9]",
        "baseline[chunker.size=48,retriever.k1=1.2]",
        "baseline[chunker.size=64,retriever.k1=0.9]",
        "baseline[chunker.size=64,retriever.k1=1.2]",
    ]
    first = next(r for r in stored if r.manifest["name"] == names[0])
    assert first.manifest["params"]["chunker"]["size"] == 48
    rows = json.loads(out.stdout)
    assert {r["run_a"] for r in rows} == {first.run_id}
    assert len({r["run_b"] for r in rows}) == 3


def test_a_parameter_both_set_and_swept_is_refused(rag_bench, tmp_path):
    out = rag_bench(
        "run", "--variant", "baseline", "--dataset", SEED, "--runs-dir", tmp_path,
        "--set", "chunker.size=32", "--sweep", "chunker.size=48,64",
    )  # fmt: skip
    assert_one_line_error(out, "chunker.size=32 is both set and swept")
