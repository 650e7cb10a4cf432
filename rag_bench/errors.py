"""The error tree for user mistakes.

Every user mistake raises a subclass of :class:`RagBenchError`. The CLI prints its one-line
message and exits with the class's exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SHORT_LIST = 12  # known names listed in full up to this many


class RagBenchError(Exception):
    """A mistake the user can fix; ``hint`` says how."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (fix: {self.hint})"
        return self.message


class DataError(RagBenchError):
    """Malformed or inconsistent input data, located by file and line when known."""

    exit_code = 3

    def __init__(
        self,
        path: str | Path,
        message: str,
        hint: str | None = None,
        line: int | None = None,
    ):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}", hint)


class UnknownNameError(RagBenchError):
    """A name (metric, variant, component, parameter) that no registry knows: the hint offers
    the close names (difflib), and lists all of them when there are few or none is close."""

    exit_code = 2

    def __init__(
        self,
        kind: str,
        name: str,
        known: list[str] | tuple[str, ...],
        close: list[str] | None = None,
    ):
        import difflib

        self.kind = kind
        self.name = name
        self.known = sorted(known)
        self.close = difflib.get_close_matches(name, self.known, n=3) if close is None else close
        hints = []
        if self.close:
            hints.append(f"did you mean {' or '.join(repr(c) for c in self.close)}?")
        if not self.close or len(self.known) <= SHORT_LIST:
            hints.append(f"use one of: {', '.join(self.known)}")
        super().__init__(f"unknown {kind} {name!r}", "; ".join(hints))


class UsageError(RagBenchError):
    """An option value that makes no sense (e.g. a cutoff of 0)."""

    exit_code = 2


class MissingBackendError(RagBenchError):
    """An optional backend (extra) is not installed; the hint is the pip install that fixes it."""

    exit_code = 4


def import_backend(module: str, install: str, purpose: str) -> Any:
    """Import an optional dependency, or say which ``pip install`` provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingBackendError(
            f"{purpose} needs the Python package {module!r}", install
        ) from None
