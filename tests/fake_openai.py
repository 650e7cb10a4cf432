"""A fake OpenAI-compatible server on 127.0.0.1 (chat completions and embeddings, scripted
replies), as the pytest fixture ``fake``: registered for every test module by conftest."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

KEY = "sk-planted-7f3c9e21d4b8a6f0-never-store-me"


def fake_vector(text: str, dims: int = 16) -> np.ndarray:
    """A deterministic, unnormalised bag-of-words embedding."""
    vector = np.zeros(dims)
    vector[0] = 0.5
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dims] += 1.0
    return vector


def default_chat(body: dict) -> str:
    system = body["messages"][0]["content"]
    user = body["messages"][1]["content"]  # the first user message, also in a repair
    if system.startswith("You are a strict fact-checker"):
        claims = re.findall(r"^(\d+)\. ", user.split("Claims:")[-1], re.MULTILINE)
        verdicts = [
            {"claim_id": int(c), "grade": 2, "supporting_passages": [1], "reason": "stated"}
            for c in claims
        ]
        return json.dumps({"verdicts": verdicts})
    doc = re.search(r'doc_id="([^"]+)"', user)
    if doc is None:
        return "I don't know: there are no passages."
    return f"The passages say so [{doc.group(1)}]."


def default_system(body: dict) -> dict:
    """A RAG service over the seed-example dataset: refunds go to d3, everything else to d1."""
    refund = "refund" in body["query"].lower()
    doc = "d3" if refund else "d1"
    answer = "Refunds take 3 to 5 working days [d3]." if refund else "Returns take 7 days [d1]."
    return {"result": {"answer": answer}, "documents": [{"id": doc, "score": 2.0}, "d2"]}


def serve_posts(answer):
    """A loopback JSON server in a daemon thread: ``answer(path, body_bytes)`` gives each POST's
    ``(status, reply_bytes)``. Returns the server and its ``/v1`` URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            status, data = answer(self.path, self.rfile.read(int(self.headers["content-length"])))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


class FakeOpenAI:
    """Records every request; serves ``script`` entries first (a status code, a (status, body,
    headers) triple or ("sleep", seconds)), then answers with ``chat`` / fake embeddings.
    With ``drip`` set (seconds per byte), the whole reply, status line and headers included,
    is sent one byte at a time: a server that defeats any per-read timeout. ``reply`` replaces
    every reply's body (a hostile JSON text)."""

    def __init__(self):
        self.requests: list[dict] = []
        self.script: list = []
        self.chat = default_chat
        self.system = default_system
        self.require_key: str | None = None
        self.delay = 0.0
        self.drip: float | None = None
        self.reply: str | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.url = ""

    def chat_bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def respond(self, path: str, headers: dict, body: dict):
        with self.lock:
            self.requests.append({"path": path, "headers": headers, "body": body})
            step = self.script.pop(0) if self.script else None
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            if isinstance(step, tuple) and step[0] == "sleep":
                time.sleep(step[1])
            elif isinstance(step, int):
                return step, json.dumps({"error": {"message": f"scripted {step}"}}), {}
            elif isinstance(step, tuple):
                return step
            if self.require_key and headers.get("authorization") != f"Bearer {self.require_key}":
                shown = (headers.get("authorization") or "")[-12:]
                message = f"Incorrect API key provided: {shown}"
                return 401, json.dumps({"error": {"message": message}}), {}
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            path = path.partition("?")[0]  # routed by path; a query string may carry a key
            if path.endswith("/chat/completions"):
                content = self.chat(body)
                choice = {"index": 0, "message": {"role": "assistant", "content": content}}
                reply = {"object": "chat.completion", "choices": [choice], "usage": usage}
            elif path.endswith("/embeddings"):
                rows = [
                    {"index": i, "embedding": fake_vector(t).tolist()}
                    for i, t in enumerate(body["input"])
                ]
                reply = {"data": rows[::-1], "usage": {"prompt_tokens": 7, "total_tokens": 7}}
            elif path.endswith("/ask"):
                return 200, self.reply or json.dumps(self.system(body)), {}
            else:
                return 404, json.dumps({"error": {"message": "no route"}}), {}
            return 200, self.reply or json.dumps(reply), {}
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.fixture
def fake(monkeypatch, tmp_path):
    server_state = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, text, extra = server_state.respond(self.path, headers, body)
            data = text.encode() if isinstance(text, str) else text
            if server_state.drip:
                return self.drip(status, data)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def drip(self, status: int, data: bytes) -> None:
            head = f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
            raw = (head + f"Content-Length: {len(data)}\r\n\r\n").encode() + data
            for byte in raw:
                time.sleep(server_state.drip)
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:
                    return  # the client gave up
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    server_state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", server_state.url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("RAG_BENCH_CACHE_DIR", str(tmp_path / "cache"))
    yield server_state
    server.shutdown()
    server.server_close()
