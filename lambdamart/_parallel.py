"""Thread counts for numba's parallel kernels, and the lock that keeps unsafe threading layers from aborting.

Every parallel kernel of a fit or predict runs inside :func:`parallel_region`, which sets numba's thread count for
its duration (joblib's ``n_jobs`` convention) and restores it afterwards; the public metrics, which have no
``n_jobs``, launch theirs inside :func:`serialised_launches` with the caller's thread count.
"""

import threading
from contextlib import contextmanager

import numba

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


def threads_pay(work, threshold):
    """Whether a kernel that comes in a serial and a parallel version should run the parallel one: numba has more
    than one thread here and there are at least ``threshold`` items of work. Below that, waking the threads costs
    more than they save, and the parallel version (seconds to compile on first use) is never compiled."""
    return work >= threshold and numba.get_num_threads() > 1


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
