"""Feature binning: raw float features to uint8 bin codes, feature-major, with a missing-value bin per feature.

Feature ``f`` has ``n_bins[f]`` value bins, separated by the ``n_bins[f] - 1`` increasing thresholds
``thresholds[threshold_offsets[f]:threshold_offsets[f + 1]]``; a value ``x`` falls in the bin counting the
thresholds below it, so ``x <= thresholds[b]`` exactly when its bin is ``<= b``. NaN gets code ``n_bins[f]``
(its own bin, right after the value bins); ±inf fall in the extreme value bins.
"""

import numpy as np

from .._jit import inner_kernel, kernel

MAX_BINS = 255
# As LightGBM's min_data_in_bin: a value seen fewer times than this shares its bin with the next value, so the
# trees cannot isolate a handful of rows by a rare exact value.
MIN_SAMPLES_PER_BIN = 3
# Feature values from which binning and the histogram layout share their work among threads (when the fit has
# several). LightGBM's example (900k values) binned in 12.4 ms instead of 16.6 on two threads (in-process, median of
# seven fits after fits, so with numba's workers still spinning); handing a range to a thread costs tens of µs.
_THREADED_VALUES = 500_000
# Features sorted together in find_thresholds: their values gathered from a row are adjacent in memory (a cache
# line or two), and the chunk's buffer stays small (12.8 MB at the 200k-row binning sample, float32).
_SORT_CHUNK = 16


def over_ranges(work, n_items, n_values, split):
    """Run ``work(lo, hi)`` over the items ``0:n_items`` (features, rows): through ``split`` from
    ``_THREADED_VALUES`` values, else in one call.

    ``split(work, n_items)`` shares contiguous ranges among threads (``_parallel.split_over_threads``, handed in by
    the caller: the engine imports nothing from the package). Each range's work is numpy's or a ``nogil`` kernel's,
    so the threads run in parallel, and per-item work gives the same result for any ranges. Python threads rather
    than numba's: binning and the histogram layout are made once per fit, and a parallel kernel would cost a second
    or more of compilation on first use.
    """
    if split is None or n_values < _THREADED_VALUES:
        work(0, n_items)
    else:
        split(work, n_items)


def find_thresholds(X, max_bins=MAX_BINS, rows=None, split=None):
    """Bin thresholds per feature from quantiles of a row subsample.

    With at most ``max_bins`` distinct values, thresholds are the midpoints between consecutive distinct values,
    skipping those that would close a bin of fewer than ``MIN_SAMPLES_PER_BIN`` rows; otherwise midpoint
    quantiles, so each bin holds roughly the same number of subsample rows.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    max_bins : int
        Maximum number of value bins per feature (≤ 255; the missing bin comes on top).
    rows : ndarray of int or None
        The rows used to place the thresholds (a subsample); None for all.
    split : callable or None
        ``split(work, n_features)`` that shares feature ranges among threads (``_parallel.split_over_threads``),
        used from ``_THREADED_VALUES`` values; None for one thread.

    Returns
    -------
    thresholds : ndarray of float64
        All features' thresholds, concatenated.
    threshold_offsets : ndarray of int64, shape (n_features + 1,)
    """
    # The sample's values are sorted a chunk of features at a time, in one small buffer per thread reused from
    # chunk to chunk, instead of in one sorted copy of the whole sample: a fresh process pays for every new page
    # it touches (~2 ms per MB on a VM), and that copy (4-8 bytes per value) was the slowest part of a first fit.
    # numpy's sort (SIMD, NaN last) is several times faster than numba's; gathering and thresholds are kernels.
    sample = np.arange(X.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    table = np.empty((X.shape[1], max_bins))
    counts = np.zeros(X.shape[1], dtype=np.int64)

    def place(f0, f1):
        chunk = np.empty((min(_SORT_CHUNK, f1 - f0), sample.shape[0]), dtype=X.dtype)
        for c0 in range(f0, f1, _SORT_CHUNK):
            values = chunk[:min(_SORT_CHUNK, f1 - c0)]
            _gather_features(X, sample, c0, values)
            values.sort(axis=1)
            _thresholds_per_feature(values, max_bins, c0, table, counts)
    over_ranges(place, X.shape[1], sample.shape[0] * X.shape[1], split)
    threshold_offsets = np.zeros(X.shape[1] + 1, dtype=np.int64)
    np.cumsum(counts, out=threshold_offsets[1:])
    return table[np.arange(table.shape[1]) < counts[:, None]], threshold_offsets


@kernel(nogil=True)
def _gather_features(X, rows, f0, out):
    """``out[j] = X[rows, f0 + j]`` for each row ``j`` of ``out``: one pass over the rows, each read once for all
    the chunk's features (numpy's strided copy reads every row once per feature, 30-50 % slower here)."""
    for i in range(rows.shape[0]):
        r = rows[i]
        for j in range(out.shape[0]):
            out[j, i] = X[r, f0 + j]


@kernel(nogil=True)
def _thresholds_per_feature(sorted_values, max_bins, f0, table, counts):
    """Thresholds of features ``f0, f0 + 1, ...`` from their rows of ``sorted_values`` (each sorted, NaN last) into
    rows of the (n_features, max_bins) table."""
    for j in range(sorted_values.shape[0]):
        m = sorted_values.shape[1]
        while m > 0 and np.isnan(sorted_values[j, m - 1]):
            m -= 1
        counts[f0 + j] = _feature_thresholds(sorted_values[j, :m].astype(np.float64), max_bins, table[f0 + j])


@inner_kernel
def _feature_thresholds(values, max_bins, out):
    """Write the thresholds of one feature's sorted non-missing values into ``out``; return how many."""
    m = values.shape[0]
    # The distinct values and their counts, until there are more than max_bins: then quantiles place the
    # thresholds, and the rest of the scan (most of a continuous feature's values) would be wasted.
    distinct = np.empty(max_bins + 1)
    seen = np.zeros(max_bins + 1, dtype=np.int64)
    n_distinct = 0
    for i in range(m):
        if n_distinct == 0 or values[i] != distinct[n_distinct - 1]:
            if n_distinct == max_bins + 1:
                break
            distinct[n_distinct] = values[i]
            n_distinct += 1
        seen[n_distinct - 1] += 1
    n_out = 0
    if n_distinct <= max_bins:
        in_bin = 0
        for i in range(n_distinct - 1):
            in_bin += seen[i]
            if in_bin < MIN_SAMPLES_PER_BIN:
                continue
            in_bin = 0
            lower, upper = distinct[i], distinct[i + 1]
            # Halves first, so huge values of opposite sign do not overflow. Rounding between adjacent doubles, or
            # an infinite neighbour, can put the midpoint on or past `upper` (or make it NaN); cutting at `lower`
            # then keeps the two values apart.
            mid = lower * 0.5 + upper * 0.5
            out[n_out] = mid if mid < upper else lower
            n_out += 1
    else:
        for k in range(1, max_bins):
            # numpy's "midpoint" percentile at k / max_bins.
            position = k * (m - 1) / max_bins
            lo = int(np.floor(position))
            hi = int(np.ceil(position))
            t = values[lo] * 0.5 + values[hi] * 0.5
            # +inf would only leave an empty bin above it; NaN comes from averaging -inf with +inf.
            if np.isnan(t) or t == np.inf:
                continue
            if n_out == 0 or t > out[n_out - 1]:
                out[n_out] = t
                n_out += 1
    return n_out


def bin_features(X, rows, thresholds, threshold_offsets, split=None):
    """Bin codes of the rows ``rows`` of ``X``, shape (n_features, len(rows)) uint8, feature-major; ``split``
    shares the features among threads as in :func:`find_thresholds`."""
    n_features = threshold_offsets.shape[0] - 1
    # Each feature's thresholds padded with +inf to a fixed 255 entries, for a branch-free 8-step search.
    padded = np.full((n_features, MAX_BINS), np.inf)
    counts = np.diff(threshold_offsets)
    padded[np.arange(MAX_BINS) < counts[:, None]] = thresholds
    codes = np.empty((n_features, rows.shape[0]), dtype=np.uint8)
    over_ranges(lambda f0, f1: _bin_rows(X, rows, padded, counts, f0, f1, codes), n_features,
                rows.shape[0] * n_features, split)
    return codes


@kernel(nogil=True)
def _bin_rows(X, rows, padded, counts, f0, f1, codes):
    n_rows = rows.shape[0]
    # Blocks of rows, each first copied out feature by feature (every row read once, in order), so that each
    # feature's searches then read consecutive values; a block of 64 rows' copy stays in the L1 cache. Against
    # reading X[row, f] in the search loop: 7 instead of 10 ns a value (570k generated rows, one thread).
    block = 64
    values = np.empty((f1 - f0, block), dtype=X.dtype)
    for lo in range(0, n_rows, block):
        hi = min(lo + block, n_rows)
        for i in range(lo, hi):
            r = rows[i]
            for f in range(f0, f1):
                values[f - f0, i - lo] = X[r, f]
        for f in range(f0, f1):
            edges = padded[f]
            missing = counts[f] + 1
            column = values[f - f0]
            # Up to 15 thresholds (flags, counts, most sparse features) take four halving steps instead of eight.
            # Two loops, not a choice in one: LLVM made that choice a select, running both searches for every value.
            if counts[f] <= 15:  # what four steps from 8 reach (8 + 4 + 2 + 1)
                for i in range(hi - lo):
                    x = np.float64(column[i])
                    codes[f, lo + i] = missing if np.isnan(x) else _count_below(edges, x, 8)
            else:
                for i in range(hi - lo):
                    x = np.float64(column[i])
                    codes[f, lo + i] = missing if np.isnan(x) else _count_below(edges, x, 128)


@inner_kernel(inline="always")
def _count_below(edges, x, step):
    """How many of the ascending, +inf-padded ``edges`` are below ``x``, in halving steps from ``step`` (a power of
    two; finds up to 2·step - 1 edges). Adding each comparison's result instead of branching on it avoids a
    misprediction at every step (2x)."""
    pos = 0
    while step > 0:
        pos += step * (edges[pos + step - 1] < x)
        step >>= 1
    return pos
