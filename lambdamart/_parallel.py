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


def _thread_safe_layer():
    """Whether numba's threading layer is known to allow concurrent parallel launches from several threads."""
    try:
        return numba.threading_layer() in ("tbb", "omp")
    except ValueError:  # no parallel region has run yet, so no layer has been chosen
        return False


@contextmanager
def serialised_launches():
    """Let one thread at a time launch parallel kernels, on layers that abort on concurrent launches (re-entrant)."""
    if _thread_safe_layer():
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
