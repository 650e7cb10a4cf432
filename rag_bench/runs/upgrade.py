"""Rewriting runs of the first layout (``runs/<run_id>/{manifest.json,*.parquet}``) into the
hive-partitioned one (``rag-bench runs --upgrade``, :meth:`RunStore.upgrade`).

Each run is rewritten through :func:`rag_bench.runs.commit.write_run` under its own id, so it is
committed atomically like a new run; the old folder is removed only once the new manifest
exists. Interrupted, the upgrade leaves either the old run alone or both copies, and running it
again finishes it: an old folder whose run is already committed is just removed.
"""

from __future__ import annotations

from pathlib import Path

from rag_bench.errors import RagBenchError, first_line
from rag_bench.runs.catalog import is_stored, legacy_runs, read_manifest
from rag_bench.runs.commit import remove_run, write_run
from rag_bench.runs.folder import RunsFolder
from rag_bench.runs.ids import Locks
from rag_bench.runs.layout import LEGACY_MANIFEST, SCHEMA_VERSION, TABLES


def upgrade_runs(runs: RunsFolder, locks: Locks) -> list[str]:
    """Rewrite every run of the first layout in the folder; returns the ids rewritten."""
    done = []
    for run_id, folder in legacy_runs(runs).items():
        locks.acquire(run_id)
        try:
            if not is_stored(runs, run_id):
                manifest, tables = _read_legacy(folder)
                write_run(runs, locks, run_id, manifest, tables)
                done.append(run_id)
            remove_run(folder, [])
        finally:
            locks.release(run_id)
    return done


def _read_legacy(folder: Path):
    import pandas as pd

    manifest = read_manifest(folder)
    if manifest.get("run_id", folder.name) != folder.name:
        raise RagBenchError(
            f"run {folder.name} cannot be upgraded: its manifest names another id",
            f"check {folder / LEGACY_MANIFEST} or remove the run with `rag-bench rm`",
        )
    try:
        tables = {t: pd.read_parquet(folder / f"{t}.parquet") for t in TABLES}
    except (OSError, ValueError) as exc:
        raise RagBenchError(
            f"run {folder.name} cannot be upgraded: {first_line(exc)}",
            f"remove the run with `rag-bench rm {folder.name} --yes`",
        ) from None
    manifest = {**manifest, "schema_version": SCHEMA_VERSION, "upgraded_from_schema": 1}
    return manifest, tables
