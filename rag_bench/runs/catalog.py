"""What a runs folder holds: committed runs (by manifest), their partitions, first-layout runs,
and each run read back: its manifest checked, its tables as pyarrow.

A run is listed when its manifest exists. One hostile file (a manifest nested too deep, of the
wrong types, truncated, with a newer schema; a Parquet part of the wrong columns) makes that run
*broken*: reported once with the reason, left out of every reader, and still removable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rag_bench.errors import RagBenchError, first_line
from rag_bench.runs.folder import RunsFolder
from rag_bench.runs.ids import is_run_id
from rag_bench.runs.layout import (
    LEGACY_MANIFEST,
    MANIFESTS,
    REPEAT,
    REPEATED,
    SCHEMA_VERSION,
    TABLES,
    RunLocation,
    file_schema,
    manifest_parts,
    partition_run_id,
)

# the manifest fields readers rely on, and the JSON types each may have
MANIFEST_FIELDS = {
    "variant": (str,),
    "created_at": (str,),
    "dataset": (dict,),
    "params": (dict,),
    "ks": (list,),
    "judge": (dict, type(None)),
    "status": (str,),
    "duration_s": (int, float, type(None)),
}
OUTSIDE = "rag-bench never follows one out of the runs folder"
DATASET_FIELDS = {"name": (str,), "sha256": (str,), "n_queries": (int,)}


@dataclass(frozen=True)
class StoredRun:
    """A committed, readable run: its id, where its files are, and its manifest."""

    run_id: str
    location: RunLocation
    manifest: dict = field(repr=False)

    @property
    def variant(self) -> str:
        return self.manifest.get("variant", "?")

    @property
    def dataset_sha256(self) -> str | None:
        return self.manifest.get("dataset", {}).get("sha256")

    @property
    def dataset_name(self) -> str | None:
        return self.manifest.get("dataset", {}).get("name")

    @property
    def created(self) -> tuple[str, str]:
        """The order of runs in time (ties broken by id)."""
        return (self.manifest.get("created_at", ""), self.run_id)

    @property
    def name(self) -> str | None:
        """The name it was given (``--name``, or a sweep point's parameters)."""
        name = self.manifest.get("name")
        return name if isinstance(name, str) and name else None

    @property
    def customised(self) -> list[str]:
        """How it departs from its variant's defaults on the full query set: its overrides,
        query selection and sweep point (empty for a default run)."""
        m = self.manifest
        selection = m.get("selection") or {}
        parts = [str(o) for o in m.get("overrides") or []]
        parts += [f"tier={selection['tier']}"] if selection.get("tier") else []
        parts += [f"tag={selection['tag']}"] if selection.get("tag") else []
        parts += [f"sample={selection['sample']}"] if selection.get("sample") else []
        parts += [str(p) for p in m.get("sweep") or [] if str(p) not in parts]
        return parts


@dataclass
class Catalog:
    """The runs of one folder: the readable ones and, apart, the broken ones with the reason
    (runs of the first layout among them, until they are upgraded)."""

    runs: list[StoredRun] = field(default_factory=list)
    broken: dict[str, RagBenchError] = field(default_factory=dict)
    removable: dict[str, RunLocation | Path] = field(default_factory=dict)


def find_run(
    runs: list[StoredRun], broken: dict[str, RagBenchError], ref: str, where: str
) -> StoredRun:
    """The run ``ref`` names among ``runs`` (of the folder ``where``): a full id, a name,
    ``latest``, ``latest:<variant>`` (its latest run with the variant's defaults on every
    query), ``latest:<variant>+`` (its latest run, however made) or a unique id prefix, each
    optionally followed by ``@<dataset>`` (a dataset's name, a unique prefix of one, or of its
    sha256) to look among the runs on that dataset only. A name given to several runs names
    the latest of them."""
    if ref in broken:
        raise broken[ref]
    if not runs:
        raise RagBenchError(
            f"no runs in {where}", "run `rag-bench run --variant …` first, or pass --runs-dir"
        )
    exact = [r for r in runs if r.run_id == ref] or [r for r in runs if r.name == ref]
    if exact:
        return max(exact, key=lambda r: r.created)
    plain, at, dataset = ref.rpartition("@") if "@" in ref else (ref, "", "")
    if at:
        runs, where = on_dataset(runs, dataset, where), f"{where} on dataset {dataset!r}"
    if plain == "latest" or plain.startswith("latest:"):
        return _latest(runs, plain.partition(":")[2], where, at + dataset)
    exact = [r for r in runs if r.run_id == plain] or [r for r in runs if r.name == plain]
    if exact:
        return max(exact, key=lambda r: r.created)
    matching = [r for r in runs if r.run_id.startswith(plain)]
    if len(matching) == 1:
        return matching[0]
    if not matching:
        raise RagBenchError(f"no run {ref!r} in {where}", "list the runs with `rag-bench runs`")
    names = ", ".join(r.run_id for r in matching[:10])
    raise RagBenchError(f"run id prefix {plain!r} is ambiguous: {names}", "give more of the id")


def on_dataset(runs: list[StoredRun], dataset: str, where: str) -> list[StoredRun]:
    """The runs made on ``dataset``: its name exactly, else the one dataset whose name (or
    sha256) starts with it."""
    names = sorted({r.dataset_name or "?" for r in runs})
    exact = [r for r in runs if r.dataset_name == dataset]
    if exact or not dataset:
        return exact
    by_name = {r.dataset_name for r in runs if (r.dataset_name or "").startswith(dataset)}
    by_sha = {r.dataset_sha256 for r in runs if (r.dataset_sha256 or "").startswith(dataset)}
    if len(by_name) == 1:
        return [r for r in runs if r.dataset_name in by_name]
    if len(by_sha) == 1 and len(dataset) >= 6:
        return [r for r in runs if r.dataset_sha256 in by_sha]
    if len(by_name) > 1:
        raise RagBenchError(
            f"dataset {dataset!r} is ambiguous in {where}: "
            f"{', '.join(sorted(n for n in by_name if n))}",
            "give more of the dataset's name",
        )
    raise RagBenchError(
        f"no run on dataset {dataset!r} in {where}", f"stored datasets: {', '.join(names)}"
    )


def _latest(runs: list[StoredRun], variant: str, where: str, qualifier: str) -> StoredRun:
    any_kind = variant.endswith("+")
    variant = variant.removesuffix("+")
    matching = [r for r in runs if not variant or r.variant == variant]
    if not matching:
        stored = ", ".join(sorted({r.variant for r in runs})) or "none"
        raise RagBenchError(
            f"no run of variant {variant!r} in {where}", f"stored variants: {stored}"
        )
    chosen = matching if any_kind or not variant else [r for r in matching if not r.customised]
    if not chosen:
        newest = max(matching, key=lambda r: r.created)
        raise RagBenchError(
            f"no run of variant {variant!r} with its defaults on every query in {where} "
            f"(the latest, {newest.run_id}, has {', '.join(newest.customised)})",
            f"name it by id or name, or take the latest of any kind: latest:{variant}+{qualifier}",
        )
    return max(chosen, key=lambda r: r.created)


def reference_on(run: StoredRun, dataset: str) -> str:
    """The reference to ``run``'s counterpart on ``dataset``: ``latest:<variant>@<dataset>``
    (with ``+`` when ``run`` departs from its variant's defaults)."""
    return f"latest:{run.variant}{'+' if run.customised else ''}@{dataset}"


def scan(folder: RunsFolder, upgrade_hint: str) -> Catalog:
    """Read every committed run's manifest and check its tables."""
    catalog = Catalog()
    folder.check()  # a missing bucket is a mistake, unlike a missing local folder
    if folder.local is not None and folder.local.exists() and not folder.local.is_dir():
        raise RagBenchError(f"the runs folder {folder} is a file", "name a folder or a URL")
    ids = committed_ids(folder)
    placed = None if folder.local is not None else partitions(folder)
    for run_id in ids:
        location = RunLocation(folder, run_id, None)
        catalog.removable[run_id] = location
        try:
            manifest = read_manifest(location)
            location = RunLocation(folder, run_id, manifest["variant"])
            _check_tables(location, placed)
        except RagBenchError as exc:
            catalog.broken[run_id] = exc
            continue
        except FileNotFoundError as exc:
            if not is_stored(folder, run_id):  # removed while this scan read it: not there
                del catalog.removable[run_id]
                continue
            reason = f"run {run_id} is unreadable: {first_line(exc)}"
            catalog.broken[run_id] = RagBenchError(reason, "remove it with `rag-bench rm --yes`")
            continue
        except (OSError, ValueError) as exc:
            reason = f"run {run_id} is unreadable: {first_line(exc)}"
            catalog.broken[run_id] = RagBenchError(reason, "remove it with `rag-bench rm --yes`")
            continue
        catalog.runs.append(StoredRun(run_id, location, manifest))
    for run_id, legacy in legacy_runs(folder).items():
        if run_id in ids:
            continue  # already rewritten; the old folder is a leftover of the upgrade
        catalog.removable[run_id] = legacy
        catalog.broken[run_id] = RagBenchError(
            f"run {run_id} is stored in the first layout ({legacy}), "
            "which this rag-bench does not read",
            f"rewrite the runs of that folder with {upgrade_hint}",
        )
    return catalog


def committed_ids(folder: RunsFolder) -> list[str]:
    """The ids of every committed run (one with a manifest), oldest first; a manifest whose
    name is not a valid run id is ignored (it cannot have been written by rag-bench)."""
    if folder.local is not None and (folder.local / MANIFESTS).is_symlink():
        raise RagBenchError(
            f"{folder.url(MANIFESTS)} is a symbolic link, not the folder of the run manifests "
            "(rag-bench never follows one out of the runs folder)",
            "move that link away",
        )
    if folder.local is not None and (folder.local / MANIFESTS).is_file():
        raise RagBenchError(
            f"{folder.url(MANIFESTS)} is a file, not the folder of the run manifests",
            "move that file away",
        )
    names = (
        e.name[: -len(".json")]
        for e in folder.list(MANIFESTS)
        if not e.is_dir and e.name.endswith(".json")
    )
    return sorted(name for name in names if is_run_id(name))


def is_stored(folder: RunsFolder, run_id: str) -> bool:
    """Whether ``run_id`` is committed (its manifest exists)."""
    return folder.exists(*manifest_parts(run_id))


def partitions(folder: RunsFolder) -> dict[str, list[tuple[str, ...]]]:
    """Every table partition in the folder, committed or not: run id -> partition path parts.
    Partitions whose folder name is no valid run id are left alone."""
    found: dict[str, list[tuple[str, ...]]] = {}
    for table in TABLES:
        for variant in folder.list(table):
            if not variant.is_dir or not variant.name.startswith("variant="):
                continue
            for run in folder.list(table, variant.name):
                run_id = partition_run_id(run.name) if run.is_dir else None
                if is_run_id(run_id):
                    found.setdefault(run_id, []).append((table, variant.name, run.name))
    return found


def legacy_runs(folder: RunsFolder) -> dict[str, Path]:
    """Runs stored in the first layout (``runs/<run_id>/manifest.json``): id -> folder."""
    if folder.local is None or not folder.local.is_dir():
        return {}
    return {
        p.name: p
        for p in sorted(folder.local.iterdir())
        if p.is_dir()
        and is_run_id(p.name)
        and not p.is_symlink()
        and not p.name.startswith("_")
        and p.name not in TABLES
        and (p / LEGACY_MANIFEST).is_file()
    }


def read_manifest(where: RunLocation | Path) -> dict:
    """The manifest of a run (or of a folder of the first layout), checked to be readable and
    to hold the fields readers use, of the right types."""
    if isinstance(where, RunLocation):
        name, shown = where.run_id, where.runs.url(*manifest_parts(where.run_id))
        if where.runs.symlink(*manifest_parts(where.run_id)):
            raise _unreadable(name, shown, f"it is a symbolic link: {OUTSIDE}")
        with where.runs.errors("cannot read"):
            reading = where.runs.read_bytes(*manifest_parts(where.run_id))
    else:
        name, shown = where.name, str(where / LEGACY_MANIFEST)
        reading = None
        legacy = where / LEGACY_MANIFEST
    try:
        data = reading if reading is not None else legacy.read_bytes()
        manifest = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else first_line(exc)
        raise _unreadable(name, shown, why) from None
    if not isinstance(manifest, dict):
        raise _unreadable(name, shown, "not a JSON object")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _unreadable(name, shown, f"schema_version {json.dumps(version)} is not a number")
    if version > SCHEMA_VERSION:
        raise RagBenchError(
            f"run {name} uses trace schema version {version}, "
            f"newer than this rag-bench reads ({SCHEMA_VERSION})",
            "upgrade rag-bench",
        )
    _check_fields(name, shown, manifest)
    return manifest


def _check_fields(name: str, shown: str, manifest: dict) -> None:
    if not manifest.get("variant") or not isinstance(manifest["variant"], str):
        raise _unreadable(name, shown, "it names no variant")
    for key, types in MANIFEST_FIELDS.items():
        if key in manifest and not isinstance(manifest[key], types):
            raise _unreadable(name, shown, f"{key} is a {type(manifest[key]).__name__}")
    for key, types in DATASET_FIELDS.items():
        value = manifest.get("dataset", {}).get(key)
        if value is not None and not isinstance(value, types):
            raise _unreadable(name, shown, f"dataset.{key} is a {type(value).__name__}")


def _unreadable(name: str, shown: str, why: str) -> RagBenchError:
    return RagBenchError(
        f"run {name} has an unreadable manifest ({why})", f"check {shown} or remove the run"
    )


def _check_tables(run: RunLocation, placed: dict | None) -> None:
    """Fail when a table of the run is missing, not Parquet or not of its columns: locally by
    reading each footer; remotely against one listing of the partitions."""
    import pyarrow.parquet as pq

    for table in TABLES:
        if placed is not None:
            if run.table_parts(table)[:3] not in placed.get(run.run_id, []):
                raise FileNotFoundError(f"{run.runs.url(*run.table_parts(table))} is missing")
            continue
        link = run.runs.symlink(*run.table_parts(table))
        if link is not None:
            raise RagBenchError(
                f"run {run.run_id} is not read: {link} is a symbolic link ({OUTSIDE})",
                "replace the link by the file, or remove the run with `rag-bench rm --yes`",
            )
        found = pq.read_schema(run.table_file(table))
        for column in file_schema(table):
            index = found.get_field_index(column.name)
            if index >= 0 and _kind(found.field(index).type) not in (_kind(column.type), "null"):
                raise ValueError(
                    f"{run.runs.url(*run.table_parts(table))}: column {column.name} is "
                    f"{found.field(index).type}, not {column.type}"
                )


def _kind(arrow_type) -> str:
    """What a column holds, as far as a reader cares: text, number, flag, list or null (a
    file written by another tool may use large strings or other widths of numbers)."""
    import pyarrow.types as t

    checks = (
        ("text", t.is_string(arrow_type) or t.is_large_string(arrow_type)),
        ("number", t.is_integer(arrow_type) or t.is_floating(arrow_type)),
        ("flag", t.is_boolean(arrow_type)),
        ("list", t.is_list(arrow_type) or t.is_large_list(arrow_type)),
        ("null", t.is_null(arrow_type)),
    )
    return next((kind for kind, matches in checks if matches), str(arrow_type))


def read_table(run: RunLocation, table: str):
    """One trace table of one run (pyarrow) in the store's schema (a file written by another
    tool may hold other widths of the same types), ``run_id`` and ``variant`` columns first."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with run.runs.errors("cannot read"):
        data = pq.read_table(
            run.table_file(table),
            filesystem=run.runs.fs,
            partitioning=None,
            schema=file_schema(table),
        )
    if table in REPEATED:  # a file written before repeats existed: every row is repeat 0
        at = data.schema.get_field_index(REPEAT)
        data = data.set_column(at, REPEAT, pc.fill_null(data.column(at), 0))
    data = data.add_column(0, "run_id", pa.array([run.run_id] * data.num_rows, pa.string()))
    return data.add_column(1, "variant", pa.array([run.variant] * data.num_rows, pa.string()))
