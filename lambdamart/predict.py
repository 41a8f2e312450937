"""Scoring rows with a tree ensemble: raw features for predict, bin codes inside the boosting loop."""

import numpy as np
from numba import njit, prange


# Rows per block: each tree is walked for a whole block of rows before the next, so its nodes stay in cache.
_BLOCK = 64


@njit(cache=True)
def _leaf_value(X, i, node, feature, threshold, missing_left, left, right, value):
    while left[node] != -1:
        x = X[i, feature[node]]
        # NaN fails every comparison. Both children are loaded and one is selected without a branch: the
        # direction is data-dependent, so a branch would be mispredicted about half the time.
        go_right = (x > threshold[node]) | ((x != x) & ~missing_left[node])
        lo = left[node]
        hi = right[node]
        node = hi if go_right else lo
    return value[node]


@njit(cache=True)
def _score_block(X, lo, hi, feature, threshold, missing_left, left, right, value, tree_starts, out):
    out[lo:hi] = 0.0
    for t in range(tree_starts.shape[0]):
        for i in range(lo, hi):
            out[i] += _leaf_value(X, i, tree_starts[t], feature, threshold, missing_left, left, right, value)


@njit(cache=True, parallel=True)
def predict_parallel(X, feature, threshold, missing_left, left, right, value, tree_starts):
    """Scores of all rows of ``X``, blocks of rows spread across threads (sums in tree order, as serial)."""
    n = X.shape[0]
    out = np.empty(n)
    for block in prange((n + _BLOCK - 1) // _BLOCK):
        lo = block * _BLOCK
        _score_block(X, lo, min(lo + _BLOCK, n), feature, threshold, missing_left, left, right, value, tree_starts,
                     out)
    return out


@njit(cache=True)
def predict_serial(X, feature, threshold, missing_left, left, right, value, tree_starts):
    """Scores of all rows of ``X`` on the calling thread: no thread start-up cost for a single query."""
    n = X.shape[0]
    out = np.empty(n)
    for lo in range(0, n, _BLOCK):
        _score_block(X, lo, min(lo + _BLOCK, n), feature, threshold, missing_left, left, right, value, tree_starts,
                     out)
    return out


@njit(cache=True, parallel=True)
def add_tree_binned(codes, n_bins, feature, split_bin, missing_left, left, right, value, rows, scores):
    """``scores[r] += tree(r)`` for the rows ``rows`` of binned data ``codes`` (one tree, relative indices)."""
    for k in prange(rows.shape[0]):
        r = rows[k]
        node = 0
        while left[node] != -1:
            f = feature[node]
            code = codes[f, r]
            if code == n_bins[f]:
                node = left[node] if missing_left[node] else right[node]
            elif code <= split_bin[node]:
                node = left[node]
            else:
                node = right[node]
        scores[r] += value[node]
