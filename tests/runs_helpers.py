"""Test helpers over the run store's layout: find, copy and edit stored runs the way a person
with a file browser (or a broken disk) would."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from rag_bench.runs import TABLES, RunLocation, open_runs
from rag_bench.runs.catalog import committed_ids as _committed_ids
from rag_bench.runs.catalog import partitions as _partitions
from rag_bench.runs.catalog import read_table as _read_table
from rag_bench.runs.layout import MANIFESTS

__all__ = [
    "committed_ids",
    "copy_run",
    "locate",
    "manifest_file",
    "partitions",
    "read_table",
    "table_file",
    "write_table",
]


def committed_ids(runs) -> list[str]:
    """The ids of the runs committed in ``runs`` (a path, URL or store), oldest first."""
    return _committed_ids(open_runs(runs).folder)


def partitions(runs) -> dict[str, list[tuple[str, ...]]]:
    """Every table partition in ``runs``, committed or not: run id -> path parts."""
    return _partitions(open_runs(runs).folder)


def locate(runs, run_id: str) -> RunLocation:
    """Where the committed run ``run_id`` of ``runs`` is."""
    return open_runs(runs).get(run_id).location


def read_table(run: RunLocation, table: str) -> pd.DataFrame:
    """One table of one run as written: its ``run_id`` column first (no ``variant``)."""
    return _read_table(run, table).drop_columns(["variant"]).to_pandas()


def manifest_file(runs: Path, run_id: str) -> Path:
    return Path(runs) / MANIFESTS / f"{run_id}.json"


def table_file(run: RunLocation, table: str) -> Path:
    return Path(run.table_file(table))


def write_table(run: RunLocation, table: str, frame: pd.DataFrame) -> None:
    """Replace one table of a stored run (the run_id column is the partition's, not the file's)."""
    path = table_file(run, table)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.drop(columns=["run_id"], errors="ignore").to_parquet(path, index=False)


def copy_run(run: RunLocation, runs: Path, new_id: str | None = None, **manifest) -> RunLocation:
    """A copy of a stored run in ``runs`` (under ``new_id``), manifest last; ``manifest`` entries
    override the copied manifest's (a new ``variant`` also moves the tables' partitions)."""
    new_id = new_id or run.run_id
    variant = manifest.get("variant", run.variant)
    target = RunLocation(open_runs(Path(runs)).folder, new_id, variant)
    for table in TABLES:
        write_table(target, table, read_table(run, table))
    content = json.loads(manifest_file(Path(run.runs.root), run.run_id).read_text())
    content.update(run_id=new_id, **manifest)
    path = manifest_file(runs, new_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    return target


def fingerprint(folder: Path, mtimes: bool = False) -> str:
    """A hash of every path and file under ``folder`` (and, with ``mtimes``, of every file's
    modification time, so that a file rewritten with the same bytes counts as changed): equal
    exactly when nothing changed."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
            if mtimes:
                digest.update(str(path.stat().st_mtime_ns).encode())
    return digest.hexdigest()
