# The compiled line scanner (rag_bench/io/_scan.c); its comment documents the arguments.
from typing import Any

import numpy as np

def scan(
    buffer: Any,
    start: int,
    end: int,
    delimiter: str,
    kinds: bytes,
    outputs: list[np.ndarray],
    /,
) -> tuple[int, tuple[int, ...]] | None: ...
