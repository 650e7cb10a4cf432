"""The run store: one object over one runs folder, the only way in or out of it.

``open_runs("runs")`` (a path, a ``file://`` or object-store URL, or None for
``$RAG_BENCH_RUNS_DIR`` or ``./runs``) builds a :class:`RunStore` once; every command and
library function then asks it. Reading: :meth:`RunStore.list`, :meth:`~RunStore.get`,
:meth:`~RunStore.resolve`, the trace tables as pandas DataFrames (:meth:`~RunStore.metrics`,
:meth:`~RunStore.queries`, :meth:`~RunStore.retrieved`, :meth:`~RunStore.claims`), DuckDB
views and :meth:`~RunStore.sql`. Writing (the experiment layer): run ids and their locks,
checkpoints, :meth:`~RunStore.write_run`, :meth:`~RunStore.remove`, :meth:`~RunStore.clean_stale`
and :meth:`~RunStore.upgrade`. The modules beside this one each do one of those jobs; only
this object combines them.
"""

from __future__ import annotations

import builtins  # `list` is a method of RunStore: its annotations name the type this way
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rag_bench.errors import RagBenchError, UnknownNameError, UsageError
from rag_bench.runs.catalog import (
    Catalog,
    StoredRun,
    find_run,
    is_stored,
    on_dataset,
    partitions,
    read_table,
    scan,
)
from rag_bench.runs.checkpoint import Checkpoint, find_checkpoint
from rag_bench.runs.commit import ensure_folder, remove_run, write_error, write_run
from rag_bench.runs.folder import RunsFolder, bookkept_folder, runs_folder
from rag_bench.runs.ids import Locks, new_run_id
from rag_bench.runs.layout import CHECKPOINT, TABLES, partial_name, view_schema
from rag_bench.runs.sql import (
    connect,
    describe,
    run_sql,
    runs_frame,
    stream_sql,
)
from rag_bench.runs.stale import clean_stale
from rag_bench.runs.upgrade import upgrade_runs


def open_runs(path_or_url: str | Path | RunStore | None = None) -> RunStore:
    """The run store of a runs folder: a path, a ``file://`` or object-store URL (``s3://
    bucket/prefix``), or None for ``$RAG_BENCH_RUNS_DIR`` or ``runs/`` in the working
    directory. A :class:`RunStore` is returned as it is."""
    if isinstance(path_or_url, RunStore):
        return path_or_url
    return RunStore(runs_folder(path_or_url))


class RunList(list):
    """Stored runs (a list of :class:`StoredRun`) that read as a table: ``to_frame()`` gives
    one row per run (id, name, variant, dataset, queries scored, headline means), and so do
    ``repr`` and a notebook's ``_repr_html_``."""

    def __init__(self, runs, store: RunStore):
        super().__init__(runs)
        self.store = store

    def to_frame(self):
        from rag_bench.evaluation.measures import headline_metrics

        columns = ["run_id", "name", "variant", "dataset", "queries", "created_at"]
        frame = runs_frame(list(self))[columns]
        headline = headline_metrics(brief=True)
        values = self.store.metrics(list(self)) if self else None
        if values is None:
            return frame.assign(**{m: [] for m in headline})
        chosen = values[values["metric"].isin(headline)]
        means = chosen.groupby(["run_id", "metric"])["value"].mean().unstack("metric")
        return frame.join(means.reindex(columns=headline), on="run_id")

    def __repr__(self) -> str:
        return self.to_frame().to_string(index=False) if self else "RunList([])"

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(index=False)


class RunStore:
    """Every read and write of one runs folder (see the module docstring)."""

    def __init__(self, folder: RunsFolder):
        self.folder = folder
        self.locks = Locks(folder.bookkeeping)
        self._catalog: Catalog | None = None

    def __str__(self) -> str:
        return str(self.folder)

    def __repr__(self) -> str:
        return f"RunStore({str(self.folder)!r})"

    @property
    def exists(self) -> bool:
        """Whether the folder is there (a remote folder is, once its bucket answers)."""
        return self.folder.local is None or self.folder.local.exists()

    def holds(self, path: str | Path) -> bool:
        """Whether ``path`` (its links followed) lies inside this runs folder's local part,
        where only the store writes."""
        root = Path(os.path.realpath(self.folder.bookkeeping))
        return Path(os.path.realpath(path)).is_relative_to(root)

    def check_output(self, path: str | Path | None, what: str) -> None:
        """Refuse to write ``what`` (a report, an export) to ``path`` inside the runs folder."""
        if path is not None and self.holds(path):
            raise UsageError(
                f"the {what} would be written into the runs folder {self} ({path})",
                "write it outside the runs folder",
            )

    @property
    def is_default(self) -> bool:
        """Whether this is the folder used when none is named."""
        return self.folder == runs_folder(None)

    # --- reading -----------------------------------------------------------------------------

    def _read(self) -> Catalog:
        """What the folder holds, read once (and again after this store writes or removes)."""
        if self._catalog is None:
            option = "" if self.is_default else f" --runs-dir {self}"
            self._catalog = scan(self.folder, f"`rag-bench runs --upgrade{option}`")
        return self._catalog

    def refresh(self) -> None:
        """Forget what was read, so the next read sees runs other processes stored meanwhile."""
        self._catalog = None

    @property
    def broken(self) -> dict[str, RagBenchError]:
        """The runs that cannot be read, by id, with the reason (each is still removable)."""
        return self._read().broken

    def get(self, ref: str) -> StoredRun:
        """A run by reference; see :func:`rag_bench.runs.catalog.find_run` (an id, a name,
        ``latest``, ``latest:<variant>``, ``latest:<variant>+`` or an id prefix, each with an
        optional ``@<dataset>``)."""
        return find_run(self._read().runs, self._read().broken, ref, str(self))

    def list(self, variant: str | None = None, dataset: str | None = None) -> RunList:
        """The readable runs (oldest id first), optionally of one variant and on one dataset
        (its name, a unique prefix of it or of its sha256)."""
        runs = [r for r in self._read().runs if variant is None or r.variant == variant]
        return RunList(runs if dataset is None else on_dataset(runs, dataset, str(self)), self)

    def resolve(self, ref: str, include_broken: bool = False) -> str:
        """The full id ``ref`` names; with ``include_broken`` also an unreadable run's."""
        try:
            return self.get(ref).run_id
        except RagBenchError:
            if not include_broken:
                raise
            broken = self._read().broken
            found = [n for n in broken if n == ref] or [n for n in broken if n.startswith(ref)]
            if len(found) != 1:
                raise
            return found[0]

    def _chosen(self, runs: Sequence[str | StoredRun] | str | None) -> builtins.list[StoredRun]:
        """The runs named by references (or given as stored runs); None: every readable run."""
        if runs is None:
            return self.list()
        if isinstance(runs, (str, StoredRun)):
            runs = [runs]
        return [run if isinstance(run, StoredRun) else self.get(run) for run in runs]

    def table(self, name: str, runs: Sequence[str] | str | None = None):
        """One trace table of ``runs`` (refs; None: every readable run) as a pandas DataFrame,
        ``run_id`` and ``variant`` first, rows in run order then as stored."""
        import pyarrow as pa

        if name not in TABLES:
            raise UnknownNameError("trace table", name, TABLES)
        parts = [read_table(r.location, name) for r in self._chosen(runs)]
        if not parts:
            return view_schema(name).empty_table().to_pandas()
        return pa.concat_tables(parts, promote_options="default").to_pandas()

    def metrics(self, runs: Sequence[str] | str | None = None):
        """One row per (run, query, metric): the value (NaN when undefined) and its status."""
        return self.table("metrics", runs)

    def queries(self, runs: Sequence[str] | str | None = None):
        """One row per (run, query): the answer, refusal, failure class and latencies."""
        return self.table("queries", runs)

    def retrieved(self, runs: Sequence[str] | str | None = None):
        """One row per (run, query, stage, rank): what was retrieved and its relevance."""
        return self.table("retrieved", runs)

    def claims(self, runs: Sequence[str] | str | None = None):
        """One row per (run, claim): its text, citations and the judge's verdict."""
        return self.table("claims", runs)

    def runs_frame(self):
        """One row per readable run: what its manifest says (the ``runs`` view)."""
        return runs_frame(self.list())

    def connect(self, runs: Sequence[str | StoredRun] | None = None, allow_files: bool = False):
        """A sealed DuckDB connection with the views ``runs``, ``queries``, ``metrics``,
        ``retrieved`` and ``claims`` (the trace views over ``runs``; default: all)."""
        return connect(self.folder, self.list(), self._chosen(runs), allow_files)

    def sql(self, statement: str, allow_files: bool = False):
        """A read-only SQL statement over the views, as a DataFrame; ``allow_files`` lets it
        read files outside the runs folder. A run removed meanwhile is seen or not, whole."""
        return self._steady(
            lambda: run_sql(self.connect(allow_files=allow_files), statement, allow_files)
        )

    def sql_chunks(self, statement: str, allow_files: bool = False) -> Iterator:
        """Like :meth:`sql`, the result in DataFrames of bounded size (the first, possibly
        empty, names the columns): for results too large to hold at once."""
        connection = self._steady(lambda: self.connect(allow_files=allow_files))
        return stream_sql(connection, statement, allow_files)

    def _steady(self, work: Callable[[], Any]) -> Any:
        """``work()`` over what the folder holds; when it fails because a run went away
        meanwhile (an ``rm`` by another process), once more over what it holds now."""
        attempts = 3
        for attempt in range(1, attempts + 1):
            before = [run.run_id for run in self.list()]
            try:
                return work()
            except (OSError, RagBenchError) as error:
                self.refresh()
                if attempt < attempts and [run.run_id for run in self.list()] != before:
                    continue
                if isinstance(error, OSError):
                    raise RagBenchError(
                        f"cannot read the runs folder {self}: {error.strerror or error}",
                        "retry; check that nothing else is deleting its files",
                    ) from None
                raise
        return None

    def schema(self):
        """The views and their columns (view, column_name, column_type)."""
        return describe(self.connect())

    # --- writing -----------------------------------------------------------------------------

    def remove(self, ref: str) -> str:
        """Delete a run, readable or not: its manifest first (un-committing it), then its
        tables. Returns the id removed."""
        run_id = self.resolve(ref, include_broken=True)
        where = self._read().removable[run_id]
        found = [] if isinstance(where, Path) else partitions(self.folder).get(run_id, [])
        try:
            remove_run(where, found)
        except OSError as exc:
            raise write_error(f"could not remove run {run_id} from", self, exc) from None
        finally:
            self.refresh()
        return run_id

    def is_stored(self, run_id: str) -> bool:
        """Whether ``run_id`` is committed (asks the folder, not what was read before)."""
        return is_stored(self.folder, run_id)

    def reserve_run_id(self, variant: str, created: datetime) -> str:
        """A new run id no other process holds, claimed by creating its lock file exclusively
        and held until :meth:`release_run_id` (or the end of the process). Cleans stale
        leftovers first."""
        ensure_folder(self.folder)
        self.clean_stale()
        for _ in range(100):
            run_id = new_run_id(variant, created)
            try:
                self.locks.create(run_id)
            except FileExistsError:
                continue
            except OSError as exc:
                raise write_error("cannot write to the runs folder", self, exc) from None
            partial = self.folder.bookkeeping / partial_name(run_id)
            if not self.is_stored(run_id) and not partial.exists():
                return run_id
            self.release_run_id(run_id)
        raise RagBenchError(f"could not find a free run id in {self}", "retry in a second")

    def acquire_run_id(self, run_id: str) -> None:
        """Hold the lock of an existing run id (to resume it); fails when a live process
        holds it."""
        try:
            self.locks.acquire(run_id)
        except OSError as exc:
            raise write_error("cannot write to the runs folder", self, exc) from None

    def release_run_id(self, run_id: str) -> None:
        self.locks.release(run_id)

    def create_checkpoint(self, run_id: str, header: dict[str, Any]) -> Checkpoint:
        """A new, empty checkpoint of the run ``run_id`` (whose id this process holds)."""
        return Checkpoint.create(self.folder, run_id, header)

    def find_checkpoint(self, ref: str) -> tuple[RunStore, Checkpoint]:
        """An interrupted run's checkpoint by id, unique prefix or folder path, with the store
        it belongs to (another one when a folder of another runs folder is named)."""
        given = Path(os.path.abspath(ref))
        if (given / CHECKPOINT).is_file():
            store = RunStore(bookkept_folder(given.parent))
            return store, Checkpoint.open(given, store.folder)
        return self, find_checkpoint(self.folder, ref)

    def write_run(self, run_id: str, manifest: dict, tables: dict) -> StoredRun:
        """Store a complete run atomically and release its id; see :mod:`rag_bench.runs.commit`."""
        try:
            location = write_run(self.folder, self.locks, run_id, manifest, tables)
        finally:
            self.refresh()
        return StoredRun(run_id, location, manifest)

    def clean_stale(self) -> builtins.list[str]:
        """Remove what ended processes left behind; see :mod:`rag_bench.runs.stale`."""
        return clean_stale(self.folder, self.locks)

    def upgrade(self) -> builtins.list[str]:
        """Rewrite runs of the first layout into the current one; returns the ids rewritten."""
        try:
            return upgrade_runs(self.folder, self.locks)
        finally:
            self.refresh()
