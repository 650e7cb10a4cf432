"""The experiment file: rag-bench.toml names variants (overrides, sweeps), the tier and the
gates; `run --config` and `gate --config` read it, and flags win over it."""

from __future__ import annotations

import pytest

from conftest import SHIPPED, assert_one_line_error
from rag_bench.errors import DataError
from rag_bench.experiment.config import load_experiment
from rag_bench.runs import open_runs

EXPERIMENT = f"""
dataset = "{SHIPPED}"
tier = "smoke"
k = [1, 5, 10, 20]

[variant.baseline]

[variant.bm25-k1]
variant = "baseline"
set = {{ "retriever.k1" = 0.5 }}

[variant.chunks]
variant = "baseline"
sweep = {{ "chunker.size" = [64, 128] }}

[gate.k1]
candidate = "bm25-k1"
baseline = "baseline"
max_drop = {{ "recall@10" = 0.5 }}

[gate.strict]
candidate = "bm25-k1"
baseline = "baseline"
max_drop = {{ "mrr@10" = 0.0 }}
require = "drop"
"""


@pytest.fixture
def experiment(tmp_path):
    path = tmp_path / "rag-bench.toml"
    path.write_text(EXPERIMENT)
    return path


def test_the_file_reads_as_command_line_options(experiment):
    read = load_experiment(experiment)
    assert read.options == {"dataset": str(SHIPPED), "tier": "smoke", "ks": "1,5,10,20"}
    by_key = {v.key: v for v in read.variants}
    assert by_key["baseline"].name == "baseline" and by_key["baseline"].overrides == ()
    assert by_key["bm25-k1"].overrides == ("retriever.k1=0.5",)
    assert by_key["chunks"].sweeps == ("chunker.size=64,128",)
    assert [g.key for g in read.gates] == ["k1", "strict"]
    assert read.gates[1].max_drops == {"mrr@10": 0.0} and read.gates[1].require == "drop"


def test_run_and_gate_from_the_file_with_flags_winning(experiment, tmp_path, rag_bench):
    runs = tmp_path / "runs"
    out = rag_bench("run", "--config", experiment, "--runs-dir", runs, "--k", "1,10,20")
    assert out.exit_code == 0, out.stderr
    store = open_runs(runs)
    made = store.list()
    assert len(made) == 4  # baseline, bm25-k1 and the two points of the sweep
    assert {len(r.manifest["selection"]["query_ids"]) for r in made} == {30}  # the smoke tier
    assert {tuple(r.manifest["ks"]) for r in made} == {(1, 10, 20)}  # --k won over k
    named = store.get("bm25-k1").manifest
    assert named["overrides"] == ["retriever.k1=0.5"] and named["variant"] == "baseline"
    assert {r.name for r in made} >= {"baseline[chunker.size=64]", "baseline[chunker.size=128]"}
    only = rag_bench(
        "run", "--config", experiment, "--runs-dir", runs, "--variant", "bm25-k1",
        "--set", "retriever.k1=0.9", "--tag", "smoke",
    )  # fmt: skip
    assert only.exit_code == 0, only.stderr
    store.refresh()
    assert store.get("bm25-k1").manifest["overrides"] == ["retriever.k1=0.5", "retriever.k1=0.9"]
    assert store.get("bm25-k1").manifest["params"]["retriever"]["k1"] == 0.9  # --set won
    gates = rag_bench("gate", "--config", experiment, "--runs-dir", runs)
    assert gates.exit_code in (0, 1), gates.stderr
    assert "k1: bm25-k1 against baseline" in gates.stdout
    assert "strict: bm25-k1" in gates.stdout
    loose = rag_bench(
        "gate", "--config", experiment, "--runs-dir", runs, "--max-drop", "recall@10=1"
    )
    assert loose.exit_code == 0 and loose.stdout.count("recall@10: pass") == 2


def test_mistakes_in_the_file_are_one_line(tmp_path, rag_bench):
    bad = tmp_path / "bad.toml"
    bad.write_text('[variant.x]\nvariant = "baseline"\nsett = {}\n')
    with pytest.raises(DataError, match="unknown key 'sett' in \\[variant.x\\]"):
        load_experiment(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("dataset = \n")
    assert_one_line_error(rag_bench("run", "--config", broken), "broken.toml", "not valid TOML")
    assert_one_line_error(
        rag_bench("run", "--config", bad), "bad.toml", "unknown key 'sett'", "use note, set"
    )
    assert_one_line_error(rag_bench("gate"), "needs a CANDIDATE", "--config")
