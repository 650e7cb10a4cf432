"""A component's parameters: read from its ``__init__``, overrides given their declared types.

The keyword parameters of ``__init__`` (with their defaults and annotations) are the only
declaration of a component's parameters; ``--set slot.param=value`` must give a value of the
declared type (an int where an int is declared, a finite float where a float is).
"""

from __future__ import annotations

import inspect
import math
import types as pytypes
import typing
from collections.abc import Callable, Sequence
from typing import Any

from rag_bench.components import base
from rag_bench.errors import RagBenchError, UsageError, shown_value


def parameters(cls: type) -> tuple[dict[str, Any], dict[str, Any]]:
    """A component class's parameters: the keyword parameters of its ``__init__`` with their
    defaults, and their types (the annotation, else the type of the default). An ``__init__``
    taking ``**kwargs`` passes them to its base class, whose parameters follow."""
    defaults: dict[str, Any] = {}
    types: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is object or klass.__module__ in ("typing", base.__name__):
            break  # the contracts declare no parameters
        init = klass.__dict__.get("__init__")
        if init is None or init is object.__init__:
            continue
        passes_on = False
        hints = _hints(init)
        for p in list(inspect.signature(init).parameters.values())[1:]:
            if p.kind is p.VAR_KEYWORD:
                passes_on = True
            elif p.default is p.empty:
                raise RagBenchError(
                    f"parameter {p.name!r} of {cls.__qualname__} has no default",
                    "give every __init__ parameter of a component a default",
                )
            elif p.name not in defaults:
                defaults[p.name] = p.default
                types[p.name] = hints.get(p.name, type(p.default))
        if not passes_on:
            break
    return defaults, types


def _hints(init: Callable) -> dict[str, Any]:
    """The evaluated annotations of an ``__init__`` (none when one cannot be evaluated)."""
    try:
        return typing.get_type_hints(init)
    except (NameError, AttributeError, TypeError):  # e.g. a name imported for type checking only
        return {}


TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")
MAX_INT = 2**63 - 1  # the largest int a parameter may have: what numpy and Arrow hold
MAX_DIGITS = 20


def coerce(value: Any, declared: Any, where: str) -> Any:
    """An override as a value of the parameter's declared type, or a :class:`UsageError`
    naming the parameter and the type (NaN and infinity are no floats here)."""
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin in (typing.Union, pytypes.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return coerce(value, option, where)
            except UsageError:
                continue
    elif origin in (tuple, list, Sequence) or declared in (tuple, list):
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(items, (list, tuple)):
            element = args[0] if args and args[0] is not Ellipsis else Any
            kept = (coerce(_strip(v), element, where) for v in items)
            return list(kept) if origin is list or declared is list else tuple(kept)
    elif declared in _SCALARS:
        converted = _SCALARS[declared](value)
        if converted is not None:
            return converted
    else:
        return value  # a type the registry does not check: the component checks it
    raise UsageError(
        f"{where}={shown_value(value)} is not {_type_name(declared)}",
        f"give {where} {_type_name(declared)}",
    )


def _strip(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in TRUE + FALSE:
        return value.lower() in TRUE
    return None


def _as_int(value: Any) -> int | None:
    """An int within float's range (a component's numbers meet floats; 400 digits are no
    parameter value)."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        value = int(value) if len(value.strip()) <= MAX_DIGITS else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value if abs(value) <= MAX_INT else None
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):  # an int beyond float's range is no float either
        return None
    return number if math.isfinite(number) else None


def _as_str(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return str(value)


_SCALARS: dict[type, Callable[[Any], Any]] = {
    bool: _as_bool,
    int: _as_int,
    float: _as_float,
    str: _as_str,
}


def _type_name(declared: Any) -> str:
    """``an int``, ``a finite float``, ``a sequence of float``, ``a str or None``."""
    args = [a for a in typing.get_args(declared) if a is not Ellipsis]
    if typing.get_origin(declared) in (typing.Union, pytypes.UnionType):
        return " or ".join("None" if a is type(None) else _type_name(a) for a in args)
    if typing.get_origin(declared) in (tuple, list, Sequence):
        return f"a sequence of {getattr(args[0], '__name__', 'values') if args else 'values'}"
    name = getattr(declared, "__name__", str(declared))
    return {"int": "an int", "float": "a finite float"}.get(name, f"a {name}")


def type_label(declared: Any) -> str:
    """A declared type as it reads in a signature: ``int``, ``Sequence[float]``, ``int | None``."""
    args = typing.get_args(declared)
    origin = typing.get_origin(declared)
    if origin in (typing.Union, pytypes.UnionType):
        return " | ".join("None" if a is type(None) else type_label(a) for a in args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_label(a) for a in args)
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{inner}]" if inner else name
    return getattr(declared, "__name__", str(declared).replace("typing.", ""))
