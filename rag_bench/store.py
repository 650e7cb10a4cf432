"""The run store: ``runs/<run_id>/`` with a manifest and one Parquet file per trace table.

A run is written into a hidden temporary folder and renamed into place only when complete,
so a crash or Ctrl-C never leaves a visible partial run. Run ids sort by time and read well:
``20261129-195012-hybrid_rerank-3f2a``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

import pandas as pd

from rag_bench.errors import RagBenchError

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"


def default_runs_dir() -> Path:
    return Path(os.environ.get("RAG_BENCH_RUNS_DIR", Path.cwd() / "runs"))


def _schemas():
    import pyarrow as pa

    latency = [
        (f"latency_ms_{s}", pa.float64())
        for s in ("retrieve", "fusion", "rerank", "generate", "judge", "total")
    ]
    return {
        "queries": pa.schema(
            [
                ("run_id", pa.string()),
                ("query_id", pa.string()),
                ("category", pa.string()),
                ("tags", pa.list_(pa.string())),
                ("should_refuse", pa.bool_()),
                ("query", pa.string()),
                ("answer", pa.string()),
                ("refused", pa.bool_()),
                ("failure_class", pa.string()),
                ("n_relevant", pa.int64()),
                *latency,
            ]
        ),
        "metrics": pa.schema(
            [
                ("run_id", pa.string()),
                ("query_id", pa.string()),
                ("category", pa.string()),
                ("metric", pa.string()),
                ("value", pa.float64()),
                ("status", pa.string()),
            ]
        ),
        "retrieved": pa.schema(
            [
                ("run_id", pa.string()),
                ("query_id", pa.string()),
                ("stage", pa.string()),
                ("rank", pa.int32()),
                ("chunk_id", pa.string()),
                ("doc_id", pa.string()),
                ("score", pa.float64()),
                ("relevance", pa.int32()),
            ]
        ),
        "claims": pa.schema(
            [
                ("run_id", pa.string()),
                ("query_id", pa.string()),
                ("claim_id", pa.int32()),
                ("text", pa.string()),
                ("citations", pa.list_(pa.string())),
                ("supported", pa.bool_()),
                ("support_grade", pa.int32()),
                ("supported_by", pa.list_(pa.string())),
                ("judge", pa.string()),
                ("reason", pa.string()),
            ]
        ),
    }


TABLES = ("queries", "metrics", "retrieved", "claims")


def new_run_id(variant: str, created: datetime) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", variant).strip("-") or "run"
    return f"{created:%Y%m%d-%H%M%S}-{slug}-{secrets.token_hex(2)}"


def reserve_run_id(runs_dir: Path, variant: str, created: datetime) -> str:
    """A run id no other process holds: claimed by creating a lock file exclusively."""
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RagBenchError(
            f"cannot create the runs folder {runs_dir}: {exc.strerror}",
            "pass a writable --runs-dir",
        ) from None
    for _ in range(100):
        run_id = new_run_id(variant, created)
        try:
            fd = os.open(runs_dir / f".{run_id}.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        except OSError as exc:
            raise RagBenchError(
                f"cannot write to the runs folder {runs_dir}: {exc.strerror}",
                "pass a writable --runs-dir",
            ) from None
        os.close(fd)
        if not (runs_dir / run_id).exists():
            return run_id
        os.unlink(runs_dir / f".{run_id}.lock")
    raise RagBenchError(f"could not find a free run id in {runs_dir}", "retry in a second")


def write_run(runs_dir: Path, run_id: str, manifest: dict, tables: dict[str, pd.DataFrame]) -> Path:
    """Write a complete run folder atomically and release the run id's lock."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schemas = _schemas()
    final = runs_dir / run_id
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{run_id}-", dir=runs_dir))
    try:
        for name in TABLES:
            frame = tables.get(name, pd.DataFrame(columns=schemas[name].names))
            table = pa.Table.from_pandas(
                frame[schemas[name].names], schema=schemas[name], preserve_index=False
            )
            pq.write_table(table, staging / f"{name}.parquet")
        (staging / MANIFEST).write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n"
        )
        os.rename(staging, final)
    except OSError as exc:
        raise RagBenchError(
            f"could not write run {run_id} to {runs_dir}: {exc.strerror}",
            "free disk space or pass another --runs-dir",
        ) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        lock = runs_dir / f".{run_id}.lock"
        if lock.exists():
            lock.unlink()
    return final


def run_folders(runs_dir: Path) -> list[Path]:
    """Every stored run folder, oldest first (hidden staging folders and locks excluded)."""
    if not runs_dir.is_dir():
        return []
    return sorted(p for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith("."))


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RagBenchError(
            f"run {folder.name} has an unreadable manifest ({exc})",
            f"check {path} or remove the run",
        ) from None
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RagBenchError(
            f"run {folder.name} uses trace schema version {version}, "
            f"newer than this rag-bench reads ({SCHEMA_VERSION})",
            "upgrade rag-bench",
        )
    return manifest


def remove_run(folder: Path) -> None:
    """Delete a run: hide it first (one rename), then remove the files."""
    hidden = folder.parent / f".rm-{folder.name}-{secrets.token_hex(2)}"
    os.rename(folder, hidden)
    shutil.rmtree(hidden)
