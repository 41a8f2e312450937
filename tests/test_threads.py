"""``_parallel.split_over_threads``: one-off work (metrics, large predicts) shared among Python threads."""

import multiprocessing
import threading

import numpy as np
import pytest

from lambdamart._parallel import parallel_region, split_over_threads


def record_ranges(cost, threads, min_cost=0):
    calls, lock = [], threading.Lock()

    def work(lo, hi):
        with lock:
            calls.append((int(lo), int(hi), threading.get_ident()))

    with parallel_region(threads):
        split_over_threads(work, cost, min_cost)
    return sorted(calls)


@pytest.mark.parametrize("cost", [np.array([5.0, 1, 1, 1, 1, 1, 10, 1]), 1000, np.ones(3), 2,
                                  np.array([0.0, 0.0, 7.0])])
def test_ranges_cover_every_item_once_one_per_thread(cost):
    calls = record_ranges(cost, 2)
    n = cost if isinstance(cost, int) else len(cost)
    bounds = [(lo, hi) for lo, hi, _ in calls]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # contiguous, no overlap
    assert all(lo < hi for lo, hi in bounds)
    assert len(bounds) <= 2
    # The first range runs on the calling thread.
    assert calls[0][2] == threading.get_ident()


def test_ranges_have_about_equal_cost():
    cost = np.r_[np.full(10, 100.0), np.ones(1000)]  # the first 10 items cost as much as the other 1000
    (_, cut, _), _ = record_ranges(cost, 2)
    assert cut in (9, 10, 11)
    (_, cut, _), _ = record_ranges(1000, 2)
    assert cut == 500


@pytest.mark.parametrize("threads, cost, min_cost", [(1, 1000, 0), (2, 1000, 1001), (2, 1, 0), (2, 0, 0),
                                                     (2, np.zeros(0), 0)])
def test_one_call_on_the_calling_thread_when_threads_do_not_pay(threads, cost, min_cost):
    calls = record_ranges(cost, threads, min_cost)
    n = cost if isinstance(cost, int) else len(cost)
    assert [(lo, hi) for lo, hi, _ in calls] == [(0, n)]
    assert calls[0][2] == threading.get_ident()


def test_an_error_in_any_range_reaches_the_caller_after_every_range_ended():
    ended = []

    def work(lo, hi):
        if lo > 0:
            raise ValueError(f"range {lo}:{hi} failed")
        ended.append((lo, hi))

    with parallel_region(2), pytest.raises(ValueError, match="failed"):
        split_over_threads(work, 100)
    assert ended == [(0, 50)]


def _child(queue):
    out = np.zeros(10)

    def work(lo, hi):
        out[lo:hi] = threading.get_ident()

    with parallel_region(2):
        split_over_threads(work, 10)
    queue.put(len(np.unique(out)))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_gets_its_own_threads():
    """A forked child inherits the parent's pool object but none of its threads: it must not wait on them."""
    record_ranges(10, 2)  # the parent's pool exists and has run work
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    try:
        child.join(timeout=120)
        assert child.exitcode == 0, "the child hung or failed"
    finally:
        child.kill()
    assert queue.get(timeout=10) == 2  # both ranges ran, on two threads
