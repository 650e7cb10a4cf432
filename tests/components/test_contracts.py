"""Every component satisfies its slot's contract; the pipeline uses what a component declares."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from conftest import SHIPPED
from rag_bench.components.base import CONTRACTS, Capability, Generator, Judge, declared
from rag_bench.components.generate import ExtractiveGenerator
from rag_bench.components.judges import LexicalJudge
from rag_bench.components.params import coerce
from rag_bench.components.registry import component, registry, resolve
from rag_bench.components.rerank import ProximityReranker
from rag_bench.data.dataset import load_dataset
from rag_bench.errors import MissingBackendError, RagBenchError
from rag_bench.pipeline import compose
from rag_bench.pipeline.compose import BATCH, Pipeline

SPECS = sorted(registry().components.values(), key=lambda s: (s.kind, s.name))


def test_every_slot_has_a_builtin_component():
    assert {s.kind for s in SPECS if s.origin == "rag-bench"} == set(CONTRACTS)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.kind}-{s.name}")
def test_every_registered_component_satisfies_its_slots_contract(spec):
    capabilities = declared(spec.kind, spec.factory)
    for name, default in spec.params.items():  # each default passes its own declared type
        assert coerce(default, spec.types[name], name) == default, name
    try:
        made = spec.factory(**spec.params)
    except MissingBackendError:
        pytest.skip(f"{spec.requires} is not installed")
    if spec.kind == "retriever":
        assert isinstance(made.stage, str) and made.stage
    if spec.kind == "encoder":
        assert isinstance(made.batch_size, int) and made.batch_size >= 1
    if spec.kind == "generator":
        assert made.context_k is None or made.context_k >= 1
    if spec.kind == "index":
        assert isinstance(made.approximate, bool)
    if spec.kind in ("analyzer", "fuser", "index"):
        assert capabilities == frozenset()
    else:
        assert made.capabilities == capabilities


# --- contract violations: one-line errors naming what is wrong --------------------------------


class NoGenerate(Generator):
    """Subclasses the contract but never writes generate."""


class BatchWithoutMethod(Generator):
    capabilities = frozenset({Capability.BATCH})

    def generate(self, query, context):
        raise AssertionError


class WrongArguments(Judge):
    def judge(self, query, claims):
        raise AssertionError


class Plain:
    """Not subclassing: must declare capabilities itself."""

    def generate(self, query, context):
        raise AssertionError


class ForeignCapability(Generator):
    capabilities = frozenset({Capability.LEARNS_ACROSS_QUERIES})

    def generate(self, query, context):
        raise AssertionError


class NamedByString(Generator):
    capabilities = frozenset({"batch"})

    def generate(self, query, context):
        raise AssertionError


class CacheWithoutPrepare(ExtractiveGenerator):
    capabilities = frozenset({Capability.CACHE})


@pytest.mark.parametrize(
    ("kind", "cls", "fragments"),
    [
        ("generator", NoGenerate, ["no generate"]),
        ("generator", BatchWithoutMethod, ["BATCH: no generate_all"]),
        ("judge", WrongArguments, ["judge does not take (query, claims, context)"]),
        ("generator", Plain, ["no capabilities", "no context_k"]),
        ("generator", ForeignCapability, ["LEARNS_ACROSS_QUERIES is not a generator capability"]),
        ("generator", NamedByString, ["Capability members"]),
        ("generator", CacheWithoutPrepare, ["CACHE without PREPARE"]),
        ("chunker", Plain, ["no chunk"]),
    ],
)
def test_a_broken_component_is_refused_when_it_registers(kind, cls, fragments):
    spec = component(kind, "broken")(cls).spec
    with pytest.raises(RagBenchError) as info:
        registry().add_component(spec, "a-plugin")
    assert (kind, "broken") not in registry().components
    message = str(info.value)
    assert "\n" not in message and cls.__qualname__ in message
    for fragment in fragments:
        assert fragment in message


def test_a_parameter_without_a_default_is_refused():
    class Needy(Generator):
        def __init__(self, model: str):
            self.model = model

    with pytest.raises(RagBenchError, match="'model' of .*Needy has no default"):
        component("generator", "needy")(Needy)


def test_parameters_follow_kwargs_to_the_base_class():
    spec = registry().component("generator", "delayed")
    params = ["delay_ms", "context_k", "max_sentences", "min_coverage", "refuse_on"]
    assert list(spec.params) == params
    assert spec.types["min_coverage"] is float


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("chunker.size=12.5", "chunker.size=12.5 is not an int"),
        ("chunker.size=true", "chunker.size=True is not an int"),
        ("retriever.k1=NaN", "retriever.k1=nan is not a finite float"),
        ("retriever.k1=inf", "retriever.k1='inf' is not a finite float"),
        ("generator.min_coverage=[1]", "is not a finite float"),
        ("analyzer.stem=maybe", "analyzer.stem='maybe' is not a bool"),
    ],
)
def test_an_override_of_another_type_is_refused(override, fragment):
    with pytest.raises(RagBenchError) as info:
        resolve(registry().variant("baseline"), [override])
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_overrides_take_their_declared_types():
    variant = registry().variant("hybrid")
    resolved = resolve(
        variant,
        ["chunker.size=64", "retriever.k1=2", "analyzer.stem=no", "fusion.name=weighted"],
    )
    assert resolved["chunker"]["size"] == 64 and resolved["retriever"]["k1"] == 2.0
    assert isinstance(resolved["retriever"]["k1"], float) and resolved["analyzer"]["stem"] is False
    for weights in ("0.7,0.3", "[0.7, 0.3]"):
        fused = resolve(variant, ["fusion.name=weighted", f"fusion.weights={weights}"])
        assert fused["fusion"]["weights"] == (0.7, 0.3)


# --- the pipeline asks the declaration --------------------------------------------------------


class Calls:
    """Sizes of the blocks a component method was called with."""

    sizes: list[int]


class BatchGenerator(ExtractiveGenerator):
    capabilities = ExtractiveGenerator.capabilities | {Capability.BATCH}

    def generate_all(self, queries, contexts):
        Calls.sizes.append(len(queries))
        return [self.generate(q, c) for q, c in zip(queries, contexts)]


class UndeclaredBatchGenerator(BatchGenerator):
    capabilities = ExtractiveGenerator.capabilities  # has generate_all, does not declare it


class BatchJudge(LexicalJudge):
    capabilities = LexicalJudge.capabilities | {Capability.BATCH}

    def judge_all(self, queries, claims, contexts):
        Calls.sizes.append(len(queries))
        return [self.judge(*args) for args in zip(queries, claims, contexts)]


class UndeclaredBatchJudge(BatchJudge):
    capabilities = LexicalJudge.capabilities


class AcrossQueries(ProximityReranker):
    capabilities = ProximityReranker.capabilities | {Capability.LEARNS_ACROSS_QUERIES}

    def rerank_all(self, queries, candidates, stages):
        Calls.sizes.append(len(queries))
        return super().rerank_all(queries, candidates, stages)


class BlockByBlock(AcrossQueries):
    capabilities = ProximityReranker.capabilities


class MeteredGenerator(ExtractiveGenerator):
    capabilities = ExtractiveGenerator.capabilities | {Capability.METERED}

    def generate(self, query, context):
        Calls.sizes.append(1)
        return super().generate(query, context)

    def usage(self) -> dict:
        return {"answers": len(Calls.sizes)}

    def tally(self) -> dict:
        return {"answers": len(Calls.sizes)}

    def absorb(self, counts: dict) -> None:
        raise AssertionError("a local run works on the pipeline itself")


class UnmeteredGenerator(MeteredGenerator):
    capabilities = ExtractiveGenerator.capabilities


class Embeds:
    """Texts per call of an encoder's fit."""

    calls: list[int]


class IndependentEncoder:
    """Not subclassing the contract: declares every member itself."""

    capabilities = frozenset({Capability.INDEPENDENT_EMBEDDINGS})
    batch_size = 10

    def __init__(self, dims: int = 8):
        self.dims = dims

    def cache_material(self) -> dict:
        return {"component": type(self).__name__, "dims": self.dims}

    def fit(self, texts, analyzer):
        Embeds.calls.append(len(texts))
        return self.encode(texts)

    def encode(self, texts):
        rows = [[zlib.crc32(w.encode()) % self.dims for w in t.lower().split()] for t in texts]
        return np.array([np.bincount(r, minlength=self.dims) + 1.0 for r in rows])

    def save(self, folder):
        pass

    def load(self, folder, analyzer):
        pass


class DependentEncoder(IndependentEncoder):
    capabilities = frozenset()


@pytest.fixture
def plugged(monkeypatch):
    """Registers test components (through the contract check) for one test."""
    reg = registry()

    def plug(kind: str, cls: type) -> str:
        name = cls.__name__.lower()
        monkeypatch.setitem(reg.components, (kind, name), None)  # removed after the test
        reg.add_component(component(kind, name)(cls).spec, "tests")
        return name

    Calls.sizes, Embeds.calls = [], []
    return plug


@pytest.fixture(scope="module")
def kestrel():
    data = load_dataset(SHIPPED)
    return data, list(data.queries.values())[:70]  # blocks of 32, 32 and 6


def run(kestrel, overrides: list[str], variant: str = "baseline") -> Pipeline:
    data, queries = kestrel
    pipeline = Pipeline(resolve(registry().variant(variant), overrides))
    pipeline.index(data)
    pipeline.results = pipeline.answer(queries, depth=20)
    return pipeline


def test_a_generator_declaring_batch_gets_blocks(plugged, kestrel):
    batched = run(kestrel, [f"generator.name={plugged('generator', BatchGenerator)}"])
    assert Calls.sizes == [BATCH, BATCH, 70 - 2 * BATCH]
    Calls.sizes.clear()
    single = run(kestrel, [f"generator.name={plugged('generator', UndeclaredBatchGenerator)}"])
    assert Calls.sizes == []
    assert [r.generation for r in batched.results] == [r.generation for r in single.results]


def test_a_judge_declaring_batch_gets_blocks(plugged, kestrel):
    batched = run(kestrel, [f"judge.name={plugged('judge', BatchJudge)}"])
    answered = [sum(1 for r in batched.results[i : i + BATCH] if r.claims) for i in (0, 32, 64)]
    assert Calls.sizes == [n for n in answered if n] and sum(answered) > 40
    Calls.sizes.clear()
    single = run(kestrel, [f"judge.name={plugged('judge', UndeclaredBatchJudge)}"])
    assert Calls.sizes == []
    assert [r.verdicts for r in batched.results] == [r.verdicts for r in single.results]


@pytest.mark.slow
def test_a_reranker_learning_across_queries_gets_them_all_at_once(plugged, kestrel):
    run(kestrel, [f"reranker.name={plugged('reranker', AcrossQueries)}"], "hybrid_rerank")
    assert Calls.sizes == [70]
    Calls.sizes.clear()
    run(kestrel, [f"reranker.name={plugged('reranker', BlockByBlock)}"], "hybrid_rerank")
    assert Calls.sizes == [BATCH, BATCH, 70 - 2 * BATCH]


def test_a_metered_component_reports_its_usage(plugged, kestrel):
    metered = run(kestrel, [f"generator.name={plugged('generator', MeteredGenerator)}"])
    assert metered.usage() == {"generator": {"answers": 70}}
    unmetered = run(kestrel, [f"generator.name={plugged('generator', UnmeteredGenerator)}"])
    assert unmetered.usage() == {}


def test_an_encoder_with_independent_embeddings_is_embedded_in_blocks(
    plugged, kestrel, monkeypatch
):
    monkeypatch.setattr(compose, "EMBED_BLOCK", 95)  # rounded up to whole batches of 10
    monkeypatch.setattr(compose, "EMBED_BLOCKS", 1)  # blocks of EMBED_BLOCK, however few
    data, _ = kestrel
    independent = plugged("encoder", IndependentEncoder)
    blocks = Pipeline(resolve(registry().variant("hybrid"), [f"encoder.name={independent}"]))
    blocks.index(data)
    n = len(blocks.chunks)
    assert Embeds.calls == [100] * (n // 100) + [n % 100] and n > 200
    Embeds.calls.clear()
    dependent = plugged("encoder", DependentEncoder)
    whole = Pipeline(resolve(registry().variant("hybrid"), [f"encoder.name={dependent}"]))
    whole.index(data)
    assert Embeds.calls == [n]
    assert np.array_equal(blocks.dense.embeddings, whole.dense.embeddings)
