"""Gradient histograms of one tree node: per feature and bin, the sums of λ, of w and the row count.

A node's histogram is a ``(total_bins, 3)`` float64 array; feature ``f`` owns rows
``bin_offsets[f]:bin_offsets[f + 1]`` (its value bins, then its missing bin). Features are spread across threads,
so no two threads ever write the same row, and each bin sums its rows in node order: the result does not depend on
the thread count.
"""

import numpy as np
from numba import njit, prange


def bin_offsets_for(n_bins):
    """Histogram row offsets for features with ``n_bins`` value bins each (plus one missing bin)."""
    offsets = np.zeros(len(n_bins) + 1, dtype=np.int64)
    np.cumsum(np.asarray(n_bins) + 1, out=offsets[1:])
    return offsets


@njit(cache=True, parallel=True)
def build_histogram(codes, rows, ordered_grad, ordered_hess, bin_offsets, features, hist):
    """Fill ``hist`` for the node whose rows are ``rows``, with ``ordered_grad[i]`` the λ of ``rows[i]``.

    Only the features listed in ``features`` are built; the rest of ``hist`` is left as it was.
    """
    n_rows = rows.shape[0]
    for k in prange(features.shape[0]):
        f = features[k]
        base = bin_offsets[f]
        hist[base:bin_offsets[f + 1], :] = 0.0
        column = codes[f]
        for i in range(n_rows):
            b = base + column[rows[i]]
            hist[b, 0] += ordered_grad[i]
            hist[b, 1] += ordered_hess[i]
            hist[b, 2] += 1.0


@njit(cache=True, parallel=True)
def subtract_histogram(parent, child, bin_offsets, features):
    """``parent -= child`` in place: the parent's histogram becomes its other child's."""
    for k in prange(features.shape[0]):
        f = features[k]
        for b in range(bin_offsets[f], bin_offsets[f + 1]):
            parent[b, 0] -= child[b, 0]
            parent[b, 1] -= child[b, 1]
            parent[b, 2] -= child[b, 2]
