"""The review server: serves the review page for a pool file on 127.0.0.1 and appends each
decision a person makes to a labels file.

- Loopback only: it binds 127.0.0.1 (a random free port unless one is given) and answers only
  requests whose ``Host`` is that address, so a page reached by another name (DNS rebinding)
  is refused.
- A token: the page's URL carries a random token, and a label is taken only with it (compared
  in constant time) and as ``application/json``, so another local page cannot post one.
- Durable: each label is appended by rewriting the labels file whole through
  :func:`rag_bench.io.durable.atomic_write` (synced, renamed, the folder synced), under a lock,
  so the file always holds every earlier line and either all of the new one or none of it; an
  exclusive ``flock`` on the folder makes two servers on one labels file take turns.
- Resuming: the items an existing labels file already labels count as done; the page opens on
  the first item still unlabelled.

The label records the item's key (and dataset), the decision, the labeller and the time (UTC,
to the second), in the format of :mod:`rag_bench.data.review`.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from rag_bench.data.review import (
    KEY_FIELDS,
    check_label,
    item_key,
    json_line,
    latest_labels,
    read_items,
    read_labels,
)
from rag_bench.errors import DataError, RagBenchError, UsageError, check_number
from rag_bench.io.durable import atomic_write, fsync
from rag_bench.report.review_page import review_page

HOST = "127.0.0.1"
MAX_BODY = 1 << 20  # a label is a few hundred bytes; a larger request is refused
DECISION = {"pair": ("grade",), "claim": ("label",), "generated": ("accept", "query")}


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ReviewSession:
    """The items of a pool file, the labels file they are labelled into, and who labels."""

    def __init__(self, items_path: str | Path, labels_path: str | Path, labeller: str):
        if not labeller.strip():
            raise UsageError("the labeller is empty", "name who labels, e.g. --labeller ana")
        self.items = read_items(items_path)
        if not self.items:
            raise DataError(items_path, "no review items", "make one with rag-bench pool")
        self.labels_path = Path(os.path.realpath(labels_path))  # a link: its target
        if self.labels_path.exists() and not self.labels_path.is_file():
            raise UsageError(
                f"the labels file {labels_path} is not a file", "name a file for the labels"
            )
        self.labeller = labeller.strip()
        self.token = secrets.token_urlsafe(24)
        self.keys = [json.dumps(item_key(item)) for item in self.items]
        self.latest = {
            json.dumps(key): label
            for key, label in latest_labels(read_labels(self.labels_path, missing_ok=True)).items()
        }
        self.lock = threading.Lock()

    def payload(self) -> dict:
        """What the page needs: the items with their keys, the decisions made so far."""
        mine = set(self.keys)
        return {
            "items": [{**item, "key": key} for item, key in zip(self.items, self.keys)],
            "labels": {k: v for k, v in self.latest.items() if k in mine},
            "labeller": self.labeller,
            "token": self.token,
        }

    def labelled(self) -> int:
        return sum(key in self.latest for key in self.keys)

    def record(self, posted: dict) -> dict:
        """Append the decision ``posted`` (``index`` of the item and its decision fields) as a
        label; a decision of the wrong shape is a :class:`DataError`."""
        index = posted.get("index")
        if (
            not isinstance(index, int)
            or isinstance(index, bool)
            or not 0 <= index < len(self.items)
        ):
            raise UsageError(f"no item {index!r}", f"post an index below {len(self.items)}")
        item = self.items[index]
        kind = item["kind"]
        label: dict = {"kind": kind}
        label.update({name: item[name] for name in KEY_FIELDS[kind]})
        if "dataset" in item:
            label["dataset"] = item["dataset"]
        label.update({name: posted[name] for name in DECISION[kind] if name in posted})
        label.update({"labeller": self.labeller, "labelled_at": now_utc()})
        check_label(label, Path("<posted label>"), index + 1)
        with self.lock:
            self._append(json_line(label).encode("utf-8"))
            self.latest[self.keys[index]] = label
        return label

    def _append(self, line: bytes) -> None:
        with folder_lock(self.labels_path.parent):
            before = self.labels_path.read_bytes() if self.labels_path.exists() else b""
            if before and not before.endswith(b"\n"):
                before += b"\n"
            atomic_write(self.labels_path, before + line)
            fsync(self.labels_path.parent)  # the rename itself, on disk


@contextlib.contextmanager
def folder_lock(folder: Path):
    """An exclusive ``flock`` on ``folder`` for the block, so that two review servers writing
    one labels file take turns (where there is no ``flock``, the session's lock alone)."""
    try:
        import fcntl
    except ImportError:  # not on POSIX
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class _Handler(BaseHTTPRequestHandler):
    server: ReviewServer

    def log_message(self, format: str, *args) -> None:  # noqa: A002  # the base class's name
        pass  # a request is not news; the command prints the URL and the labels as they come

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header(
            "Content-Security-Policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
            "connect-src 'self'; frame-ancestors 'none'",
        )
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: dict) -> None:
        self._send(status, json.dumps(value).encode("utf-8"), "application/json")

    def _allowed(self) -> bool:
        """The Host names this server, and the URL carries the token."""
        session = self.server.session
        if self.headers.get("Host") != f"{HOST}:{self.server.server_port}":
            return False
        given = parse_qs(urlsplit(self.path).query).get("token", [""])[0]
        return hmac.compare_digest(given.encode(), session.token.encode())

    def do_GET(self) -> None:  # noqa: N802  # http.server's name
        if urlsplit(self.path).path != "/" or not self._allowed():
            self._send(403, b"forbidden", "text/plain; charset=utf-8")
            return
        page = review_page(self.server.session.payload())
        self._send(200, page.encode("utf-8"), "text/html; charset=utf-8")

    def do_POST(self) -> None:  # noqa: N802  # http.server's name
        if urlsplit(self.path).path != "/label" or not self._allowed():
            self._json(403, {"error": "forbidden"})
            return
        if self.headers.get_content_type() != "application/json":
            self._json(415, {"error": "labels are posted as application/json"})
            return
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or not 0 < int(length) <= MAX_BODY:
            self._json(413, {"error": "a label is a small JSON object"})
            return
        try:
            posted = json.loads(self.rfile.read(int(length)))
            if not isinstance(posted, dict):
                raise ValueError("not a JSON object")
            label = self.server.session.record(posted)
        except (ValueError, RagBenchError) as error:
            self._json(400, {"error": str(error)})
            return
        except OSError as error:
            self._json(500, {"error": f"cannot write the labels file: {error.strerror or error}"})
            return
        self.server.on_label(label)
        self._json(200, {"label": label, "labelled": self.server.session.labelled()})


class ReviewServer(ThreadingHTTPServer):
    """The review page of ``session`` on 127.0.0.1:``port`` (0: a free port)."""

    daemon_threads = True

    def __init__(self, session: ReviewSession, port: int = 0, on_label=None):
        check_number("port", port, 0, 65535, whole=True)
        self.session = session
        self.on_label = on_label or (lambda label: None)
        try:
            super().__init__((HOST, port), _Handler)
        except OSError as error:
            raise UsageError(
                f"cannot listen on {HOST}:{port}: {error.strerror or error}",
                "pick another --port, or leave it out for a free one",
            ) from None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_port}/?token={self.session.token}"

    @contextlib.contextmanager
    def running(self):
        """Serve in a background thread for the ``with`` block (tests, notebooks)."""
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.shutdown()
            self.server_close()
            thread.join()
