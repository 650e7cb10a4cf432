"""Whether an answer says what the gold answer says: SQuAD exact match and token F1, containment,
and the recall of the gold answer's key facts, with one verdict (correct, partial, wrong) for
the failure classes. A query with several gold answers is scored against the one that suits the
answer best, as SQuAD's official evaluation takes the maximum over its ground truths.

English follows the official SQuAD v1.1 evaluation script to the letter, so that the numbers
can be set beside published ones: lower-case, delete the characters of ``string.punctuation``
(ASCII only: an en dash stays, and "Rockefeller's" becomes "rockefellers"), drop the words a, an,
the, split on whitespace. Text with Han characters is read as the CMRC evaluation does: full-width
forms folded, every punctuation character removed, every Han character a token of its own.
"""

from __future__ import annotations

import functools
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

from rag_bench.text.facts import key_facts
from rag_bench.text.scripts import HAN, fold_width, has_han

ARTICLES = re.compile(r"\b(a|an|the)\b")
HAN_OR_OTHER = re.compile(f"[{HAN}]|[^{HAN}]+")
# An answer is partly right when it holds this share of the gold answer's words but not all of
# its facts (used only for gold answers without key facts).
PARTIAL_WORDS = 0.5


WITHOUT_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """The official SQuAD v1.1 normalisation (for text without Han characters): lower case,
    punctuation removed (``str.translate``: what SQuAD's character filter does, at C speed),
    articles dropped, white space collapsed."""
    text = text.lower().translate(WITHOUT_PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


def words(text: str) -> list[str]:
    """The tokens that exact match and F1 compare: SQuAD's for English, characters for Han."""
    return list(_words(text))


@functools.lru_cache(maxsize=1 << 16)
def _words(text: str) -> tuple[str, ...]:
    """:func:`words`, kept for the passages met again and again (a chunk sits in the rankings
    of many queries, and every cutoff asks whether it holds the gold answer)."""
    if not has_han(text):
        return tuple(normalize_answer(text).split())
    out: list[str] = []
    for word in re.sub(r"[^\w\s]", " ", fold_width(text).lower()).split():
        out.extend(HAN_OR_OTHER.findall(word) if has_han(word) else (word,))
    return tuple(w for w in out if w not in ("a", "an", "the"))


def exact_match(prediction: str, gold: str) -> float:
    return float(words(prediction) == words(gold))


def token_f1(prediction: str, gold: str) -> float:
    p, g = Counter(words(prediction)), Counter(words(gold))
    common = sum((p & g).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(p.values()), common / sum(g.values())
    return 2 * precision * recall / (precision + recall)


def best_over(metric: Callable[[str, str], float], prediction: str, golds: Sequence[str]) -> float:
    """The metric against the gold answer that suits the prediction best (the official SQuAD
    script's ``metric_max_over_ground_truths``)."""
    return max(metric(prediction, gold) for gold in golds)


def contains(haystack: str, needle: str) -> bool:
    """Whether the normalised ``needle`` occurs as a whole word sequence in ``haystack``."""
    n = _words(needle)
    return bool(n) and _spaced(needle) in _spaced(haystack)


@functools.lru_cache(maxsize=1 << 16)
def _spaced(text: str) -> str:
    """The words of ``text`` joined by single spaces, with a space before and after."""
    return f" {' '.join(_words(text))} "


def asked_facts(gold: str, question: str) -> list:
    """The key facts of the gold answer that the question does not already state (a fact the
    question names is given, not answered)."""
    return [f for f in key_facts(gold) if not f.found_in(question)]


def key_fact_recall(answer: str, gold: str, question: str) -> float | None:
    """Share of the gold answer's key facts found in the answer; None when it has none."""
    facts = asked_facts(gold, question)
    if not facts:
        return None
    return sum(f.found_in(answer) for f in facts) / len(facts)


def verdict(answer: str, gold: str, question: str) -> str:
    """``correct`` when the answer holds the gold answer or every one of its key facts,
    ``partial`` when it holds some of them (or, without key facts, at least half of the gold
    answer's words), else ``wrong``."""
    if contains(answer, gold):
        return "correct"
    recall = key_fact_recall(answer, gold, question)
    if recall is not None:
        return "correct" if recall == 1 else "partial" if recall > 0 else "wrong"
    gold_words = Counter(words(gold))
    found = sum((gold_words & Counter(words(answer))).values())
    total = sum(gold_words.values())
    return "partial" if total and found / total >= PARTIAL_WORDS else "wrong"


VERDICT_ORDER = ("wrong", "partial", "correct")


def best_verdict(answer: str, golds: Sequence[str], question: str) -> str:
    """The best verdict of the answer against any of the gold answers."""
    return max((verdict(answer, g, question) for g in golds), key=VERDICT_ORDER.index)


def best_fact_recall(answer: str, golds: Sequence[str], question: str) -> float | None:
    """The highest key-fact recall of the answer against a gold answer with key facts; None
    when no gold answer has any."""
    found = [r for g in golds if (r := key_fact_recall(answer, g, question)) is not None]
    return max(found, default=None)
