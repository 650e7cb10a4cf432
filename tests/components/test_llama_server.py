"""The OpenAI-compatible path against a real server: llama.cpp's ``llama_cpp.server`` with the
packaged SmolLM2-135M on 127.0.0.1 (``.ci/run`` starts it; else the ``llama_server`` fixture
does). The ``openai`` generator, the ``llm`` judge and the ``llm_relevance`` judge talk to it:
chat completions, JSON mode, the repair of a malformed reply, concurrent requests, and a server
killed mid-run, then ``--resume`` asking no answered query again. tests/components/test_llm.py
keeps the fake server for what a real one cannot produce on demand (429 storms, huge bodies).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request

import pytest

from conftest import SHIPPED, require
from fake_openai import serve_posts
from llama_server import MODEL_NAME, LlamaServer
from rag_bench.components.openai.client import EndpointError
from rag_bench.components.openai.components import OpenAIGenerator
from rag_bench.components.openai.judge import LLMJudge, LLMRelevanceJudge
from rag_bench.experiment.runner import Selection, resume_run, run_variant
from rag_bench.model import Chunk, Query
from rag_bench.pipeline import compose
from rag_bench.runs import open_runs
from rag_bench.text.claims import split_claims

require("httpx", "pip install -e '.[dev]'")
pytestmark = [pytest.mark.llm]

RETURNS = "Items can be returned within 7 days of delivery. Fresh food cannot be returned."
SHIPPING = "Orders ship within 2 working days. Express delivery costs 9 euros."
CONTEXT = [
    Chunk("policy-3#0", "policy-3", 0, len(RETURNS), RETURNS, "Return policy"),
    Chunk("ship-1#0", "ship-1", 0, len(SHIPPING), SHIPPING, "Shipping"),
]
QUERIES = [
    Query("q1", "How many days do I have to return an item?"),
    Query("q2", "How much does express delivery cost?"),
]
CLAIMS = [
    split_claims("Items can be returned within 7 days [policy-3]. Fresh food is free [ship-1]."),
    split_claims("Express delivery costs 9 euros [ship-1]."),
]
HTTP = {
    "model": MODEL_NAME,
    "cache": False,
    "retry_backoff": 0.0,
    "timeout": 600.0,
    "max_retries": 1,
}


def test_the_openai_generator_gets_a_chat_completion(llama_server):
    generator = OpenAIGenerator(max_tokens=64, **HTTP)
    generation = generator.generate(QUERIES[0], CONTEXT)
    assert generation.answer.strip()
    usage = generator.usage()
    assert usage["model"] == MODEL_NAME and usage["requests"] == 1
    assert usage["prompt_tokens"] > 100 and 0 < usage["completion_tokens"] <= 64


def test_the_llm_judge_reads_every_reply_of_json_mode(llama_server):
    """In JSON mode the server constrains the reply to JSON with a grammar; whether the 135M
    model fills in the verdicts asked for is its business: each claim gets a valid grade or
    no verdict with the reason, never a guess, after at most one repair per answer."""
    judge = LLMJudge(max_tokens=160, **HTTP)
    verdicts = judge.judge_all(QUERIES, CLAIMS, [CONTEXT, CONTEXT])
    assert [len(v) for v in verdicts] == [len(c) for c in CLAIMS]
    usage = judge.usage()
    assert usage["claims_judged"] + usage["claims_unjudged"] == 3
    for verdict in (v for answer in verdicts for v in answer):
        if verdict.grade is None:
            assert verdict.supported is None
            assert verdict.reason.startswith("judge reply unusable: ")
        else:
            assert verdict.grade in (0, 1, 2) and verdict.supported == (verdict.grade >= 1)
    # one request per answer, and one repair per malformed reply
    assert usage["requests"] == 2 + usage["malformed_replies"] <= 4


def test_with_the_json_schema_every_claim_gets_a_verdict(llama_server):
    """``json_schema=true``: llama.cpp's server compiles the verdicts' schema into a grammar,
    so the 135M model's reply always parses: one grade per claim, no repair."""
    judge = LLMJudge(max_tokens=200, json_schema=True, **HTTP)
    verdicts = judge.judge_all(QUERIES, CLAIMS, [CONTEXT, CONTEXT])
    usage = judge.usage()
    assert usage["requests"] == 2 and usage["malformed_replies"] == 0
    assert usage["claims_judged"] == 3 and usage["claims_unjudged"] == 0
    for verdict in (v for answer in verdicts for v in answer):
        assert verdict.grade in (0, 1, 2) and len(verdict.reason) <= 200


def test_without_json_mode_a_malformed_reply_is_sent_back_once(llama_server):
    judge = LLMJudge(max_tokens=160, json_mode=False, **HTTP)
    judge.judge_all(QUERIES, CLAIMS, [CONTEXT, CONTEXT])
    usage = judge.usage()
    assert usage["malformed_replies"] >= 1, "the model wrote valid JSON unasked"
    assert usage["requests"] == 2 + usage["malformed_replies"]
    assert usage["malformed_after_retry"] <= usage["malformed_replies"]


def test_the_relevance_judge_grades_answers(llama_server):
    judge = LLMRelevanceJudge(max_tokens=60, **HTTP)
    grades = judge.grade_relevance(QUERIES, ["You have 7 days.", "Orders ship in 2 days."])
    assert len(grades) == 2
    for grade in grades:
        assert grade.grade in (0, 1, 2) or grade.reason.startswith("judge reply unusable: ")
    usage = judge.usage()
    assert usage["answers_graded"] + usage["answers_unjudged"] == 2
    assert usage["requests"] == 2 + usage["malformed_replies"]


def cli(args: list[str], env: dict, cache) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RAG_BENCH_")}
    environment |= {"RAG_BENCH_CACHE_DIR": str(cache), **env}
    command = [sys.executable, "-m", "rag_bench.cli.main", *map(str, args)]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=900)


OPTIONS = [
    "--set", "generator.name=openai", "--set", f"generator.model={MODEL_NAME}",
    "--set", "generator.max_tokens=48", "--set", "generator.context_k=2",
    "--set", "generator.retry_backoff=0", "--set", "generator.timeout=900",
]  # fmt: skip


def test_a_run_with_two_workers_and_the_llm_relevance_judge(llama_server, tmp_path):
    runs = tmp_path / "runs"
    judge = [
        "--judge", "llm_relevance", "--set", f"judge.model={MODEL_NAME}",
        "--set", "judge.max_tokens=120", "--set", "judge.concurrency=2",
        "--set", "judge.timeout=900", "--set", "generator.timeout=900",
    ]  # fmt: skip
    run = ["run", "--variant", "baseline", "--tag", "smoke", "--sample", "4", "--workers", "2"]
    out = cli(
        [*run, "--runs-dir", runs, *OPTIONS, "--set", "generator.concurrency=2", *judge],
        {"OPENAI_BASE_URL": llama_server, "OPENAI_API_KEY": "no-key"},
        tmp_path / "cache",
    )
    assert out.returncode == 0, out.stderr
    [stored] = open_runs(runs).list()
    usage = stored.manifest["usage"]
    assert usage["generator"]["requests"] == 4 and usage["generator"]["completion_tokens"] > 0
    judged = usage["judge"]
    assert judged["requests"] >= judged["answers_graded"] + judged["answers_unjudged"]
    answers = open_runs(runs).queries([stored.run_id])["answer"]
    assert len(answers) == 4 and answers.str.strip().str.len().gt(0).all()


class CountingProxy:
    """A loopback proxy in front of the real server that records the body of every request the
    server answered (HTTP 200) and, after ``kill_after`` answers, kills the server: it dies
    between two queries of a run, as a crashed server would. While the server is down the proxy
    answers 502."""

    def __init__(self, server: LlamaServer, kill_after: int):
        self.server, self.kill_after = server, kill_after
        self.answered: list[str] = []
        self.lock = threading.Lock()
        self.http, self.url = serve_posts(self.forward)

    def forward(self, path: str, body: bytes) -> tuple[int, bytes]:
        target = f"http://127.0.0.1:{self.server.port}{path}"
        request = urllib.request.Request(target, body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as reply:
                data = reply.read()
        except OSError as error:
            return 502, json.dumps({"error": {"message": f"server down: {error}"}}).encode()
        canonical = json.dumps(json.loads(body), sort_keys=True)
        with self.lock:
            self.answered.append(canonical)
            if len(self.answered) == self.kill_after:
                self.server.kill()
        return 200, data

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.mark.signals
def test_a_server_killed_mid_run_then_resume_asks_no_answered_query_again(
    real_smollm2, tmp_path, monkeypatch
):
    """Four queries in checkpoint blocks of two. The real server is SIGKILLed right after its
    third answer: queries 1-2 are checkpointed, query 3 was answered (and its reply cached) but
    not checkpointed, query 4 finds the server dead and the run stops naming the resume. A new
    server on the same port, ``resume_run``: query 3 comes from the request cache, only query 4
    is sent; the proxy saw every answered request exactly once."""
    monkeypatch.setattr(compose, "BATCH", 2)
    monkeypatch.setenv("RAG_BENCH_CACHE_DIR", str(tmp_path / "cache"))
    server = LlamaServer(log=tmp_path / "server.log", n_ctx=1024).start()
    proxy = CountingProxy(server, kill_after=3)
    monkeypatch.setenv("OPENAI_BASE_URL", proxy.url)
    monkeypatch.setenv("OPENAI_API_KEY", "no-key")
    runs = tmp_path / "runs"
    overrides = [
        "generator.name=openai", f"generator.model={MODEL_NAME}", "generator.max_tokens=8",
        "generator.context_k=1", "generator.concurrency=1", "generator.max_retries=1",
        "generator.retry_backoff=0", "generator.timeout=600",
    ]  # fmt: skip
    selection = Selection(tag="smoke", sample=4, seed=1)
    try:
        with pytest.raises(EndpointError) as stopped:
            run_variant("baseline", SHIPPED, overrides=overrides, selection=selection,
                        runs_dir=runs, cache_dir=tmp_path / "index")  # fmt: skip
        assert "then resume with `rag-bench run --resume" in str(stopped.value)
        assert "(2 of 4 queries are checkpointed)" in str(stopped.value)
        assert len(proxy.answered) == 3 and server.process.poll() is not None

        again = LlamaServer(port=server.port, log=tmp_path / "server.log", n_ctx=1024).start()
        try:
            run_id = open_runs(runs).find_checkpoint("")[1].run_id
            resumed = resume_run(run_id, runs_dir=runs, cache_dir=tmp_path / "index")
        finally:
            again.stop()
    finally:
        server.kill()
        proxy.close()
    usage = resumed.manifest["usage"]["generator"]
    assert resumed.manifest["resumed"]["queries_from_checkpoint"] == 2
    assert usage["cached_requests"] == 1  # query 3: answered before the kill, not re-sent
    assert len(proxy.answered) == 4 and len(set(proxy.answered)) == 4  # nothing asked twice
    answers = open_runs(runs).queries([resumed.run_id])["answer"]
    assert len(answers) == 4
