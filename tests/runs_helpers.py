"""Test helpers over the run store's layout: find, copy and edit stored runs the way a person
with a file browser (or a broken disk) would."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from rag_bench.runs.store import (
    MANIFESTS,
    TABLES,
    RunLocation,
    locate,
    read_table,
    runs_folder,
)

__all__ = ["copy_run", "locate", "manifest_file", "read_table", "table_file", "write_table"]


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
    override the copied manifest's."""
    new_id = new_id or run.run_id
    target = RunLocation(runs_folder(Path(runs)), new_id, run.variant)
    for table in TABLES:
        write_table(target, table, read_table(run, table))
    content = json.loads(manifest_file(Path(run.runs.root), run.run_id).read_text())
    content.update(run_id=new_id, **manifest)
    path = manifest_file(runs, new_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    return target


def fingerprint(folder: Path) -> str:
    """A hash of every path and file under ``folder``: equal exactly when nothing changed."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()
