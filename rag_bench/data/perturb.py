"""Perturbed queries that keep their labels: the seeds ask for typos, colloquial wording and
synonyms on purpose, and a reordered question tests the same need in another order.

Each perturbation is a deterministic function of (seed, kind, query id): the same run gives the
same perturbed text on any machine. A perturbed query is a copy of its original under the id
``<original id>~<kind>`` with the same category, answers and qrels, and the tags ``perturbed``
and ``perturbed:<kind>``; a query the rules leave unchanged (nothing to misspell, no word in the
synonym table, a script the rules do not read) gets no copy, and is counted.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from rag_bench.errors import UnknownNameError, UsageError

SEPARATOR = "~"
PERTURBED_TAG = "perturbed"

# whole words of letters only (codes such as KS-220 and names such as KestrelOS stay intact)
_WORD = re.compile(r"(?<![\w-])[A-Za-z][a-z]+(?![\w-])")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_KEYBOARD = (
    "qwertyuiop",
    "asdfghjkl",
    "zxcvbnm",
)
_NEIGHBOURS = {
    letter: "".join(row[j] for j in (i - 1, i + 1) if 0 <= j < len(row))
    for row in _KEYBOARD
    for i, letter in enumerate(row)
}


def _misspell(word: str, rng: random.Random) -> str:
    """One slip of the fingers inside ``word`` (its first letter kept, as people keep it)."""
    i = rng.randrange(1, len(word) - 1)
    slip = rng.choice(("swap", "drop", "double", "neighbour"))
    if slip == "swap" and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if slip == "drop":
        return word[:i] + word[i + 1 :]
    if slip == "double":
        return word[: i + 1] + word[i] + word[i + 1 :]
    near = _NEIGHBOURS.get(word[i].lower(), "")
    return word[:i] + rng.choice(near) + word[i + 1 :] if near else word[:i] + word[i + 1 :]


_FUNCTION_WORDS = frozenset(
    "what which when where does have with from that this there these those many much into "
    "about your they their than then them were been being would could should shall".split()
)


def typo(text: str, rng: random.Random) -> str:
    """One misspelt word, two in a query of more than eight words: content words of four
    letters or more, product codes and capitalised names left alone."""
    spans = [
        m.span()
        for m in _WORD.finditer(text)
        if len(m.group()) >= 4
        and m.group().lower() not in _FUNCTION_WORDS
        and (m.start() == 0 or m.group()[0].islower())
    ]
    if not spans:
        return text
    n = 2 if len(text.split()) > 8 and len(spans) > 1 else 1
    for start, end in sorted(rng.sample(spans, n), reverse=True):
        text = text[:start] + _misspell(text[start:end], rng) + text[end:]
    return text


_CASUAL = (
    (r"\bWhat is\b", "what's"),
    (r"\bwhat is\b", "what's"),
    (r"\bWhat are\b", "what are"),
    (r"\bHow do I\b", "how do i"),
    (r"\bdo not\b", "don't"),
    (r"\bdoes not\b", "doesn't"),
    (r"\bcannot\b", "can't"),
    (r"\bis not\b", "isn't"),
    (r"\bmaximum\b", "max"),
    (r"\bminimum\b", "min"),
    (r"\binformation\b", "info"),
    (r"\bapproximately\b", "about"),
    (r"\bconfiguration\b", "config"),
    (r"\bdocumentation\b", "docs"),
)
_OPENERS = ("hey, ", "quick question: ", "so ", "um, ", "pls tell me ", "")


def colloquial(text: str, rng: random.Random) -> str:
    """The way the question is typed into a chat box: contractions and clipped words, a casual
    opener, a lower-case start and no question mark."""
    out = text
    for pattern, casual in _CASUAL:
        out = re.sub(pattern, casual, out)
    out = out.rstrip().rstrip("?").rstrip()
    if out[:1].isupper() and not out[1:2].isupper():
        out = out[0].lower() + out[1:]
    return rng.choice(_OPENERS) + out


# Common words of questions over product and policy documents, and a word a user might type
# instead; a table written for these tests, not a thesaurus.
SYNONYMS = {
    "maximum": "highest",
    "minimum": "lowest",
    "default": "standard",
    "released": "launched",
    "release": "launch",
    "capacity": "size",
    "supported": "compatible",
    "support": "handle",
    "supports": "handles",
    "error": "fault",
    "mean": "indicate",
    "means": "indicates",
    "number": "count",
    "required": "needed",
    "requires": "needs",
    "require": "need",
    "allowed": "permitted",
    "allow": "permit",
    "allows": "permits",
    "price": "cost",
    "cost": "price",
    "buy": "purchase",
    "purchase": "buy",
    "return": "send back",
    "refund": "reimbursement",
    "delivery": "shipping",
    "shipping": "delivery",
    "customer": "client",
    "customers": "clients",
    "employee": "staff member",
    "employees": "staff",
    "change": "modify",
    "replace": "swap",
    "remove": "delete",
    "delete": "remove",
    "create": "make",
    "enable": "turn on",
    "disable": "turn off",
    "start": "begin",
    "stop": "halt",
    "fast": "quick",
    "slow": "sluggish",
    "big": "large",
    "large": "big",
    "small": "little",
    "speed": "rate",
    "limit": "cap",
    "limits": "caps",
    "timeout": "time limit",
    "version": "release",
    "update": "upgrade",
    "upgrade": "update",
    "install": "set up",
    "setting": "option",
    "settings": "options",
    "feature": "function",
    "features": "functions",
    "memory": "RAM",
    "drive": "disk",
    "drives": "disks",
    "folder": "directory",
    "folders": "directories",
    "file": "document",
    "files": "documents",
    "users": "accounts",
    "user": "account",
    "password": "passcode",
    "account": "profile",
    "schedule": "timetable",
    "opening": "business",
    "hours": "times",
    "open": "available",
    "closed": "shut",
    "policy": "rule",
    "policies": "rules",
    "days": "calendar days",
    "fee": "charge",
    "fees": "charges",
    "warranty": "guarantee",
    "repair": "fix",
    "problem": "issue",
    "problems": "issues",
    "connect": "link",
    "connection": "link",
    "hold": "store",
    "keep": "retain",
    "show": "display",
    "happens": "occurs",
    "happen": "occur",
    "used": "utilised",
    "use": "utilise",
    "each": "every",
    "between": "among",
    "after": "following",
    "before": "prior to",
}


def synonym(text: str, rng: random.Random) -> str:
    """Every word of the synonym table replaced by its other wording (case kept at the start)."""

    def swap(match: re.Match) -> str:
        word = match.group()
        other = SYNONYMS.get(word.lower())
        if other is None:
            return word
        return other[0].upper() + other[1:] if word[0].isupper() else other

    return re.sub(r"[A-Za-z]+", swap, text)


_TAIL = re.compile(r"^(?P<head>.+?)\s+(?P<tail>(?:in|for|on|of|with|under|during)\s+[^,?]+)\?$")


def reorder(text: str, rng: random.Random) -> str:
    """The closing phrase moved to the front: "What is X for Y?" becomes "For Y, what is X?"."""
    match = _TAIL.match(text.strip())
    if match is None or len(match["head"].split()) < 3:
        return text
    head, tail = match["head"], match["tail"]
    if head[:1].isupper() and not head[1:2].isupper():
        head = head[0].lower() + head[1:]
    return f"{tail[0].upper()}{tail[1:]}, {head}?"


PERTURBATIONS = {"typo": typo, "colloquial": colloquial, "synonym": synonym, "reorder": reorder}


def parse_perturbations(spec: str | Sequence[str]) -> list[str]:
    """``"typo,synonym"`` (or a list) as known perturbation names, in order, no repeats."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for name in (str(n).strip() for n in names):
        if not name:
            continue
        if name not in PERTURBATIONS:
            raise UnknownNameError("perturbation", name, list(PERTURBATIONS))
        if name not in out:
            out.append(name)
    if not out:
        raise UsageError("no perturbation given", f"name some of: {', '.join(PERTURBATIONS)}")
    return out


def perturb_text(text: str, kind: str, seed: int, query_id: str) -> str:
    """``text`` under perturbation ``kind``, the same for the same (seed, kind, query id).
    The rules read English: a text in Han script is left as it is."""
    if _HAN.search(text):
        return text
    return PERTURBATIONS[kind](text, random.Random(f"{seed}:{kind}:{query_id}"))


def perturbed_id(query_id: str, kind: str) -> str:
    return f"{query_id}{SEPARATOR}{kind}"


def perturb_queries(queries: Sequence, kinds: Sequence[str], seed: int):
    """The perturbed copies of ``queries`` (model Query objects) for each of ``kinds``, and per
    kind how many were made and how many the rules left unchanged."""
    copies, counts = [], {}
    for kind in kinds:
        made = 0
        for query in queries:
            text = perturb_text(query.text, kind, seed, query.id)
            if text == query.text:
                continue
            tags = (*query.tags, PERTURBED_TAG, f"{PERTURBED_TAG}:{kind}")
            copies.append(replace(query, id=perturbed_id(query.id, kind), text=text, tags=tags))
            made += 1
        counts[kind] = {"made": made, "unchanged": len(queries) - made}
    return copies, counts


def with_perturbed(data, chosen: Sequence[str], kinds: Sequence[str], seed: int):
    """``data`` with the perturbed copies of its ``chosen`` queries added (queries and qrels),
    the chosen ids followed by the copies' ids, and per kind how many copies were made."""
    from rag_bench.data.qrels import Qrels

    copies, counts = perturb_queries([data.queries[q] for q in chosen], kinds, seed)
    original_of = {c.id: c.id.rsplit(SEPARATOR, 1)[0] for c in copies}
    frame = data.qrels.frame
    judged = frame.assign(
        query_id=frame["query_id"].astype(str), doc_id=frame["doc_id"].astype(str)
    )
    pairs = pd.DataFrame({"copy": list(original_of), "query_id": list(original_of.values())})
    extra = pairs.merge(judged, on="query_id")[["copy", "doc_id", "grade"]]
    rows = [*judged.itertuples(index=False, name=None), *extra.itertuples(index=False, name=None)]
    qrels = replace(Qrels.from_records(rows), source=data.qrels.source)
    queries = {**data.queries, **{c.id: c for c in copies}}
    return replace(data, queries=queries, qrels=qrels), [*chosen, *original_of], counts
