"""The documentation stays true: every command, variant and metric is documented (in README.md or
a page of docs/) and every command has help. tests/cli/test_readme_examples.py runs the examples;
`make docs` (in .ci/run) builds the site strictly."""

from __future__ import annotations

import re

import click
import pytest

from conftest import DOCUMENTS, ROOT
from rag_bench.cli.main import cli
from rag_bench.components.registry import registry

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_has_help_and_is_documented(rag_bench, command):
    out = rag_bench(command, "--help")
    assert out.exit_code == 0 and "Usage:" in out.stdout
    assert f"rag-bench {command}" in DOCS


def test_every_option_of_every_command_has_help():
    for name, command in cli.commands.items():
        for option in command.params:
            assert not isinstance(option, click.Option) or option.help, (name, option.opts)


def test_every_builtin_variant_is_documented():
    for name, spec in registry().variants.items():
        if spec.origin == "rag-bench":
            assert f"`{name}`" in DOCS


def test_every_metric_family_is_documented():
    from rag_bench.evaluation.measures import FAMILIES

    for name in FAMILIES:
        assert re.search(rf"`{re.escape(name)}(@k)?`", DOCS), name


def test_the_two_commands_are_there():
    assert "make run" in README and "make test" in README


def test_the_readme_is_a_front_door():
    """README stays short and points into the reference: every page of docs/ it names exists."""
    assert len(README.splitlines()) < 400
    linked = re.findall(r"\]\((docs/[\w-]+\.md)", README)
    assert linked and all((ROOT / page).is_file() for page in linked)
