"""The component catalogue: every registered component, by slot, with its declared parameters."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rag_bench.components.base import Chunker
from rag_bench.components.catalog import components
from rag_bench.components.params import type_label
from rag_bench.components.registry import SLOT_KINDS, ComponentSpec, Registry, registry
from rag_bench.errors import UnknownNameError


def test_every_registered_component_once_in_slot_order():
    table = components()
    registered = {(kind, name) for kind, name in registry().components}
    listed = {(SLOT_KINDS[slot], name) for slot, name in zip(table["slot"], table["component"])}
    assert listed == registered and len(table) == len(registered)
    order = list(SLOT_KINDS)
    positions = [order.index(slot) for slot in table["slot"]]
    assert positions == sorted(positions)


def test_a_row_carries_the_declared_parameters_description_and_origin():
    table = components("retriever").set_index("component")
    spec = registry().component("retriever", "bm25")
    bm25 = table.loc["bm25"]
    assert [p["name"] for p in bm25["params"]] == list(spec.params)
    assert {p["name"]: p["default"] for p in bm25["params"]} == spec.params
    assert {p["name"]: p["type"] for p in bm25["params"]} == {
        name: declared.__name__ for name, declared in spec.types.items()
    }
    assert bm25["description"] == spec.description and bm25["origin"] == "rag-bench"
    assert table.loc["http"]["requires"] == registry().component("retriever", "http").requires


def test_one_slot_is_its_kind_of_components():
    fusion = components("fusion")
    assert set(fusion["slot"]) == {"fusion"}
    assert set(fusion["component"]) == set(registry().names("fuser"))


def test_an_unknown_slot_lists_the_slots():
    with pytest.raises(UnknownNameError) as info:
        components("retreiver")
    assert "did you mean 'retriever'" in str(info.value)
    assert all(slot in str(info.value) for slot in SLOT_KINDS)


@pytest.mark.parametrize(
    ("declared", "label"),
    [
        (int, "int"),
        (Sequence[float], "Sequence[float]"),
        (int | None, "int | None"),
        (tuple[int, ...], "tuple[int, ...]"),
        (list[str] | None, "list[str] | None"),
    ],
)
def test_a_type_reads_as_in_a_signature(declared, label):
    assert type_label(declared) == label


def test_a_spec_without_a_description_is_described_by_its_docstring():
    class Halves(Chunker):
        """Two chunks per document.

        The rest of the docstring is not listed."""

        def chunk(self, doc):
            return []

    reg = Registry({}, {})
    reg.add_component(ComponentSpec("chunker", "halves", Halves), "a-plugin")
    [row] = components("chunker", reg).to_dict("records")
    assert row["description"] == "Two chunks per document."
    assert row["origin"] == "a-plugin" and row["params"] == []
