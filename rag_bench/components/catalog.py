"""The registered components as rows: what ``rag-bench components`` lists and a notebook reads.

One row per component, in slot order: its parameters (name, declared type, default, read from
``__init__`` by :mod:`~rag_bench.components.params`), the first line of its docstring, the
``pip install`` an optional backend needs, and the distribution it comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_bench.components.params import type_label
from rag_bench.components.registry import (
    SLOT_KINDS,
    ComponentSpec,
    Registry,
    first_line,
    registry,
)
from rag_bench.errors import UnknownNameError

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("slot", "component", "params", "description", "requires", "origin")


def components(slot: str | None = None, reg: Registry | None = None) -> pd.DataFrame:
    """The components of one slot (all slots when None) with their parameters; ``params`` holds
    a list of ``{"name", "type", "default"}`` per component. An unknown slot is an
    :class:`UnknownNameError` listing the slots."""
    import pandas as pd

    if slot is not None and slot not in SLOT_KINDS:
        raise UnknownNameError("slot", slot, list(SLOT_KINDS))
    reg = reg or registry()
    slots = [slot] if slot is not None else list(SLOT_KINDS)
    rows = [
        _row(name, spec)
        for name in slots
        for spec in reg.components.values()
        if spec.kind == SLOT_KINDS[name]
    ]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _row(slot: str, spec: ComponentSpec) -> dict:
    params = [
        {"name": name, "type": type_label(spec.types.get(name, type(default))), "default": default}
        for name, default in spec.params.items()
    ]
    return {
        "slot": slot,
        "component": spec.name,
        "params": params,
        "description": spec.description or first_line(spec.factory.__doc__),
        "requires": spec.requires,
        "origin": spec.origin,
    }
