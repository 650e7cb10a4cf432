"""Start-up: how long ``import rag_bench`` and ``rag-bench --help`` take next to a bare Python.

Three commands, each in a new process, with this interpreter (the one rag-bench is installed
in, so all three pay the same site-packages start-up):

- ``python -c pass``: the interpreter alone, the floor;
- ``python -c "import rag_bench"``: the package, whose public names load on first use;
- ``rag-bench --help``: the command line's entry point, every command's options included.

Each runs in the system's temporary folder, outside the checkout. After one warm-up of each
(filling the OS file cache), ``--repeat`` rounds run the three one after another, so a burst of
load from other processes hits all three alike. The table shows the median wall time and CPU
time (user + system, which other processes disturb less) of each, and each median over that of
``python -c pass``.

    python benchmarks/bench_startup.py
    python benchmarks/bench_startup.py --quick     # 5 rounds instead of 30
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import common

ENTRY_POINT = Path(sys.executable).with_name("rag-bench")
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import rag_bench'": [sys.executable, "-c", "import rag_bench"],
    "rag-bench --help": [str(ENTRY_POINT), "--help"],
}
FLOOR = "python -c pass"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30, help="rounds measured (default 30)")
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--json", type=Path, default=None, help="results file")
    return parser.parse_args()


def measure_once(name: str) -> dict:
    # from a folder outside the checkout, so that `import rag_bench` finds the installed package
    done = common.run_measured(COMMANDS[name], cwd=Path(tempfile.gettempdir()))
    if done["returncode"] != 0:
        raise RuntimeError(f"{name} failed (exit {done['returncode']}):\n{done['output']}")
    return done


def benchmark(rounds: int) -> dict[str, dict]:
    """Median wall and CPU seconds of each command over ``rounds`` interleaved rounds."""
    for name in COMMANDS:
        measure_once(name)  # warm-up
    samples: dict[str, list[dict]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name in COMMANDS:
            samples[name].append(measure_once(name))
    cases = {
        name: {
            "wall_s": common.median_of(runs, "wall_s"),
            "cpu_s": common.median_of(runs, "cpu_s"),
            "peak_mib": common.median_of(runs, "peak_mib"),
            "runs": len(runs),
        }
        for name, runs in samples.items()
    }
    floor = cases[FLOOR]
    for case in cases.values():
        case["wall_vs_python"] = case["wall_s"] / floor["wall_s"]
        case["cpu_vs_python"] = case["cpu_s"] / floor["cpu_s"]
    return cases


def report(results: dict, path: Path) -> None:
    rows = [{"command": name, **case} for name, case in results["cases"].items()]
    columns = [
        ("command", "command", "s"),
        ("wall_s", "wall s", ".3f"),
        ("wall_vs_python", "vs python", "x"),
        ("cpu_s", "cpu s", ".3f"),
        ("cpu_vs_python", "vs python", "x"),
        ("peak_mib", "peak MiB", ".0f"),
    ]
    print(common.describe(results))
    print(f"median of {results['repeat']} interleaved rounds after a warm-up\n")
    print(common.table(rows, columns))
    common.write_results(results, path)


def main() -> int:
    args = parse_args()
    rounds = 5 if args.quick else args.repeat
    if not ENTRY_POINT.exists():
        print(f"no {ENTRY_POINT}: install rag-bench into this interpreter's environment")
        return 1
    load_before = common.load_average()
    started = time.perf_counter()
    results = {"benchmark": "startup", "quick": args.quick, "repeat": rounds}
    results["cases"] = benchmark(rounds)
    results |= {
        "seconds": time.perf_counter() - started,
        "load_average_1min": {"before": load_before, "after": common.load_average()},
        "machine": common.machine(),
        "source": common.source(),
    }
    default = common.RESULTS_DIR / ("startup-quick.json" if args.quick else "startup.json")
    report(results, args.json or default)
    return 0


if __name__ == "__main__":
    sys.exit(main())
