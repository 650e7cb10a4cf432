"""The plugin registry: entry points, overrides, error messages, and a third-party package."""

from __future__ import annotations

import sys
import textwrap

import pytest

from conftest import SHIPPED, assert_one_line_error
from rag_bench.components.registry import registry, resolve
from rag_bench.errors import UnknownNameError, UsageError


def test_builtins_come_through_entry_points():
    reg = registry()
    assert {"baseline", "hybrid", "hybrid_rerank", "recorded"} <= set(reg.variants)
    assert reg.variant("baseline").origin == "rag-bench"
    assert reg.component("retriever", "bm25").origin == "rag-bench"


def test_overrides_are_typed_and_land_in_the_resolved_params():
    spec = registry().variant("hybrid")
    resolved = resolve(spec, ["retriever.k1=1.2", "chunker.size=64", "encoder.dims=32"])
    assert resolved["retriever"]["k1"] == 1.2 and resolved["chunker"]["size"] == 64
    assert resolved["encoder"] == {"name": "lsa", "dims": 32, "seed": 0}
    switched = resolve(spec, ["chunker.name=none"])
    assert switched["chunker"] == {"name": "none"}


@pytest.mark.parametrize(
    ("override", "error", "fragments"),
    [
        ("retrever.k1=1", UnknownNameError, ["retrever", "analyzer", "chunker", "retriever"]),
        ("retriever.k=1", UnknownNameError, ["'k'", "b, k1, method"]),
        ("chunker.name=sliding", UnknownNameError, ["sliding", "fixed, none, recorded, recursive"]),
        ("retriever.k1=fast", UsageError, ["retriever.k1='fast'", "float"]),
        ("retriever", UsageError, ["slot.param=value"]),
    ],
)
def test_bad_overrides_name_the_valid_choices(override, error, fragments):
    with pytest.raises(error) as info:
        resolve(registry().variant("baseline"), [override])
    for fragment in fragments:
        assert fragment in str(info.value)


PLUGIN = """
from rag_bench.components.registry import VariantSpec, component


@component("chunker", "sentences", description="one chunk per pair of sentences", per_chunk=2)
class SentenceChunker:
    def __init__(self, per_chunk=2):
        self.per_chunk = per_chunk

    def chunk(self, doc):
        from rag_bench.model import Chunk
        from rag_bench.text.sentences import split_sentences
        spans = split_sentences(doc.text)
        groups = [spans[i:i + self.per_chunk] for i in range(0, len(spans), self.per_chunk)]
        chunks = []
        for i, g in enumerate(groups):
            start, end = g[0][0], g[-1][1]
            text = doc.text[start:end]
            chunks.append(Chunk(f"{doc.id}#{i}", doc.id, start, end, text, doc.title))
        return chunks


def components():
    return [SentenceChunker.spec]


variant = VariantSpec(
    "sentence_bm25",
    {
        "chunker": {"name": "sentences"},
        "retriever": {"name": "bm25", "k1": 1.2},
        "generator": {"name": "extractive"},
    },
    "BM25 over sentence pairs",
)
"""


@pytest.fixture
def third_party_plugin(tmp_path, monkeypatch):
    """An installed package 'kestrel-plugins' that registers a chunker and a variant."""
    (tmp_path / "kestrel_plugins.py").write_text(PLUGIN)
    info = tmp_path / "kestrel_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kestrel-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [rag_bench.components]
            kestrel = kestrel_plugins:components

            [rag_bench.variants]
            kestrel = kestrel_plugins:variant
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.cache_clear()
    yield
    registry.cache_clear()
    sys.modules.pop("kestrel_plugins", None)


def test_third_party_variant_is_listed_and_runs(third_party_plugin, rag_bench, tmp_path):
    listing = rag_bench("variants", "--format", "csv").stdout
    assert "sentence_bm25,chunker,sentences,per_chunk=2,kestrel-plugins" in listing
    assert "baseline,retriever,bm25" in listing
    out = rag_bench(
        "run",
        "--variant",
        "sentence_bm25",
        "--dataset",
        SHIPPED,
        "--runs-dir",
        tmp_path / "runs",
        "--tag",
        "smoke",
        "--format",
        "csv",
    )
    assert out.exit_code == 0, out.stderr
    assert "all,sentence_bm25,30," in out.stdout


def test_unknown_variant_lists_registered_ones(rag_bench, tmp_path):
    out = rag_bench("run", "--variant", "hybird", "--runs-dir", tmp_path)
    assert_one_line_error(out, "hybird", "baseline, http, hybrid, hybrid_rerank, recorded")


def test_component_switch_applies_before_its_parameters_whatever_the_order():
    spec = registry().variant("baseline")
    a = resolve(spec, ["chunker.max_words=50", "chunker.name=recursive"])
    b = resolve(spec, ["chunker.name=recursive", "chunker.max_words=50"])
    assert a["chunker"] == b["chunker"] == {"name": "recursive", "max_words": 50, "overlap": 16}
