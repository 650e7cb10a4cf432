"""64-bit hashes of string identifiers held as Arrow strings, and keys combined from them.

Matching millions of a run's document ids against the qrels by string is slow; their hashes
are integers that sort and compare fast. Equal ids always have equal hashes; the rare unequal
ids with equal hashes are told apart by whoever uses them (a string comparison, or reading the
file again line by line). A hash depends on the string alone, so the hashes of two files agree.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from rag_bench.io.threads import in_parallel, usable_cores

try:  # hash sets per group of rows, compiled (rag_bench/io/_groups.c); numpy does without
    from rag_bench.io import _groups
except ImportError:
    _groups = None  # type: ignore[assignment]

_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd, so multiplying by it loses no bit
_SHIFT = np.uint64(32)
# _LOW_BYTES[n]: a mask keeping the first n bytes of a little-endian 8-byte word
_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)
_LENGTH_BYTE = np.uint64(56)
ROW_BLOCK = 1 << 20  # rows hashed or keyed at a time: temporaries stay small and in cache
_HASHES: dict[int, np.ndarray] = {}  # id(Arrow strings) -> their hashes, while the strings live
_CATEGORIES: dict[int, object] = {}  # id(categories) -> their Arrow strings, while they live


def scaled_keys(first: np.ndarray) -> np.ndarray:
    """The first half of :func:`combine_keys`: ``combine_keys(a, b) == scaled_keys(a) + b``."""
    key = first.astype(np.uint64)
    key *= _MULTIPLIER
    return key


def combine_keys(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """One 64-bit key per row from two integer keys: equal pairs give equal keys, and unequal
    pairs rarely do when ``second`` is a hash."""
    key = scaled_keys(first)
    key += second.astype(np.uint64, copy=False)
    return key


def combine_into(key: np.ndarray, second: np.ndarray) -> None:
    """``key = combine_keys(key, second)`` in place, for a ``key`` of uint64 already."""
    key *= _MULTIPLIER
    key += second.astype(np.uint64, copy=False)


def _fold(h: np.ndarray, word: np.ndarray) -> None:
    """Fold one 8-byte word into the hashes, in place (for a fixed ``h``, a bijection of words)."""
    h ^= word
    h *= _MULTIPLIER
    h ^= h >> _SHIFT


def _string_hashes(strings) -> np.ndarray:
    """A 64-bit hash of each value of an Arrow (large_)string array, read from its buffers.

    Each string is taken 8 bytes at a time (one unaligned load per row and word, bytes past its
    end masked off) and its words are folded into a hash that starts from its length; the hash
    depends on the string alone, not on its neighbours.
    """
    import pyarrow as pa

    offset_type = np.dtype(np.int64 if pa.types.is_large_string(strings.type) else np.int32)
    n = len(strings)
    buffers = strings.buffers()
    offsets = np.frombuffer(
        buffers[1], dtype=offset_type, count=n + 1, offset=strings.offset * offset_type.itemsize
    )
    first, end = int(offsets[0]), int(offsets[-1])
    padded = np.zeros(end - first + 8, dtype=np.uint8)
    if end > first:
        padded[: end - first] = np.frombuffer(buffers[2], dtype=np.uint8)[first:end]
    words = np.ndarray(len(padded) - 7, dtype=np.uint64, buffer=padded, strides=(1,))
    starts, lengths = offsets[:-1] - first, np.diff(offsets)
    h = lengths.astype(np.uint64) << _LENGTH_BYTE
    word = words[starts]
    if n and int(lengths.min()) < 8:
        word &= _LOW_BYTES[np.minimum(lengths, 8)]
    _fold(h, word)
    for at in range(8, int(lengths.max()) if n else 0, 8):
        longer = np.flatnonzero(lengths > at)  # only these have bytes left
        word = words[starts[longer] + at] & _LOW_BYTES[np.minimum(lengths[longer] - at, 8)]
        folded = h[longer]
        _fold(folded, word)
        h[longer] = folded
    return h


def _cached_string_hashes(strings) -> np.ndarray:
    """:func:`_string_hashes` of a chunked array, kept while the (immutable) array lives: a run's
    ids are hashed once when the file is checked for duplicates and again when evaluated."""
    key = id(strings)
    if key not in _HASHES:
        hashes = np.empty(len(strings), dtype=np.uint64)
        done = 0
        for chunk in strings.chunks:
            # a slice's strings stay in the CPU's cache while its words are read
            for start in range(0, len(chunk), ROW_BLOCK):
                block = chunk.slice(start, ROW_BLOCK)
                hashes[done : done + len(block)] = _string_hashes(block)
                done += len(block)
        remember_hashes(strings, hashes)
    return _HASHES[key]


def grouped_repeat(starts: np.ndarray, keys: np.ndarray) -> bool | None:
    """Whether two rows of one group have equal ``keys`` (group i: rows ``starts[i]`` to the
    next start), from a hash set per group, the groups shared out over the cores; ``None``
    where the compiled module is not built."""
    if _groups is None:
        return None
    keys = keys.astype(np.uint64, copy=False)
    parts = _group_parts(starts, len(keys))
    return any(
        in_parallel(
            [
                partial(_groups.any_repeat, _int64s(starts[g0:g1] - r0), keys[r0:r1])
                for g0, g1, r0, r1 in parts
            ],
            workers=len(parts),
        )
    )


def grouped_join(
    starts: np.ndarray,
    group_query: np.ndarray,
    keys: np.ndarray,
    query_offsets: np.ndarray,
    entry_keys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Every (row, entry) pair of equal keys where the row's group belongs to query q (group i:
    rows ``starts[i]`` to the next start, of query ``group_query[i]``; -1: none) and the entry
    is one of q's, ``entry_keys[query_offsets[q]:query_offsets[q + 1]]``: rows ascending,
    entries as positions in ``entry_keys``. The groups are shared out over the cores. ``None``
    where the compiled module is not built, or the pairs outnumber the rows of a share (hash
    collisions galore)."""
    if _groups is None:
        return None
    keys = keys.astype(np.uint64, copy=False)
    offsets, entry_keys = _int64s(query_offsets), entry_keys.astype(np.uint64, copy=False)

    def join(g0: int, g1: int, r0: int, r1: int):
        rows, entries = np.empty(r1 - r0, np.int64), np.empty(r1 - r0, np.int64)
        n = _groups.join(
            _int64s(starts[g0:g1] - r0),
            _int64s(group_query[g0:g1]),
            keys[r0:r1],
            offsets,
            entry_keys,
            rows,
            entries,
        )
        return None if n < 0 else (rows[:n] + r0, entries[:n])

    parts = _group_parts(starts, len(keys))
    found = in_parallel([partial(join, *part) for part in parts], workers=len(parts))
    if any(pairs is None for pairs in found):
        return None
    return np.concatenate([p[0] for p in found]), np.concatenate([p[1] for p in found])


PARALLEL_ROWS = 1 << 20  # rows that are worth a thread of their own


def _group_parts(starts: np.ndarray, n_rows: int) -> list[tuple[int, int, int, int]]:
    """(first group, end group, first row, end row) of as many parts as there are cores, of
    about equal rows (one part for fewer than :data:`PARALLEL_ROWS` rows)."""
    n = len(starts)
    parts = max(1, min(usable_cores(), n_rows // PARALLEL_ROWS, n))
    cuts = np.unique(np.searchsorted(starts, np.arange(parts) * (n_rows / parts)))
    bounds = [int(c) for c in cuts] + [n]
    row = [int(starts[g]) if g < n else n_rows for g in bounds]
    return [(bounds[i], bounds[i + 1], row[i], row[i + 1]) for i in range(len(bounds) - 1)]


def _int64s(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


def remember_hashes(strings, hashes: np.ndarray) -> None:
    """Take ``hashes`` as the :func:`_string_hashes` of ``strings`` (a chunked array), computed
    elsewhere (by the compiled scanner, while it read them), for as long as ``strings`` lives."""
    hashes.flags.writeable = False
    _HASHES[id(strings)] = hashes
    weakref.finalize(strings, _HASHES.pop, id(strings), None)


def remember_categories(categories: pd.Index, strings, hashes: np.ndarray) -> None:
    """Take ``strings`` (Arrow) and ``hashes`` as the values of a Categorical's ``categories``
    and their hashes, for as long as the (immutable) categories live: a file's reader knows
    both, which :meth:`IdColumn.of` would otherwise build again from Python strings."""
    import pyarrow as pa

    chunked = pa.chunked_array([strings], type=pa.large_string())
    remember_hashes(chunked, hashes)
    _CATEGORIES[id(categories)] = chunked
    weakref.finalize(categories, _CATEGORIES.pop, id(categories), None)


@dataclass(frozen=True)
class IdColumn:
    """A column of string ids as Arrow strings: every value, or the distinct values of a
    Categorical with the codes into them."""

    values: object  # pyarrow.ChunkedArray of strings
    codes: np.ndarray | None = None

    @classmethod
    def of(cls, ids: pd.Series) -> IdColumn:
        import pyarrow as pa

        if isinstance(ids.dtype, pd.CategoricalDtype):
            categorical = ids.array  # its codes are a view, where .cat.codes copies
            known = _CATEGORIES.get(id(categorical.categories))
            if known is not None:
                return cls(known, categorical.codes)
            strings = pd.Series(categorical.categories.astype(str))
            return cls(cls.of(strings).values, categorical.codes)
        if isinstance(ids.dtype, pd.StringDtype) and ids.dtype.storage == "pyarrow":
            return cls(ids.array.__arrow_array__())  # the column's own Arrow data, no copy
        strings = np.asarray(ids.astype(str), dtype=object)
        return cls(pa.chunked_array([pa.array(strings, type=pa.large_string())]))

    def hashes(self) -> np.ndarray:
        """A 64-bit hash per row: equal ids, equal hashes; unequal ids, rarely equal ones."""
        hashes = _cached_string_hashes(self.values)
        return hashes if self.codes is None else hashes[self.codes]

    def take(self, rows: np.ndarray):
        """The ids at ``rows``, as Arrow strings."""
        return take(self.values, rows if self.codes is None else self.codes[rows])


def take(values, rows: np.ndarray):
    """``values.take(rows)`` for a chunked Arrow array, as one array, taken chunk by chunk:
    Arrow's own take across chunks first concatenates them all."""
    import pyarrow as pa

    if values.num_chunks == 1:
        return values.chunk(0).take(rows)
    order = None if np.all(rows[1:] >= rows[:-1]) else np.argsort(rows, kind="stable")
    ascending = rows if order is None else rows[order]
    bounds = np.cumsum([0] + [len(chunk) for chunk in values.chunks])
    cuts = np.searchsorted(ascending, bounds)
    pieces = [
        chunk.take(ascending[cuts[i] : cuts[i + 1]] - bounds[i])
        for i, chunk in enumerate(values.chunks)
        if cuts[i + 1] > cuts[i]
    ]
    taken = pa.concat_arrays(pieces) if pieces else pa.array([], type=values.type)
    if order is not None:
        taken = taken.take(np.argsort(order))  # back to the order asked for
    return taken
