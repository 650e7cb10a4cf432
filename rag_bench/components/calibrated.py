"""The ``calibrated`` judge: features of a claim and its context combined by a logistic
regression learned on public human labels.

For each claim, against the sentence windows (single sentences and neighbouring pairs) of all
context passages:

- lexical features: the share of the claim's content words in its best window and anywhere in
  the context, plain unigram and bigram overlap, the share of the claim's numbers and of its
  capitalised names the context lacks, a negation clash and a contrary word (guilty / no
  contest) against the best window, the claim's length;
- semantic features (with the ``models`` extra): all-MiniLM-L6-v2 cosines of the claim to the
  ``CANDIDATES`` sentences of best word coverage: the highest, their mean, and the best
  covered one's.

The weights, the feature scaling and the threshold (the probability of support below which a
claim is flagged, chosen on the training labels to maximise Cohen's κ, never by hand) are the
few numbers in ``calibrated_judge.json``, written by ``benchmarks/train_judge.py`` with where
they came from. Without the ``models`` extra the judge runs its lexical-only model, which is
weaker, and says so in every verdict's reason and in ``describe()`` (the run's manifest and
``judge-agreement`` name it); ``semantic=true`` makes a missing extra an error instead,
``semantic=false`` never loads MiniLM.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np

from rag_bench.components.base import Capability, Judge
from rag_bench.components.judges import polarity_clash
from rag_bench.components.registry import component
from rag_bench.data.dataset import Dataset
from rag_bench.errors import MissingBackendError, RagBenchError
from rag_bench.model import Chunk, Claim, Query, Verdict
from rag_bench.text.numbers import numbers
from rag_bench.text.polarity import contrary_clash
from rag_bench.text.sentences import split_sentences

MODEL_FILE = "calibrated_judge.json"
LEXICAL = (
    "coverage_best",
    "coverage_all",
    "unigram_overlap",
    "bigram_overlap",
    "numbers_missing",
    "any_number_missing",
    "names_missing",
    "negation_clash",
    "contrary_clash",
    "log_terms",
)
SEMANTIC = ("cosine_best", "cosine_mean", "cosine_at_coverage")
# sentences of best word coverage that MiniLM compares with the claim: embedding every window
# of a long context costs too much on a small CPU (about 20 sentences/s on a busy 2-core box)
CANDIDATES = 2
MAX_TOKENS = 128  # word pieces MiniLM reads of a sentence (the model's limit is 256)


def minilm(batch_size: int = 64):
    """The MiniLM encoder the judge compares sentences with (needs the models extra)."""
    from rag_bench.components.minilm import MiniLMEncoder

    return MiniLMEncoder(batch_size=batch_size, max_seq_length=MAX_TOKENS)


WORD = re.compile(r"\w+")
WEAKER = "lexical features only, the weaker model: install rag-bench[models] for MiniLM"


def learned(kind: str) -> dict:
    """One of the two learned models (``semantic`` or ``lexical``) of the package's JSON."""
    text = resources.files("rag_bench.components").joinpath(MODEL_FILE).read_text()
    models = json.loads(text)["models"]
    if kind not in models:
        raise RagBenchError(
            f"{MODEL_FILE} has no {kind!r} model", "rerun benchmarks/train_judge.py"
        )
    return models[kind]


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def proper_names(text: str) -> list[str]:
    """Capitalised words that do not open a sentence: names, places, titles."""
    words = text.split()
    return [
        w
        for i, w in enumerate(words)
        if i and w[:1].isupper() and not words[i - 1].endswith((".", ":", "!", "?", "\n"))
    ]


def _share_found(wanted: Sequence, found: set) -> float:
    return sum(w in found for w in wanted) / len(wanted) if wanted else 1.0


def lexical_features(
    claim: str, passages: Sequence[str], spans: list[str], single: list[bool], analyzer
) -> dict:
    """The lexical features of a claim against its context (``spans``: its windows,
    ``single``: which of them are one sentence), and the sentences MiniLM is to compare."""
    terms = set(analyzer.terms(claim)) or set(_words(claim))
    span_terms = [set(analyzer.terms(s)) or set(_words(s)) for s in spans]
    coverage = [len(terms & t) / len(terms) for t in span_terms] if terms else [1.0] * len(spans)
    order = sorted(range(len(spans)), key=lambda i: (-coverage[i], len(spans[i])))
    best = order[0] if order else 0
    context = " ".join(passages)
    words, vocabulary = _words(claim), set(_words(context))
    pairs = set(zip(_words(context), _words(context)[1:]))
    wanted_numbers = numbers(claim)
    missing_numbers = wanted_numbers - numbers(context, lenient=True)
    names = [_words(n)[0] for n in proper_names(claim) if _words(n)]
    return {
        "coverage_best": coverage[best] if spans else 0.0,
        "coverage_all": _share_found(
            sorted(terms), set().union(*span_terms) if span_terms else set()
        ),
        "unigram_overlap": _share_found(words, vocabulary),
        "bigram_overlap": _share_found(list(zip(words, words[1:])), pairs),
        "numbers_missing": len(missing_numbers) / len(wanted_numbers) if wanted_numbers else 0.0,
        "any_number_missing": float(bool(missing_numbers)),
        "names_missing": 1.0 - _share_found(names, vocabulary),
        "negation_clash": float(bool(spans) and polarity_clash(claim, spans[best], analyzer)),
        "contrary_clash": float(bool(spans) and bool(contrary_clash(claim, spans[best], analyzer))),
        "log_terms": math.log1p(len(terms)),
        "_candidates": [i for i in order if single[i]][:CANDIDATES],
    }


def semantic_features(claim_vector: np.ndarray, candidate_vectors: np.ndarray) -> dict:
    """Cosines of the claim to its candidate windows (the first has the best word coverage)."""
    cosines = candidate_vectors @ claim_vector if len(candidate_vectors) else np.zeros(1)
    return {
        "cosine_best": float(cosines.max()),
        "cosine_mean": float(cosines.mean()),
        "cosine_at_coverage": float(cosines[0]),
        "_best_cosine": int(np.argmax(cosines)),
    }


class PairFeatures:
    """The features of claims against their contexts; MiniLM vectors are kept for the texts
    of one block of answers (``forget`` drops them)."""

    def __init__(self, analyzer, encoder=None):
        self.analyzer, self.encoder = analyzer, encoder
        self._vectors: dict[str, np.ndarray] = {}
        self.keep = False  # keep the vectors across blocks (a benchmark over fixed sets)

    @property
    def names(self) -> tuple[str, ...]:
        return LEXICAL + (SEMANTIC if self.encoder is not None else ())

    def forget(self) -> None:
        if not self.keep:
            self._vectors.clear()

    def embed(self, texts: Sequence[str]) -> None:
        wanted = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if wanted:
            for text, vector in zip(wanted, self.encoder.encode(wanted)):
                self._vectors[text] = vector

    def lexical(self, claim: str, passages: Sequence[str]) -> Pending:
        spans, owner, single = [], [], []
        for i, passage in enumerate(passages):
            sentences = [passage[s:e] for s, e in split_sentences(passage)] or [passage]
            found = sentences + [f"{a} {b}" for a, b in zip(sentences, sentences[1:])]
            spans += found
            owner += [i] * len(found)
            single += [True] * len(sentences) + [False] * (len(found) - len(sentences))
        values = lexical_features(claim, passages, spans, single, self.analyzer)
        candidates = values.pop("_candidates")
        return Pending(
            claim, values, [spans[i] for i in candidates], [owner[i] for i in candidates]
        )

    def finish(self, pending: Pending) -> tuple[dict, int | None]:
        """All features of a claim, and the passage of its deciding window (None: none)."""
        values, decided = dict(pending.values), 0
        if self.encoder is not None:
            vectors = np.array([self._vectors[s] for s in pending.spans]).reshape(-1, 384)
            values |= semantic_features(self._vectors[pending.claim], vectors)
            decided = values.pop("_best_cosine")
        return values, pending.owners[decided] if pending.owners else None

    def features_all(
        self, tasks: Sequence[tuple[str, Sequence[str]]]
    ) -> list[tuple[dict, int | None]]:
        """:meth:`finish` of each (claim, passages), the MiniLM texts embedded in one call."""
        pending = [self.lexical(claim, passages) for claim, passages in tasks]
        if self.encoder is not None:
            self.embed([t for p in pending for t in (p.claim, *p.spans)])
        return [self.finish(p) for p in pending]


@dataclass(frozen=True)
class Pending:
    """A claim's lexical features and the candidate windows MiniLM is to compare it with."""

    claim: str
    values: dict
    spans: list[str]
    owners: list[int]


@component(
    "judge",
    "calibrated",
    description="MiniLM similarity and lexical pair features in a logistic regression learned "
    "on public human labels (lexical features only without the models extra, and says so)",
)
class CalibratedJudge(Judge):
    """P(supported) of each claim from the learned model; supported when it reaches the
    model's calibrated threshold (grade 2), else grade 0. ``semantic``: unset, MiniLM is used
    when the models extra is installed; ``true`` requires it, ``false`` never uses it."""

    # METERED: the manifest's usage names which model ran (and what it cost in MiniLM texts)
    capabilities = frozenset({Capability.PREPARE, Capability.BATCH, Capability.METERED})

    def __init__(self, semantic: bool | None = None, batch_size: int = 64):
        self.semantic, self.batch_size = semantic, batch_size
        self.encoder = self._encoder()
        self.model = learned("semantic" if self.encoder is not None else "lexical")
        self.pairs = PairFeatures(None, self.encoder)
        self.counts = {"claims_judged": 0, "texts_embedded": 0}

    def _encoder(self):
        if self.semantic is False:
            return None
        try:
            return minilm(self.batch_size)
        except MissingBackendError:
            if self.semantic:
                raise
            return None

    def describe(self) -> str:
        if self.encoder is None:
            return f"calibrated judge, {WEAKER}"
        return "calibrated judge, MiniLM (all-MiniLM-L6-v2) and lexical features"

    def usage(self) -> dict:
        kind = "semantic" if self.encoder is not None else "lexical"
        return {"model": kind, "note": self.describe(), **self.counts}

    def tally(self) -> dict:
        return dict(self.counts)

    def absorb(self, counts: dict) -> None:
        for key, value in counts.items():
            self.counts[key] = self.counts.get(key, 0) + value

    def prepare(self, dataset: Dataset | None, chunks: Sequence[Chunk], analyzer) -> None:
        self.pairs.analyzer = analyzer

    def probability(self, values: dict) -> float:
        model = self.model
        x = np.array([values[name] for name in model["features"]], dtype=float)
        z = (x - np.array(model["mean"])) / np.array(model["scale"])
        return float(1 / (1 + math.exp(-(z @ np.array(model["coef"]) + model["intercept"]))))

    def judge(
        self, query: Query, claims: Sequence[Claim], context: Sequence[Chunk]
    ) -> list[Verdict]:
        return self.judge_all([query], [claims], [context])[0]

    def judge_all(
        self,
        queries: Sequence[Query],
        claims: Sequence[Sequence[Claim]],
        contexts: Sequence[Sequence[Chunk]],
    ) -> list[list[Verdict]]:
        tasks = [
            (claim.text, [c.text for c in context])
            for block, context in zip(claims, contexts)
            for claim in block
            if context and claim.text.strip()
        ]
        before = len(self.pairs._vectors)
        found = iter(self.pairs.features_all(tasks))
        self.counts["claims_judged"] += len(tasks)
        self.counts["texts_embedded"] += len(self.pairs._vectors) - before
        out = [
            [self._verdict(claim, context, found) for claim in block]
            for block, context in zip(claims, contexts)
        ]
        self.pairs.forget()
        return out

    def _verdict(self, claim: Claim, context: Sequence[Chunk], found) -> Verdict:
        if not context:
            return Verdict(0, False, (), "no context", 0.0)
        if not claim.text.strip():
            return Verdict(None, None, (), "no text to check")
        values, passage = next(found)
        p = self.probability(values)
        threshold = self.model["threshold"]
        supported = p >= threshold
        chunk = context[passage if passage is not None else 0]
        weaker = f" ({WEAKER})" if self.encoder is None else ""
        sign = "≥" if supported else "<"
        reason = f"{chunk.chunk_id}: P(supported) {p:.2f} {sign} {threshold:.2f}{weaker}"
        by = (chunk.doc_id,) if supported else ()
        return Verdict(2 if supported else 0, supported, by, reason, p)
