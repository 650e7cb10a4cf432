"""`rag-bench generate`: the report printed, the set run with its unreviewed queries named,
and mistakes as one line."""

from __future__ import annotations

import json

from conftest import assert_one_line_error


def test_generate_prints_the_report_and_a_run_names_the_unreviewed(rag_bench, tmp_path):
    out = tmp_path / "gen"
    made = rag_bench("generate", "--dataset", "kestrel-kb", "-o", out, "--n", "4",
                     "--categories", "literal,unanswerable")  # fmt: skip
    assert made.exit_code == 0, made.stderr
    assert "queries: 4 (offline:" in made.stdout
    for part in ("answerability:", "near-duplicates:", "spread:", "difficulty", "power:"):
        assert part in made.stdout
    assert "tagged unreviewed" in made.stderr
    quality = json.loads((out / "quality.json").read_text())
    assert quality["categories"] == {"literal": 2, "unanswerable": 2}
    run = rag_bench("run", "--variant", "baseline", "--dataset", out, "--runs-dir", tmp_path / "r")
    assert run.exit_code == 0, run.stderr
    assert "4 of 4 queries are generated and unreviewed" in run.stderr
    both = "latest:baseline,latest:baseline"
    sized = rag_bench("generate", "--dataset", "kestrel-kb", "-o", tmp_path / "gen2", "--n", "2",
                      "--runs", both, "--runs-dir", tmp_path / "r")  # fmt: skip
    assert sized.exit_code == 0, sized.stderr
    assert "(observed: ndcg@10 of " in sized.stdout


def test_mistakes_are_one_line(rag_bench, tmp_path):
    out = tmp_path / "gen"
    bad = rag_bench("generate", "--dataset", "kestrel-kb", "-o", out, "--categories", "multihop")
    assert_one_line_error(bad, "multihop")
    assert_one_line_error(
        rag_bench("generate", "--dataset", "kestrel-kb", "-o", out, "--effect", "0"), "--effect"
    )
    assert_one_line_error(rag_bench("generate", "--dataset", "kestrel-kb"), "-o")
    assert not out.exists()
