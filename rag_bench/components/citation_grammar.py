"""A GBNF grammar that makes a chat model's answer cite the passages of its own prompt.

Under ``generator.cite=grammar`` the ``llama_cpp`` generator decodes within :func:`gbnf`: the
answer is either the refusal the built-in prompt defines (``I don't know: ...``, one sentence,
no marker) or one to :data:`MAX_SENTENCES` sentences, each ending in a citation marker before
its full stop. A marker names one passage of the prompt, by its number (``[2]``) or its doc id
(``[policy-3]``); :func:`~rag_bench.components.prompting.normalise_citations` maps both to doc
ids. The model still chooses the words and which passage to cite; the grammar only makes it
commit to one. A sentence holds at most :data:`MAX_WORDS` words of at most :data:`MAX_CHARS`
characters, so that a short answer ends within ``max_tokens`` (128 by default); an answer cut
by ``max_tokens`` can still lack its last marker.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_bench.model import Chunk

CITE_MODES = ("", "grammar")  # "": free text (the default); "grammar": the grammar below
MAX_SENTENCES = 3
MAX_WORDS = 16
MAX_CHARS = 24  # the longest word, and the most digits of a number on each side of its point
REFUSAL_START = "I don't know:"


def literal(text: str) -> str:
    """``text`` as a GBNF string literal (backslash, quote and control characters escaped)."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def citable(doc_id: str) -> bool:
    """A doc id a marker can name: one holding a bracket or a line break would not be read
    back from the answer as the same id."""
    return bool(doc_id) and not set("[]\r\n") & set(doc_id)


def markers(context: Sequence[Chunk]) -> list[str]:
    """Every marker the grammar allows for these passages: the number (``[2]``) and the doc id
    (``[policy-3]``) of each passage whose doc id a marker can name, each marker once."""
    numbers = [f"[{n}]" for n, c in enumerate(context, 1) if citable(c.doc_id)]
    ids = [f"[{c.doc_id}]" for c in context if citable(c.doc_id)]
    return list(dict.fromkeys(numbers + ids))


def gbnf(context: Sequence[Chunk]) -> str:
    """The grammar of a cited answer (or the refusal) over these context passages; with no
    passage a marker can name (no context at all, say) only the refusal."""
    allowed = markers(context)
    more, number = MAX_WORDS - 1, f"[0-9]{{1,{MAX_CHARS}}}"
    answer = [
        f'answer ::= sentence (" " sentence){{0,{MAX_SENTENCES - 1}}}',
        f'sentence ::= word (" " word){{0,{more}}} " " marker "."',
        "marker ::= " + " | ".join(literal(m) for m in allowed),
    ]
    return "\n".join(
        [
            "root ::= refusal | answer" if allowed else "root ::= refusal",
            *(answer if allowed else []),
            f'refusal ::= {literal(REFUSAL_START)} (" " word){{1,{MAX_WORDS}}} "."',
            # a word has no space, bracket or line break, and no full stop but the decimal
            # point of a number (19.8): a sentence ends only with its marker and full stop
            f"word ::= wchar{{1,{MAX_CHARS}}} | {number} {literal('.')} {number}",
            "wchar ::= [^ .\\[\\]\\n\\r\\t]",
        ]
    )
