"""The kind of value a question asks for (a phone number, an address, a quantity, ...) and
whether an answer gives one: an answer about the right topic that lacks the asked-for value
("the Dublin office is at 4 Harbour Road" to "what is the phone number?") does not answer it.
"""

from __future__ import annotations

import re

from rag_bench.text.numbers import numbers

# (kind, what in a question asks for it, what in an answer gives it); the first kind whose
# question pattern matches is the one asked for.
KINDS: tuple[tuple[str, re.Pattern, re.Pattern], ...] = (
    (
        "email",
        re.compile(r"\be-?mail\s+address\b|邮箱|电子邮件", re.IGNORECASE),
        re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    ),
    (
        "phone",
        re.compile(
            r"\b(?:phone|telephone|fax|hotline|contact)\s+number\b|\bnumber\s+to\s+call\b"
            r"|电话|热线|手机号",
            re.IGNORECASE,
        ),
        re.compile(r"\+?\d[\d ()./-]{5,}\d|\b\d{3,4}-\d{3,4}\b"),
    ),
    (
        "website",
        re.compile(r"\b(?:website|web\s+address|url|web\s+page)\b|网址|网站", re.IGNORECASE),
        re.compile(r"https?://\S+|\bwww\.\S+|\b[\w-]+\.(?:com|org|net|io|eu|cn)\b", re.IGNORECASE),
    ),
    (
        "address",
        re.compile(
            r"\b(?:postal|mailing|street|shipping|return|office|physical)\s+address\b"
            r"|\bwhat\s+is\s+the\s+address\b|地址",
            re.IGNORECASE,
        ),
        re.compile(
            r"\b\d+[A-Za-z]?\s+(?:[A-Z][\w.'-]*\s+){1,4}"
            r"(?:Street|St|Avenue|Ave|Road|Rd|Drive|Dr|Boulevard|Blvd|Way|Lane|Ln|Parkway|"
            r"Place|Pl|Square|Quay|Court|Ct)\b|\bP\.?\s?O\.?\s+Box\b|\b\d{5}(?:-\d{4})?\b"
            r"|\b[A-Z]\d{2}\s?[A-Z0-9]{4}\b|[路街道巷弄号]\d|\d+号",
        ),
    ),
)
QUANTITY = re.compile(
    r"\bhow\s+(?:many|much|long|often|far|old)\b|多少|多久|几[天个次年月周]|多长时间",
    re.IGNORECASE,
)


def asked_kind(question: str) -> str | None:
    """``email``, ``phone``, ``website``, ``address`` or ``quantity`` when the question asks
    for such a value, else None."""
    for kind, asks, _ in KINDS:
        if asks.search(question):
            return kind
    return "quantity" if QUANTITY.search(question) else None


def gives(kind: str, answer: str) -> bool:
    """Whether the answer holds a value of the kind (a quantity: any number)."""
    if kind == "quantity":
        return bool(numbers(answer, lenient=True))
    pattern = next(gives for name, _, gives in KINDS if name == kind)
    return bool(pattern.search(answer))
