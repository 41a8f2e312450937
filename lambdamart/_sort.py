"""A stable descending sort of one query's scores, shared by the objective and the metrics.

Queries hold tens to hundreds of documents and are sorted once per query per boosting round (and per metric
evaluation), so this sort is on the hot path: see :func:`descending_order`.
"""

import numpy as np

from ._jit import inner_kernel

# The sort below indexes with unsigned integers: numba wraps negative signed indices around, and that select on
# every access costs as much as the merging itself.


@inner_kernel
def _sort_block(keys, rows, out_keys, out_rows, lo, hi):
    """Stable descending sort of the short block [lo, hi) into ``out_*``: each element goes to its rank, the
    number of elements that come before it (no branch, unlike insertion sort, whose exits are unpredictable)."""
    for a in range(lo, hi):
        rank = lo
        for b in range(lo, hi):
            rank += np.uint64((keys[b] > keys[a]) | ((keys[b] == keys[a]) & (b < a)))
        out_keys[rank] = keys[a]
        out_rows[rank] = rows[a]


@inner_kernel
def _merge_runs(keys, rows, out_keys, out_rows, lo, mid, hi):
    """Stable merge of the descending runs [lo, mid) and [mid, hi) into ``out_*``."""
    a, b, k = lo, mid, lo
    while a < mid and b < hi:
        right = keys[b] > keys[a]  # on ties the left run's element comes first: stable
        out_keys[k] = keys[b] if right else keys[a]
        out_rows[k] = rows[b] if right else rows[a]
        b += np.uint64(right)
        a += np.uint64(not right)
        k += np.uint64(1)
    while a < mid:
        out_keys[k], out_rows[k] = keys[a], rows[a]
        a += np.uint64(1)
        k += np.uint64(1)
    while b < hi:
        out_keys[k], out_rows[k] = keys[b], rows[b]
        b += np.uint64(1)
        k += np.uint64(1)


@inner_kernel
def _merge_equal_runs(keys, rows, out_keys, out_rows, lo, m):
    """Stable merge of the descending runs [lo, lo + m) and [lo + m, lo + 2m) into ``out_*``, from both ends.

    Each end is a chain of dependent loads and compares; the two chains are independent, so the CPU overlaps them.
    With runs of equal length, m steps from each end never read past a run. Selects, not branches, as the
    comparisons are unpredictable.
    """
    one = np.uint64(1)
    a, b, k = lo, lo + m, lo
    a_back, b_back, k_back = lo + m - one, lo + m + m - one, lo + m + m - one
    for _ in range(m):
        right = keys[b] > keys[a]
        out_keys[k] = keys[b] if right else keys[a]
        out_rows[k] = rows[b] if right else rows[a]
        b += np.uint64(right)
        a += np.uint64(not right)
        k += one
        # The last place takes the smaller key; on ties the right run's element, which comes later.
        left = keys[a_back] < keys[b_back]
        out_keys[k_back] = keys[a_back] if left else keys[b_back]
        out_rows[k_back] = rows[a_back] if left else rows[b_back]
        a_back -= np.uint64(left)
        b_back -= np.uint64(not left)
        k_back -= one


@inner_kernel
def descending_order(scores):
    """Row indices in descending order of ``scores``, tied scores in row order (LightGBM's std::stable_sort):
    ``np.argsort(-scores, kind="mergesort")``, about three times as fast on queries of ~100 documents (numba's
    merge sort branches on every comparison and reads each value through its index).

    Blocks of 16 sorted by rank, then a bottom-up merge sort, on integer keys (integer compares are quicker).
    NaN scores come last, in row order, as in numpy's sort.
    """
    n = scores.shape[0]
    sorted_already = True
    has_nan = False
    for k in range(n):
        has_nan |= scores[k] != scores[k]
        if k > 0 and scores[k - 1] < scores[k]:
            sorted_already = False
    if sorted_already and not has_nan:  # e.g. the first round, where all scores are 0
        return np.arange(n)
    # The float's bits as an integer with the same order: negative floats get their magnitude bits flipped.
    # Adding 0.0 first turns -0.0 into 0.0, equal as floats. NaN gets the smallest key, below -inf's. (Loops, not
    # array expressions, which compile ufunc machinery: seconds on first use.)
    values = np.empty(n)
    keys = values.view(np.int64)
    rows = np.empty(n, dtype=np.int64)
    for k in range(n):
        values[k] = scores[k] + 0.0
        bits = keys[k]
        keys[k] = np.iinfo(np.int64).min if scores[k] != scores[k] else bits ^ ((bits >> 63) & 0x7FFFFFFFFFFFFFFF)
        rows[k] = k
    out_keys = np.empty(n, dtype=np.int64)
    out_rows = np.empty(n, dtype=np.int64)
    size = np.uint64(n)
    width = np.uint64(16)
    for lo in range(np.uint64(0), size, width):
        _sort_block(keys, rows, out_keys, out_rows, lo, min(lo + width, size))
    while width < size:
        keys, out_keys = out_keys, keys
        rows, out_rows = out_rows, rows
        for lo in range(np.uint64(0), size, width + width):
            mid = min(lo + width, size)
            hi = min(mid + width, size)
            if hi - mid == width:
                _merge_equal_runs(keys, rows, out_keys, out_rows, lo, width)
            else:
                _merge_runs(keys, rows, out_keys, out_rows, lo, mid, hi)
        width += width
    return out_rows


@inner_kernel
def descending_order_from(scores, order, sorted_scores):
    """:func:`descending_order` of ``scores``, found by re-sorting ``order`` (any permutation of their indices) in
    place; returns ``order``, and leaves the scores in that order in ``sorted_scores[:n]``.

    Between two boosting rounds a query's ranking barely changes (one tree moves each score a little): ~1.4 pairs
    per document swap on generated data after 20 rounds (0.3 after 100), 0.1 on LightGBM's example, so an insertion
    sort from the last round's order does a few moves per document instead of a merge sort's log2(n) passes
    (queries of ~115 documents: 0.4-0.7 of the time, ~15 documents: a fifth). Its comparisons are those of
    :func:`descending_order` (higher score first, ties by index), so the result does not depend on ``order``. Past
    8 moves per document, or on a NaN, it falls back to :func:`descending_order`: an order far from sorted never
    costs quadratic time. The scores are gathered into ``sorted_scores`` first and moved along with their indices,
    so the comparisons read one contiguous array instead of each score through its index (on 570k generated rows,
    8.5 instead of 12.3 ns a row), and the caller has the ranked scores without a second gather.
    """
    n = order.shape[0]
    budget = 8 * n
    for k in range(n):
        sorted_scores[k] = scores[order[k]]
        if sorted_scores[k] != sorted_scores[k]:
            budget = -1
    for i in range(1, n if budget >= 0 else 0):
        v = sorted_scores[i]
        if sorted_scores[i - 1] > v:  # in place already: most documents, most rounds
            continue
        r = order[i]
        j = i - 1
        while j >= 0:
            w = sorted_scores[j]
            t = order[j]
            if w > v or (w == v and t < r):
                break
            sorted_scores[j + 1] = w
            order[j + 1] = t
            j -= 1
        budget -= i - 1 - j
        sorted_scores[j + 1] = v
        order[j + 1] = r
        if budget < 0:
            break
    if budget < 0:
        merged = descending_order(scores)
        for k in range(n):
            order[k] = merged[k]
            sorted_scores[k] = scores[merged[k]]
    return order
