"""The labels JSONL format of judge-agreement --labels, and its one-line errors."""

from __future__ import annotations

import json

import pytest
from labels_helpers import write_labels

from rag_bench.data.labels import load_labels
from rag_bench.errors import DataError


def test_answers_and_claims_load(tmp_path):
    path = write_labels(
        tmp_path,
        [
            {"id": 1, "context": "one passage", "claim": "a claim", "label": "supported"},
            {"id": "a", "contexts": ["p1", "p2", " "], "answer": "An answer. Two.",
             "label": "unsupported", "question": "q?", "group": "g",
             "claims": [{"claim": "Two.", "label": "unsupported"}]},
        ],
    )  # fmt: skip
    claim, answer = load_labels(path)
    assert (claim.id, claim.context, claim.is_answer, claim.supported) == (
        "1",
        ("one passage",),
        False,
        True,
    )
    assert claim.group == "1"  # an item is its own group by default
    assert answer.context == ("p1", "p2") and answer.is_answer and not answer.supported
    assert answer.claims[0].text == "Two." and not answer.claims[0].supported
    assert (answer.question, answer.group) == ("q?", "g")


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ({"id": "x", "context": "p", "claim": "c", "label": "true"}, "label is 'true'"),
        ({"id": "x", "context": "p", "claim": "c", "answer": "a", "label": "supported"},
         "has both"),
        ({"id": "x", "context": "p", "label": "supported"}, "either an 'answer' or a 'claim'"),
        ({"id": "x", "context": [], "claim": "c", "label": "supported"}, "context is empty"),
        ({"id": "x", "context": 3, "claim": "c", "label": "supported"}, "list of passages"),
        ({"id": "x", "context": "p", "claim": " ", "label": "supported"}, "is empty"),
        ({"context": "p", "claim": "c", "label": "supported"}, "missing field 'id'"),
        ({"id": "x", "context": "p", "answer": "a", "label": "supported",
          "claims": [{"claim": "c", "label": "maybe"}]}, "claims[0].label"),
    ],
)  # fmt: skip
def test_a_bad_line_is_named(tmp_path, row, fragment):
    good = {"id": "ok", "context": "p", "claim": "c", "label": "supported"}
    path = write_labels(tmp_path, [good, row])
    with pytest.raises(DataError) as caught:
        load_labels(path)
    assert f"{path}:2:" in str(caught.value) and fragment in str(caught.value)


def test_repeated_ids_and_empty_files_are_refused(tmp_path):
    row = {"id": "x", "context": "p", "claim": "c", "label": "supported"}
    with pytest.raises(DataError, match="repeats line 1"):
        load_labels(write_labels(tmp_path, [row, row]))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataError, match="no labelled items"):
        load_labels(empty)
    (tmp_path / "bad.jsonl").write_text(json.dumps(row) + "\n{not json\n")
    with pytest.raises(DataError, match="bad.jsonl:2"):
        load_labels(tmp_path / "bad.jsonl")
