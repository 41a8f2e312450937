"""Feature binning: raw float features to uint8 bin codes, feature-major, with a missing-value bin per feature.

Feature ``f`` has ``n_bins[f]`` value bins, separated by the ``n_bins[f] - 1`` increasing thresholds
``thresholds[threshold_offsets[f]:threshold_offsets[f + 1]]``; a value ``x`` falls in the bin counting the
thresholds below it, so ``x <= thresholds[b]`` exactly when its bin is ``<= b``. NaN gets code ``n_bins[f]``
(its own bin, right after the value bins); ±inf fall in the extreme value bins.
"""

import numpy as np
from numba import njit, prange

MAX_BINS = 255
# As LightGBM's min_data_in_bin: a value seen fewer times than this shares its bin with the next value, so the
# trees cannot isolate a handful of rows by a rare exact value.
MIN_SAMPLES_PER_BIN = 3


def find_thresholds(X, max_bins=MAX_BINS, rows=None):
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

    Returns
    -------
    thresholds : ndarray of float64
        All features' thresholds, concatenated.
    threshold_offsets : ndarray of int64, shape (n_features + 1,)
    """
    n_features = X.shape[1]
    if rows is not None:
        X = X[rows]
    per_feature = [_feature_thresholds(X[:, f], max_bins) for f in range(n_features)]
    threshold_offsets = np.zeros(n_features + 1, dtype=np.int64)
    np.cumsum([len(t) for t in per_feature], out=threshold_offsets[1:])
    thresholds = np.concatenate(per_feature) if per_feature else np.zeros(0)
    return thresholds.astype(np.float64, copy=False), threshold_offsets


def _feature_thresholds(column, max_bins):
    values = column[~np.isnan(column)].astype(np.float64)
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size <= max_bins:
        cuts = _cuts_after(counts[:-1])
        lower, upper = distinct[cuts], distinct[cuts + 1]
        # Halves first, so huge values of opposite sign do not overflow. Rounding between adjacent doubles, or an
        # infinite neighbour, can put the midpoint on or past `upper` (or make it NaN); cutting at `lower` then
        # keeps the two values apart.
        with np.errstate(invalid="ignore"):
            mids = lower * 0.5 + upper * 0.5
        thresholds = np.where((mids >= upper) | np.isnan(mids), lower, mids)
    else:
        quantiles = np.linspace(0, 100, max_bins + 1)[1:-1]
        with np.errstate(invalid="ignore"):
            thresholds = np.unique(np.percentile(values, quantiles, method="midpoint"))
    # A +inf threshold would only leave an empty bin above it; NaN arises from averaging -inf with +inf.
    return thresholds[~(np.isnan(thresholds) | np.isposinf(thresholds))]


def _cuts_after(counts):
    """Indices of the values after which a bin closes, each bin gathering at least MIN_SAMPLES_PER_BIN rows."""
    cuts = []
    in_bin = 0
    for i, c in enumerate(counts.tolist()):
        in_bin += c
        if in_bin >= MIN_SAMPLES_PER_BIN:
            cuts.append(i)
            in_bin = 0
    return np.array(cuts, dtype=np.intp)


@njit(cache=True, parallel=True)
def bin_features(X, rows, thresholds, threshold_offsets):
    """Bin codes of the rows ``rows`` of ``X``, shape (n_features, len(rows)) uint8, feature-major.

    Threads take blocks of rows, so each block of ``X`` is read from cache once for all its features.
    """
    n_features = X.shape[1]
    n_rows = rows.shape[0]
    codes = np.empty((n_features, n_rows), dtype=np.uint8)
    block = 2048
    for start in prange((n_rows + block - 1) // block):
        lo = start * block
        hi = min(lo + block, n_rows)
        for f in range(n_features):
            edges = thresholds[threshold_offsets[f]:threshold_offsets[f + 1]]
            missing = edges.shape[0] + 1
            for i in range(lo, hi):
                x = X[rows[i], f]
                codes[f, i] = missing if np.isnan(x) else np.searchsorted(edges, x, side="left")
    return codes
