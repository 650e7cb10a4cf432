"""An endpoint cannot hold a run, crash it or leak a secret: a server that drips its reply one
byte at a time meets a total deadline per request (not a per-read timeout it defeats); Ctrl-C
and SIGTERM stop a run waiting on it at once with the usual line; hostile replies (nested too
deep, NaN, numbers beyond float range) are one line naming the endpoint; a key in the URL's
query string is stored and shown nowhere. The server is the fake on 127.0.0.1."""

from __future__ import annotations

import json
import signal
import sys
import time

import pytest
from processes import Process

from conftest import ROOT, assert_one_line_error
from rag_bench.components.openai.client import LLMClient
from rag_bench.io.urls import public_url

SEED = ROOT / "data" / "seed-example"
SECRET = "sk-query-secret-5b1d"


@pytest.fixture
def service(fake, monkeypatch):
    monkeypatch.setenv("RAG_SYSTEM_URL", fake.url + "/ask")
    return fake


def _http_run(runs, *sets: str) -> list[str]:
    args = ["run", "--variant", "http", "--dataset", SEED, "--runs-dir", runs, "--k", "1,2"]
    for slot in ("generator", "retriever"):
        args += ["--set", f"{slot}.answer_field=result.answer"]
        args += [a for s in sets for a in ("--set", f"{slot}.{s}")]
    return args


def test_a_dripping_server_meets_a_total_deadline(service, rag_bench, tmp_path):
    service.drip = 0.1  # a reply of ~200 bytes takes ~20 s, each byte well within any timeout
    out = rag_bench(*_http_run(tmp_path / "runs", "timeout=1", "max_retries=0"))
    assert_one_line_error(out, "127.0.0.1", "no reply within 1s", "max_retries")


@pytest.mark.signals
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_signal_stops_a_run_waiting_on_an_endpoint(
    service, tmp_path, index_cache, signum, concurrency
):
    service.drip = 0.5
    args = _http_run(tmp_path / "runs", f"concurrency={concurrency}")
    process = Process(args, cache=index_cache)
    deadline = time.monotonic() + 60
    while not service.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert service.requests, "the run never asked the endpoint"
    time.sleep(0.3)
    process.signal(signum)
    code = process.finish(timeout=15)  # before: only SIGKILL ended it
    assert code == 128 + signum
    [line] = process.messages()
    assert line.startswith("interrupted; ") and "Traceback" not in line


@pytest.mark.parametrize(
    "body, said",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deep"),
        ('{"result": {"answer": "x"}, "documents": [{"id": "d1", "score": NaN}]}', "NaN"),
        ('{"result": {"answer": "x"}, "documents": [{"id": "d1", "score": 1e999}]}', "score"),
        ('{"result": {"answer": "x"}, "documents": [{"id": "d1", "score": 1%s}]}' % ("0" * 400),
         "score"),
    ],
    ids=["deep", "nan", "overflow", "400-digits"],
)  # fmt: skip
def test_hostile_replies_are_one_line_naming_the_endpoint(service, rag_bench, tmp_path, body, said):
    service.reply = body
    out = rag_bench(*_http_run(tmp_path / "runs"))
    assert_one_line_error(out, "127.0.0.1", said)


@pytest.mark.parametrize("tokens", ["1e999", "1" + "0" * 400, "true", "-5"])
def test_absurd_token_counts_count_nothing(fake, tokens):
    fake.reply = json.dumps(
        {"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": 0}}
    ).replace('"prompt_tokens": 0', f'"prompt_tokens": {tokens}')
    client = _client()
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]
    assert client.chat("m", messages) == "hi"
    usage = client.usage()
    assert usage["prompt_tokens"] == 0 and usage["requests"] == 1
    json.dumps(usage, allow_nan=False)  # a manifest can hold it


def _client(**options) -> LLMClient:
    settings = dict(
        where="generator",
        base_url_env="OPENAI_BASE_URL",
        api_key_env="OPENAI_API_KEY",
        timeout=5.0,
        max_retries=0,
        retry_backoff=0.0,
        concurrency=1,
        cache=True,
        price_per_1k_prompt=0.0,
        price_per_1k_completion=0.0,
    )
    return LLMClient(**{**settings, **options})


# --- secrets in the URL -----------------------------------------------------------------------


def test_public_url_redacts_query_values_and_user_info():
    url = f"https://me:pw@api.example:8443/v1/ask?api_key={SECRET}&model=m#frag"
    assert public_url(url) == "https://api.example:8443/v1/ask?api_key=***&model=***"
    assert public_url("http://h/x?just-a-token") == "http://h/x?just-a-token=***"


def test_a_key_in_the_query_string_is_stored_and_shown_nowhere(service, rag_bench, tmp_path):
    service_url = service.url + f"/ask?api_key={SECRET}"
    runs = tmp_path / "runs"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAG_SYSTEM_URL", service_url)
        out = rag_bench(*_http_run(runs))
        assert out.exit_code == 0, out.stderr
        service.script = [500]
        failed = rag_bench(*_http_run(tmp_path / "other", "max_retries=0", "cache=false"))
    assert_one_line_error(failed, "/ask?api_key=***", "HTTP 500")
    assert SECRET not in failed.stderr + out.stderr + out.stdout
    stored = [p for p in [*runs.rglob("*"), *(tmp_path / "cache").rglob("*")] if p.is_file()]
    assert stored and not [p for p in stored if SECRET.encode() in p.read_bytes()]
    assert any(r["path"].endswith(f"api_key={SECRET}") for r in service.requests)  # it was sent
