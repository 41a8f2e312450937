"""Best split of a node from its histogram: the threshold bin and missing-value side that maximise

    gain = G_L² / (H_L + l2) + G_R² / (H_R + l2) - G² / (H + l2)

subject to ``min_samples_leaf`` rows and ``min_sum_hessian`` weight on each side.
"""

import numpy as np
from numba import njit


_RELATIVE_GAIN_TOLERANCE = 1e-10


@njit(cache=True)
def leaf_objective(sum_grad, sum_hess, l2):
    """G² / (H + l2): how much a leaf with these sums lowers the loss; 0 when it has no weight at all."""
    denominator = sum_hess + l2
    return sum_grad * sum_grad / denominator if denominator > 0.0 else 0.0


@njit(cache=True)
def leaf_value(sum_grad, sum_hess, l2):
    """Newton step -G / (H + l2); 0 for a leaf without weight (nothing to learn there)."""
    denominator = sum_hess + l2
    return -sum_grad / denominator if denominator > 0.0 else 0.0


@njit(cache=True)
def feature_best_split(hist, base, n_value_bins, sum_grad, sum_hess, count, l2, min_samples_leaf, min_sum_hessian):
    """Best (gain, bin, missing_left, left λ sum, left w sum, left count) for one feature; gain -inf if none."""
    missing = base + n_value_bins
    miss_g, miss_h, miss_n = hist[missing, 0], hist[missing, 1], hist[missing, 2]
    parent_term = leaf_objective(sum_grad, sum_hess, l2)
    best_gain, best_bin, best_missing_left = -np.inf, -1, False
    best_g, best_h, best_n = 0.0, 0.0, 0.0
    g_left, h_left, n_left = 0.0, 0.0, 0.0
    # With missing values present, the last value bin is also a candidate: all values left, missing right.
    last = n_value_bins - 1 if miss_n == 0.0 else n_value_bins
    for b in range(last):
        if hist[base + b, 2] == 0.0:
            # An empty bin moves no row: the threshold before it is the same split. Skipping it also keeps the
            # rounding noise a subtracted histogram leaves in empty bins from deciding between equal splits.
            continue
        g_left += hist[base + b, 0]
        h_left += hist[base + b, 1]
        n_left += hist[base + b, 2]
        for missing_left in (False, True):
            if missing_left:
                if miss_n == 0.0 or b == n_value_bins - 1:
                    continue
                g, h, n = g_left + miss_g, h_left + miss_h, n_left + miss_n
            else:
                g, h, n = g_left, h_left, n_left
            g_right, h_right, n_right = sum_grad - g, sum_hess - h, count - n
            if n < min_samples_leaf or n_right < min_samples_leaf:
                continue
            if h < min_sum_hessian or h_right < min_sum_hessian:
                continue
            children = leaf_objective(g, h, l2) + leaf_objective(g_right, h_right, l2)
            gain = children - parent_term
            # A gain within rounding error of the terms it is the difference of is no gain: splitting on it would
            # fit noise (e.g. nearly equal gradients everywhere).
            if gain <= _RELATIVE_GAIN_TOLERANCE * children:
                continue
            if gain > best_gain:
                best_gain, best_bin, best_missing_left = gain, b, missing_left
                best_g, best_h, best_n = g, h, n
    if miss_n == 0.0 and best_bin >= 0:
        # No missing value reached this node in training: send future ones to the larger child.
        best_missing_left = best_n >= count - best_n
    return best_gain, best_bin, best_missing_left, best_g, best_h, best_n


@njit(cache=True)
def store_feature_split(results, k, hist, base, n_value_bins, sum_grad, sum_hess, count, l2, min_samples_leaf,
                        min_sum_hessian):
    """Write the best split on the histogram of one feature into row ``k`` of ``results`` (see :func:`best_of`)."""
    gain, b, missing_left, g, h, c = feature_best_split(hist, base, n_value_bins, sum_grad, sum_hess, count, l2,
                                                        min_samples_leaf, min_sum_hessian)
    results[k, 0] = gain
    results[k, 1] = b
    results[k, 2] = 1.0 if missing_left else 0.0
    results[k, 3] = g
    results[k, 4] = h
    results[k, 5] = c


@njit(cache=True)
def best_of(results, features):
    """The best of the per-feature splits ``results[f]`` for f in ``features``: (gain, feature, bin, missing_left,
    left λ sum, left w sum, left count). Ties in gain go to the lowest feature index (``features`` is sorted), so the
    result does not depend on the thread count; a gain of -inf means no admissible split."""
    if features.shape[0] == 0:
        return -np.inf, -1, -1, False, 0.0, 0.0, 0.0
    best = features[0]
    for f in features[1:]:
        if results[f, 0] > results[best, 0]:
            best = f
    r = results[best]
    return r[0], best, int(r[1]), r[2] != 0.0, r[3], r[4], r[5]
