"""Splitting an answer into claims, and recognising refusals.

A claim is a sentence of the answer; the citation markers that follow a sentence (``[d1]``,
``[d1][d2]``, ``[d1, d2]``, and in Chinese text ``【d1】``, ``【d1，d2】``, ``［d1］``) belong to it
and are removed from its text. A marker holds document ids, which have no spaces: "[citation
needed]" is text, and so is a Markdown link's ``[label](url)``. Chinese sentences end at 。！？；
(full- or half-width), an ellipsis, and the closing quotes after them (see
``rag_bench.text.sentences.split_sentences``); every line of an answer is a sentence of its own.

What is no claim is left out: the number or bullet of a list item ("5. Mix 1 tsp salt" claims
"Mix 1 tsp salt"), a lead-in about the sources ("Based on the provided passages, the fee is 10%"
claims "the fee is 10%"), and sentences about the conversation ("I hope this helps.", "Here are
the steps:", "Let me know if you have other questions.").
"""

from __future__ import annotations

import re

from rag_bench.model import Claim
from rag_bench.text.sentences import split_sentences

# One document id or several, separated by commas, semicolons or 、 (no spaces inside an id).
IDS = r"\s*[^\s\[\]【】［］,，;；、]+(?:\s*[,，;；、]\s*[^\s\[\]【】［］,，;；、]+)*\s*"
MARKER = re.compile(rf"\s*(?:\[({IDS})\](?!\()|【({IDS})】|［({IDS})］)")
CLAIM_END = re.compile(rf"(?:\[{IDS}\]|【{IDS}】|［{IDS}］)[.!?。．！？；…]+[”’」』）)]*")
LEADING_MARKERS = re.compile(rf"^(?:\s*(?:\[{IDS}\](?!\()|【{IDS}】|［{IDS}］))+")
# The number, letter or bullet of a list item, and Markdown heading or emphasis marks before it.
LIST_ITEM = re.compile(
    r"^(?:#{1,6}\s+|[*_]{2}(?=\S))?(?:[-*•‣▪–]\s+|\(?(?:\d{1,2}|[a-z]|[ivx]{1,4})[.)]\s+)"
)
# A hard-wrapped line: it ends without punctuation and the next goes on in lower case.
WRAPPED = re.compile(r"(?<=[\w,])[ \t]*\n[ \t]*(?=[a-z])")
# Where a list starts inside a line: "Steps: 1. Open the tray."
LIST_START = re.compile(r"(?<=:)\s+(?=(?:1|a|i)[.)]\s+\S)")
SOURCES = (
    r"(?:the\s+|these\s+|this\s+)?(?:provided\s+|given\s+|retrieved\s+|available\s+|above\s+|"
    r"supplied\s+|following\s+|relevant\s+|cited\s+)?(?:passages?|context|documents?|sources?|"
    r"information|text|excerpts?|search\s+results|materials?|evidence|documentation|"
    r"(?:document|passage|source)\s*\d+)(?:\s+(?:provided|given|above|supplied))?"
)
# A lead-in that says where the claim comes from, not what it is.
META_LEAD = re.compile(
    rf"^(?:(?:based\s+(?:solely\s+|only\s+)?on|according\s+to|from|per|as\s+(?:stated|mentioned|"
    rf"noted|described|shown|explained|indicated)\s+in)\s+{SOURCES}\s*[,:]\s*"
    rf"|{SOURCES}\s+(?:states?|says?|indicates?|mentions?|shows?|suggests?|notes?|explains?|"
    rf"confirms?|specif(?:y|ies))\s+that\s+"
    r"|(?:in\s+summary|to\s+summari[sz]e|in\s+conclusion|in\s+short|overall|in\s+brief)\s*[,:]\s*"
    r"|(?:根据|依据|按照)(?:所|您)?(?:提供|检索到|给定|上述|以上|现有)的?"
    r"(?:资料|文档|文件|信息|上下文|内容|材料)(?:来看|显示)?[，,:：]\s*)",
    re.IGNORECASE,
)
# A sentence about the conversation, not the question's subject.
META_SENTENCE = re.compile(
    r"^\W*(?:i\s+hope\s+(?:this|that|it)\s+helps|hope\s+(?:this|that)\s+helps"
    r"|(?:please\s+)?(?:let\s+me\s+know|feel\s+free)\b|if\s+you\s+have\s+any\b.*\bquestions?"
    r"|is\s+there\s+anything\s+else\b|(?:sure|certainly|of\s+course|great\s+question|absolutely)\W*$"
    r"|(?:sure|certainly|of\s+course)\s*[!,.]\s*here\b|here\s+(?:is|are|'s)\b[^.!?]*:$"
    r"|i(?:'d|\s+would)\s+be\s+(?:happy|glad)\s+to\b|(?:the\s+)?(?:following|steps|ingredients)\s*:$"
    r"|\w+(?:\s+\w+)?\s*:$)",
    re.IGNORECASE,
)
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
    whatever the case of the next word, at every line break (but a hard wrap) and where a list
    starts."""
    pieces = []
    answer = WRAPPED.sub(" ", answer.replace("\r\n", "\n").replace("\r", "\n"))
    for line in LIST_START.split(answer):
        for part in line.split("\n"):
            start = 0
            for match in CLAIM_END.finditer(part):
                pieces.append(part[start : match.end()])
                start = match.end()
            pieces.append(part[start:])
    return [piece[s:e] for piece in pieces for s, e in split_sentences(piece)]


def claim_text(sentence: str) -> str:
    """A sentence's claim: without a list item's number or bullet, and without a lead-in
    naming the sources; empty for a sentence about the conversation ("I hope this helps.")."""
    text = LIST_ITEM.sub("", sentence.strip(), count=1)
    text = META_LEAD.sub("", text, count=1)
    if META_SENTENCE.search(text):
        return ""
    return text[:1].upper() + text[1:] if text[:1].islower() and text != sentence else text


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
        text = claim_text(re.sub(r"\s+", " ", MARKER.sub("", sentence)).strip())
        if not text or re.fullmatch(r"\W*", text):
            # a sentence that is only markers cites for the claim before it
            if claims and citations:
                previous = claims[-1]
                claims[-1] = Claim(previous.text, previous.citations + tuple(citations))
            continue
        claims.append(Claim(text, tuple(dict.fromkeys(citations))))
    return claims
