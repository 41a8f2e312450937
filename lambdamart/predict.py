"""Scoring rows with a tree ensemble: raw features for predict, bin codes inside the boosting loop."""

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _row_score(X, i, feature, threshold, missing_left, left, right, value, tree_starts):
    score = 0.0
    for t in range(tree_starts.shape[0]):
        node = tree_starts[t]
        while left[node] != -1:
            x = X[i, feature[node]]
            if np.isnan(x):
                node = left[node] if missing_left[node] else right[node]
            elif x <= threshold[node]:
                node = left[node]
            else:
                node = right[node]
        score += value[node]
    return score


@njit(cache=True, parallel=True)
def predict_parallel(X, feature, threshold, missing_left, left, right, value, tree_starts):
    """Scores of all rows of ``X``, rows spread across threads."""
    out = np.empty(X.shape[0])
    for i in prange(X.shape[0]):
        out[i] = _row_score(X, i, feature, threshold, missing_left, left, right, value, tree_starts)
    return out


@njit(cache=True)
def predict_serial(X, feature, threshold, missing_left, left, right, value, tree_starts):
    """Scores of all rows of ``X`` on the calling thread: no thread start-up cost for a single query."""
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        out[i] = _row_score(X, i, feature, threshold, missing_left, left, right, value, tree_starts)
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
