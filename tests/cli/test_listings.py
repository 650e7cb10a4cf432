"""`rag-bench components` and `variants`: what is registered, in every format, and tables that
wrap long cells rather than lose them."""

from __future__ import annotations

import json
import re

import pandas as pd
from table_text import cells, columns, grouped, joined, wrapped_rows

from conftest import assert_one_line_error
from rag_bench.cli.render import WIDE, as_table
from rag_bench.components.catalog import components
from rag_bench.components.registry import SLOT_KINDS, registry


def test_components_table_shows_every_parameter_of_the_slot(rag_bench, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    out = rag_bench("components", "encoder")
    assert out.exit_code == 0, out.stderr
    assert max(len(line) for line in out.stdout.splitlines()) <= 120
    shown = grouped(cells(out.stdout), "component")
    assert list(shown) == list(components("encoder")["component"])
    for row in components("encoder").itertuples():
        params = shown[row.component]["params"]
        signatures = [f"{p['name']}: {p['type']} = {p['default']!r}" for p in row.params]
        starts = [line.split(":")[0] for line in params if re.match(r"\w+: ", line)]
        assert starts == [p["name"] for p in row.params]  # one parameter a line, in order
        squeezed = "".join("".join(params).split())  # a long word may break anywhere
        assert squeezed == "".join("".join(signatures).split())
        needs = f" needs: {row.requires}" if isinstance(row.requires, str) else ""
        assert " ".join(shown[row.component]["description"]).strip() == row.description + needs
        assert shown[row.component]["origin"][0] == row.origin


def test_components_json_keeps_everything(rag_bench):
    listed = json.loads(rag_bench("components", "--format", "json").stdout)
    expected = components()
    assert [r["component"] for r in listed] == list(expected["component"])
    for row, spec in zip(listed, expected.itertuples()):
        assert row["description"] == spec.description and row["origin"] == spec.origin
        assert [p["name"] for p in row["params"]] == [p["name"] for p in spec.params]
    fusion = {r["component"]: r for r in listed if r["slot"] == "fusion"}
    assert fusion["weighted"]["params"][0] == {
        "name": "weights",
        "type": "Sequence[float]",
        "default": list(registry().component("fuser", "weighted").params["weights"]),
    }


def test_components_csv_and_markdown_put_a_component_on_one_line(rag_bench):
    csv = rag_bench("components", "fusion", "--format", "csv").stdout.splitlines()
    assert csv[0] == "slot,component,params,description,requires,origin"
    assert csv[1].startswith("fusion,rrf,k: int = 60; weights: Sequence[float] = (),")
    markdown = rag_bench("components", "fusion", "--format", "markdown").stdout.splitlines()
    assert len(markdown) == 2 + len(components("fusion"))


def test_an_unknown_slot_is_one_line_naming_the_slots(rag_bench):
    out = rag_bench("components", "retreiver")
    assert_one_line_error(out, "unknown slot 'retreiver'", *SLOT_KINDS)


def test_variants_show_their_descriptions(rag_bench, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    table = rag_bench("variants").stdout
    for name, spec in registry().variants.items():
        assert spec.description or spec.origin != "rag-bench", f"{name} has no description"
        assert any(
            line.split()[:1] == [name] and spec.description in line for line in table.splitlines()
        ), name
    rows = json.loads(rag_bench("variants", "--format", "json").stdout)
    assert {r["variant"]: r["description"] for r in rows} == {
        name: spec.description for name, spec in registry().variants.items()
    }


def test_a_wrapped_column_continues_on_rows_of_its_own(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    words = " ".join(f"w{i}x" for i in range(40))
    frame = pd.DataFrame({"name": ["a", "b"], "text": [words, "one\ntwo"], "n": [1, 2]})
    table = as_table(frame, wrap=("text",))
    assert max(len(line) for line in table.splitlines()) <= 60
    rows = cells(table)
    assert [r["name"] for r in rows if r["name"]] == ["a", "b"]
    assert [r["n"] for r in rows if r["n"]] == ["1", "2"]
    shown = grouped(rows, "name")
    assert " ".join(shown["a"]["text"]) == words and len(shown["a"]["text"]) > 1
    assert shown["a"]["n"][1:] == [""] * (len(shown["a"]["text"]) - 1)
    assert shown["b"]["text"] == ["one", "two"]


def test_under_wide_a_wrapped_column_splits_at_newlines_only(monkeypatch):
    import click

    monkeypatch.setenv("COLUMNS", "60")
    words = " ".join(f"w{i}x" for i in range(40))
    frame = pd.DataFrame({"name": ["a", "b"], "text": [words, "one\ntwo"]})
    with click.Context(click.Command("x")) as context:
        context.meta[WIDE] = True
        rows = cells(as_table(frame, wrap=("text",)))
    assert [r["text"] for r in rows] == [words, "one", "two"]


def test_variants_json_gives_each_slots_parameters_as_an_object(rag_bench):
    from rag_bench.components.registry import resolve

    rows = json.loads(rag_bench("variants", "--format", "json").stdout)
    [bm25] = [r for r in rows if r["variant"] == "baseline" and r["slot"] == "retriever"]
    resolved = resolve(registry().variant("baseline"))["retriever"]
    assert bm25["params"] == {k: v for k, v in resolved.items() if k != "name"}


def test_wide_characters_take_two_columns(monkeypatch):
    """Chinese text is measured as the terminal shows it (two columns a character): wrapped,
    it fits, and the columns after it line up."""
    monkeypatch.setenv("COLUMNS", "60")
    answer = "须在商品签收后30天内购买，逾期不能补购【zh-028】。" * 3
    frame = pd.DataFrame({"id": ["q1", "q2"], "answer": [answer, "short"], "n": [1, 22]})
    table = as_table(frame, wrap=("answer",))
    lines = table.splitlines()
    assert max(columns(line) for line in lines) <= 60, table
    ends = {columns(line) for line in lines[2:] if line.rstrip().endswith(("1", "22"))}
    assert ends == {columns(lines[1])}, table  # n right-aligned under its rule on both rows
    shown = wrapped_rows(cells(table), "id")
    assert joined(shown[0]["answer"]) == joined([answer])


def test_wide_characters_are_cut_by_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    frame = pd.DataFrame(
        {"id": ["q1"], "text": ["扫地机器人吸力四千帕电池五千二百毫安时续航一百五十分钟"]}
    )
    table = as_table(frame)
    assert max(columns(line) for line in table.splitlines()) <= 40, table
    assert table.splitlines()[2].endswith("…")
