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


def test_unreviewed_queries_are_in_no_tier_until_accepted(rag_bench, tmp_path):
    out = tmp_path / "gen"
    made = rag_bench("generate", "--dataset", "kestrel-kb", "-o", out, "--n", "2",
                     "--categories", "literal")  # fmt: skip
    assert made.exit_code == 0, made.stderr
    runs = ("--runs-dir", tmp_path / "r")
    deep = rag_bench("run", "--variant", "baseline", "--dataset", out, "--tier", "deep", *runs)
    assert deep.exit_code != 0 and "Traceback" not in deep.stderr
    error = deep.stderr.strip().splitlines()[-1]  # after the dataset's unreviewed line
    assert error.startswith("error: ") and "every query is generated and unreviewed" in error
    first = json.loads((out / "queries.jsonl").read_text().splitlines()[0])["_id"]
    label = {"kind": "generated", "query_id": first, "accept": True, "labeller": "ana",
             "labelled_at": "2026-12-05T19:04:11Z"}  # fmt: skip
    (tmp_path / "labels.jsonl").write_text(json.dumps(label) + "\n")
    accepted = rag_bench("generate", "--accept", tmp_path / "labels.jsonl", "--dataset", out)
    assert "accepted 1 (0 edited), rejected 0, not yet labelled 1" in accepted.stdout
    deep = rag_bench("run", "--variant", "baseline", "--dataset", out, "--tier", "deep", *runs,
                     "--format", "json")  # fmt: skip
    assert deep.exit_code == 0, deep.stderr
    assert "1 of 2 queries are generated and unreviewed" in deep.stderr
