"""Repeats: a run's queries answered N times by components that sample, each time with its own
seed, so that the noise of generation and judging can be measured.

A component samples when its resolved parameters have ``temperature`` above 0 and a ``seed``
(the ``llama_cpp`` generator, for one). Repeat 0 uses the seeds the run was given; repeat r ≥ 1
sets each sampling component's ``seed`` to one derived from its own seed, its slot and r
(:func:`derived_seed`): distinct within the run, the same for the same run seed. Retrieval does
not sample: it is computed once per repeat, identical, and stored once.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from rag_bench.errors import UsageError, check_number

SAMPLING_SLOTS = ("generator", "judge")
MAX_REPEATS = 100


def sampling_slots(resolved: dict[str, dict[str, Any]]) -> list[str]:
    """The slots whose component samples: temperature above 0 and a seed parameter."""
    return [
        slot
        for slot in SAMPLING_SLOTS
        if isinstance(resolved.get(slot, {}).get("temperature"), (int, float))
        and resolved[slot]["temperature"] > 0
        and "seed" in resolved[slot]
    ]


def derived_seed(seed: int, slot: str, repeat: int) -> int:
    """The seed of ``slot`` in ``repeat`` (≥ 1): 31 bits of sha256 of (seed, slot, repeat)."""
    digest = hashlib.sha256(f"{seed}:{slot}:{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def repeat_seeds(resolved: dict[str, dict[str, Any]], repeats: int) -> dict[str, list[int]]:
    """Per sampling slot, its seed in each repeat (repeat 0: its own), all distinct. Refuses
    ``repeats`` above 1 when nothing samples: every repeat would be the same."""
    check_number("repeats", repeats, 1, MAX_REPEATS, whole=True)
    slots = sampling_slots(resolved)
    if repeats > 1 and not slots:
        raise UsageError(
            f"repeats={repeats}, but no component of the variant samples (temperature above 0 "
            "with a seed): every repeat would give the same answers",
            "set e.g. generator.temperature=0.7 (with generator.name=llama_cpp), or repeats=1",
        )
    seeds = {}
    for slot in slots:
        own = int(resolved[slot]["seed"])
        chosen = [own]
        for repeat in range(1, repeats):
            seed, salt = derived_seed(own, slot, repeat), repeat
            while seed in chosen:  # a 31-bit collision: draw again, still deterministically
                salt += repeats
                seed = derived_seed(own, slot, salt)
            chosen.append(seed)
        seeds[f"{slot}.seed"] = chosen
    return seeds


def repeat_config(resolved: dict, seeds: dict[str, list[int]], repeat: int) -> dict:
    """The resolved parameters of ``repeat``: the run's, each sampling seed replaced."""
    config = copy.deepcopy(resolved)
    for key, values in seeds.items():
        slot = key.split(".", 1)[0]
        config[slot]["seed"] = values[repeat]
    return config
