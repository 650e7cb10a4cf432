"""Queries proposed from a corpus without a model: rules over sentences and their key facts.

- **literal** (``offline:cloze``, ``offline:table-row``): a sentence holding a key fact (a
  number, a date, an amount, a code, a name; see :mod:`rag_bench.text.facts`) becomes a
  question by putting a question word where the fact stood ("The KS-220 launched on what
  date?"); a two-cell table row ``Memory | 2 GB DDR4`` asks for its value ("What is the memory
  in the KS-220 Specification Sheet?"). The fact is the gold answer, the sentence the source
  span, its document the one relevant document.
- **paraphrase** (``offline:lsa-paraphrase``): the literal question with its content words
  replaced by their nearest corpus terms (:mod:`rag_bench.testsets.lexicon`); the share of the
  question's terms still in the source sentence is kept as ``overlap`` and a question keeping
  more than :data:`MAX_PARAPHRASE_OVERLAP` is not proposed.
- **multi-hop** (``offline:bridge``): a sentence of document B names a thing (a name or code)
  that a sentence of another document A names too; the question asks B's fact with the thing
  blanked out and described by A's sentence, so answering needs both (qrels: A and B).
- **unanswerable** (``offline:swapped-entity``): a literal question with its named thing
  swapped for another thing of the same kind from elsewhere in the corpus, kept only when no
  document naming the new thing holds the question's other terms (the whole corpus is
  checked): the corpus does not say it, so the right answer is a refusal.

Everything is drawn from a ``random.Random(seed)``: the same corpus and seed give the same
queries. The rules form English questions; text in a Han script is left out.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from rag_bench.data.dataset import Dataset
from rag_bench.errors import UsageError
from rag_bench.text.facts import AMOUNT, ISO_DATE, MONTH_DATE, Fact, key_facts
from rag_bench.text.scripts import HAN
from rag_bench.text.sentences import split_sentences

CATEGORIES = ("literal", "paraphrase", "multi-hop", "unanswerable")
MIN_WORDS, MAX_WORDS = 6, 45  # a source sentence's length
MAX_PARAPHRASE_OVERLAP = 0.5
MAX_BRIDGE_DOCS = 20  # a thing named in more documents is no bridge between two
ATTRIBUTE_SHARE = 0.5  # a document naming the swapped thing with this share of the rest says it
BLANK = "___"
_HAN = re.compile(f"[{HAN}]")
PRONOUNS = frozenset("it its this that these those they their them he she his her we our".split())
NOTE_MARK = re.compile(r"\[\d+\]")
NOTE_BREAK = re.compile(r"(?<=\])\s*(?=[A-Z])")
_YEAR = re.compile(r"^(1[5-9]|20)\d\d$")


@dataclass(frozen=True)
class Proposal:
    """One proposed query: its text, category, source documents (its qrels), gold answer
    (None: it should be refused), source span, the method that made it and what the method
    recorded (overlap, bridge, swapped thing)."""

    text: str
    category: str
    doc_ids: tuple[str, ...]
    gold_answer: str | None
    source_span: str
    method: str
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    """A sentence with a fact to ask about: the literal question it makes, and the named
    things (names, codes) it mentions besides the fact."""

    doc_id: str
    sentence: str
    fact: str
    question: str
    method: str
    things: tuple[str, ...]


def question_word(fact: Fact) -> str:
    """The question word standing for a fact in its sentence."""
    text = fact.text
    if fact.code is not None or not fact.numbers or (fact.words and not re.search(r"\d", text)):
        return "what"  # a code, a name ("the Sixth Amendment" too)
    if ISO_DATE.fullmatch(text) or MONTH_DATE.fullmatch(text):
        return "what date"
    if AMOUNT.fullmatch(text):
        return "how much"
    if _YEAR.match(text):
        return "what year"
    return "how many"


def cloze(sentence: str, start: int, end: int, word: str) -> str:
    """``sentence`` with ``[start, end)`` replaced by ``word``, as a question."""
    text = f"{sentence[:start].rstrip()} {word} {sentence[end:].lstrip()}".strip()
    text = re.sub(r"\s+([,;:])", r"\1", re.sub(r"\s+", " ", text))
    text = text.rstrip(" .!;:,")
    if text.endswith("%"):
        text = text[:-1].rstrip()
    return text[0].upper() + text[1:] + "?"


def _named(fact: Fact) -> bool:
    """A name or a code (a thing a question can be about), of at least three characters."""
    return (fact.code is not None or not fact.numbers) and len(fact.text) >= 3


def _preference(fact: Fact) -> int:
    """Numbers, dates and amounts first, then codes, then names: the facts whose question
    word reads best in place."""
    return 0 if fact.numbers and fact.code is None else 1 if fact.code is not None else 2


def sentence_candidates(doc_id: str, sentence: str) -> list[Candidate]:
    """The questions a prose sentence makes: one per fact that stands after the sentence's
    third word and leaves at least five words around it. A sentence that cannot stand alone
    (it starts with a pronoun, a note mark or a list number) or reads as a list or a reference
    makes none."""
    asked = NOTE_MARK.sub("", sentence).strip()  # "... in 2012.[3]": the note mark goes
    words = asked.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS or _HAN.search(asked):
        return []
    if words[0].lower() in PRONOUNS or not re.match(r"[\"“‘']?[A-Z]", asked):
        return []  # "It adds a port", "[1] Smith, J." or "1) World Bank"
    if asked.count(",") > len(words) / 4:
        return []  # a list or a reference ("Smith, J., 'Title', Journal, vol. 3, 2004")
    third = len(" ".join(words[:3]))
    facts = key_facts(asked)
    out = []
    for fact in sorted(facts, key=_preference):
        if not fact.numbers and fact.code is None and len(fact.text.split()) < 2:
            continue  # a lone capitalised word is too often part of a longer phrase
        pattern = rf"(?<![\w.-]){re.escape(fact.text)}(?!\w)"
        spans = [m.start() for m in re.finditer(pattern, asked)]
        start = spans[-1] if spans else -1
        if start < third or len(words) - len(fact.text.split()) < 5:
            continue
        things = tuple(
            f.text for f in facts if f is not fact and _named(f) and f.text not in fact.text
        )
        question = cloze(asked, start, start + len(fact.text), question_word(fact))
        out.append(Candidate(doc_id, sentence, fact.text, question, "offline:cloze", things))
    return out


def row_candidate(doc_id: str, title: str, line: str) -> Candidate | None:
    """The question a two-cell table row ``name | value`` makes in a titled document."""
    cells = [c.strip() for c in line.split("|")]
    if len(cells) != 2 or not title.strip() or _HAN.search(line):
        return None
    name, value = cells
    if not (1 <= len(name.split()) <= 6 and 1 <= len(value.split()) <= 10) or name == value:
        return None
    if not re.search(r"[A-Za-z]", name):
        return None
    shown = name if name[1:2].isupper() else name[0].lower() + name[1:]
    question = f"What is the {shown} in the {title.strip()}?"
    things = tuple(f.text for f in key_facts(title) if _named(f))
    return Candidate(doc_id, line.strip(), value, question, "offline:table-row", things)


class Proposer:
    """Proposes queries of the four categories from a dataset's corpus."""

    def __init__(self, data: Dataset, seed: int = 0, lexicon=None):
        self.data = data
        self.seed = seed
        self._lexicon = lexicon
        self.analyzer = None
        self._candidates: dict[str, list[Candidate]] = {}
        self._terms: dict[str, set[str]] = {}

    @cached_property
    def texts(self) -> dict[str, str]:
        return {d: doc.full_text() for d, doc in self.data.docs.items()}

    def candidates(self, doc_id: str) -> list[Candidate]:
        """A document's literal questions, in reading order (computed once)."""
        if doc_id not in self._candidates:
            doc = self.data.docs[doc_id]
            found: list[Candidate] = []
            for line in doc.text.split("\n"):
                if "|" in line:
                    row = row_candidate(doc_id, doc.title, line)
                    found += [row] if row else []
                    continue
                # a note mark before a capital ends a sentence whose full stop is missing
                for part in NOTE_BREAK.split(line):
                    for start, end in split_sentences(part):
                        found += sentence_candidates(doc_id, part[start:end])
            self._candidates[doc_id] = found
        return self._candidates[doc_id]

    def doc_terms(self, doc_id: str) -> set[str]:
        if doc_id not in self._terms:
            self._terms[doc_id] = set(self.lexicon.analyzer.terms(self.texts[doc_id]))
        return self._terms[doc_id]

    def mentioning(self, thing: str) -> list[str]:
        """The documents that name ``thing`` as a whole word (case as written)."""
        pattern = re.compile(rf"(?<![\w-]){re.escape(thing)}(?![\w-])")
        return [d for d, text in self.texts.items() if pattern.search(text)]

    def propose(self, n: int, categories: Sequence[str] = CATEGORIES) -> list[Proposal]:
        """``n`` proposals spread over ``categories`` as evenly as the corpus allows (each
        category's share is ``n / len(categories)``, the remainder to the first ones), each
        category drawing its documents in its own seeded order, one query per document."""
        categories = check_categories(categories)
        quota = [n // len(categories) + (i < n % len(categories)) for i in range(len(categories))]
        out: list[Proposal] = []
        for category, wanted in zip(categories, quota):
            rng = random.Random(f"{self.seed}:{category}")
            order = sorted(self.data.docs)
            rng.shuffle(order)
            made = 0
            for doc_id in order:
                if made == wanted:
                    break
                options = list(self.candidates(doc_id))
                rng.shuffle(options)
                for candidate in options:
                    proposal = self.make(category, candidate, rng)
                    if proposal is not None:
                        out.append(proposal)
                        made += 1
                        break
        return out

    def make(self, category: str, candidate: Candidate, rng: random.Random) -> Proposal | None:
        if category == "literal":
            return Proposal(
                candidate.question,
                "literal",
                (candidate.doc_id,),
                candidate.fact,
                candidate.sentence,
                candidate.method,
            )
        if category == "paraphrase":
            return self.paraphrase(candidate)
        if category == "multi-hop":
            return self.multi_hop(candidate, rng)
        return self.unanswerable(candidate, rng)

    # --- paraphrase ----------------------------------------------------------------------

    @property
    def lexicon(self):
        if self._lexicon is None:
            from rag_bench.components.registry import build
            from rag_bench.testsets.lexicon import Lexicon

            self.analyzer = self.analyzer or build("analyzer", {"name": "auto"})
            self._lexicon = Lexicon(list(self.texts.values()), self.analyzer)
        return self._lexicon

    def overlap(self, question: str, sentence: str) -> float:
        """The share of the question's terms that the source sentence holds."""
        asked = set(self.lexicon.analyzer.terms(question))
        return len(asked & set(self.lexicon.analyzer.terms(sentence))) / max(len(asked), 1)

    def paraphrase(self, candidate: Candidate) -> Proposal | None:
        from rag_bench.testsets.lexicon import WORD

        lexicon = self.lexicon
        avoid = set(lexicon.analyzer.terms(candidate.sentence))
        protected = {w for thing in candidate.things for w in thing.split()}

        def swap(match: re.Match) -> str:
            word = match.group()
            if word in protected:
                return word
            other = lexicon.alternative(word, avoid)
            if other is None:
                return word
            avoid.update(lexicon.analyzer.terms(other))
            return other[0].upper() + other[1:] if word[0].isupper() else other

        text = WORD.sub(swap, candidate.question)
        overlap = self.overlap(text, candidate.sentence)
        if text == candidate.question or overlap > MAX_PARAPHRASE_OVERLAP:
            return None
        return Proposal(
            text,
            "paraphrase",
            (candidate.doc_id,),
            candidate.fact,
            candidate.sentence,
            "offline:lsa-paraphrase",
            {"overlap": round(overlap, 4), "literal": candidate.question},
        )

    # --- multi-hop -----------------------------------------------------------------------

    def multi_hop(self, candidate: Candidate, rng: random.Random) -> Proposal | None:
        if candidate.method != "offline:cloze":
            return None
        source = self.data.docs[candidate.doc_id].text
        for thing in candidate.things:
            if thing not in candidate.question or not proper(thing, source):
                continue
            others = [d for d in self.mentioning(thing) if d != candidate.doc_id]
            if not 1 <= len(others) <= MAX_BRIDGE_DOCS:
                continue
            bridge_doc = others[rng.randrange(len(others))]
            text = self.data.docs[bridge_doc].text
            for start, end in split_sentences(text.replace("\n", " ")):
                sentence = text.replace("\n", " ")[start:end]
                n_words = len(sentence.split())
                if thing not in sentence or not MIN_WORDS <= n_words <= MAX_WORDS:
                    continue
                described = sentence.replace(thing, BLANK).rstrip(" .")
                asked = candidate.question.replace(thing, BLANK, 1).rstrip("?")
                question = f'{asked}, where {BLANK} is what fits "{described}"?'
                return Proposal(
                    question,
                    "multi-hop",
                    (bridge_doc, candidate.doc_id),
                    candidate.fact,
                    candidate.sentence,
                    "offline:bridge",
                    {"bridge": thing, "bridge_span": sentence},
                )
        return None

    # --- unanswerable ----------------------------------------------------------------------

    def unanswerable(self, candidate: Candidate, rng: random.Random) -> Proposal | None:
        text = self.data.docs[candidate.doc_id].text
        named = [t for t in candidate.things if t in candidate.question and proper(t, text)]
        if not named:
            return None
        thing = named[0]
        kind = _kind(thing)
        pool = self.things_of_kind(kind, rng, exclude=candidate.doc_id)
        analyzer = self.lexicon.analyzer
        rest = set(analyzer.terms(candidate.question.replace(thing, " "))) - set(
            analyzer.terms("what how many much date year")
        )
        for other in pool:
            if other.lower() in thing.lower() or thing.lower() in other.lower():
                continue
            said = [
                d
                for d in self.mentioning(other)
                if len(rest & self.doc_terms(d)) >= ATTRIBUTE_SHARE * max(len(rest), 1)
            ]
            if said:
                continue
            question = candidate.question.replace(thing, other, 1)
            return Proposal(
                question,
                "unanswerable",
                (),
                None,
                candidate.sentence,
                "offline:swapped-entity",
                {"template_doc": candidate.doc_id, "swapped": [thing, other]},
            )
        return None

    def things_of_kind(self, kind: str, rng: random.Random, exclude: str) -> list[str]:
        """Up to 20 named things (names, codes) of ``kind`` from the text of other documents
        (up to 200 of them), in a seeded order."""
        order = sorted(self.data.docs)
        rng.shuffle(order)
        found: list[str] = []
        for doc_id in order[:200]:
            if doc_id == exclude:
                continue
            text = self.data.docs[doc_id].text[:2000]
            found += [
                f.text
                for f in key_facts(text)
                if _named(f) and _kind(f.text) == kind and proper(f.text, text)
            ]
            found = list(dict.fromkeys(found))
            if len(found) >= 20:
                break
        return found[:20]


def proper(thing: str, text: str) -> bool:
    """Whether a capitalised run reads as a name in ``text``: its first word is not written in
    lower case elsewhere in it ("Many Muslim countries" starts a sentence; "many" is no name)."""
    first = thing.split()[0]
    if len(thing.split()) < 2 or not first[:1].isupper() or first[1:2].isupper():
        return True
    return re.search(rf"(?<![\w-]){re.escape(first.lower())}(?![\w-])", text) is None


def _kind(thing: str) -> str:
    return "code" if re.search(r"\d", thing) else "name"


def check_categories(categories: Sequence[str]) -> tuple[str, ...]:
    """The categories asked for, each a known one, in the order given."""
    from rag_bench.errors import UnknownNameError

    chosen = tuple(dict.fromkeys(categories))
    if not chosen:
        raise UsageError("no category asked for", f"e.g. --categories {','.join(CATEGORIES)}")
    for category in chosen:
        if category not in CATEGORIES:
            raise UnknownNameError("category", category, list(CATEGORIES))
    return chosen


def with_text(proposal: Proposal, text: str, method: str) -> Proposal:
    """The proposal worded otherwise (by an LLM, or by a person's edit)."""
    return replace(proposal, text=text, method=method)
