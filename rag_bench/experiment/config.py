"""The experiment file, ``rag-bench.toml``: the variants to run (each with its overrides or a
sweep), the query selection and cutoffs they share, and the gates to check, so an experiment is
one file under version control::

    dataset = "kestrel-kb"
    tier = "smoke"                      # or tag / sample / seed
    k = [1, 5, 10, 100]

    [variant.baseline]                  # the key names the run; variant = the key by default
    [variant.bm25-k1]
    variant = "baseline"
    set = { "retriever.k1" = 1.2 }
    [variant.chunks]
    variant = "baseline"
    sweep = { "chunker.size" = [128, 256] }

    [gate.recall]
    candidate = "bm25-k1"
    baseline = "baseline"               # any reference: a name, latest:baseline@kestrel-kb …
    max_drop = { "recall@10" = 0.02 }
    require = "auto"

``rag-bench run --config`` and ``rag-bench gate --config`` read it; a flag given on the command
line wins over the file's value (and ``--set`` is applied after the file's ``set``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_bench.errors import DataError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package
    import tomli as tomllib

TOP_KEYS = {
    "dataset",
    "tier",
    "tag",
    "sample",
    "seed",
    "k",
    "depth",
    "split",
    "runs_dir",
    "variant",
    "gate",
}
VARIANT_KEYS = {"variant", "set", "sweep", "note"}
GATE_KEYS = {"candidate", "baseline", "max_drop", "require"}


@dataclass(frozen=True)
class VariantEntry:
    """One ``[variant.<key>]``: the variant run, the run's name (the key, so gates and other
    commands name the run by it), overrides and sweep axes as the command line writes them
    (``slot.param=value``, ``slot.param=v1,v2``); a sweep's runs are named by their point."""

    key: str
    variant: str
    name: str | None
    overrides: tuple[str, ...] = ()
    sweeps: tuple[str, ...] = ()
    note: str | None = None


@dataclass(frozen=True)
class GateEntry:
    key: str
    candidate: str
    baseline: str
    max_drops: dict[str, float]
    require: str = "auto"


@dataclass(frozen=True)
class Experiment:
    """An experiment file read: shared run options (the command line's names), variants,
    gates."""

    path: Path
    options: dict[str, Any] = field(default_factory=dict)
    variants: tuple[VariantEntry, ...] = ()
    gates: tuple[GateEntry, ...] = ()


def load_experiment(path: str | Path) -> Experiment:
    """Read and check an experiment file; a mistake is one line naming the file, the key and
    the fix (a TOML syntax error, its line)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        why = f"cannot read the experiment file ({exc.strerror})"
        raise DataError(path, why, "check the path") from None
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        raise DataError(path, f"not valid TOML ({exc.args[0]})", "fix the syntax", line) from None
    _only(path, "", data, TOP_KEYS)
    options = {k: v for k, v in data.items() if k not in ("variant", "gate")}
    if "k" in options:
        ks = options.pop("k")
        if not isinstance(ks, list) or not all(isinstance(k, int) for k in ks):
            raise DataError(path, "k must be a list of whole numbers", "e.g. k = [1, 5, 10]")
        options["ks"] = ",".join(str(k) for k in ks)
    variants = tuple(_variant(path, key, v) for key, v in _table(path, data, "variant").items())
    gates = tuple(_gate(path, key, v) for key, v in _table(path, data, "gate").items())
    return Experiment(path, options, variants, gates)


def _table(path: Path, data: dict, name: str) -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise DataError(path, f"{name} must hold tables [{name}.<key>]", f"e.g. [{name}.baseline]")
    return value


def _only(path: Path, where: str, table: dict, allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        place = f" in [{where}]" if where else ""
        raise DataError(
            path,
            f"unknown key {unknown[0]!r}{place}",
            f"use {', '.join(sorted(allowed))}",
        )


def _variant(path: Path, key: str, entry: dict) -> VariantEntry:
    _only(path, f"variant.{key}", entry, VARIANT_KEYS)
    variant = entry.get("variant", key)
    overrides = tuple(f"{p}={_value(v)}" for p, v in _mapping(path, key, entry, "set").items())
    sweeps = tuple(
        f"{p}={','.join(_value(x) for x in (v if isinstance(v, list) else [v]))}"
        for p, v in _mapping(path, key, entry, "sweep").items()
    )
    return VariantEntry(key, str(variant), key, overrides, sweeps, entry.get("note"))


def _gate(path: Path, key: str, entry: dict) -> GateEntry:
    _only(path, f"gate.{key}", entry, GATE_KEYS)
    for needed in ("candidate", "baseline", "max_drop"):
        if needed not in entry:
            raise DataError(path, f"[gate.{key}] has no {needed}", f"add {needed} = …")
    drops = _mapping(path, key, entry, "max_drop")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in drops.values()):
        raise DataError(
            path, f"[gate.{key}] max_drop values must be numbers", 'e.g. {"recall@10" = 0.02}'
        )
    return GateEntry(
        key,
        str(entry["candidate"]),
        str(entry["baseline"]),
        {m: float(v) for m, v in drops.items()},
        str(entry.get("require", "auto")),
    )


def _mapping(path: Path, key: str, entry: dict, name: str) -> dict:
    value = entry.get(name, {})
    if not isinstance(value, dict):
        raise DataError(path, f"{name} of {key!r} must be a table", f'e.g. {name} = {{"a.b" = 1}}')
    return value


def _value(value: Any) -> str:
    """A TOML value as ``--set`` writes it (``true``, ``1.2``, ``none``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
