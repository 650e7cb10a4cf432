"""Run every benchmark in this folder, one after another: ``make bench``.

python benchmarks/run_all.py           # full size (10M run lines, 1M chunks, 20M metric rows)
python benchmarks/run_all.py --quick   # about 10x smaller data, for a fast check
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = (
    "bench_startup.py",
    "bench_eval.py",
    "bench_retrieval.py",
    "bench_end_to_end.py",
    "bench_store.py",
    "bench_compare.py",
    "bench_scaling.py",
    "bench_ann.py",  # 10^6 chunks: minutes of CPU for the HNSW builds
    "bench_embed.py",  # needs the models extra (make models)
    "bench_dense_memory.py",
    "bench_refuse.py",
    # judges × public human-labelled sets (README's last section); fetches the sets once
    "judge_table.py",
    "bench_llm.py",  # needs the llm extra (make llm)
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data, for a fast check")
    args = parser.parse_args()
    failed, seconds = [], {}
    for script in BENCHMARKS:
        print(f"== {script}", flush=True)
        command = [sys.executable, str(HERE / script)] + (["--quick"] if args.quick else [])
        started = time.perf_counter()
        if subprocess.run(command).returncode != 0:
            failed.append(script)
        seconds[script] = time.perf_counter() - started
    print("\n" + ", ".join(f"{name} {s:.0f} s" for name, s in seconds.items()), end="")
    print(f"; total {sum(seconds.values()):.0f} s")
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
