"""Refusing a hostile file costs no more than reading a valid one of the same size.

A run file that is one long line (no newline anywhere: a binary, a minified JSON, a file joined by
mistake) must be refused in time linear in its size, like any file rag-bench reads. This compares,
in one process and on files of the same size generated here:

- ``rag-bench parse``: ``load_run`` of a valid TREC run file (the yardstick);
- ``rag-bench refuse``: ``load_run`` of a file that is one line of the same size, refused with the
  file and line named;
- ``pandas read_csv``: pandas reading the valid file as space-separated columns (a named peer).

Each is timed ``--repeat`` times after a warm-up; the table gives the median and each median over
rag-bench's parse of the valid file.

    python benchmarks/bench_refuse.py              # 50 MB files
    python benchmarks/bench_refuse.py --quick      # 5 MB files
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import common
import pandas as pd

from rag_bench.data.rankings import load_run
from rag_bench.errors import DataError


def write_files(folder: Path, size: int) -> tuple[Path, Path]:
    """A valid run file and a one-line file, both ``size`` bytes (the valid one to the end of its
    last whole line)."""
    lines = "".join(f"q{i // 100} Q0 d{i} {i % 100 + 1} 0.5 t\n" for i in range(size // 20))
    valid = folder / "valid.txt"
    valid.write_text(lines[: lines.rindex("\n", 0, size) + 1])
    words = " ".join(f"x{i}" for i in range(size // 6))
    one_line = folder / "one-line.txt"
    one_line.write_text(words[: valid.stat().st_size])
    return valid, one_line


def refuse(path: Path) -> None:
    try:
        load_run(path)
    except DataError as error:
        if f"{path.name}:1" not in str(error):
            raise RuntimeError(f"refused without naming the line: {error}") from error
        return
    raise RuntimeError(f"{path} was accepted")


def timed(call, repeat: int) -> float:
    call()  # warm-up
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def benchmark(size: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        valid, one_line = write_files(Path(folder), size)
        cases = {
            "rag-bench parse (valid file)": timed(lambda: load_run(valid), repeat),
            "rag-bench refuse (one line)": timed(lambda: refuse(one_line), repeat),
            "pandas read_csv (valid file)": timed(
                lambda: pd.read_csv(valid, sep=" ", header=None), repeat
            ),
        }
        sizes = {
            "valid_mb": valid.stat().st_size / 1e6,
            "one_line_mb": one_line.stat().st_size / 1e6,
        }
    yardstick = cases["rag-bench parse (valid file)"]
    return {
        "sizes": sizes,
        "cases": {name: {"seconds": s, "vs_parse": s / yardstick} for name, s in cases.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 MB files")
    parser.add_argument("--repeat", type=int, default=3, help="timed repeats (default 3)")
    args = parser.parse_args()
    load_before = common.load_average()
    results = {"benchmark": "refuse", "quick": args.quick, "repeat": args.repeat}
    results |= benchmark(5_000_000 if args.quick else 50_000_000, args.repeat)
    results |= {
        "load_average_1min": {"before": load_before, "after": common.load_average()},
        "machine": common.machine(),
        "source": common.source(),
    }
    print(common.describe(results))
    sizes = results["sizes"]
    print(f"valid file {sizes['valid_mb']:.1f} MB, one-line file {sizes['one_line_mb']:.1f} MB\n")
    rows = [{"case": name, **case} for name, case in results["cases"].items()]
    columns = [("case", "case", "s"), ("seconds", "seconds", ".3f"), ("vs_parse", "vs parse", "x")]
    print(common.table(rows, columns))
    name = "refuse-quick.json" if args.quick else "refuse.json"
    common.write_results(results, common.RESULTS_DIR / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
