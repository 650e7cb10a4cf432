"""Query tiers: smoke, regression and deep as tags, the stratified sampler that writes them, and
`rag-bench tiers` / `rag-bench run --tier`."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from conftest import SHIPPED, assert_one_line_error
from rag_bench.data.dataset import load_dataset
from rag_bench.data.tiers import sample_tier, tier_queries, tier_sizes, write_tier
from rag_bench.errors import DataError, UnknownNameError, UsageError
from rag_bench.experiment.runner import Selection


@pytest.fixture
def kestrel(tmp_path):
    """A writable copy of the shipped kestrel-kb."""
    return shutil.copytree(SHIPPED, tmp_path / "kestrel-kb")


def test_tiers_of_the_shipped_dataset():
    queries = load_dataset(SHIPPED).queries
    smoke = tier_queries(queries, "smoke")
    assert len(smoke) == 30 and all("smoke" in queries[q].tags for q in smoke)
    # no query is tagged regression yet: regression and deep are every labelled query
    assert tier_queries(queries, "regression") == tier_queries(queries, "deep") == list(queries)
    sizes = tier_sizes(queries).set_index("tier")
    assert sizes.loc["smoke", "queries"] == 30 and sizes.loc["smoke", "unanswerable"] == 6
    assert list(sizes["selects"]) == ["smoke", "(all)", "(all)"]
    with pytest.raises(UnknownNameError, match="tier"):
        tier_queries(queries, "nightly")


def test_a_sample_is_stratified_seeded_and_nested():
    queries = load_dataset(SHIPPED).queries
    drawn = sample_tier(queries, "regression", 100, seed=3)
    assert drawn == sample_tier(queries, "regression", 100, seed=3)
    assert drawn != sample_tier(queries, "regression", 100, seed=4)
    assert len(drawn) == 100 and set(tier_queries(queries, "smoke")) <= set(drawn)
    # 82/71/82/40 of 275 → 29.8/25.8/29.8/14.5 of 100: the largest remainders get the rest
    shares = Counter(queries[q].category for q in drawn)
    assert shares == {"literal": 30, "paraphrase": 30, "multi-hop": 26, "unanswerable": 14}
    assert drawn == [q for q in queries if q in set(drawn)]  # the dataset's order


def test_sizes_a_tier_cannot_have():
    queries = load_dataset(SHIPPED).queries
    with pytest.raises(UsageError, match="from 30 to 275"):
        sample_tier(queries, "regression", 20)
    with pytest.raises(UsageError, match="from 1 to 275"):
        sample_tier(queries, "smoke", 276)
    with pytest.raises(UnknownNameError):
        sample_tier(queries, "deep", 10)  # deep is every labelled query, never sampled


def test_write_tier_changes_only_the_lines_it_must(kestrel):
    data = load_dataset(kestrel)
    before = (kestrel / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    drawn = sample_tier(data.queries, "regression", 60, seed=0)
    assert write_tier(data, "regression", drawn) == 60
    after = (kestrel / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    changed = [json.loads(a) for b, a in zip(before, after) if a != b]
    assert len(after) == len(before) and len(changed) == 60
    assert all(r["tags"][-1] == "regression" for r in changed)
    again = load_dataset(kestrel)
    assert tier_queries(again.queries, "regression") == drawn
    # a smoke tier drawn now comes from the regression tier, and replaces the old smoke tag
    smoke = sample_tier(again.queries, "smoke", 12, seed=0)
    write_tier(again, "smoke", smoke)
    final = load_dataset(kestrel).queries
    assert tier_queries(final, "smoke") == smoke and set(smoke) <= set(drawn)
    assert write_tier(load_dataset(kestrel), "smoke", smoke) == 0


def test_the_shipped_datasets_are_not_rewritten():
    data = load_dataset(SHIPPED)
    with pytest.raises(DataError, match="copy its folder"):
        write_tier(data, "smoke", [])


def test_selection_by_tier(kestrel):
    queries = load_dataset(kestrel).queries
    assert Selection(tier="smoke").apply(queries) == Selection(tag="smoke").apply(queries)
    assert Selection(tier="deep").apply(queries) == list(queries)
    record = Selection(tier="smoke", sample=5, seed=2).record()
    assert Selection(**record) == Selection(tier="smoke", sample=5, seed=2)
    lines = (kestrel / "queries.jsonl").read_text(encoding="utf-8").replace('"smoke", ', "")
    (kestrel / "queries.jsonl").write_text(lines.replace(', "smoke"', ""), encoding="utf-8")
    with pytest.raises(UsageError, match="no query is in the smoke tier") as error:
        Selection(tier="smoke").apply(load_dataset(kestrel).queries)
    assert "rag_bench.data.tiers.sample_tier" in error.value.hint


def test_cli_tiers_samples_and_run_tier_runs_it(rag_bench, kestrel, tmp_path):
    out = rag_bench("tiers", "--dataset", kestrel, "--sample", "regression", "--size", "50")
    assert out.exit_code == 0, out.stderr
    assert "tagged 50 queries regression" in out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[2:]}
    assert rows["regression"][1:3] == ["regression", "50"] and rows["deep"][2] == "275"
    runs = tmp_path / "runs"
    out = rag_bench(
        "run", "--variant", "baseline", "--tier", "regression", "--dataset", kestrel,
        "--runs-dir", runs, "--format", "json",
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    assert "(50 queries)" in out.stderr
    listed = rag_bench("runs", "--runs-dir", runs, "--format", "json")
    assert json.loads(listed.stdout)[0]["customised"] == "tier=regression"


def test_cli_tier_mistakes(rag_bench, tmp_path):
    assert_one_line_error(
        rag_bench("tiers", "--sample", "smoke"), "--sample and --size go together"
    )
    assert_one_line_error(
        rag_bench("tiers", "--sample", "smoke", "--size", "9"), "shipped dataset", "copy"
    )
    out = rag_bench("run", "--variant", "baseline", "--tier", "nightly", "--runs-dir", tmp_path)
    assert out.exit_code == 2 and "nightly" in out.stderr


def test_the_library_runs_a_tier(tmp_path):
    import rag_bench

    result = rag_bench.run("baseline", "lumen-mall-zh", tier="smoke", runs_dir=tmp_path)
    queries = load_dataset("lumen-mall-zh").queries
    assert list(result.queries["query_id"]) == tier_queries(queries, "smoke")
    assert result.manifest["selection"]["tier"] == "smoke"
