"""Parameter sweeps: one variant run at every point of a grid of parameter values, each run
named by its parameters, so a parameter study is one command and one comparison.

The whole grid is checked before its first point runs: it may hold at most ``max_points``
points (counted before any is made), and every point's parameters must make its components,
so a bad value in the last point stores nothing rather than the points before it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from rag_bench.components.registry import SLOT_KINDS, build, registry, resolve
from rag_bench.errors import ParameterError, RagBenchError, UsageError, check_number
from rag_bench.experiment.runner import RunResult, run_variant

MAX_POINTS = 100  # a grid larger than this is refused unless max_points is raised


def parse_axis(text: str) -> tuple[str, list[str]]:
    """``chunker.size=128,256`` → (``chunker.size``, [``128``, ``256``])."""
    where, sign, values = text.partition("=")
    where = where.strip()
    points = [v.strip() for v in values.split(",")] if sign else []
    if not sign or "." not in where or not points or any(not v for v in points):
        raise UsageError(
            f"sweep {text!r} is not slot.param=value,value,…", "e.g. chunker.size=128,256,512"
        )
    if len(set(points)) != len(points):
        raise UsageError(f"sweep {text!r} repeats a value", "give each value once")
    return where, points


def sweep_grid(axes: Sequence[str], max_points: int = MAX_POINTS) -> list[tuple[str, ...]]:
    """Every combination of the axes' values, as override lists, the first axis slowest; at
    most ``max_points`` of them (a :class:`ParameterError` before any is made)."""
    check_number("max_points", max_points, 1, whole=True)
    parsed = [parse_axis(axis) for axis in axes]
    names = [where for where, _ in parsed]
    if len(set(names)) != len(names):
        repeated = next(n for n in names if names.count(n) > 1)
        raise UsageError(f"{repeated} is swept twice", "give each parameter one sweep")
    size = math.prod(len(values) for _, values in parsed)
    if size > max_points:
        raise ParameterError(
            "max_points",
            max_points,
            f"at least the grid's {size:,} points to run them all (or sweep fewer values)",
        )
    return [
        tuple(f"{where}={value}" for where, value in zip(names, point))
        for point in itertools.product(*(values for _, values in parsed))
    ]


def point_name(variant: str, point: Sequence[str]) -> str:
    """How a grid point's run is named: ``baseline[chunker.size=256,retriever.k1=1.2]``."""
    return f"{variant}[{','.join(point)}]"


def run_sweep(
    variant: str,
    axes: Sequence[str],
    dataset,
    *,
    overrides: Sequence[str] = (),
    on_stored: Callable[[RunResult], None] | None = None,
    max_points: int = MAX_POINTS,
    **run_options,
) -> list[RunResult]:
    """Run ``variant`` at every grid point of ``axes`` (each ``slot.param=v1,v2``) on top of
    ``overrides``; indexes and embeddings are shared through the cache wherever a point's
    parameters leave them unchanged. The grid (at most ``max_points``) is checked whole before
    the first point runs. Returns the runs in grid order (the first is the baseline of the
    sweep's comparison)."""
    grid = sweep_grid(axes, max_points)
    swept = {axis.partition("=")[0].strip() for axis in axes}
    fixed = [o for o in overrides if o.partition("=")[0].strip() in swept]
    if fixed:
        raise UsageError(f"{fixed[0]} is both set and swept", "drop the --set or the --sweep")
    for point in grid:
        check_point(variant, (*overrides, *point), point)
    results = []
    for point in grid:
        result = run_variant(
            variant,
            dataset,
            overrides=(*overrides, *point),
            annotations={"name": point_name(variant, point), "sweep": list(point)},
            **run_options,
        )
        if on_stored is not None:
            on_stored(result)
        results.append(result)
    return results


def check_point(variant: str, overrides: Sequence[str], point: Sequence[str]) -> None:
    """Make the components of one grid point (their parameters checked, nothing prepared);
    a value they refuse is an error naming the point."""
    resolved = resolve(registry().variant(variant), overrides)
    try:
        for slot, config in resolved.items():
            if slot in SLOT_KINDS:
                build(slot, config)
    except RagBenchError as error:
        raise UsageError(
            f"sweep point {point_name(variant, point)}: {error.message}",
            (error.hint or "") + " (nothing of the sweep was run)",
        ) from None
