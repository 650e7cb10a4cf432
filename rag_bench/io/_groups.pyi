# Hash sets per group of rows (rag_bench/io/_groups.c); its comment documents the arguments.
import numpy as np

def any_repeat(starts: np.ndarray, keys: np.ndarray, /) -> bool: ...
def join(
    groups: np.ndarray,
    group_query: np.ndarray,
    keys: np.ndarray,
    query_offsets: np.ndarray,
    entry_keys: np.ndarray,
    out_rows: np.ndarray,
    out_entries: np.ndarray,
    /,
) -> int: ...
