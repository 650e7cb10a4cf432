"""Importing a system's outputs, and scoring a service through the ``http`` variant, against
running a pipeline on the same data: the 275 queries of kestrel-kb, the baseline variant run
(index cached, as a second run finds it); the same run's outputs exported and imported
(recorded retriever and passages, the same judge and metrics); and those outputs served by a
local HTTP service (127.0.0.1) that the ``http`` variant scores, timed on a rerun whose every
request the reply cache answers (0 requests sent). The ratios import / run and http rerun /
run are what issue 28 asks to keep within 2.

    python benchmarks/bench_import.py [--rounds 3]

Writes benchmarks/results/import.json; each timing is the median of the rounds, alternating
run, import and http rerun so a change of load hits them alike. Wall time (``*_s``) and this
process's CPU time (``*_cpu_s``: the service's threads send nothing on a rerun) are both kept.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from common import RESULTS_DIR, machine, source, write_results

from rag_bench.analysis.export import outputs_records, passage_texts
from rag_bench.data.dataset import load_dataset
from rag_bench.experiment.importer import import_outputs
from rag_bench.experiment.runner import run_variant
from rag_bench.runs import open_runs


def serve(records: list[dict]) -> tuple[ThreadingHTTPServer, list[int]]:
    """A service on 127.0.0.1 answering each POSTed query with its recorded documents and
    answer (the ``http`` variant's default reply fields); the requests it got, counted."""
    replies = {
        r["query_id"]: json.dumps(
            {
                "answer": r["answer"],
                "documents": [{"id": i["doc_id"], "score": i["score"]} for i in r["retrieved"]],
            }
        ).encode()
        for r in records
    }
    asked = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            asked[0] += 1
            data = replies[body["query_id"]]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, asked


def timed(work: Callable[..., object], *args, **kwargs) -> tuple[float, float]:
    """Wall and CPU seconds of ``work(*args, **kwargs)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    work(*args, **kwargs)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = load_dataset("kestrel-kb")
    with tempfile.TemporaryDirectory() as tmp:
        folder, cache = Path(tmp), Path(tmp) / "cache"
        os.environ["RAG_BENCH_CACHE_DIR"] = str(folder / "replies")  # the http reply cache
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
        server, asked = serve(records)
        os.environ["RAG_SYSTEM_URL"] = f"http://127.0.0.1:{server.server_address[1]}/ask"
        os.environ["RAG_SYSTEM_API_KEY"] = "sk-bench"
        http_first = timed(run_variant, "http", data, runs_dir=folder / "h", cache_dir=cache)
        sent = asked[0]
        timings: dict[str, list[tuple[float, float]]] = {"run": [], "import": [], "http": []}
        for n in range(args.rounds):
            timings["run"].append(
                timed(run_variant, "baseline", data, runs_dir=folder / f"run{n}", cache_dir=cache)
            )
            timings["import"].append(
                timed(import_outputs, outputs, data, name="system", runs_dir=folder / f"imp{n}",
                      cache_dir=cache)
            )  # fmt: skip
            timings["http"].append(
                timed(run_variant, "http", data, runs_dir=folder / f"http{n}", cache_dir=cache)
            )
        server.shutdown()
        resent = asked[0] - sent
    if resent:
        raise SystemExit(f"the http reruns sent {resent} requests; the reply cache missed")
    wall = {k: statistics.median(t[0] for t in v) for k, v in timings.items()}
    cpu = {k: statistics.median(t[1] for t in v) for k, v in timings.items()}
    result = {
        "what": "import of 275 outputs, and an http rerun (0 requests) of a service serving them,"
        " vs a baseline pipeline run on kestrel-kb (in-process)",
        "machine": machine(),
        "source": source(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "rounds": args.rounds,
        "run_s": round(wall["run"], 3),
        "import_s": round(wall["import"], 3),
        "http_rerun_s": round(wall["http"], 3),
        "import_over_run": round(wall["import"] / wall["run"], 2),
        "http_rerun_over_run": round(wall["http"] / wall["run"], 2),
        "run_cpu_s": round(cpu["run"], 3),
        "import_cpu_s": round(cpu["import"], 3),
        "http_rerun_cpu_s": round(cpu["http"], 3),
        "import_over_run_cpu": round(cpu["import"] / cpu["run"], 2),
        "http_rerun_over_run_cpu": round(cpu["http"] / cpu["run"], 2),
        "http_first_s": round(http_first[0], 3),
        "http_first_cpu_s": round(http_first[1], 3),
        "http_first_requests": sent,
        "runs_s": [round(t[0], 3) for t in timings["run"]],
        "imports_s": [round(t[0], 3) for t in timings["import"]],
        "http_reruns_s": [round(t[0], 3) for t in timings["http"]],
    }
    write_results(result, RESULTS_DIR / "import.json")
    print(
        f"run {wall['run']:.2f} s, import {wall['import']:.2f} s, http rerun {wall['http']:.2f} s:"
        f" import / run = {result['import_over_run']}, http rerun / run ="
        f" {result['http_rerun_over_run']} (CPU: {result['import_over_run_cpu']},"
        f" {result['http_rerun_over_run_cpu']})"
    )


if __name__ == "__main__":
    main()
