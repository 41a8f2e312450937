"""Thread counts, the lock that keeps unsafe threading layers from aborting, and Python threads for one-off work.

Every parallel kernel of a fit or predict runs inside :func:`parallel_region`, which sets numba's thread count for
its duration (joblib's ``n_jobs`` convention) and restores it afterwards. Work done once per call (binning, the
metrics, a large predict) runs a ``nogil`` serial kernel on ranges of its items on Python threads
(:func:`split_over_threads`), as many as numba's current thread count: the caller's for the public metrics, which
have no ``n_jobs``.
"""

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numba
import numpy as np

# The workqueue threading layer (numba's fallback when neither TBB nor OpenMP is available) aborts the process
# when two threads launch parallel regions at once, so launches are serialised until a thread-safe layer is known.
_LAUNCH_LOCK = threading.RLock()


def n_threads(n_jobs):
    """Thread count for ``n_jobs``, with joblib's convention: None or -1 all cores, -2 all but one, ..."""
    available = numba.config.NUMBA_NUM_THREADS
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None or -1 for all cores, or a positive thread count.")
    if n_jobs is None:
        return available
    if n_jobs < 0:
        return max(1, available + 1 + n_jobs)
    return min(n_jobs, available)


def _pool_layer():
    """Whether numba runs on OpenMP or TBB (rather than its fallback, workqueue): these start a parallel region in
    microseconds, and allow concurrent launches from several threads. Starts numba's threads if nothing has."""
    numba.get_num_threads()  # chooses and starts the threading layer, as any parallel kernel would
    return numba.threading_layer() in ("tbb", "omp")


# When threads pay in a fit, by what starting a parallel region costs: ~2.5 µs with OpenMP on 2 cores, ~100 µs with
# workqueue. With OpenMP, threads on every node of a few thousand row-feature updates took LightGBM's 3k-row
# example (900k feature values) from 0.47 s to 0.26 s and 16k generated rows from 1.33 s to 0.81 s; at 100 rounds
# they pay on any data (1.7x faster on 587 generated rows, 1.5x on MQ2008's 9.6k rows x 46 features). What they
# cost is the one-time compilation of the parallel kernels (~4 s in a fresh environment), so a fit stays on one
# thread when it is small in both senses: fewer than _FIT_VALUES values and fewer than _FIT_WORK values x rounds
# (under ~1 s on one thread: 100 rounds on 20 generated queries, 190k values, take 0.5 s, and a first such fit
# compiles in 13 s rather than 17). With workqueue, the thresholds are those that paid there.
_FIT_VALUES = {True: 500_000, False: 2_000_000}
_FIT_WORK = {True: 30_000_000, False: float("inf")}
_NODE_WORK = {True: 2_000, False: 500_000}


def fit_threads(n_values, n_rounds, threads):
    """Threads for a fit of up to ``n_rounds`` rounds on ``n_values`` feature values (rows × features) that may use
    ``threads``."""
    pool = _pool_layer()
    return threads if n_values >= _FIT_VALUES[pool] or n_values * n_rounds >= _FIT_WORK[pool] else 1


def node_parallel_work():
    """Row × feature updates from which a node is split on numba's threads (``grow_tree``'s ``parallel_work``);
    None when there is one thread."""
    return None if numba.get_num_threads() == 1 else _NODE_WORK[_pool_layer()]


# Threads partition a node's rows (and gather its smaller child's λ and w) in fits of at least _PARTITION_FIT_ROWS
# rows, on nodes of at least _PARTITION_NODE_ROWS. Replaying a fit's trees on make_ranking_data, 2 threads, OpenMP:
# growth 8.5 % shorter at 570k rows, 6.5 % at 265k, no change measurable at 131k (those nodes' rows and λ are in
# cache, and two more parallel regions per split cost about what they save). Smaller fits skip the threaded
# partition's compilation (~1.7 s more in the demo's first fit). With workqueue a region costs ~40x more.
_PARTITION_FIT_ROWS = 200_000
_PARTITION_NODE_ROWS = {True: 20_000, False: 500_000}


def node_partition_rows(n_rows):
    """Rows from which ``grow_tree`` partitions a node on numba's threads (its ``partition_rows``) in a fit on
    ``n_rows`` rows; None when there is one thread or the fit is too small for it to pay."""
    if numba.get_num_threads() == 1 or n_rows < _PARTITION_FIT_ROWS:
        return None
    return _PARTITION_NODE_ROWS[_pool_layer()]


# One pool per process: a forked child (a Dask or loky worker) inherits the pool object but none of its threads.
_POOL = {"pid": None, "executor": None}
_POOL_LOCK = threading.Lock()


def _executor():
    with _POOL_LOCK:
        if _POOL["pid"] != os.getpid():
            _POOL["pid"] = os.getpid()
            _POOL["executor"] = ThreadPoolExecutor(max(numba.config.NUMBA_NUM_THREADS - 1, 1),
                                                   thread_name_prefix="lambdamart")
        return _POOL["executor"]


def split_over_threads(work, cost, min_cost=0):
    """Call ``work(lo, hi)`` over consecutive ranges of the items ``0:n``, one range per thread of numba's current
    thread count, of about equal total cost; in one call on the calling thread when there is one thread or the
    total cost is below ``min_cost``.

    ``cost`` is an array of the items' costs, or their number ``n`` when all cost the same. For work done once per
    call over many independent items (queries, rows): ``work`` calls a ``nogil`` serial kernel on its range, so
    the ranges run in parallel on Python threads. numba's parallel version of such a kernel costs a second or more
    of compilation on first use, while a hand-off to a waiting thread costs tens of microseconds, nothing next to
    such a call. Not for the rounds of a fit: there numba's OpenMP workers, spinning for a while after each
    parallel region, take the cores the Python threads need (docs/design.md, Threading). The first range runs on
    the calling thread; ranges must not write to the same memory.
    """
    if isinstance(cost, (int, np.integer)):
        n_items, cumulative = int(cost), None
        total = n_items
    else:
        n_items, cumulative = len(cost), np.cumsum(cost, dtype=np.float64)
        total = cumulative[-1] if n_items else 0.0
    n_threads = min(numba.get_num_threads(), n_items)
    if n_threads <= 1 or total < min_cost:
        work(0, n_items)
        return
    shares = np.arange(1, n_threads) / n_threads
    cuts = (n_items * shares).astype(np.int64) if cumulative is None else np.searchsorted(cumulative, total * shares)
    bounds = np.unique(np.concatenate(([0], cuts, [n_items])))
    pending = [_executor().submit(work, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
    try:
        work(bounds[0], bounds[1])
    finally:
        for done in pending:
            done.result()


@contextmanager
def serialised_launches():
    """Let one thread at a time launch parallel kernels, on layers that abort on concurrent launches (re-entrant)."""
    if _pool_layer():
        yield
    else:
        with _LAUNCH_LOCK:
            yield


@contextmanager
def parallel_region(n_jobs):
    """Run numba parallel kernels with ``n_jobs`` threads, serialised on layers that abort on concurrent launches."""
    previous = numba.get_num_threads()
    numba.set_num_threads(n_threads(n_jobs))
    try:
        with serialised_launches():
            yield
    finally:
        numba.set_num_threads(previous)
