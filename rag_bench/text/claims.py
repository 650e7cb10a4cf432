"""Splitting an answer into claims, and recognising refusals.

A claim is a sentence of the answer; the citation markers that follow a sentence (``[d1]``,
``[d1][d2]``, ``[d1, d2]``, and in Chinese text ``【d1】``, ``【d1，d2】``, ``［d1］``) belong to it
and are removed from its text. Chinese sentences end at 。！？； (full- or half-width), an
ellipsis, and the closing quotes after them (see ``rag_bench.text.scripts.split_sentences``).
"""

from __future__ import annotations

import re

from rag_bench.model import Claim
from rag_bench.text.sentences import split_sentences

MARKER = re.compile(r"\s*(?:\[([^\[\]]+)\]|【([^【】]+)】|［([^［］]+)］)")
CLAIM_END = re.compile(r"[\]】］][.!?。．！？；…]+[”’」』）)]*")
LEADING_MARKERS = re.compile(r"^(?:\s*(?:\[[^\[\]]+\]|【[^【】]+】|［[^［］]+］))+")
REFUSAL = re.compile(
    r"^\W*(i\s+(do\s*n[o']t|don’t|cannot|can\s*not|can[’']t)\s+(know|answer|tell|say|find)"
    r"|the\s+(provided\s+|retrieved\s+|available\s+)?(documents?|context|sources?)\s+(do\s*n[o']t|does\s*n[o']t|doesn’t|don’t)\s+(say|answer|mention|contain|cover|state)"
    r"|there\s+is\s+(not\s+enough|no|insufficient)\s+information"
    r"|(the\s+)?(answer|information)\s+is\s+not\s+(in|available)"
    r"|(很|非常)?(抱歉|对不起)[，,]?\s*(我)?(无法|不能|没法|没有办法)"
    r"|(我)?(无法|不能|没法)(回答|确定|判断|从)|我?不(知道|清楚|确定)"
    r"|(根据|依据)?(所|您)?(提供|检索到|现有|给定|已有|上述|以上)的?(资料|文档|文件|信息|上下文|内容)"
    r"中?[，,]?\s*(我)?(没有|未|并未|不足|无法|不能|不包含|没)"
    r"|(资料|信息|证据|依据)不足|(资料|文档|上下文)(里|中)?(没有|未|并未|不包含)|文件(里|中)(没有|未)"
    r"|没有(足够的?|相关的?)?(信息|资料|依据|证据|内容))",
    re.IGNORECASE,
)


def strip_markers(answer: str) -> str:
    """The answer's text without its citation markers."""
    return MARKER.sub("", answer)


def is_refusal(answer: str) -> bool:
    """An answer that declines to answer (it is then scored by the refusal metrics)."""
    return bool(REFUSAL.search(answer.strip()))


def _ids(match: re.Match) -> list[str]:
    body = match.group(1) or match.group(2) or match.group(3)
    return [part.strip() for part in re.split(r"[,，;；、]", body) if part.strip()]


def _sentences(answer: str) -> list[str]:
    """Sentences, also broken after every citation marker that closes one (``… [d1]. next``),
    whatever the case of the next word."""
    pieces, start = [], 0
    for match in CLAIM_END.finditer(answer):
        pieces.append(answer[start : match.end()])
        start = match.end()
    pieces.append(answer[start:])
    return [piece[s:e] for piece in pieces for s, e in split_sentences(piece)]


def split_claims(answer: str) -> list[Claim]:
    """The answer's sentences with the citation markers that follow each one."""
    claims: list[Claim] = []
    for sentence in _sentences(answer):
        leading = LEADING_MARKERS.match(sentence)
        if leading and claims:
            # "Claim one. [d1] Claim two." -- markers after the full stop cite the claim before
            previous = claims[-1]
            moved = tuple(i for m in MARKER.finditer(leading.group(0)) for i in _ids(m))
            claims[-1] = Claim(previous.text, tuple(dict.fromkeys(previous.citations + moved)))
            sentence = sentence[leading.end() :]
        citations: list[str] = []
        for match in MARKER.finditer(sentence):
            citations.extend(_ids(match))
        text = re.sub(r"\s+", " ", MARKER.sub("", sentence)).strip()
        if not text or re.fullmatch(r"\W*", text):
            # a sentence that is only markers cites for the claim before it
            if claims and citations:
                previous = claims[-1]
                claims[-1] = Claim(previous.text, previous.citations + tuple(citations))
            continue
        claims.append(Claim(text, tuple(dict.fromkeys(citations))))
    return claims
