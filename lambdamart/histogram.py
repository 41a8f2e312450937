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


@njit(cache=True)
def _accumulate(hist, rows, ordered_grad, ordered_hess, column, base):
    for i in range(rows.shape[0]):
        b = base + column[rows[i]]
        hist[b, 0] += ordered_grad[i]
        hist[b, 1] += ordered_hess[i]
        hist[b, 2] += 1.0


@njit(cache=True)
def _accumulate_four(hist, rows, ordered_grad, ordered_hess, c0, c1, c2, c3, b0, b1, b2, b3):
    # Four features per pass over the rows: the row index, λ and w are loaded once for four histograms, and the
    # four independent updates keep the CPU busy while the gathered codes arrive (about 1.7x one at a time).
    for i in range(rows.shape[0]):
        r = rows[i]
        g = ordered_grad[i]
        h = ordered_hess[i]
        b = b0 + c0[r]
        hist[b, 0] += g
        hist[b, 1] += h
        hist[b, 2] += 1.0
        b = b1 + c1[r]
        hist[b, 0] += g
        hist[b, 1] += h
        hist[b, 2] += 1.0
        b = b2 + c2[r]
        hist[b, 0] += g
        hist[b, 1] += h
        hist[b, 2] += 1.0
        b = b3 + c3[r]
        hist[b, 0] += g
        hist[b, 1] += h
        hist[b, 2] += 1.0


@njit(cache=True)
def build_feature_group(codes, rows, ordered_grad, ordered_hess, bin_offsets, features, first, last, hist):
    """Histograms of ``features[first:last]`` (at most four) for the node whose rows are ``rows``."""
    for k in range(first, last):
        f = features[k]
        hist[bin_offsets[f]:bin_offsets[f + 1], :] = 0.0
    if last - first == 4:
        f0, f1, f2, f3 = features[first], features[first + 1], features[first + 2], features[first + 3]
        _accumulate_four(hist, rows, ordered_grad, ordered_hess, codes[f0], codes[f1], codes[f2], codes[f3],
                         bin_offsets[f0], bin_offsets[f1], bin_offsets[f2], bin_offsets[f3])
    else:
        for k in range(first, last):
            f = features[k]
            _accumulate(hist, rows, ordered_grad, ordered_hess, codes[f], bin_offsets[f])


def n_feature_groups(n_features):
    """Features are processed four at a time (see :func:`build_feature_group`)."""
    return (n_features + 3) // 4


@njit(cache=True, parallel=True)
def build_histogram(codes, rows, ordered_grad, ordered_hess, bin_offsets, features, hist):
    """Fill ``hist`` for the node whose rows are ``rows``, with ``ordered_grad[i]`` the λ of ``rows[i]``.

    Only the features listed in ``features`` are built; the rest of ``hist`` is left as it was. Threads take
    groups of four features.
    """
    n_features = features.shape[0]
    for group in prange((n_features + 3) // 4):
        build_feature_group(codes, rows, ordered_grad, ordered_hess, bin_offsets, features, 4 * group,
                            min(4 * group + 4, n_features), hist)


@njit(cache=True)
def subtract_feature(parent, child, bin_offsets, f):
    """``parent -= child`` on feature ``f``'s bins: the parent's histogram becomes its other child's."""
    for b in range(bin_offsets[f], bin_offsets[f + 1]):
        parent[b, 0] -= child[b, 0]
        parent[b, 1] -= child[b, 1]
        parent[b, 2] -= child[b, 2]
