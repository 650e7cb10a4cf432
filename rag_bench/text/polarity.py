"""Whether an English claim and a passage sentence contradict each other with the same words: a
negation on one side only ("Fresh food can be returned" / "Fresh food cannot be returned"), or
two contraries in one slot ("pleaded guilty" / "pleaded no contest", "rose" / "fell").

A negation cue surely denies its head, the first content word after it in its clause ("does not
*cover* water damage", "cannot be *returned*", "no *fee*"); it may deny the rest of its clause.
A clash needs a sure denial on one side and a sure assertion on the other: the head stands in the
other side outside the reach of every cue there. The two clauses must
be about the same thing (share a content word besides the head), so that "fresh food cannot be
returned" says nothing against "items can be returned within 30 days". Reading heads, not
word windows, keeps the voice free ("water damage is not covered by the warranty" agrees with
"the warranty does not cover water damage") and keeps a list under one negation whole ("not in
the form of stars, planets or dark clouds").

Idioms whose cue denies nothing need no list of their own: the head of "not only SMB but also
NFS" is "only", of "there is no doubt that", "doubt", of "no later than 72 hours", "later", of
"pleaded no contest", "contest", and "nothing but rainwater" has none (a contrast follows the cue),
so none of them denies what a claim asserts. "No longer" denies the word after "longer".
"""

from __future__ import annotations

import re

NEGATION_CUES = frozenset(
    "not no never none nothing neither nor cannot without can't won't isn't aren't doesn't "
    "don't didn't wasn't weren't shouldn't mustn't".split()
)
NEGATION_SCOPE = 4  # words after a cue in which its head must stand
RAW_WORD = re.compile(r"[\w'’]+")
CLAUSE_BREAK = re.compile(r"[;；，、：|｜\n\t]|[,:](?!\d)|[.!?](?=\s)")
# Light verbs carry no content of their own: "does not have a strong enough gravity" denies the
# strength, not the having, so the head is the word after them (and after "no longer").
LIGHT_VERBS = frozenset(
    "have has had having get gets got getting make makes made making longer".split()
)
# Where a cue's reach ends inside a clause: a contrast starts a new assertion.
CONTRAST = frozenset("but yet although though whereas while however except unless".split())
# Contraries: in one slot, each excludes the others (a claim that says one where the passage says
# another, and not the claim's, contradicts it). Each alternative lists its inflections.
CONTRARIES: tuple[tuple[frozenset[str], ...], ...] = tuple(
    tuple(frozenset(alternative.split()) for alternative in group.split(" / "))
    for group in (
        "guilty / no_contest nolo_contendere / not_guilty innocent",
        "increase increases increased increasing rise rises rose risen rising grow grows grew "
        "grown higher / decrease decreases decreased decreasing fall falls fell fallen falling "
        "drop drops dropped dropping decline declines declined declining lower",
        "before / after",
        "earlier / later",
        "win wins won winning / lose loses lost losing",
        "allowed permitted legal / prohibited forbidden banned illegal",
        "maximum / minimum",
        "largest biggest / smallest",
        "highest / lowest",
        "true / false",
        "north northern / south southern",
        "east eastern / west western",
        "accept accepts accepted approve approves approved / reject rejects rejected deny "
        "denies denied",
        "succeeded success successful / failed failure unsuccessful",
        "alive / dead",
        "positive / negative",
        "male / female",
        "open opened / closed",
        "public / private",
        "internal / external",
        "enabled / disabled",
        "import imports imported / export exports exported",
        "buy buys bought / sell sells sold",
        "above / below",
    )
)
PHRASES = re.compile(r"\b(not\s+guilty|no\s+contest|nolo\s+contendere)\b", re.IGNORECASE)


# A phrase that denies what follows it ("wait in the queue rather than failing"); not "instead
# of", which mostly sets a new state against an old one the passage still describes ("now show
# E-7045 instead of E-7040").
IMPLICIT_CUE = re.compile(r"\brather\s+than\b", re.IGNORECASE)


def _words(clause: str) -> list[str]:
    """Lower-cased words, the implicit cues read as "not"."""
    clause = IMPLICIT_CUE.sub(" not ", clause)
    return [w.lower().replace("’", "'") for w in RAW_WORD.findall(clause)]


def _is_cue(word: str) -> bool:
    return word in NEGATION_CUES or word.endswith("n't")


def clauses(text: str) -> list[str]:
    """The comma-, semicolon- and full-stop-separated clauses of a text (not the commas of
    1,200, nor the point of 3.5)."""
    return [c for c in CLAUSE_BREAK.split(text) if c.strip()]


def heads(clause: str, analyzer) -> set[str]:
    """The index terms a negation cue of the clause surely denies: the first content word within
    NEGATION_SCOPE words after each cue ("cannot be returned" → return)."""
    words = _words(clause)
    found: set[str] = set()
    for i, word in enumerate(words):
        if not _is_cue(word):
            continue
        for following in words[i + 1 : i + 1 + NEGATION_SCOPE]:
            if following in CONTRAST or _is_cue(following):
                break
            terms = [] if following in LIGHT_VERBS else analyzer.terms(following)
            if terms:
                found.add(terms[0])
                break
    return found


def reach(clause: str, analyzer) -> set[str]:
    """The index terms a cue of the clause may deny: everything after it up to a contrast."""
    words = _words(clause)
    found: set[str] = set()
    negating = False
    for word in words:
        if word in CONTRAST:
            negating = False
        elif _is_cue(word):
            negating = True
        elif negating:
            found.update(analyzer.terms(word))
    return found


def _clash(a: str, b: str, analyzer) -> bool:
    """Whether a cue of ``a`` surely denies what ``b`` surely asserts."""
    parts = [(set(analyzer.terms(c)), reach(c, analyzer)) for c in clauses(b)]
    for clause in clauses(a):
        terms = set(analyzer.terms(clause))
        for head in heads(clause, analyzer):
            holders = [p for p in parts if head in p[0]]
            if not holders or any(head in denied for _, denied in holders):
                continue  # b never names it, or denies it somewhere too: no sure assertion
            best = max(holders, key=lambda p: len(p[0] & terms))[0]
            if (best & terms) - {head}:
                return True
    return False


def negation_clash(claim: str, window: str, analyzer) -> bool:
    """Whether the claim denies what the window asserts, or asserts what it denies."""
    return _clash(claim, window, analyzer) or _clash(window, claim, analyzer)


def _alternatives(clause: str) -> list[tuple[int, int, str]]:
    """(group, alternative, word) of every contrary the clause states."""
    text = PHRASES.sub(lambda m: "_".join(m.group().lower().split()), clause)
    words = {w.lower() for w in RAW_WORD.findall(text)}
    return [
        (g, k, min(words & alternative))
        for g, group in enumerate(CONTRARIES)
        for k, alternative in enumerate(group)
        if words & alternative
    ]


def contrary_clash(claim: str, window: str, analyzer) -> str | None:
    """The word of the claim whose contrary the window states in its place, or None: the claim's
    clause states one alternative of a group ("guilty"), the window never states it, and the
    window's clause closest to the claim's (sharing at least two other content words) states
    another ("no contest"). A clause that lists several alternatives ("the North, Middle and
    South forks") fills no single slot."""
    stated_anywhere = {(g, k) for g, k, _ in _alternatives(window)}
    window_clauses = [(set(analyzer.terms(c)), _alternatives(c)) for c in clauses(window)]
    if not window_clauses:
        return None
    for clause in clauses(claim):
        terms = set(analyzer.terms(clause))
        found = _alternatives(clause)
        closest_terms, closest = max(window_clauses, key=lambda w: len(w[0] & terms))
        for group, alternative, word in found:
            if sum(g == group for g, _, _ in found) > 1 or (group, alternative) in stated_anywhere:
                continue
            contrary = {k for g, k, _ in closest if g == group}
            slot_words = set(analyzer.terms(" ".join(w for a in CONTRARIES[group] for w in a)))
            if contrary and len((closest_terms & terms) - slot_words) >= 2:
                return word.replace("_", " ")
    return None


UNIVERSAL_EN = re.compile(
    r"\b(?:any|anyone|anybody|anything|all|always|everyone|everybody|everything)\b", re.IGNORECASE
)
# "all" that points back at what was listed or is an idiom, not a generalisation.
NOT_UNIVERSAL = re.compile(
    r"\b(?:all\s+of\s+(?:these|those|them|this|the\s+above)|(?:they|we|you|these|those)\s+all"
    r"|in\s+all\b|at\s+all|after\s+all|above\s+all|all\s+in\s+all|first\s+of\s+all"
    r"|once\s+and\s+for\s+all|any\s+more|any\s+longer|at\s+any\s+time|all\s+the\s+time)",
    re.IGNORECASE,
)


def generalises(clause_text: str) -> bool:
    """Whether English text states a generalisation ("any order", "all items", "always"): not
    under a negation, where "any" means none ("do not have any issues", "without any luxuries")
    and "not all", "not always" deny the generalisation, and not in idioms that point back
    ("all of these methods", "they all") or say something else ("at all", "after all")."""
    for clause in clauses(NOT_UNIVERSAL.sub(" ", clause_text)):
        words = _words(clause)
        for i, word in enumerate(words):
            if UNIVERSAL_EN.fullmatch(word) and not any(map(_is_cue, words[max(0, i - 4) : i])):
                return True
    return False
