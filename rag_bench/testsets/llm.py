"""Questions worded by a chat model: the ``llama_cpp`` generator (the packaged SmolLM2 by
default) or the ``openai`` one (a user's server), called through the component's own
``complete``, so the model, its settings and the request path are the generator's.

The offline rules choose what to ask (the sentence, the fact, the bridge, the swapped thing:
:mod:`rag_bench.testsets.propose`); the model only words the question. A reply that is no
usable question (empty, no question mark, or giving away the answer) is not used: that query
keeps the offline wording, its ``method`` says so, and the count is reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rag_bench.components.registry import VariantSpec, build, resolve
from rag_bench.errors import UsageError
from rag_bench.testsets.propose import Proposal

SYSTEM = (
    "You write one question for a test set of a search system. Reply with the question only, "
    "on one line, ending with a question mark."
)
MAX_QUESTION_WORDS = 60


def question_writer(name: str, overrides: Sequence[str] = ()) -> Any:
    """The generator component ``name`` with ``generator.PARAM=VALUE`` overrides, checked to be
    able to complete a chat."""
    spec = VariantSpec("generate", {"generator": {"name": name}})
    generator = build("generator", resolve(spec, overrides)["generator"])
    if not callable(getattr(generator, "complete", None)):
        raise UsageError(
            f"the generator {name!r} cannot write questions (it completes no chat)",
            "use --llm llama_cpp (the packaged SmolLM2) or --llm openai",
        )
    return generator


def messages(proposal: Proposal) -> list[dict]:
    """The chat asking for ``proposal``'s question."""
    if proposal.category == "multi-hop":
        task = (
            f"Passage 1: {proposal.details['bridge_span']}\nPassage 2: {proposal.source_span}\n"
            f"Answer: {proposal.gold_answer}\nWrite a question whose answer is the answer above "
            f'and that needs both passages: do not name "{proposal.details["bridge"]}", '
            "describe it by what passage 1 says about it."
        )
    elif proposal.category == "unanswerable":
        task = f"Rewrite this as one natural question, keeping every name: {proposal.text}"
    else:
        task = (
            f"Passage: {proposal.source_span}\nAnswer: {proposal.gold_answer}\n"
            "Write a question that the passage answers with exactly this answer."
        )
        if proposal.category == "paraphrase":
            task += " Use your own words, not the passage's."
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]


def usable(reply: str, proposal: Proposal) -> str | None:
    """The question in a model's reply, or None when there is none to use."""
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return None
    # "Question: ...", "Rewrite this as one natural question: ..." (the task echoed)
    text = re.sub(r"^[^:?]*\bquestion\b[^:?]*:\s*", "", lines[0], flags=re.I).strip(" \"'*")
    if not text.endswith("?") or not 3 <= len(text.split()) <= MAX_QUESTION_WORDS:
        return None
    gold = (proposal.gold_answer or "").strip().lower()
    if gold and gold in text.lower():
        return None  # it gives its answer away
    if proposal.category == "unanswerable" and proposal.details["swapped"][1] not in text:
        return None  # the corpus was checked for the swapped thing: it must stay
    if proposal.category == "multi-hop" and proposal.details["bridge"] in text:
        return None  # naming the bridge makes the first document unnecessary
    return text


def word(generator: Any, proposal: Proposal) -> str | None:
    """The model's wording of ``proposal``'s question, or None when its reply is unusable."""
    return usable(generator.complete(messages(proposal)), proposal)
