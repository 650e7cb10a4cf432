"""Whether compared runs were scored on the same qrels: a run's manifest names the qrels
version it was scored on (``qrels.sha256``), and two runs scored on different judgements differ
by the judgements as well as by the systems."""

from __future__ import annotations

from collections.abc import Sequence

from rag_bench.runs import StoredRun


def _shown(record: dict) -> str:
    version = record.get("version")
    label = f"version {version}" if version not in (None, "base", "file") else str(version)
    return f"{label} {str(record.get('sha256'))[:12]}"


def qrels_differ(runs: Sequence[StoredRun]) -> list[str]:
    """A warning per run after the first whose qrels are not the first run's (runs stored
    before manifests named their qrels say nothing either way)."""
    base = runs[0].manifest.get("qrels") if runs else None
    if not base:
        return []
    out = []
    for run in runs[1:]:
        other = run.manifest.get("qrels")
        if other and other.get("sha256") != base.get("sha256"):
            out.append(
                f"{runs[0].run_id} was scored on qrels {_shown(base)} and {run.run_id} on "
                f"{_shown(other)}: the comparison is partly about the judgements "
                f"(rescore one on the other's: rag-bench rescore {run.run_id} --qrels "
                f"{str(base.get('sha256'))[:12]})"
            )
    return out
