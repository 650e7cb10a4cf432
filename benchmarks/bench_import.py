"""Importing a system's outputs against running a pipeline on the same data: the 275 queries
of kestrel-kb, the baseline variant run (index cached, as a second run finds it) and the same
run's outputs exported and imported (recorded retriever and passages, the same judge and
metrics). The ratio import / run is what issue 28 asks to keep within 2.

    python benchmarks/bench_import.py [--rounds 3]

Writes benchmarks/results/import.json; each timing is the median of the rounds, alternating
run and import so a change of load hits both alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from common import RESULTS_DIR, machine, source, write_results

from rag_bench.analysis.export import outputs_records, passage_texts
from rag_bench.data.dataset import load_dataset
from rag_bench.experiment.importer import import_outputs
from rag_bench.experiment.runner import run_variant
from rag_bench.runs import open_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = load_dataset("kestrel-kb")
    with tempfile.TemporaryDirectory() as tmp:
        folder, cache = Path(tmp), Path(tmp) / "cache"
        first = run_variant("baseline", data, runs_dir=folder / "warm", cache_dir=cache)
        store = open_runs(folder / "warm")
        records = outputs_records(
            first.manifest,
            store.queries([first.run_id]),
            store.retrieved([first.run_id]),
            passage_texts(first.manifest, data),
        )
        outputs = folder / "outputs.jsonl"
        outputs.write_text("".join(json.dumps(r) + "\n" for r in records))
        runs, imports = [], []
        for n in range(args.rounds):
            started = time.perf_counter()
            run_variant("baseline", data, runs_dir=folder / f"run{n}", cache_dir=cache)
            runs.append(time.perf_counter() - started)
            started = time.perf_counter()
            import_outputs(
                outputs, data, name="system", runs_dir=folder / f"imp{n}", cache_dir=cache
            )
            imports.append(time.perf_counter() - started)
    run_s, import_s = statistics.median(runs), statistics.median(imports)
    result = {
        "what": "import of 275 outputs vs a baseline pipeline run on kestrel-kb (in-process)",
        "machine": machine(),
        "source": source(),
        "rounds": args.rounds,
        "run_s": round(run_s, 3),
        "import_s": round(import_s, 3),
        "import_over_run": round(import_s / run_s, 2),
        "runs_s": [round(t, 3) for t in runs],
        "imports_s": [round(t, 3) for t in imports],
    }
    write_results(result, RESULTS_DIR / "import.json")
    print(f"run {run_s:.2f} s, import {import_s:.2f} s: import / run = {import_s / run_s:.2f}")


if __name__ == "__main__":
    main()
