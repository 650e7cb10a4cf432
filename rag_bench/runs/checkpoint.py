"""Checkpoints: the answered queries of a run in progress, kept so an interrupted run resumes.

A checkpoint lives in ``.partial-<run_id>/`` of the runs folder's bookkeeping folder (for a
remote runs folder: its local one). ``checkpoint.json`` says what the run is (variant, resolved
parameters, dataset hash, selection, cutoffs); each block of answered queries is appended as a
new JSONL file ``answers-<n>.jsonl``, written atomically, so a block is there whole or not at
all; ``progress.json`` carries the time spent and the components' usage so far. Entries are
keyed by query id and by a hash of what the answer was computed from, so an entry whose inputs
changed is not reused. The run id a checkpoint names must be the one of its folder and obey
the run-id grammar: a forged checkpoint cannot point a resume outside the runs folder. Nor can
a symbolic link: a checkpoint folder that is one is refused, and its files are read without
following links (a linked answers file is skipped, its queries recomputed).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from rag_bench.errors import RagBenchError
from rag_bench.io.durable import atomic_write, read_no_follow
from rag_bench.io.jsonl import finite
from rag_bench.runs.catalog import committed_ids
from rag_bench.runs.commit import write_error
from rag_bench.runs.folder import RunsFolder
from rag_bench.runs.ids import is_run_id
from rag_bench.runs.layout import CHECKPOINT, PARTIAL, PROGRESS, partial_name


class Checkpoint:
    """The answered queries of one run in progress, in ``folder`` of the runs folder ``runs``."""

    def __init__(self, folder: Path, header: dict[str, Any], runs: RunsFolder):
        self.folder = folder
        self.runs = runs
        self.header = header
        self.entries: dict[str, dict] = {}
        self.progress: dict[str, Any] = {}
        self.blocks = 0

    @property
    def run_id(self) -> str:
        return self.header["run_id"]

    def __len__(self) -> int:
        return len(self.entries)

    def _fail(self, exc: OSError) -> RagBenchError:
        return write_error(f"could not checkpoint run {self.run_id} in", self.runs, exc)

    @classmethod
    def create(cls, runs: RunsFolder, run_id: str, header: dict[str, Any]) -> Checkpoint:
        folder = runs.bookkeeping / partial_name(run_id)
        checkpoint = cls(folder, {**header, "run_id": run_id}, runs)
        try:
            folder.mkdir(exist_ok=False)
            data = json.dumps(checkpoint.header, indent=1, ensure_ascii=False, default=str)
            atomic_write(folder / CHECKPOINT, data.encode())
        except OSError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise checkpoint._fail(exc) from None
        return checkpoint

    @classmethod
    def open(cls, folder: Path, runs: RunsFolder) -> Checkpoint:
        """Read a checkpoint folder; unreadable answer files are skipped (recomputed)."""
        if folder.is_symlink():
            raise _unreadable(folder, "it is a symbolic link, which rag-bench never makes")
        try:
            header = json.loads(read_no_follow(folder / CHECKPOINT).decode("utf-8"))
            if not isinstance(header, dict) or "run_id" not in header:
                raise ValueError("no run_id")
        except (OSError, ValueError, RecursionError) as exc:
            raise _unreadable(folder, exc) from None
        if not is_run_id(header["run_id"]) or folder.name != partial_name(header["run_id"]):
            raise _unreadable(folder, f"it names the run id {str(header['run_id'])[:80]!r}")
        checkpoint = cls(folder, header, runs)
        for path in sorted(folder.glob("answers-*.jsonl")):
            checkpoint.blocks += 1
            for record in _records(path):
                if isinstance(record, dict) and isinstance(record.get("query_id"), str):
                    checkpoint.entries[record["query_id"]] = record
        try:
            progress = json.loads(read_no_follow(folder / PROGRESS).decode("utf-8"))
            checkpoint.progress = progress if isinstance(progress, dict) else {}
        except (OSError, ValueError, RecursionError):
            checkpoint.progress = {}
        return checkpoint

    def reread(self) -> Checkpoint:
        """The checkpoint as it is on disk now (after taking the run's lock)."""
        return Checkpoint.open(self.folder, self.runs)

    def lookup(self, query_id: str, key: str) -> dict | None:
        entry = self.entries.get(query_id)
        return entry if entry is not None and entry.get("key") == key else None

    def save(self, records: list[dict], progress: dict[str, Any]) -> None:
        """Append one block of answered queries (atomically), then the progress so far."""
        try:
            if records:
                self.blocks += 1
                lines = "".join(
                    json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records
                )
                atomic_write(self.folder / f"answers-{self.blocks:06d}.jsonl", lines.encode())
            data = json.dumps(finite(progress), ensure_ascii=False, default=str)
            atomic_write(self.folder / PROGRESS, data.encode())
        except OSError as exc:
            raise self._fail(exc) from None
        for record in records:
            self.entries[record["query_id"]] = record
        self.progress = progress

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _records(path: Path) -> list:
    try:
        lines = read_no_follow(path).decode("utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError, RecursionError):
        return []


def _unreadable(folder: Path, why: object) -> RagBenchError:
    return RagBenchError(
        f"the checkpoint {folder} is unreadable ({why})", "start the run again without --resume"
    )


def find_checkpoint(runs: RunsFolder, ref: str) -> Checkpoint:
    """The checkpoint of an interrupted run in ``runs`` by id or unique id prefix."""
    local = runs.bookkeeping
    partials = {}
    if local.is_dir():
        partials = {
            p.name[len(PARTIAL) :]: p
            for p in local.iterdir()
            if p.name.startswith(PARTIAL) and (p / CHECKPOINT).is_file()
        }
    matching = [r for r in partials if r == ref] or [r for r in partials if r.startswith(ref)]
    if len(matching) == 1:
        return Checkpoint.open(partials[matching[0]], runs)
    if len(matching) > 1:
        raise RagBenchError(
            f"run id prefix {ref!r} matches several interrupted runs: "
            + ", ".join(sorted(matching)[:10]),
            "give more of the id",
        )
    stored = [r for r in committed_ids(runs) if r == ref or r.startswith(ref)]
    if stored:
        raise RagBenchError(
            f"run {stored[0]} is complete: there is nothing to resume",
            f"see it with `rag-bench show {stored[0]}`",
        )
    resumable = ", ".join(sorted(partials)) or "none"
    raise RagBenchError(
        f"no interrupted run {ref!r} in {runs}",
        f"interrupted runs there: {resumable}; pass --runs-dir if it is elsewhere",
    )
