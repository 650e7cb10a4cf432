"""docs/judges.md stays true: its labels example is a valid labels file that the documented
command measures."""

from __future__ import annotations

import json
import re

from conftest import ROOT

DOC = (ROOT / "docs" / "judges.md").read_text(encoding="utf-8")


def test_the_labels_example_runs(rag_bench, tmp_path):
    block = re.search(r"```json\n(.*?)```", DOC, re.DOTALL).group(1)
    (tmp_path / "my-labels.jsonl").write_text(block)
    assert all(json.loads(line)["label"] for line in block.splitlines() if line.strip())
    command = re.search(
        r"\$ rag-bench (judge-agreement --labels my-labels.jsonl --judge \w+)\n", DOC
    )
    args = command.group(1).replace("my-labels.jsonl", str(tmp_path / "my-labels.jsonl")).split()
    outcome = rag_bench(*args, "--judge", "lexical", "--resamples", "50")
    assert outcome.exit_code == 0, outcome.stderr
    assert "per answer: 1" in outcome.stdout and "per claim: 1" in outcome.stdout
