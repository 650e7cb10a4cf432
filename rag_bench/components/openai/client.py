"""A small client for OpenAI-compatible HTTP APIs (chat completions and embeddings).

It is shared by the ``openai`` generator and encoder and the ``llm`` judge, and does the chores
a benchmark needs from a paid, flaky, rate-limited service:

- the base URL and the API key come from environment variables whose *names* are component
  parameters; the key itself is held in memory only, never written to params, manifests,
  traces, cache files or error messages;
- timeouts, and bounded retries with exponential backoff on HTTP 429 / 5xx / timeouts /
  dropped connections (``Retry-After`` is honoured, up to a cap);
- bounded concurrency: :meth:`LLMClient.map` runs requests in a small thread pool;
- an on-disk cache, one JSON file per request under ``<cache dir>/llm/``, keyed by a hash of
  the endpoint and the request body and written atomically, so re-running a variant costs
  nothing and returns exactly the same output;
- token accounting from each reply's ``usage`` field, and a cost when prices are configured.

A failure the user can fix (wrong key, wrong URL or model, a server that is not OpenAI-compatible,
a server that keeps failing) is a one-line :class:`EndpointError` that names the fix.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

import numpy as np

from rag_bench.errors import RagBenchError, UsageError, first_line, import_backend
from rag_bench.io.cache import default_cache_dir, digest
from rag_bench.io.durable import atomic_write
from rag_bench.io.urls import public_url, query_digest

T = TypeVar("T")
R = TypeVar("R")

INSTALL = "pip install 'rag-bench[openai]'"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_BACKOFF_S = 30.0  # longest wait between two attempts, Retry-After included
MAX_REPLY_BYTES = 64 * 2**20  # a reply larger than this is no API's answer
MAX_TOKENS = 10**12  # a token count beyond this in a reply's usage counts nothing
CACHE_FORMAT = 1
UNTRUSTED_TAG = re.compile(r"<(/?\s*(?:passages?|answer))", re.IGNORECASE)


class EndpointError(RagBenchError):
    """The HTTP endpoint refused or failed a request in a way the user must fix."""

    exit_code = 5


class LLMClient:
    """Chat completions and embeddings against one OpenAI-compatible base URL.

    ``where`` names the slot using the client (``generator``, ``judge``, ``encoder``) so that
    hints can name the exact ``--set`` that fixes a problem. The other settings are the
    parameters of :class:`EndpointComponent`, where their defaults are declared.
    """

    def __init__(
        self,
        *,
        where: str,
        base_url_env: str,
        api_key_env: str,
        timeout: float,
        max_retries: int,
        retry_backoff: float,
        concurrency: int,
        cache: bool,
        price_per_1k_prompt: float,
        price_per_1k_completion: float,
        default_base_url: str | None = DEFAULT_BASE_URL,
        speaks: str = "an OpenAI-compatible API (base URL ending in /v1)",
    ):
        """``default_base_url`` is used when ``$base_url_env`` is unset (None: it must be set);
        ``speaks`` names the protocol the server must speak, in hints."""
        if timeout <= 0:
            raise UsageError(f"{where}.timeout={timeout} is not positive", "e.g. 60 (seconds)")
        if max_retries < 0:
            raise UsageError(f"{where}.max_retries={max_retries} is below 0", "e.g. 4")
        if retry_backoff < 0:
            raise UsageError(f"{where}.retry_backoff={retry_backoff} is below 0", "e.g. 1.0")
        if concurrency < 1:
            raise UsageError(f"{where}.concurrency={concurrency} is below 1", "e.g. 4")
        if price_per_1k_prompt < 0 or price_per_1k_completion < 0:
            raise UsageError(f"{where} has a negative price", "prices are USD per 1000 tokens")
        self._httpx = import_backend("httpx", INSTALL, f"the {where} calling an HTTP endpoint")
        self.where = where
        self.base_url_env, self.api_key_env = base_url_env, api_key_env
        raw = os.environ.get(base_url_env, "").strip() or default_base_url or ""
        if not raw:
            raise UsageError(f"${base_url_env} is not set", f"set {base_url_env} to {speaks}")
        if urlsplit(raw).scheme not in ("http", "https") or not urlsplit(raw).hostname:
            raise UsageError(
                f"${base_url_env} is not an http(s) URL",
                f"set {base_url_env} to the API's base URL, e.g. {DEFAULT_BASE_URL}",
            )
        self.base_url = raw.rstrip("/")
        self.speaks = speaks
        self._key = os.environ.get(api_key_env, "").strip() or None
        self.timeout, self.max_retries, self.retry_backoff = timeout, max_retries, retry_backoff
        self.concurrency = concurrency
        self.prices = (price_per_1k_prompt, price_per_1k_completion)
        self.cache_root = default_cache_dir() / "llm" if cache else None
        self._client = None
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(
            (
                "requests",
                "retries",
                "cached_requests",
                "prompt_tokens",
                "completion_tokens",
                "cached_prompt_tokens",
                "cached_completion_tokens",
            ),
            0,
        )

    def __repr__(self) -> str:  # never the key
        return f"LLMClient({public_url(self.base_url)!r}, key from ${self.api_key_env})"

    # --- public API ----------------------------------------------------------------------

    def chat(self, model: str, messages: Sequence[dict], **params: Any) -> str:
        """The text of the first choice of a chat completion (``params``: temperature, ...)."""
        body = {"model": model, "messages": list(messages), **params}
        reply = self.post("chat/completions", body)
        try:
            content = reply["choices"][0]["message"].get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise self._not_openai("chat/completions", "has no choices[0].message") from None
        return content if isinstance(content, str) else ""

    def embed(self, model: str, texts: Sequence[str], dimensions: int | None = None) -> np.ndarray:
        """One embedding per text (one request; batch with :meth:`map`)."""
        body: dict[str, Any] = {"model": model, "input": list(texts)}
        if dimensions:
            body["dimensions"] = dimensions
        reply = self.post("embeddings", body)
        try:
            rows = sorted(reply["data"], key=lambda row: row["index"])
            vectors = np.array([row["embedding"] for row in rows], dtype=np.float64)
        except (KeyError, TypeError, ValueError):
            raise self._not_openai("embeddings", "has no data[].embedding list") from None
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise self._not_openai("embeddings", f"has {len(rows)} embeddings for {len(texts)}")
        return vectors

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` with at most ``concurrency`` requests in flight, in order.

        The first error stops the work: requests not yet started are not sent. The calling
        thread waits in Python, so Ctrl-C (or SIGTERM) stops it at once; requests in flight are
        left to their deadline on daemon threads, which never hold the process up at exit.
        """
        items = list(items)
        if self.concurrency == 1 or len(items) <= 1:
            return [fn(item) for item in items]
        results: list[Any] = [None] * len(items)
        failures: dict[int, BaseException] = {}
        pending = iter(range(len(items)))
        stop, lock = threading.Event(), threading.Lock()

        def work() -> None:
            while not stop.is_set():
                with lock:
                    index = next(pending, None)
                if index is None:
                    return
                try:
                    results[index] = fn(items[index])
                except BaseException as exc:  # handed to the waiting thread
                    failures[index] = exc
                    stop.set()

        workers = [
            threading.Thread(target=work, name="rag-bench-llm", daemon=True)
            for _ in range(min(self.concurrency, len(items)))
        ]
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                while worker.is_alive():
                    worker.join(0.1)
        finally:
            stop.set()  # an interrupt: start no more requests
        if failures:
            raise failures[min(failures)]
        return results

    def tally(self) -> dict[str, int]:
        """The raw counts behind :meth:`usage`."""
        with self._lock:
            return dict(self._counts)

    def absorb(self, counts: dict[str, int]) -> None:
        """Add counts made by a copy of this client (a task of a Ray run)."""
        with self._lock:
            for name, value in counts.items():
                self._counts[name] = self._counts.get(name, 0) + value

    def __getstate__(self) -> dict[str, Any]:
        """What a copy sent to another process keeps: no connection, lock or module, and no
        API key (a copy reads it from its own environment), so no secret reaches Ray's object
        store or its spill files."""
        state = dict(self.__dict__)
        for name in ("_client", "_lock", "_httpx", "_key"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client = None
        self._lock = threading.Lock()
        self._httpx = import_backend("httpx", INSTALL, f"the {self.where} calling an HTTP endpoint")
        self._key = os.environ.get(self.api_key_env, "").strip() or None

    def usage(self) -> dict[str, Any]:
        """Requests sent (``retries`` extra attempts among them not counted), requests answered
        from the cache, and the tokens of both; ``cost_usd`` of the tokens actually paid for
        when prices are set."""
        with self._lock:
            counts: dict[str, float] = dict(self._counts)
        prompt_price, completion_price = self.prices
        if prompt_price or completion_price:
            counts["cost_usd"] = round(
                counts["prompt_tokens"] / 1000 * prompt_price
                + counts["completion_tokens"] / 1000 * completion_price,
                6,
            )
        return counts

    # --- one request -----------------------------------------------------------------------

    def post(self, path: str, body: dict) -> dict:
        """POST ``body`` to ``<base url>/<path>``: from the cache when this exact request was
        answered before, else over HTTP (with retries), then cached."""
        url = f"{self.base_url}/{path}" if path else self.base_url
        material = {"format": CACHE_FORMAT, "endpoint": public_url(url), "body": body}
        if public_url(url) != url:  # a query or user info: told apart by a hash, not stored
            material["secret_sha256"] = query_digest(url)
        key = digest(material)
        cached = self._cache_read(key)
        if cached is not None:
            self._account(cached, cached=True)
            return cached
        reply = self._send(url, body)
        self._account(reply, cached=False)
        self._cache_write(key, {"endpoint": public_url(url), "request": body, "response": reply})
        return reply

    def _http(self):
        with self._lock:
            if self._client is None:
                httpx = self._httpx
                self._client = httpx.Client(
                    timeout=httpx.Timeout(self.timeout),
                    limits=httpx.Limits(max_connections=self.concurrency),
                )
            return self._client

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    def _send(self, url: str, body: dict) -> dict:
        httpx = self._httpx
        shown = public_url(url)
        if self._key is None and self.base_url == DEFAULT_BASE_URL:
            raise EndpointError(
                f"no API key for {shown} (${self.api_key_env} is not set)",
                f"set {self.api_key_env}, or point {self.base_url_env} at your own server",
            )
        problem = "no attempt"
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._lock:
                    self._counts["retries"] += 1
            wait = None
            try:
                response = self._attempt(url, body)
            except (httpx.TimeoutException, TimeoutError):
                problem = f"no reply within {self.timeout:g}s"
            except httpx.TransportError as error:
                problem = f"connection failed ({type(error).__name__})"
            else:
                status = response.status_code
                if status < 300:
                    return self._decode(response, shown)
                self._raise_for_fatal(response, shown, body)
                problem = f"HTTP {status}{self._server_message(response)}"
                wait = _retry_after(response)
            if attempt == self.max_retries:
                break
            if wait is None:
                wait = self.retry_backoff * 2**attempt * (0.5 + random.random() / 2)
            time.sleep(min(wait, MAX_BACKOFF_S))
        raise EndpointError(
            f"{shown} failed {self.max_retries + 1} time(s), last: {problem}",
            f"check that the server at ${self.base_url_env} is up, "
            f"or allow more attempts: --set {self.where}.max_retries=8",
        )

    def _attempt(self, url: str, body: dict) -> Reply:
        """One POST, bounded in total by ``timeout`` (however slowly the server drips its reply),
        made on a daemon thread while this one waits in Python, where Ctrl-C arrives."""
        deadline = time.monotonic() + self.timeout
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                outcome["reply"] = self._receive(url, body, deadline)
            except BaseException as exc:  # handed to the waiting thread
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=call, name="rag-bench-request", daemon=True).start()
        while not done.wait(min(0.1, max(deadline - time.monotonic(), 0.0) + 0.01)):
            if time.monotonic() > deadline + 0.5:
                raise TimeoutError  # the thread ends at its next byte, or its read timeout
        if "error" in outcome:
            raise outcome["error"]
        return outcome["reply"]

    def _receive(self, url: str, body: dict, deadline: float) -> Reply:
        """The reply read in pieces, given up once ``deadline`` passes or it grows too large."""
        with self._http().stream("POST", url, json=body, headers=self._headers()) as response:
            pieces, size = [], 0
            for piece in response.iter_bytes():
                size += len(piece)
                if time.monotonic() > deadline:
                    raise TimeoutError
                if size > MAX_REPLY_BYTES:
                    raise self._not_openai_url(
                        public_url(url), f"is larger than {MAX_REPLY_BYTES // 2**20} MiB"
                    )
                pieces.append(piece)
            return Reply(response.status_code, response.headers, b"".join(pieces))

    def _decode(self, response: Reply, shown: str) -> dict:
        try:
            reply = response.json()
        except RecursionError:
            raise self._not_openai_url(shown, "is JSON nested too deep") from None
        except ValueError as exc:
            raise self._not_openai_url(shown, f"is not JSON ({first_line(exc)[:200]})") from None
        if not isinstance(reply, dict):
            raise self._not_openai_url(shown, "is not a JSON object")
        return reply

    def _raise_for_fatal(self, response, shown: str, body: dict) -> None:
        """Errors a retry cannot fix: say what to change."""
        status = response.status_code
        if status in (401, 403):
            raise EndpointError(
                f"{shown} answered HTTP {status}: the API key is missing or was rejected",
                f"set {self.api_key_env} to a valid key for ${self.base_url_env}",
            )
        if status == 404:
            raise EndpointError(
                f"{shown} answered HTTP 404: no such endpoint"
                + (f" or model {body['model']!r}" if "model" in body else "")
                + self._server_message(response),
                f"check that {self.base_url_env} points at {self.speaks}"
                + (f" and --set {self.where}.model=..." if "model" in body else ""),
            )
        if status in (408, 409, 425, 429) or status >= 500:
            return
        raise EndpointError(
            f"{shown} rejected the request with HTTP {status}{self._server_message(response)}",
            f"check the {self.where}'s parameters (model, max_tokens, ...) against the server",
        )

    def _server_message(self, response) -> str:
        """The server's own error text, shortened, on one line, with the key redacted."""
        try:
            payload = response.json()
            error = payload.get("error", payload) if isinstance(payload, dict) else payload
            text = error.get("message", "") if isinstance(error, dict) else str(error)[:400]
        except (ValueError, RecursionError):
            text = response.text
        text = " ".join(str(text).split())[:200]
        if self._key:
            text = text.replace(self._key, "***")
        return f": {text}" if text else ""

    def _not_openai_url(self, shown: str, what: str) -> EndpointError:
        return EndpointError(
            f"the reply of {shown} {what}",
            f"point {self.base_url_env} at {self.speaks}",
        )

    def _not_openai(self, path: str, what: str) -> EndpointError:
        return self._not_openai_url(public_url(f"{self.base_url}/{path}"), what)

    # --- accounting and cache ------------------------------------------------------------

    def _account(self, reply: dict, cached: bool) -> None:
        usage = reply["usage"] if isinstance(reply.get("usage"), dict) else {}
        prompt = _count(usage.get("prompt_tokens", usage.get("total_tokens")))
        completion = _count(usage.get("completion_tokens"))
        with self._lock:
            if cached:
                self._counts["cached_requests"] += 1
                self._counts["cached_prompt_tokens"] += prompt
                self._counts["cached_completion_tokens"] += completion
            else:
                self._counts["requests"] += 1
                self._counts["prompt_tokens"] += prompt
                self._counts["completion_tokens"] += completion

    def _cache_path(self, key: str) -> Path:
        assert self.cache_root is not None  # asked only when the cache is on
        return self.cache_root / key[:2] / f"{key}.json"

    def _cache_read(self, key: str) -> dict | None:
        if self.cache_root is None:
            return None
        try:
            entry = json.loads(self._cache_path(key).read_text(encoding="utf-8"))
            return entry["response"] if isinstance(entry.get("response"), dict) else None
        except (OSError, ValueError, AttributeError):
            return None  # missing or damaged: ask again

    def _cache_write(self, key: str, entry: dict) -> None:
        if self.cache_root is None:
            return
        path = self._cache_path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps(entry, ensure_ascii=False).encode("utf-8"))
        except OSError:
            return  # an unwritable cache only costs money on the next run


def _count(value: Any) -> int:
    """A token count from a reply: a whole number of at most ``MAX_TOKENS`` (a boolean, a
    non-finite or an absurd value counts nothing rather than overflowing a sum)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return int(value) if number and 0 <= value <= MAX_TOKENS else 0


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


@dataclass(frozen=True)
class Reply:
    """An HTTP reply read whole: status, headers and body."""

    status_code: int
    headers: Any
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; NaN and Infinity, which JSON has not, are refused (ValueError)."""
        return json.loads(self.content.decode("utf-8"), parse_constant=_no_constant)


def _retry_after(response) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (dates are ignored)."""
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class EndpointComponent:
    """Base of the components that call an OpenAI-compatible endpoint through ``self.client``.

    Its keyword parameters configure the client; a subclass's ``__init__`` passes its
    ``**http`` on with ``super().__init__(**http)``, which makes them the subclass's parameters
    too. Only the *names* of the environment variables are parameters: the URL and the key
    never reach params or the manifest. A subclass says which slot it fills (``where``, named
    in hints) and declares ``Capability.METERED``: this class reports what the client used.
    """

    where: ClassVar[str]
    model: str

    def __init__(
        self,
        base_url_env: str = "OPENAI_BASE_URL",
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
        retry_backoff: float = 1.0,
        concurrency: int = 4,
        cache: bool = True,
        price_per_1k_prompt: float = 0.0,
        price_per_1k_completion: float = 0.0,
    ):
        self.client = LLMClient(
            where=self.where,
            base_url_env=base_url_env,
            api_key_env=api_key_env,
            timeout=timeout,
            max_retries=max_retries,
            retry_backoff=retry_backoff,
            concurrency=concurrency,
            cache=cache,
            price_per_1k_prompt=price_per_1k_prompt,
            price_per_1k_completion=price_per_1k_completion,
        )

    def usage(self) -> dict:
        return {"model": self.model, **self.client.usage()}

    def tally(self) -> dict:
        return self.client.tally()

    def absorb(self, counts: dict) -> None:
        self.client.absorb(counts)


def untrusted(text: str) -> str:
    """Text made safe to put between ``<passage>`` or ``<answer>`` tags: it cannot open or close
    one."""
    return UNTRUSTED_TAG.sub(lambda m: "‹" + m.group(1), text)


def format_passages(chunks: Sequence[Any]) -> str:
    """Numbered context passages with their document ids, fenced as untrusted data."""
    lines = ["<passages>"]
    for number, chunk in enumerate(chunks, 1):
        doc_id = untrusted(str(chunk.doc_id)).replace('"', "'")
        lines.append(f'<passage number="{number}" doc_id="{doc_id}">')
        if getattr(chunk, "title", ""):
            lines.append(f"Title: {untrusted(chunk.title)}")
        lines.append(untrusted(chunk.text))
        lines.append("</passage>")
    lines.append("</passages>")
    return "\n".join(lines)
