"""Executors: the local one (in order, threads, errors) and Ray, whose runs must store the same
traces as local runs, bit for bit, and count the same requests."""

from __future__ import annotations

import pickle
import threading
import time

import numpy as np
import pandas as pd
import pytest

from conftest import SHIPPED, assert_one_line_error, require
from rag_bench.components.registry import registry, resolve
from rag_bench.data.dataset import load_dataset
from rag_bench.errors import UsageError
from rag_bench.experiment.runner import Selection, run_variant
from rag_bench.pipeline import executors
from rag_bench.pipeline.compose import Pipeline
from rag_bench.pipeline.executors import LocalExecutor, make_executor

SMOKE = Selection(tag="smoke")


def without_timings(frame: pd.DataFrame) -> pd.DataFrame:
    """A trace table without what differs between two runs by nature: run id and latencies."""
    keep = [c for c in frame.columns if c != "run_id" and not c.startswith("latency_ms")]
    return frame[keep].reset_index(drop=True)


def assert_same_traces(a, b, atol: float | None = None, skip: tuple[str, ...] = ()) -> None:
    """The two runs' tables (but ``skip``) equal bit for bit, or with ``atol`` their numbers
    within ``atol`` (ids, texts and ranks still exactly)."""
    assert a.tables.keys() == b.tables.keys()
    exact = (
        {"check_exact": True} if atol is None else {"check_exact": False, "rtol": 0, "atol": atol}
    )
    for name in [n for n in a.tables if n not in skip]:
        left, right = without_timings(a.tables[name]), without_timings(b.tables[name])
        pd.testing.assert_frame_equal(left, right, obj=name, **exact)


# --- the local executor ---------------------------------------------------------------------


def slow_square(shared, item):
    time.sleep(shared[item % len(shared)])
    return item * item


@pytest.mark.parametrize("workers", [1, 3])
def test_local_map_keeps_the_order_of_the_items(workers):
    delays = [0.03, 0.0, 0.01, 0.02]
    found = list(LocalExecutor(workers).map(slow_square, delays, list(range(11))))
    assert found == [i * i for i in range(11)]


def test_local_threads_overlap_and_stay_within_the_bound():
    running, peak, lock = [0], [0], threading.Lock()

    def task(shared, item):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return item

    assert list(LocalExecutor(2).map(task, None, list(range(8)))) == list(range(8))
    assert peak[0] == 2


def test_a_task_error_reaches_the_caller():
    def task(shared, item):
        if item == 2:
            raise UsageError("bad item 2", "fix it")
        return item

    with pytest.raises(UsageError, match="bad item 2"):
        list(LocalExecutor(2).map(task, None, list(range(6))))


def test_bad_executor_options_are_usage_errors():
    with pytest.raises(UsageError, match="unknown executor 'spark'"):
        make_executor("spark")
    with pytest.raises(UsageError, match="--address is for --executor ray"):
        make_executor("local", address="auto")
    with pytest.raises(UsageError, match="--workers 0 is below 1"):
        make_executor("local", workers=0)


@pytest.mark.slow
def test_threads_give_the_traces_of_one_block_at_a_time(tmp_path):
    """Every query of kestrel-kb: nine blocks, so two threads score dense rankings at the same
    time (with one block, as on the smoke tier, they never overlap and prove nothing)."""
    one = run_variant("hybrid_rerank", SHIPPED, runs_dir=tmp_path)
    two = run_variant("hybrid_rerank", SHIPPED, runs_dir=tmp_path, executor=LocalExecutor(2))
    assert_same_traces(one, two)
    assert two.manifest["executor"] == {"name": "local", "workers": 2}


@pytest.mark.parametrize("variant", ["hybrid_rerank"])
@pytest.mark.parametrize(
    "analyzer",
    # the default analyzer in the fast tier; each one indexes the whole corpus
    [
        pytest.param("en", marks=pytest.mark.slow),
        pytest.param("zh", marks=pytest.mark.slow),
        "auto",
    ],
)
def test_an_indexed_pipeline_survives_pickling(variant, analyzer):
    """What Ray does to the shared pipeline: a copy answers exactly as the original."""
    data = load_dataset(SHIPPED)
    pipeline = Pipeline(resolve(registry().variant(variant), [f"analyzer.name={analyzer}"]))
    pipeline.index(data)
    copy = pickle.loads(pickle.dumps(pipeline))
    queries = [data.queries[q] for q in list(data.queries)[:8]]
    for a, b in zip(pipeline.answer(queries, 20), copy.answer(queries, 20)):
        assert [h.index.tolist() for h in a.stages.values()] == [
            h.index.tolist() for h in b.stages.values()
        ]
        assert a.generation == b.generation and a.verdicts == b.verdicts


def test_a_copied_llm_client_carries_no_key_and_hands_back_its_counts(fake):
    from fake_openai import KEY
    from rag_bench.components.openai.components import OpenAIGenerator

    client = OpenAIGenerator(retry_backoff=0.0, cache=False).client
    data = pickle.dumps(client)
    assert KEY.encode() not in data
    copy = pickle.loads(data)
    copy.chat("gpt-test", [{"role": "system", "content": "hi"}, {"role": "user", "content": "x"}])
    assert client.usage()["requests"] == 0 and copy.usage()["requests"] == 1
    client.absorb(copy.tally())
    assert client.usage() == copy.usage()


# --- Ray ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_executor():
    require("ray", "pip install 'rag-bench[ray]'")
    from rag_bench.pipeline.executors import RayExecutor

    executor = RayExecutor(workers=2)
    yield executor
    executor.close()


@pytest.mark.ray
@pytest.mark.parametrize(
    "variant, overrides, selection",
    [
        # every query; the learned reranker runs on the driver, across queries
        ("hybrid_rerank", (), Selection()),
        # a per-query reranker, in the tasks
        ("hybrid_rerank", ("reranker.name=proximity",), SMOKE),
        ("recorded", (), Selection()),
    ],
)
def test_ray_runs_store_the_traces_of_local_runs(
    tmp_path, ray_executor, variant, overrides, selection
):
    local = run_variant(
        variant, SHIPPED, overrides=overrides, selection=selection, runs_dir=tmp_path
    )
    ray = run_variant(
        variant,
        SHIPPED,
        overrides=overrides,
        selection=selection,
        runs_dir=tmp_path,
        executor=ray_executor,
    )
    assert_same_traces(local, ray)
    assert ray.manifest["executor"]["name"] == "ray"


@pytest.mark.ray
def test_ray_embeds_the_corpus_in_blocks_and_counts_every_request(
    tmp_path, ray_executor, fake, monkeypatch
):
    """The openai encoder and generator through Ray: corpus blocks embedded by tasks, the
    same traces and the same request counts in the manifest as a local run."""
    import rag_bench.pipeline.compose as compose

    monkeypatch.setattr(compose, "EMBED_BLOCK", 256)  # several blocks of the 777 chunks
    overrides = (
        "encoder.name=openai",
        "encoder.model=fake-embed",
        "encoder.retry_backoff=0",
        "generator.name=openai",
        "generator.model=fake-chat",
        "generator.retry_backoff=0",
        "generator.cache=false",
    )
    runs = {}
    for name, executor in (("local", None), ("ray", ray_executor)):
        monkeypatch.setenv("RAG_BENCH_CACHE_DIR", str(tmp_path / f"cache-{name}"))
        runs[name] = run_variant(
            "hybrid",
            SHIPPED,
            overrides=overrides,
            selection=SMOKE,
            runs_dir=tmp_path / "runs",
            executor=executor,
        )
    assert_same_traces(runs["local"], runs["ray"])
    local, ray = runs["local"].manifest["usage"], runs["ray"].manifest["usage"]
    assert ray == local
    assert local["generator"]["requests"] == 30 and local["encoder"]["requests"] > 3


@pytest.mark.ray
def test_a_pipeline_that_does_not_pickle_is_one_clear_line(tmp_path, rag_bench, monkeypatch):
    require("ray", "pip install 'rag-bench[ray]'")
    import rag_bench.components.generate as generate

    monkeypatch.setattr(generate.ExtractiveGenerator, "__reduce__", _unpicklable, raising=False)
    outcome = rag_bench(
        "run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", tmp_path,
        "--executor", "ray", "--workers", "1",
    )  # fmt: skip
    assert_one_line_error(outcome, "cannot send the pipeline to Ray workers", "--executor local")


def _unpicklable(self):
    raise TypeError("a C object cannot be pickled")


@pytest.mark.ray
def test_an_unreachable_ray_address_is_one_line_at_once(tmp_path, rag_bench):
    require("ray", "pip install 'rag-bench[ray]'")
    outcome = rag_bench(
        "run", "--variant", "baseline", "--tag", "smoke", "--runs-dir", tmp_path,
        "--executor", "ray", "--address", "127.0.0.1:1",
    )  # fmt: skip
    assert_one_line_error(outcome, "cannot reach Ray at 127.0.0.1:1", "--address")
    assert not any(tmp_path.iterdir())  # nothing stored, no checkpoint left


@pytest.mark.ray
@pytest.mark.slow
def test_minilm_embeds_the_same_bits_with_one_worker_two_threads_and_ray(
    tmp_path, ray_executor, real_minilm
):
    """The hybrid with the real minilm encoder on kestrel-kb, the corpus cut into 25 blocks of
    32 chunks (inputs truncated to 16 word pieces, to be quick): with one local worker, two
    threads, and two Ray workers, every block is embedded by whichever worker takes it, and the
    stored embeddings and the traces are the same bit for bit. Ray's workers start torch on one
    thread where this process runs two, and MiniLM's last bits move with the thread count for
    some batch shapes (up to 1.6e-7 in an embedding: two chunks of one document swapped places
    in a ranking); the encoder sets its builder's count in every worker."""
    overrides = ["encoder.name=minilm", "encoder.max_seq_length=16"]
    executors = {"one": LocalExecutor(1), "threads": LocalExecutor(2), "ray": ray_executor}
    runs, stored = {}, {}
    for name, executor in executors.items():
        cache = tmp_path / f"cache-{name}"  # each embeds the corpus itself
        runs[name] = run_variant(
            "hybrid", SHIPPED, overrides=overrides, selection=SMOKE,
            runs_dir=tmp_path / name, cache_dir=cache, executor=executor,
        )  # fmt: skip
        [entry] = cache.glob("dense-*")
        stored[name] = np.load(entry / "embeddings.npy")
    assert stored["one"].dtype == np.float32 and stored["one"].shape[1] == 384
    for name in ("threads", "ray"):
        assert np.array_equal(stored[name], stored["one"]), name
        assert_same_traces(runs["one"], runs[name])


@pytest.mark.ray
def test_a_local_ray_that_times_out_starting_is_one_usage_error(monkeypatch):
    """Ray's own start-up deadline raises a bare Exception (seen on a loaded machine)."""
    require("ray", "pip install 'rag-bench[ray]'")
    from rag_bench.pipeline.executors import RayExecutor

    executor = RayExecutor(workers=1)

    def late(**options):
        raise Exception("The current node timed out during startup. This could happen ...")

    monkeypatch.setattr(executor.ray, "init", late)
    monkeypatch.setattr(executor.ray, "is_initialized", lambda: False)
    with pytest.raises(UsageError, match="cannot start or reach Ray at this machine: The current"):
        executor.start()


def test_blocks_that_compute_spread_over_every_core_whatever_the_workers(monkeypatch):
    """``cpus``: each task keeps that many cores busy (embedding a corpus), so one worker still
    runs as many tasks at once as the cores hold; work that waits keeps to ``--workers``."""
    monkeypatch.setattr(executors, "usable_cores", lambda: 3)
    together = threading.Barrier(3, timeout=10)  # passes only when three tasks run at once

    def computes(shared, item):
        together.wait()
        return item * 2

    assert list(LocalExecutor(1).map(computes, None, [1, 2, 3], cpus=1)) == [2, 4, 6]
    names = set()

    def where(shared, item):
        names.add(threading.current_thread().name)
        return item

    assert list(LocalExecutor(1).map(where, None, [1, 2, 3], cpus=2)) == [1, 2, 3]
    assert list(LocalExecutor(1).map(where, None, [1, 2, 3])) == [1, 2, 3]
    assert names == {threading.current_thread().name}  # one at a time, in the caller's thread
