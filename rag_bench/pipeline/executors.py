"""Where a run's work executes: on this machine (``local``) or on a Ray cluster (``ray``).

The pipeline hands an executor a function, one shared object (the indexed pipeline: built
once, then shared with every task rather than rebuilt by each) and a list of work items
(blocks of queries, blocks of corpus texts). :meth:`Executor.map` yields ``fn(shared, item)``
for every item, in the items' order, while later items are still being worked on, so the
caller can checkpoint each result as it arrives.

The same function on the same items gives the same results whatever the executor, which is
what makes a Ray run's traces identical to a local one. ``cpus`` marks work that computes
rather than waits (embedding a corpus): each task keeps that many cores busy, so a local run
spreads it over every core whatever ``--workers`` says, and Ray reserves that many CPUs a task.
Tasks on Ray work on a copy of the shared object: whatever they count (requests, tokens)
happens on the copy, so the pipeline has them report what they counted (see
``Pipeline.tally``) when ``isolated`` is true.
"""

from __future__ import annotations

import os
import pickle
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from rag_bench.errors import UsageError, first_line
from rag_bench.io.threads import usable_cores

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")
INSTALL_RAY = "pip install 'rag-bench[ray]'"
SHARED_KEPT = 2  # shared objects kept at once: a run's pipeline and its corpus encoder


class Executor(Protocol):
    name: str
    isolated: bool  # tasks work on copies of the shared object

    def map(
        self, fn: Callable[[S, T], R], shared: S, items: Sequence[T], cpus: int | None = None
    ) -> Iterator[R]: ...

    def start(self) -> None: ...  # ready to take work (done by the first map when not called)

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """In this process: one item after another, or ``workers`` threads (for components that
    wait on the network, such as an LLM generator; numpy work also releases the GIL)."""

    name = "local"
    isolated = False

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise UsageError(f"--workers {workers} is below 1", "use --workers 1 or more")
        self.workers = workers

    def map(
        self, fn: Callable[[S, T], R], shared: S, items: Sequence[T], cpus: int | None = None
    ) -> Iterator[R]:
        workers = self.workers if cpus is None else max(self.workers, usable_cores() // cpus)
        if workers == 1 or len(items) <= 1:
            for item in items:
                yield fn(shared, item)
            return
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rag-bench")
        try:
            yield from _in_order(lambda item: pool.submit(fn, shared, item), items, 2 * workers)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def start(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "workers": self.workers}

    def close(self) -> None:
        pass


def _in_order(submit: Callable[[T], Any], items: Sequence[T], window: int) -> Iterator[Any]:
    """Futures submitted ``window`` ahead of the one being waited for, results in order."""
    pending: list[Any] = []
    upcoming = iter(items)
    for item in upcoming:
        pending.append(submit(item))
        if len(pending) >= window:
            break
    while pending:
        result = pending.pop(0).result()
        for item in upcoming:
            pending.append(submit(item))
            break
        yield result


class RayExecutor:
    """Ray tasks, one per item, on a running cluster (``address``) or on a Ray instance started
    on this machine with ``workers`` CPUs. Ray is started (or joined) at the first task, so a
    mistake found before any work costs no start-up. The shared object is put in Ray's object
    store once per executor and every task reads it from there (numpy arrays without a copy)."""

    name = "ray"
    isolated = True

    def __init__(self, address: str | None = None, workers: int | None = None):
        if workers is not None and workers < 1:
            raise UsageError(f"--workers {workers} is below 1", "use --workers 1 or more")
        try:
            import ray
        except ImportError:
            raise UsageError("--executor ray needs Ray", INSTALL_RAY) from None
        self.ray = ray
        self.address = address
        self.workers = workers
        self.started_here = False
        self._task = None
        self._shared: dict[int, Any] = {}  # id(shared object) -> (object, its reference)

    def start(self) -> None:
        """Start a local Ray instance or join the cluster at ``address``, once."""
        if self._task is not None:
            return
        ray = self.ray
        if self.address:
            _check_reachable(self.address)
        if not ray.is_initialized():
            options: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "logging_level": "ERROR",
                "configure_logging": True,
            }
            if self.address:
                options["address"] = self.address
            else:
                options["num_cpus"] = self.workers or os.cpu_count() or 1
            try:
                ray.init(**options)
            except Exception as error:  # also a bare Exception: a raylet too slow to start
                ray.shutdown()  # what the attempt started
                raise UsageError(
                    f"cannot start or reach Ray at {self.address or 'this machine'}: "
                    f"{first_line(error)}",
                    "check --address (e.g. ray://head:10001 or auto) and that the cluster runs; "
                    "a local instance that timed out on a busy machine may start when tried again",
                ) from None
            self.started_here = True
        self.workers = self.workers or int(ray.cluster_resources().get("CPU", 1))
        self._task = ray.remote(_apply)

    def share(self, shared: Any) -> Any:
        """The object store's reference to ``shared``, put there on first use only."""
        self.start()
        entry = self._shared.get(id(shared))
        if entry is None or entry[0] is not shared:
            try:
                entry = (shared, self.ray.put(shared))
            except (TypeError, AttributeError, pickle.PicklingError) as error:
                raise UsageError(
                    f"cannot send the pipeline to Ray workers: {first_line(error)}",
                    "every component must pickle (a plugin with a C object or an open "
                    "connection can rebuild it in __setstate__); or use --executor local",
                ) from None
            while len(self._shared) >= SHARED_KEPT:  # objects of earlier runs: let them go
                self._shared.pop(next(iter(self._shared)))
            self._shared[id(shared)] = entry
        return entry[1]

    def map(
        self, fn: Callable[[S, T], R], shared: S, items: Sequence[T], cpus: int | None = None
    ) -> Iterator[R]:
        reference = [self.share(shared)]  # in a list: the task resolves it, once per worker
        assert self.workers is not None and self._task is not None  # start() has set them
        task = self._task if cpus is None else self._task.options(num_cpus=cpus)
        outstanding: dict[int, Any] = {}  # tasks submitted and not yet fetched, by id

        def submit(item):
            future = _RayFuture(self.ray, task.remote(fn, reference, item), outstanding)
            outstanding[id(future)] = future.task
            return future

        try:
            yield from _in_order(submit, items, 2 * self.workers)
        except BaseException:  # an error, Ctrl-C, or the caller stopped early: stop the rest
            for task in list(outstanding.values()):
                self.ray.cancel(task, force=False)
            raise

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "workers": self.workers, "address": self.address}

    def close(self) -> None:
        self._shared.clear()
        if self.started_here:
            self.ray.shutdown()
            self.started_here = False


class _RayFuture:
    def __init__(self, ray, task, outstanding: dict[int, Any]):
        self.ray, self.task, self.outstanding = ray, task, outstanding

    def result(self):
        try:
            value = self.ray.get(self.task)
            self.outstanding.pop(id(self), None)
            return value
        except self.ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, Exception):  # the task's own error, as raised there
                raise cause from None
            raise


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A ``host:port`` (or ``ray://host:port``) that takes no connection is a one-line error
    at once; Ray itself would keep retrying for minutes. ``auto`` and the like pass."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise UsageError(
            f"cannot reach Ray at {address}: {error.strerror or first_line(error)}",
            "check --address (the head's host:port, or auto on a cluster node) and that "
            "the cluster runs",
        ) from None


_WORKER_SHARED: dict[str, Any] = {}  # in a Ray worker: shared objects it has already read


def _apply(fn, reference: list, item):
    """A Ray task: ``fn(shared, item)``, reading the shared object from the object store only
    the first time this worker process meets it."""
    import ray

    key = reference[0].hex()
    shared = _WORKER_SHARED.get(key)
    if shared is None:
        shared = ray.get(reference[0])
        while len(_WORKER_SHARED) >= SHARED_KEPT:
            _WORKER_SHARED.pop(next(iter(_WORKER_SHARED)))
        _WORKER_SHARED[key] = shared
    return fn(shared, item)


def make_executor(name: str = "local", address: str | None = None, workers: int | None = None):
    """The executor called ``name``, with a one-line error for an unknown name."""
    if name == "local":
        if address:
            raise UsageError("--address is for --executor ray", "drop --address or use ray")
        return LocalExecutor(1 if workers is None else workers)
    if name == "ray":
        return RayExecutor(address, workers)
    raise UsageError(f"unknown executor {name!r}", f"use one of: {', '.join(EXECUTORS)}")
