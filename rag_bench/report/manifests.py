"""Each run's manifest as one column of a table, the rows that differ between runs marked."""

from __future__ import annotations

import json

import pandas as pd

from rag_bench.data.selection import Selection
from rag_bench.runs import StoredRun

SELECTION_KEYS = tuple(Selection().record())  # tier, tag, sample, seed: as the manifest keeps them


def _component(config: dict) -> str:
    params = " ".join(f"{k}={v}" for k, v in config.items() if k != "name")
    return f"{config.get('name', '?')} {params}".strip()


def _manifest_fields(m: dict) -> dict[str, str]:
    dataset = m.get("dataset", {})
    selection = m.get("selection") or {}
    chosen = ", ".join(
        f"{k}={selection[k]}" for k in SELECTION_KEYS if selection.get(k) is not None
    )
    n_selected = len(selection.get("query_ids") or [])
    fields = {
        "run_id": m.get("run_id"),
        "variant": f"{m.get('variant')} ({m.get('variant_origin', '?')})",
        "created_at": m.get("created_at"),
        "duration_s": m.get("duration_s"),
        "status": m.get("status"),
        "dataset": f"{dataset.get('name')} ({dataset.get('n_docs')} docs, "
        f"{dataset.get('n_queries')} queries)",
        "dataset sha256": dataset.get("sha256"),
        "dataset path": dataset.get("path"),
        "selection": f"{n_selected} queries" + (f" ({chosen})" if chosen else ""),
        "ks": ", ".join(str(k) for k in m.get("ks", [])),
        "depth": m.get("depth"),
    }
    for slot, config in (m.get("params") or {}).items():
        fields[f"params.{slot}"] = _component(config)
    index = m.get("index") or {}
    if index:
        fields["index chunks"] = index.get("n_chunks")
    if index.get("recall"):  # an approximate index, checked against exact search
        checked = index["recall"]
        fields["index recall"] = (
            f"{checked['recall']:.4f} (recall@{checked['depth']} against exact search, "
            f"{checked['sample']} of {checked['of']} queries)"
        )
    if m.get("usage"):
        fields["usage"] = json.dumps(m["usage"], sort_keys=True)
    fields["rag_bench_version"] = m.get("rag_bench_version")
    fields["git_commit"] = m.get("git_commit")
    for package, version in (m.get("packages") or {}).items():
        fields[f"packages.{package}"] = version
    return {k: "" if v is None else str(v) for k, v in fields.items()}


def _field_rank(field: str) -> int:
    """Manifest rows in reading order: the run, its parameters, then software versions."""
    if field.startswith("params."):
        return 1
    if field in ("index chunks", "index recall", "usage"):
        return 2
    if field in ("rag_bench_version", "git_commit"):
        return 3
    return 4 if field.startswith("packages.") else 0


def manifest_table(runs: list[StoredRun], labels: dict[str, str]) -> pd.DataFrame:
    """One row per manifest field, one column per run; ``differs`` marks rows that vary."""
    per_run = [_manifest_fields(r.manifest) for r in runs]
    seen = list(dict.fromkeys(f for fields in per_run for f in fields))
    fields = sorted(seen, key=lambda f: (_field_rank(f), seen.index(f)))
    columns = {labels[r.run_id]: [p.get(f, "") for f in fields] for r, p in zip(runs, per_run)}
    table = pd.DataFrame({"field": fields, **columns})
    varies = table.drop(columns=["field"]).nunique(axis=1) > 1
    table["differs"] = varies & (table["field"] != "run_id")
    return table
