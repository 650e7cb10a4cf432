"""What the tests of the two shipped datasets share: where they are, how their recorded answers
refuse, and the diagnosis rules of their dataset cards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"

CATEGORIES = ("literal", "paraphrase", "multi-hop", "unanswerable")
FAILURE_CLASSES = (
    "ok",
    "correct_refusal",
    "answered_unanswerable",
    "retrieval_miss",
    "wrongly_refused",
    "fabricated",
    "wrong_citation",
    "retrieved_not_used",
)


@dataclass(frozen=True)
class Shipped:
    folder: Path
    refusal_prefixes: tuple[str, ...]

    def lines(self, name: str) -> int:
        """Non-blank lines of one of the dataset's files."""
        text = (self.folder / name).read_text(encoding="utf-8")
        return sum(1 for line in text.splitlines() if line.strip())

    def is_refusal(self, answer: str) -> bool:
        return answer.strip().startswith(self.refusal_prefixes)

    def expected_class(self, query, recorded, judged: dict[str, int]) -> str:
        """The diagnosis rules of the dataset card, applied in order."""
        relevant = {doc for doc, grade in judged.items() if grade >= 1}
        refused = self.is_refusal(recorded.answer)
        if query.should_refuse:
            return "correct_refusal" if refused else "answered_unanswerable"
        if not relevant & set(recorded.ranking):
            return "retrieval_miss"
        if refused:
            return "wrongly_refused"
        if any(not claim.supported_by for claim in recorded.claims):
            return "fabricated"
        if any(set(claim.citations) - set(claim.supported_by) for claim in recorded.claims):
            return "wrong_citation"
        if not any(set(claim.supported_by) & relevant for claim in recorded.claims):
            return "retrieved_not_used"
        return "ok"


KESTREL = Shipped(
    DATA / "kestrel-kb",
    (
        "I don't know",
        "I can't answer",
        "The documents don't say",
        "There is not enough information",
    ),
)
LUMEN = Shipped(DATA / "lumen-mall-zh", ("无法回答", "资料中没有", "我不知道"))


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()
