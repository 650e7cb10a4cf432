"""What the judge benchmarks share: the labelled sets on disk, the analyzer a run uses, and a
disk cache of MiniLM vectors (the sets are fixed, so each text is embedded once)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from judge_sets import SETS, build, default_out

CACHE = Path.home() / ".cache" / "rag-bench-judges"


def set_files(folder: Path, mirror: Path | None) -> Path:
    """The folder of converted sets, built from the public sources when absent."""
    if not all((folder / f"{name}-test.jsonl").is_file() for name in SETS):
        build(folder, mirror)
    return folder


def sets_folder(given: str | None, mirror: Path | None) -> Path:
    return set_files(Path(given) if given else default_out(), mirror)


def take_groups(groups: list[str], limit: int, seed: int) -> list[int]:
    """Indices of the rows (given by their groups) of whole groups taken in a seeded order
    until ``limit`` rows are reached (at least one group)."""
    names = sorted(set(groups))
    rows_of: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        rows_of.setdefault(g, []).append(i)
    taken: list[int] = []
    for k in np.random.default_rng(seed).permutation(len(names)):
        group = rows_of[names[k]]
        if taken and len(taken) + len(group) > limit:
            break
        taken += group
    return sorted(taken)


def default_analyzer():
    from rag_bench.components.registry import VariantSpec, build, resolve

    resolved = resolve(VariantSpec("judge-agreement", {"judge": {"name": "lexical"}}), ())
    return build("analyzer", resolved["analyzer"])


def one_thread() -> None:
    """MiniLM on one thread: on a shared 2-core machine two threads run slower, not faster."""
    import torch

    torch.set_num_threads(1)


def load_vectors(pairs, path: Path) -> None:
    """Preload ``pairs`` (a PairFeatures) with the vectors saved at ``path`` and keep them."""
    pairs.keep = True
    if path.is_file():
        with np.load(path) as saved:
            texts = json.loads(str(saved["texts"]))
            pairs._vectors.update(zip(texts, saved["vectors"]))


def save_vectors(pairs, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    texts = list(pairs._vectors)
    matrix = np.array([pairs._vectors[t] for t in texts], dtype=np.float32).reshape(-1, 384)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, texts=json.dumps(texts), vectors=matrix)
    tmp.replace(path)


def embed_ahead(pairs, tasks, path: Path, block: int = 1000) -> None:
    """Embed the MiniLM texts of (claim, passages) tasks in blocks, saving after each: a long
    first run that stops keeps what it embedded."""
    texts = []
    for claim, passages in tasks:
        pending = pairs.lexical(claim, passages)
        texts += [pending.claim, *pending.spans]
    wanted = [t for t in dict.fromkeys(texts) if t not in pairs._vectors]
    for start in range(0, len(wanted), block):
        pairs.embed(wanted[start : start + block])
        save_vectors(pairs, path)
        print(f"embedded {min(start + block, len(wanted))}/{len(wanted)}", flush=True)
