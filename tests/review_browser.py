"""Chromium for the browser tests (its path and flags), the review page in it driven by real
key presses (playwright), and `rag-bench review` as a process: what the browser tests share.
The fixture ``browser`` is registered for every test module by conftest."""

from __future__ import annotations

import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import require

FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def chromium() -> str:
    """Debian's chromium; without it the test skips, naming how to install it."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium not found: `make browser` installs Debian's chromium package")


@pytest.fixture
def browser():
    playwright = require("playwright.sync_api", "pip install -e '.[dev]'")
    executable = chromium()
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=executable, headless=True, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()


class Page:
    """A review page in the browser at ``url``; every console message and page error is
    collected."""

    def __init__(self, browser, url: str):
        self.page = browser.new_page()
        self.problems: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"error: {e}"))
        self.page.goto(url)

    def text(self, element: str) -> str:
        return self.page.inner_text(f"#{element}")

    def press(self, key: str, saved: str | None = None, says: str | None = None) -> None:
        """Press ``key``; with ``saved``, wait until the page says that label was saved (or,
        with ``says``, says that)."""
        self.page.keyboard.press(key)
        if saved is not None or says is not None:
            try:
                self.page.wait_for_function(
                    "text => document.getElementById('status').textContent === text",
                    arg=says or f"saved: {saved}",
                    timeout=10_000,
                )
            except Exception:
                status, position = self.text("status"), self.text("position")
                pytest.fail(
                    f"{key}: wanted {says or saved!r}, the page says {status!r} at {position}"
                )


class ReviewCommand:
    """A running `rag-bench review` process: its URL, and once ended its exit code and output."""

    def __init__(self, child: subprocess.Popen, url: str):
        self.child, self.url = child, url
        self.returncode: int | None = None
        self.stdout = self.stderr = ""


@contextmanager
def review_command(pool: Path, labels: Path, labeller: str) -> Iterator[ReviewCommand]:
    """Start ``rag-bench review POOL -o LABELS --labeller NAME`` in a child process, wait for
    the URL it prints, and on leaving end it with Ctrl-C as a person would (the outcome is then
    on the yielded object: ``returncode``, ``stdout``, ``stderr``)."""
    from processes import COMMAND, DEFAULT_SIGINT

    child = subprocess.Popen(
        [*DEFAULT_SIGINT, *COMMAND, "review", str(pool), "-o", str(labels), "--labeller", labeller],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # stdout is read line by line by a thread: waiting on the pipe with select() would miss a
    # line that an earlier readline() already pulled into the file's buffer
    lines: queue.Queue[str | None] = queue.Queue()
    out: list[str] = []

    def read() -> None:
        for line in child.stdout:
            out.append(line)
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        url = None
        while url is None:
            try:
                line = lines.get(timeout=60)
            except queue.Empty:
                raise AssertionError(f"no review page URL within 60 s: {out}") from None
            assert line is not None, child.stderr.read()
            if line.startswith("review page: "):
                url = line.split()[2]
        parts = urlsplit(url)
        assert parts.hostname == "127.0.0.1" and parts.query.startswith("token=")
        command = ReviewCommand(child, url)
        yield command
        child.send_signal(signal.SIGINT)
        command.returncode = child.wait(60)
        reader.join(10)
        command.stdout, command.stderr = "".join(out), child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
