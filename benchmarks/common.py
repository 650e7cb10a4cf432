"""What the benchmarks of this folder share: the machine description, child processes measured
with their own peak memory, medians, and writing the results file."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
RESULT_MARK = "BENCH-RESULT "
BASE_PACKAGES = ("rag-bench", "numpy", "pandas", "pyarrow", "duckdb")


def versions(distributions) -> dict[str, str | None]:
    out = {}
    for dist in distributions:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def machine(packages=()) -> dict:
    """Cores, CPU model, memory, Python and package versions."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    models = [
        line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if "model name" in line
    ]
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cores": os.cpu_count(),
        "cpu": models[0] if models else platform.processor(),
        "memory_gib": round(memory, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions([*BASE_PACKAGES, *packages]),
    }


def source() -> dict:
    """The commit of the rag-bench checkout measured, and whether rag_bench/ had local edits."""
    repo = HERE.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "dirty": bool(git("status", "--porcelain", "--", "rag_bench")),
    }


def describe(results: dict) -> str:
    """The header lines every benchmark prints: checkout, machine, load."""
    info, code = results["machine"], results["source"]
    load = results["load_average_1min"]
    lines = [
        f"rag-bench at {code['commit']}" + (" with local edits" if code["dirty"] else ""),
        f"machine: {info['cores']} cores, {info['cpu']}, {info['memory_gib']} GiB,",
        f"  Python {info['python']}, " + ", ".join(f"{k} {v}" for k, v in info["packages"].items()),
        f"load average (1 min) before/after: {load['before']:.2f}/{load['after']:.2f}"
        + (" (other processes were busy: timings are noisy)" if load["before"] > 0.5 else ""),
    ]
    return "\n".join(lines)


def run_measured(command: list[str], env: dict | None = None, cwd: Path | None = None) -> dict:
    """Run ``command`` to the end; its wall time, exit status, output and peak RSS (MiB, the
    child's own ``ru_maxrss``, read with ``wait4``)."""
    out_path = RESULTS_DIR.parent / "data" / f".child-{os.getpid()}.out"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "w+b") as out:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    out_path.unlink(missing_ok=True)
    return {
        "wall_s": wall,
        "returncode": child.returncode,
        "output": text,
        "peak_mib": usage.ru_maxrss / 1024,  # KiB on Linux
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def child_result(done: dict, what: str) -> dict:
    """The JSON a child printed after ``RESULT_MARK``, with the child's peak memory added."""
    for line in reversed(done["output"].splitlines()):
        if line.startswith(RESULT_MARK):
            return json.loads(line.removeprefix(RESULT_MARK)) | {
                "peak_mib": done["peak_mib"],
                "wall_s": done["wall_s"],
            }
    tail = "\n".join(done["output"].strip().splitlines()[-8:])
    raise RuntimeError(f"{what} failed (exit {done['returncode']}):\n{tail}")


def emit(result: dict) -> None:
    """Print a child's result for the parent."""
    print(RESULT_MARK + json.dumps(result), flush=True)


def python_child(script: Path, *args: str) -> list[str]:
    return [sys.executable, str(script), *args]


def median_of(runs: list[dict], key: str) -> float:
    values = [run[key] for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else float("nan")


def write_results(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"\nwrote {path}")


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A plain-text table; ``columns`` are (key, header, format spec)."""
    cells = [[_cell(row.get(key), spec) for key, _, spec in columns] for row in rows]
    headers = [header for _, header, _ in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    first = columns[0][2] == "s"  # a text first column is left-aligned

    def line(values):
        return " ".join(
            v.ljust(w) if i == 0 and first else v.rjust(w)
            for i, (v, w) in enumerate(zip(values, widths))
        )

    out = [line(headers), "-" * (sum(widths) + len(widths) - 1)]
    out += [line(c) for c in cells]
    return "\n".join(out)


def _cell(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if spec == "s":
        return str(value)
    if spec == "x":
        return f"{value:.2f}x"
    if spec == "%":
        return f"{100 * value:.1f}%"
    return format(value, spec)


def load_average() -> float:
    return os.getloadavg()[0]
