"""one_blas_thread: one BLAS thread inside, the process's own limit outside, in any threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from threadpoolctl import threadpool_info

from rag_bench.components.blas import one_blas_thread


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_inside_one_thread_outside_the_limit_found_even_after_interleaved_threads():
    found = blas_threads()

    def inside(_):
        with one_blas_thread():
            with one_blas_thread():  # re-entrant
                seen = blas_threads()
            return seen + blas_threads()

    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(inside, range(64)))
    assert all(n == 1 for threads in seen for n in threads)
    assert blas_threads() == found
