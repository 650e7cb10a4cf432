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
        listing = ", ".join(self.known)
        if not self.close:
            hint = f"use one of: {listing}"
        else:
            hint = f"did you mean {' or '.join(repr(c) for c in self.close)}?"
            if len(self.known) <= SHORT_LIST:
                hint += f" (known: {listing})"
        super().__init__(f"unknown {kind} {name!r}", hint)


class UsageError(RagBenchError):
    """An option value that makes no sense (e.g. a cutoff of 0)."""

    exit_code = 2


class ParameterError(UsageError):
    """A parameter value outside its valid range. It names the parameter as the library does
    (``resamples``, ``max_drops``); the CLI renames it to its flag (``--resamples``)."""

    def __init__(self, parameter: str, value: Any, valid: str, key: str | None = None):
        self.parameter, self.value, self.valid, self.key = parameter, value, valid, key
        shown = f"{parameter}[{key!r}] = {value!r}" if key else f"{parameter} = {value!r}"
        super().__init__(f"{shown} is out of range", f"{parameter} takes {valid}")

    def as_flag(self, flag: str) -> UsageError:
        """The same mistake told in terms of a command-line flag."""
        value = repr(self.value) if isinstance(self.value, str) else self.value
        shown = f"{flag} {self.key}={value}" if self.key else f"{flag} {value}"
        return UsageError(f"{shown} is out of range", f"{flag} takes {self.valid}")


def first_line(error: BaseException | str) -> str:
    """The first line of an error's message (of a text), or the error's type when it is empty:
    what a one-line message quotes of an exception from elsewhere."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def check_number(
    parameter: str,
    value: Any,
    low: float,
    high: float = float("inf"),
    *,
    whole: bool = False,
    open_low: bool = False,
    open_high: bool = False,
    key: str | None = None,
    range_note: str = "",
) -> Any:
    """``value`` if it is a finite number within [low, high] (ends excluded where ``open_*``),
    a whole one where ``whole``; else a :class:`ParameterError` saying the valid range (and
    ``range_note``, what the range comes from)."""
    import math
    import numbers

    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = (
        number
        and math.isfinite(value)
        and (value > low if open_low else value >= low)
        and (value < high if open_high else value <= high)
        and (not whole or float(value).is_integer())
    )
    if not ok:
        kind = "a whole number" if whole else "a finite number"
        left, right = "(" if open_low else "[", ")" if open_high or high == float("inf") else "]"
        valid = f"{kind} in {left}{_bound(low)}, {_bound(high)}{right}"
        valid += f" ({range_note})" if range_note else ""
        raise ParameterError(parameter, value, valid, key)
    return value


def _bound(x: float) -> str:
    if x == float("inf"):
        return "∞"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


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
