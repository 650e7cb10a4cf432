"""One rule for which variants a request names: the library's rag_bench.run("all") and the
command line's --variant all both ask the registry."""

from __future__ import annotations

import pytest

from rag_bench.components.registry import registry
from rag_bench.errors import UnknownNameError
from rag_bench.experiment import session


def test_all_is_every_variant_that_needs_only_the_dataset():
    names = registry().variants_named("all")
    assert {"baseline", "hybrid", "hybrid_rerank", "recorded"} <= set(names)
    assert "http" in registry().variants and "http" not in names  # it calls a service
    assert all(registry().variant(name).service is None for name in names)
    assert registry().variants_named("baseline") == ["baseline"]
    assert registry().variants_named(["hybrid", "baseline"]) == ["hybrid", "baseline"]
    with pytest.raises(UnknownNameError, match="did you mean 'baseline'"):
        registry().variants_named(["baseline", "baselin"])


def test_the_library_runs_what_the_registry_names(monkeypatch):
    ran = []
    monkeypatch.setattr(session, "run_variant", lambda name, *args, **kwargs: ran.append(name))
    session.run("all", "seed-example")
    assert ran == registry().variants_named("all")
