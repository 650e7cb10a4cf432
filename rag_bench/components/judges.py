"""Judges decide, claim by claim, which documents of the generator's context support it.

A verdict is graded (0 unsupported, 1 partly, 2 fully supported) and names the supporting
documents; ``supported`` is the grade compared with the judge's documented threshold.

- ``lexical`` (default, offline, deterministic): content-word overlap between the claim and a
  sentence window of a context passage, with guards so that a changed number, a flipped
  negation or an unwarranted generalisation ("any order") never counts as support. It reads
  Chinese through the pipeline's analyzer (``zh`` or ``auto``): full-width digits and Chinese
  numerals before a unit count as numbers (``７天`` = ``七天`` = ``7天``), and Chinese negation
  cues (不, 没有, 无法, 未, 禁止, ...; 除外 after what it excludes) are read clause by clause.
- ``annotated``: the human labels of the dataset's ``answers.jsonl`` (exact, for recorded answers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag_bench.components.base import Capability, Judge
from rag_bench.components.registry import component
from rag_bench.data.dataset import Dataset
from rag_bench.errors import RagBenchError, UsageError
from rag_bench.model import Chunk, Claim, Query, Verdict
from rag_bench.text.scripts import HAN, fold_width, has_han, zh_tokens
from rag_bench.text.sentences import split_sentences

# A number, with the letters glued before it when it is a code (IPX4, LM-E7, R300: a changed
# code is a changed fact), and 万/亿 after it (50万 = 500000).
NUMBER = re.compile(r"(?<![a-z])([a-z]*)(\d+(?:[.,:]\d+)*)(?:\s*([万亿]))?")
NEGATION_CUES = frozenset(
    "not no never none nothing neither nor cannot without can't won't isn't aren't doesn't "
    "don't didn't wasn't weren't shouldn't mustn't".split()
)
NEGATION_SCOPE = 4  # words after a cue that it negates (a NegEx-style window)
RAW_WORD = re.compile(r"[\w'’]+")

# Clauses: the polarity of a word is read in the clause of the window that matches the claim's
# clause best, so "7天内可以退货，生鲜商品不支持退货" supports "7天内可以退货".
CLAUSE_BREAK = re.compile(r"[;；，、：|｜\n\t]|[,:](?!\d)")

# Chinese negation, on jieba words: a cue negates up to ZH_NEGATION_SCOPE words after it in its
# clause; the scope also ends at a conjunction or a new modal (ZH_SCOPE_END), except right
# after the cue (不可以退货 negates 可以 and 退货; 不满意可以退货 only 满意). 除外/例外 negate the
# words before them (生鲜商品除外), and 除(了) ... 外 what stands between.
ZH_NEGATION_CUES = frozenset(
    "不 没 没有 无 非 未 别 勿 莫 不能 不可 不可以 不会 不得 不要 不用 不必 不需 不需要 无法 "
    "无须 无需 不予 不再 未能 未曾 从未 从不 绝不 决不 并非 并不 并未 毫无 禁止 严禁 请勿 切勿 "
    "不准 不许 不宜 不应 不应该 不该 不是 没法 不支持 不包括 不含".split()
)
ZH_POST_NEGATION = frozenset({"除外", "例外"})
ZH_EXCEPT = (frozenset({"除", "除了"}), frozenset({"外", "以外", "之外"}))
# Words that start with a cue character but do not negate (jieba keeps most, such as 非常 or
# 不锈钢, as one word already).
ZH_PSEUDO_NEGATION = (
    "无理由 不仅 不但 不管 不论 不久 不断 不少 不错 不同 不得不 非常 无论 未来 别人 别的 "
    "差不多 不一定要".split()
)
ZH_SCOPE_END = frozenset(
    "但 但是 而 却 才 则 便 也 就 可以 可 能 即可 并且 而且 或 或者 还是 因为 所以 如果 只要 "
    "只有 否则 需要 须 必须".split()
)
ZH_NEGATION_SCOPE = 5

# Universal quantifiers: a claim that says "any order" or 所有商品 generalises; the passage must
# generalise too (any of these words), else the claim is not supported. Distributive each/每 is
# not among them.
UNIVERSAL = re.compile(
    r"\b(?:any|anyone|anybody|anything|all|always|everyone|everybody|everything)\b"
    "|任何|所有|一切|全部|一律|总是|始终|凡是|无论",
    re.IGNORECASE,
)

# Chinese numerals before a unit (七天, 十五个工作日, 三到五个工作日), after 第 or 百分之.
# (一点 "a little" is why 点 is no unit.)
CN_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
CN_POWERS = {"十": 10, "百": 100, "千": 1000}
CN_SECTIONS = {"万": 10**4, "亿": 10**8}
CN_NUMERAL = re.compile("[零〇一二两三四五六七八九十百千万亿]+")
CN_UNIT = re.compile(
    "(?:[到至或~～\\-－][零〇一二两三四五六七八九十百千万亿]+)?"
    "(?:工作日|小时|分钟|星期|季度|周年|公里|公斤|千克|厘米|毫米|毫升|"
    "[天日周月年岁时分秒个次件份位名人元块角倍成折条项章节款页层号步种类台部辆张本箱瓶包斤克吨米升度级期届笔单遍码寸])"
)


def cn_numeral(text: str) -> int:
    """The value of a Chinese numeral: 七 7, 十五 15, 二十 20, 一百零五 105, 两万五千 25000,
    and digit by digit 二〇二五 2025. (Colloquial 三千五 for 3500 reads as 3005.)"""
    if len(text) > 1 and all(c in CN_DIGITS for c in text):
        return int("".join(str(CN_DIGITS[c]) for c in text))
    total = section = digit = 0
    for char in text:
        if char in CN_DIGITS:
            digit = CN_DIGITS[char]
        elif char in CN_POWERS:
            section += (digit or 1) * CN_POWERS[char]
            digit = 0
        else:
            total += (section + digit) * CN_SECTIONS[char]
            section = digit = 0
    return total + section + digit


def _cn_numbers(text: str) -> set[str]:
    found = set()
    for match in CN_NUMERAL.finditer(text):
        run, before = match.group(), text[: match.start()]
        if before.endswith(("第", "百分之")):
            found.add(str(cn_numeral(run)))
        elif run == "一" or not any(c in CN_DIGITS or c == "十" for c in run):
            continue  # 一 is mostly "a" (一个, 一种); 百, 万, 千万 alone are no count
        elif (
            run == "十"
            and text.startswith("分", match.end())
            and not text.startswith("分钟", match.end())
        ):
            continue  # 十分 is "very" (十分方便), 十分钟 ten minutes
        elif CN_UNIT.match(text, match.end()):
            found.add(str(cn_numeral(run)))
    return found


def numbers(text: str) -> set[str]:
    """Numbers in a text, thousands separators removed (1,200 == 1200), full-width digits read
    as digits (７ == 7), codes whole (IPX4 → ipx4, so IPX5 is another number), 万 and 亿 applied
    (50万 → 500000), and Chinese numerals that count something (七天, 第三条, 百分之十 → 7, 3,
    10). Chinese numerals inside words (一起, 统一, 万一) are not numbers."""
    text = fold_width(text).lower()
    found = set()
    for code, digits, scale in NUMBER.findall(text):
        number = re.sub(r",(?=\d{3}\b)", "", digits)
        if scale and not code and re.fullmatch(r"\d+(?:\.\d+)?", number):
            value = float(number) * CN_SECTIONS[scale]
            number = str(int(value)) if value.is_integer() else str(value)
        found.add(code + number)
    if has_han(text):
        found |= _cn_numbers(text)
    return found


def _join(words: list[str]) -> str:
    """Words back into text: no space between Han characters, a space elsewhere."""
    return re.sub(f"(?<=[{HAN}]) (?=[{HAN}])", "", " ".join(words))


def _zh_negated(clause: str, analyzer) -> set[str]:
    """Index terms in the scope of a Chinese negation cue within one clause."""
    words = zh_tokens(clause)
    scoped: set[str] = set()
    for i, word in enumerate(words):
        if word in ZH_NEGATION_CUES:
            ahead = "".join(words[i : i + 3])
            if any(ahead.startswith(p) for p in ZH_PSEUDO_NEGATION):
                continue
            scope: list[str] = []
            for j, following in enumerate(words[i + 1 : i + 1 + ZH_NEGATION_SCOPE]):
                if j and (following in ZH_SCOPE_END or following in ZH_NEGATION_CUES):
                    break
                scope.append(following)
            scoped.update(analyzer.terms(_join(scope)))
        elif word in ZH_POST_NEGATION:
            scope = []
            for preceding in reversed(words[max(0, i - ZH_NEGATION_SCOPE) : i]):
                if preceding in ZH_SCOPE_END or preceding in ZH_EXCEPT[0]:
                    break
                scope.insert(0, preceding)
            scoped.update(analyzer.terms(_join(scope)))
        elif word in ZH_EXCEPT[0]:
            rest = words[i + 1 : i + 1 + 2 * ZH_NEGATION_SCOPE]
            end = next((j for j, w in enumerate(rest) if w in ZH_EXCEPT[1]), None)
            if end is not None:
                scoped.update(analyzer.terms(_join(rest[:end])))
    return scoped


def negated_terms(text: str, analyzer) -> set[str]:
    """Index terms that stand within a few words after a negation cue (English), or in the
    scope of a Chinese cue within their clause."""
    words = [w.lower().replace("’", "'") for w in RAW_WORD.findall(text)]
    scoped: set[str] = set()
    for i, word in enumerate(words):
        if word in NEGATION_CUES or word.endswith("n't"):
            scoped.update(analyzer.terms(" ".join(words[i + 1 : i + 1 + NEGATION_SCOPE])))
    if has_han(text):
        for clause in clauses(text):
            if has_han(clause):
                scoped |= _zh_negated(clause, analyzer)
    return scoped


def clauses(text: str) -> list[str]:
    """The comma- and semicolon-separated clauses of a sentence (not the commas of 1,200)."""
    return [c for c in CLAUSE_BREAK.split(text) if c.strip()]


def polarity_clash(claim: str, window: str, analyzer) -> bool:
    """Whether a term the claim and the window share is negated in one and not the other.

    The polarity of a term in the window is read in the window's clause that shares the most
    terms with the claim's clause holding it: a passage that allows one thing and forbids
    another in two clauses supports a claim about either, but not a claim that swaps them.
    """
    shared = set(analyzer.terms(claim)) & set(analyzer.terms(window))
    if not shared:
        return False
    parts = [(set(analyzer.terms(c)), negated_terms(c, analyzer)) for c in clauses(window)]
    for clause in clauses(claim):
        terms = set(analyzer.terms(clause))
        negated = negated_terms(clause, analyzer)
        for term in terms & shared:
            holders = [p for p in parts if term in p[0]]
            if not holders:
                continue  # split over two clauses by the break; nothing to compare
            best = max(holders, key=lambda p: len(p[0] & terms))
            if (term in negated) != (term in best[1]):
                return True
    return False


def check_grade(supported_at: int) -> None:
    if supported_at not in (1, 2):
        raise UsageError(
            f"judge.supported_at={supported_at} is not 1 or 2",
            "2 = fully supported, 1 = at least partly",
        )


@component(
    "judge",
    "lexical",
    description="content-word overlap with a sentence window, number and negation guards",
)
class LexicalJudge(Judge):
    """Grade 2 when ≥ ``full`` of the claim's content words stand in one sentence window of a
    context passage, 1 when ≥ ``partial`` do; a claim counts as supported from grade
    ``supported_at`` on. Numbers must all appear in the passage and no shared word may be
    negated on one side only, else the grade is 0."""

    capabilities = frozenset({Capability.PREPARE})

    def __init__(self, full: float = 0.75, partial: float = 0.5, supported_at: int = 1):
        if not 0 < partial <= full <= 1:
            raise UsageError(
                f"judge thresholds partial={partial}, full={full}", "use 0 < partial ≤ full ≤ 1"
            )
        check_grade(supported_at)
        self.full, self.partial, self.supported_at = full, partial, supported_at
        self.analyzer = None

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.analyzer = analyzer

    def _windows(self, text: str) -> list[str]:
        """Single sentences and neighbouring pairs: a fact may straddle a sentence break."""
        sentences = [text[s:e] for s, e in split_sentences(text)]
        return sentences + [f"{a} {b}" for a, b in zip(sentences, sentences[1:])]

    def grade(self, claim: str, passage: str) -> tuple[int, str]:
        """Best grade of the claim against any sentence window of the passage, and why.

        Content words must be found within one window, the claim's numbers anywhere in the
        passage (a table row or a neighbouring sentence may carry them), a claim about "any" or
        "all" needs a passage that generalises too, and the passage's sentence closest to the
        claim must not negate what the claim asserts (or vice versa).
        """
        if _quoted(claim, passage):
            return 2, "the claim quotes the passage word for word"
        wanted = set(self.analyzer.terms(claim))
        if not numbers(claim) <= numbers(passage):
            return 0, "a number of the claim is not in the passage"
        if UNIVERSAL.search(claim) and not UNIVERSAL.search(passage):
            return 0, "the claim generalises (any, all, 任何, 所有) and the passage does not"
        windows = self._windows(passage)
        coverage = [len(wanted & set(self.analyzer.terms(w))) / len(wanted) for w in windows]
        if not coverage or max(coverage) < self.partial:
            return 0, "no sentence shares enough content words"
        closest = max(range(len(windows)), key=lambda i: (coverage[i], -len(windows[i])))
        if polarity_clash(claim, windows[closest], self.analyzer):
            return 0, "the claim and the passage differ in negation"
        best = max(coverage)
        grade = 2 if best >= self.full else 1
        return grade, f"{best:.0%} of the claim's content words in one passage window"

    def judge(
        self, query: Query, claims: Sequence[Claim], context: Sequence[Chunk]
    ) -> list[Verdict]:
        verdicts = []
        for claim in claims:
            if not self.analyzer.terms(claim.text):
                verdicts.append(Verdict(None, None, (), "no content words to check"))
                continue
            grades: dict[str, int] = {}
            reasons: list[str] = []
            for chunk in context:
                grade, reason = self.grade(claim.text, chunk.text)
                grades[chunk.doc_id] = max(grade, grades.get(chunk.doc_id, 0))
                reasons.append(reason)
            best = max(grades.values(), default=0)
            by = tuple(d for d, g in grades.items() if g >= self.supported_at)
            reason = next(
                (r for r in reasons if r.endswith("window")),
                reasons[0] if reasons else "no context",
            )
            verdicts.append(Verdict(best, best >= self.supported_at, by, reason))
        return verdicts


def _squeezed(text: str) -> str:
    return " ".join(text.lower().split())


def _quoted(claim: str, passage: str) -> bool:
    """Whether the claim, without its final punctuation, stands verbatim in the passage
    (whitespace and case aside): a literal quote needs no further checks."""
    body = _squeezed(claim).rstrip(".!?。！？；;:：")
    return len(body) > 0 and body in _squeezed(passage)


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


@component("judge", "annotated", description="the claim labels of answers.jsonl (supported_by)")
class AnnotatedJudge(Judge):
    capabilities = frozenset({Capability.PREPARE})

    def prepare(self, dataset: Dataset, chunks: Sequence[Chunk], analyzer) -> None:
        self.answers = dataset.answers

    def judge(
        self, query: Query, claims: Sequence[Claim], context: Sequence[Chunk]
    ) -> list[Verdict]:
        recorded = self.answers.get(query.id)
        if recorded is None:
            raise RagBenchError(
                f"the annotated judge has no labels for query {query.id!r}",
                "use it with the recorded variant, or pick --judge lexical",
            )
        labelled = {_normal(c.text): c for c in recorded.claims}
        in_context = {c.doc_id for c in context}
        verdicts = []
        for i, claim in enumerate(claims):
            label = labelled.get(_normal(claim.text))
            if label is None and len(claims) == len(recorded.claims):
                label = recorded.claims[i]
            if label is None or label.supported_by is None:
                verdicts.append(Verdict(None, None, (), "no label for this claim"))
                continue
            by = tuple(d for d in label.supported_by if d in in_context)
            verdicts.append(Verdict(2 if by else 0, bool(by), by, "annotated"))
        return verdicts
