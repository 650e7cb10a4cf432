"""Registries of components and variants, filled from entry points.

Built-in components and variants register through the same entry-point groups a third-party
package uses (``rag_bench.components`` and ``rag_bench.variants``). An entry point names either
a spec, a list of specs, or a callable returning such a list. Every list of valid names in an
error message is read from these registries.

A plugin cannot take over: anything its import raises (``SystemExit`` included) skips it with
one warning line, and a component or variant named like a built-in one is refused with a
warning (the built-in keeps its name; the plugin must choose another), so ``baseline`` always
means rag-bench's own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import metadata
from typing import Any

from rag_bench.components import base
from rag_bench.components.params import coerce, parameters
from rag_bench.errors import RagBenchError, UnknownNameError, UsageError

COMPONENT_GROUP = "rag_bench.components"
VARIANT_GROUP = "rag_bench.variants"
ALL_VARIANTS = "all"  # a request for every variant that needs nothing but the dataset
BUILTIN_ORIGIN = "rag-bench"  # the distribution of the built-in components and variants
PROBLEM_CHARS = 120  # a skipped entry point's problem, cut to keep its warning on one line

log = logging.getLogger(__name__)

# A variant fills slots; each slot holds one component of a kind.
SLOT_KINDS = {
    "analyzer": "analyzer",
    "chunker": "chunker",
    "retriever": "retriever",
    "encoder": "encoder",
    "index": "index",
    "fusion": "fuser",
    "reranker": "reranker",
    "generator": "generator",
    "judge": "judge",
}


@dataclass(frozen=True)
class ComponentSpec:
    """A named, parameterised building block: ``factory(**params)`` makes one.

    ``params`` are the defaults and ``types`` the declared types of its parameters, both read
    from ``factory.__init__`` by :func:`~rag_bench.components.params.parameters`."""

    kind: str
    name: str
    factory: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)
    types: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    requires: str | None = None  # the pip install that provides an optional backend
    origin: str = "?"


@dataclass(frozen=True)
class VariantSpec:
    """A named composition: for each slot, a component name and parameter overrides."""

    name: str
    slots: dict[str, dict[str, Any]]
    description: str = ""
    origin: str = "?"
    service: str | None = None  # what it calls outside the dataset; ALL_VARIANTS skips it


def component(kind: str, name: str, *, description: str = "", requires: str | None = None):
    """Class decorator attaching a :class:`ComponentSpec` as ``.spec``; the parameters come
    from the class's ``__init__``, the description from the docstring's first line unless
    given."""

    def attach(cls):
        defaults, types = parameters(cls)
        summary = description or first_line(cls.__doc__)
        cls.spec = ComponentSpec(kind, name, cls, defaults, types, summary, requires)
        return cls

    return attach


def first_line(doc: str | None) -> str:
    """The first line of a docstring: what a component does, in a listing."""
    return (doc or "").strip().split("\n")[0].strip()


def _named(entry: metadata.EntryPoint) -> list[Any]:
    """What an entry point names, as a list: a spec, a component class, a list of them, or the
    list a function returns."""
    loaded = entry.load()
    items = loaded() if callable(loaded) and not isinstance(loaded, type) else loaded
    return list(items) if isinstance(items, (list, tuple)) else [items]


def _entries(group: str) -> Iterable[tuple[Any, metadata.EntryPoint]]:
    """(item, entry point) of everything a group's entry points name. An entry point that fails
    to load is skipped with one warning line, so one broken package leaves the rest usable."""
    # the built-ins first, so that no plugin can take one of their names
    ordered = sorted(metadata.entry_points(group=group), key=lambda e: (not _builtin(e), e.name))
    for entry in ordered:
        try:
            items = _named(entry)
        except (Exception, SystemExit) as error:  # a third party's import may fail in any way
            _skip(entry, f"{type(error).__name__}: {error}")
            continue
        for item in items:
            yield item, entry


def _origin(entry: metadata.EntryPoint) -> str:
    return entry.dist.name if entry.dist is not None else entry.name


def _builtin(entry: metadata.EntryPoint) -> bool:
    """Whether the entry point is rag-bench's own."""
    return _origin(entry).lower().replace("_", "-") == BUILTIN_ORIGIN


def _taken(entry: metadata.EntryPoint, what: str, holder: str) -> str | None:
    """Why a plugin may not register ``what`` when ``holder`` (an origin) has it, or None."""
    if holder.lower().replace("_", "-") == BUILTIN_ORIGIN and not _builtin(entry):
        return f"{what} is a built-in name, which a plugin cannot replace; rename it"
    return None


def _skip(entry: metadata.EntryPoint, problem: str) -> None:
    """One warning line on stderr naming the distribution, the entry point and what is wrong
    (the problem's first line, cut to a few words)."""
    first = " ".join(problem.strip().splitlines()[:1]).strip() or "no message"
    if len(first) > PROBLEM_CHARS:
        first = first[: PROBLEM_CHARS - 1] + "…"
    version = f" {entry.dist.version}" if entry.dist is not None else ""
    log.warning(
        "warning: plugin %s%s: entry point '%s = %s' (%s) skipped: %s",
        _origin(entry),
        version,
        entry.name,
        entry.value,
        entry.group,
        first,
    )


@dataclass
class Registry:
    components: dict[tuple[str, str], ComponentSpec]
    variants: dict[str, VariantSpec]

    def add_component(self, spec: ComponentSpec, origin: str) -> None:
        """Register a component once it satisfies its slot's contract."""
        base.declared(spec.kind, spec.factory)
        self.components[(spec.kind, spec.name)] = replace(spec, origin=origin)

    def add_variant(self, spec: VariantSpec, origin: str) -> None:
        self.variants[spec.name] = replace(spec, origin=origin)

    def names(self, kind: str) -> list[str]:
        return sorted(name for k, name in self.components if k == kind)

    def component(self, kind: str, name: str) -> ComponentSpec:
        spec = self.components.get((kind, name))
        if spec is None:
            raise UnknownNameError(kind, name, self.names(kind))
        return spec

    def variant(self, name: str) -> VariantSpec:
        if name not in self.variants:
            raise UnknownNameError("variant", name, list(self.variants))
        return self.variants[name]

    def variants_named(self, request: str | Sequence[str]) -> list[str]:
        """The variants a request means, each checked (a misspelt name fails before any work):
        one name, a list of names, or :data:`ALL_VARIANTS`, every variant that needs nothing but
        the dataset (not those calling a service, such as ``http``)."""
        if isinstance(request, str) and request.strip() == ALL_VARIANTS:
            return [name for name, spec in self.variants.items() if spec.service is None]
        names = [request] if isinstance(request, str) else list(request)
        for name in names:
            self.variant(name)
        return names


@cache
def registry() -> Registry:
    """All components and variants from installed packages, built-ins included. Loaded once per
    process: an entry point that cannot be used is skipped with one warning line, and so is a
    variant that names a component or parameter no package provides."""
    found = Registry({}, {})
    for item, entry in _entries(COMPONENT_GROUP):
        spec = getattr(item, "spec", None) if isinstance(item, type) else item
        if not isinstance(spec, ComponentSpec):
            _skip(entry, f"it names {_kind_of(item)}, not a @component class or ComponentSpec")
            continue
        held = found.components.get((spec.kind, spec.name))
        taken = _taken(entry, f"{spec.kind} {spec.name!r}", held.origin) if held else None
        if taken:
            _skip(entry, taken)
            continue
        try:
            found.add_component(spec, _origin(entry))
        except RagBenchError as error:
            _skip(entry, str(error))
    for item, entry in _entries(VARIANT_GROUP):
        if not isinstance(item, VariantSpec):
            _skip(entry, f"it names {_kind_of(item)}, not a VariantSpec")
            continue
        variant = found.variants.get(item.name)
        taken = _taken(entry, f"variant {item.name!r}", variant.origin) if variant else None
        if taken:
            _skip(entry, taken)
            continue
        try:
            resolve(item, (), found)
        except RagBenchError as error:
            _skip(entry, f"variant {item.name!r}: {error}")
            continue
        found.add_variant(item, _origin(entry))
    return found


def _kind_of(item: Any) -> str:
    """What a wrongly registered object is, in a few words: ``class Foo``, ``a value of type
    int``."""
    if isinstance(item, type):
        return f"class {item.__qualname__}"
    return f"a value of type {type(item).__name__}"


# --- resolving a variant's parameters ----------------------------------------------------


def parse_override(text: str) -> tuple[str, str, Any]:
    """``slot.param=value`` → (slot, param, value); the value is read as JSON when it parses."""
    key, sep, raw = text.partition("=")
    slot, dot, param = key.strip().partition(".")
    if not sep or not dot or not slot or not param:
        raise UsageError(f"--set {text!r} is not slot.param=value", "e.g. --set retriever.k1=1.2")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    except RecursionError:
        raise UsageError(
            f"--set {key.strip()}=… is JSON nested too deep", "give a number, a word or a flat list"
        ) from None
    return slot, param, value


# Slots every pipeline has; a variant that leaves one out gets the default component.
DEFAULT_SLOTS = {"analyzer": {"name": "auto"}, "judge": {"name": "lexical"}}
# Slots that serve another: ``--set`` may fill one in any variant that has the slot it serves,
# starting from the named component (the index searching the encoder's embeddings: exact).
ATTACHED_SLOTS = {"index": ("encoder", "exact")}


def resolve(
    variant: VariantSpec, overrides: Iterable[str] = (), reg: Registry | None = None
) -> dict[str, dict[str, Any]]:
    """The variant's slots with every parameter filled in: defaults < variant < ``--set``."""
    reg = reg or registry()
    wanted = {slot: dict(config) for slot, config in {**DEFAULT_SLOTS, **variant.slots}.items()}
    parsed = [parse_override(text) for text in overrides]
    # a component switch (slot.name=…) applies first, so the order of --set options is free
    for slot, param, value in sorted(parsed, key=lambda o: o[1] != "name"):
        serves, default = ATTACHED_SLOTS.get(slot, ("", ""))
        if slot not in wanted and serves in wanted:
            wanted[slot] = {"name": default}
        if slot not in wanted:
            raise UnknownNameError(f"slot of variant {variant.name!r}", slot, list(wanted))
        if param == "name":
            # A new component starts from its own defaults, keeping only explicit overrides.
            wanted[slot] = {"name": str(value)}
        else:
            wanted[slot][param] = value
    resolved = {}
    for slot, config in wanted.items():
        kind = SLOT_KINDS.get(slot)
        if kind is None:
            raise RagBenchError(
                f"variant {variant.name!r} uses unknown slot {slot!r}",
                f"slots are: {', '.join(SLOT_KINDS)}",
            )
        spec = reg.component(kind, str(config["name"]))
        params = dict(spec.params)
        for param, value in config.items():
            if param == "name":
                continue
            if param not in spec.params:
                raise UnknownNameError(
                    f"parameter of {kind} {spec.name!r}", param, list(spec.params)
                )
            declared = spec.types.get(param, type(spec.params[param]))
            params[param] = coerce(value, declared, f"{slot}.{param}")
        resolved[slot] = {"name": spec.name, **params}
    return resolved


def build(slot: str, config: dict[str, Any], reg: Registry | None = None) -> Any:
    """Instantiate the component a resolved slot names."""
    reg = reg or registry()
    spec = reg.component(SLOT_KINDS[slot], config["name"])
    params = {k: v for k, v in config.items() if k != "name"}
    return spec.factory(**params)
