"""Best split of a node from its histogram: the threshold bin and missing-value side that maximise

    gain = G_L² / (H_L + l2) + G_R² / (H_R + l2) - G² / (H + l2)

subject to ``min_samples_leaf`` rows and ``min_sum_hessian`` weight on each side.
"""

from typing import NamedTuple

import numpy as np
from numba import prange

from .._jit import inner_kernel, kernel
from .histogram import subtract_bin
from .lanes import any_lane, lane, lanes, select

_RELATIVE_GAIN_TOLERANCE = 1e-10


@inner_kernel
def leaf_objective(sum_grad, sum_hess, l2):
    """G² / (H + l2): how much a leaf with these sums lowers the loss; 0 when it has no weight at all."""
    denominator = sum_hess + l2
    return sum_grad * sum_grad / denominator if denominator > 0.0 else 0.0


@kernel
def leaf_value(sum_grad, sum_hess, l2):
    """Newton step -G / (H + l2); 0 for a leaf without weight (nothing to learn there)."""
    denominator = sum_hess + l2
    return -sum_grad / denominator if denominator > 0.0 else 0.0


@inner_kernel
def _children_term(g_left, h_left, sum_grad, sum_hess, l2, min_sum_hessian):
    """G_L² / (H_L + l2) + G_R² / (H_R + l2) of a split whose left child has sums ``g_left``, ``h_left`` (rows
    checked by the caller); -inf when a side lacks ``min_sum_hessian``."""
    g_right, h_right = sum_grad - g_left, sum_hess - h_left
    if h_left < min_sum_hessian or h_right < min_sum_hessian:
        return -np.inf
    return leaf_objective(g_left, h_left, l2) + leaf_objective(g_right, h_right, l2)


@inner_kernel
def feature_best_split(hist, base, n_value_bins, sum_grad, sum_hess, count, l2, min_samples_leaf, min_sum_hessian):
    """Best (gain, bin, missing_left, left λ sum, left w sum, left count) for one feature; gain -inf if none.

    Also returns whether any threshold leaves ``min_samples_leaf`` rows on both sides. When none does, none does in
    any descendant of the node either (its rows are a subset, so each side only shrinks): the grower stops looking
    at the feature below this node.
    """
    missing = base + n_value_bins
    miss_g, miss_h, miss_n = hist[missing, 0], hist[missing, 1], hist[missing, 2]
    parent_term = leaf_objective(sum_grad, sum_hess, l2)
    best_gain, best_children, best_bin, best_missing_left = -np.inf, 0.0, -1, False
    best_g, best_h, best_n = 0.0, 0.0, 0.0
    g_left, h_left, n_left = 0.0, 0.0, 0.0
    has_missing = miss_n != 0.0
    enough_rows = False
    # With missing values present, the last value bin is also a candidate: all values left, missing right.
    last = n_value_bins if has_missing else n_value_bins - 1
    for b in range(last):
        n_bin = hist[base + b, 2]
        if n_bin == 0.0:
            # An empty bin moves no row: the threshold before it is the same split. Skipping it also keeps the
            # rounding noise a subtracted histogram leaves in empty bins from deciding between equal splits.
            continue
        g_left += hist[base + b, 0]
        h_left += hist[base + b, 1]
        n_left += n_bin
        if count - n_left < min_samples_leaf:
            break  # counts are exact and only grow to the right: no later threshold leaves enough rows right
        if n_left >= min_samples_leaf:
            enough_rows = True
            children = _children_term(g_left, h_left, sum_grad, sum_hess, l2, min_sum_hessian)
            if children - parent_term > best_gain:
                best_gain, best_children, best_bin, best_missing_left = children - parent_term, children, b, False
                best_g, best_h, best_n = g_left, h_left, n_left
        if has_missing and b != n_value_bins - 1:
            g, h, n = g_left + miss_g, h_left + miss_h, n_left + miss_n
            if n >= min_samples_leaf and count - n >= min_samples_leaf:
                enough_rows = True
                children = _children_term(g, h, sum_grad, sum_hess, l2, min_sum_hessian)
                if children - parent_term > best_gain:
                    best_gain, best_children, best_bin, best_missing_left = children - parent_term, children, b, True
                    best_g, best_h, best_n = g, h, n
    return _checked(best_gain, best_children, best_bin, best_missing_left, has_missing, best_g, best_h, best_n,
                    count) + (enough_rows,)


@inner_kernel
def _checked(gain, children, b, missing_left, has_missing, g, h, n, count):
    """A feature's best candidate (bin ``b``, -1 for none) as the scans return it: (gain, bin, missing_left, left
    λ, w and row sums), no split when its gain is within rounding of its terms, and the missing side set when no
    missing value reached the node."""
    # A gain within rounding error of the terms it is the difference of is no gain: splitting on it would fit noise
    # (e.g. nearly equal gradients everywhere). Checked once, for the best: if it fails, every candidate (a smaller
    # gain and so a smaller sum of children's terms) fails too. Per candidate, it was a sixth of the scan's work.
    if b < 0 or not gain > _RELATIVE_GAIN_TOLERANCE * children:
        return -np.inf, np.int64(-1), False, 0.0, 0.0, 0.0
    # No missing value reached this node in training: send future ones to the larger child.
    return gain, np.int64(b), missing_left if has_missing else n >= count - n, g, h, n


@inner_kernel
def _lane_result(g, h, n, b, missing_left, has_missing, sum_grad, sum_hess, count, l2):
    """One child's result of :func:`children_best_splits`, as :func:`feature_best_split` returns it."""
    children = leaf_objective(g, h, l2) + leaf_objective(sum_grad - g, sum_hess - h, l2)
    return _checked(children - leaf_objective(sum_grad, sum_hess, l2), children, b, missing_left, has_missing, g,
                    h, n, count)


@inner_kernel
def _consider(best, admissible, g, h, n, position, missing_left, sum_grad, sum_hess, l2, min_weight):
    """``best`` (N, D, bin, left λ, w and row sums, missing side) with the candidate whose left child has sums
    ``g``, ``h``, ``n`` taken in the lanes where it is admissible and better (see :func:`children_best_splits`)."""
    g_right, h_right = sum_grad - g, sum_hess - h
    left_term, right_term = h + l2, h_right + l2
    num = g * g * right_term + g_right * g_right * left_term
    den = left_term * right_term
    take = admissible & (h >= min_weight) & (h_right >= min_weight) & (num * best[1] > best[0] * den)
    return (select(take, num, best[0]), select(take, den, best[1]), select(take, position, best[2]),
            select(take, g, best[3]), select(take, h, best[4]), select(take, n, best[5]),
            select(take, missing_left, best[6]))


@inner_kernel(error_model="numpy")
def children_best_splits(hist_small, hist_large, base, n_value_bins, sums, l2, min_samples_leaf, min_sum_hessian):
    """:func:`feature_best_split` of one feature for both children of a split at once, one child per vector lane.

    ``hist_large`` holds the parent's histogram on entry and the larger child's on return: the feature's bins are
    subtracted (as :func:`histogram.subtract_feature` does) in the same pass that scans them, which saves a pass.
    ``sums`` holds each child's (λ, w, row) totals in a row (the smaller child first). Returns the two children's
    (gain, bin, missing_left, left λ sum, left w sum, left count) and whether each can still split on the feature.
    Needs ``min_sum_hessian > 0`` or ``l2 > 0``: candidates are compared as fractions, N/D with D = (H_L + l2)·(H_R +
    l2), by cross-multiplying (N·D' > N'·D), which takes no division; the chosen split's gain is then computed as
    in the scalar scan. Only candidates whose gains agree to rounding can be ordered differently than there.

    The scalar scan branches on every bin (is it empty, is it admissible, is it better), and on small nodes those
    branches are unpredictable; here every lane computes every candidate and keeps the better by selects. On
    LightGBM's example this took a node pair's subtraction and search from 57 to 32 µs, on 16k generated rows from
    173 to 123 µs (a tree's 30 node pairs, one thread).
    """
    zero, one = lanes(0.0, 0.0), lanes(1.0, 1.0)
    sum_grad = lanes(sums[0, 0], sums[1, 0])
    sum_hess = lanes(sums[0, 1], sums[1, 1])
    count = lanes(sums[0, 2], sums[1, 2])
    min_rows, min_weight = lanes(min_samples_leaf, min_samples_leaf), lanes(min_sum_hessian, min_sum_hessian)
    l2_lanes = lanes(l2, l2)
    missing = base + n_value_bins
    subtract_bin(hist_large, hist_small, missing)
    miss_g = lanes(hist_small[missing, 0], hist_large[missing, 0])
    miss_h = lanes(hist_small[missing, 1], hist_large[missing, 1])
    miss_n = lanes(hist_small[missing, 2], hist_large[missing, 2])
    has_missing = miss_n != zero
    any_missing = any_lane(has_missing)
    # With missing values, the last value bin is a candidate too (all values left, missing right).
    last = lanes(n_value_bins - 1, n_value_bins - 1) + select(has_missing, one, zero)
    g_left, h_left, n_left = zero, zero, zero
    # The best candidate so far: N and D of its children's terms, bin, left sums, missing side (1.0 = left).
    best = (lanes(-1.0, -1.0), one, lanes(-1.0, -1.0), zero, zero, zero, zero)
    enough_rows = zero != zero
    subtracted = 0
    for b in range(n_value_bins if any_missing else n_value_bins - 1):
        i = base + b
        subtract_bin(hist_large, hist_small, i)
        subtracted = b + 1
        n_bin = lanes(hist_small[i, 2], hist_large[i, 2])
        # An empty bin adds nothing (not even a subtracted histogram's rounding noise) and is no candidate.
        nonempty = n_bin != zero
        g_left = select(nonempty, g_left + lanes(hist_small[i, 0], hist_large[i, 0]), g_left)
        h_left = select(nonempty, h_left + lanes(hist_small[i, 1], hist_large[i, 1]), h_left)
        n_left = n_left + n_bin
        room = count - n_left >= min_rows  # once false, false for every later bin (counts only grow)
        if not any_lane(room):
            break
        position = lanes(b, b)
        live = nonempty & room & (position < last)
        # Values up to bin b left, missing values right.
        admissible = live & (n_left >= min_rows)
        best = _consider(best, admissible, g_left, h_left, n_left, position, zero, sum_grad, sum_hess, l2_lanes,
                         min_weight)
        if any_missing:
            # Missing values left as well (not at the last value bin: that would send every row left).
            g, h, n = g_left + miss_g, h_left + miss_h, n_left + miss_n
            with_missing = live & has_missing & (position < last - one) & (n >= min_rows) & (count - n >= min_rows)
            admissible = admissible | with_missing
            best = _consider(best, with_missing, g, h, n, position, one, sum_grad, sum_hess, l2_lanes, min_weight)
        enough_rows = enough_rows | admissible
    for i in range(base + subtracted, base + n_value_bins):  # the bins after the last one scanned
        subtract_bin(hist_large, hist_small, i)
    _, _, best_bin, best_g, best_h, best_n, best_missing_left = best
    small = _lane_result(lane(best_g, 0), lane(best_h, 0), lane(best_n, 0), np.int64(lane(best_bin, 0)),
                         lane(best_missing_left, 0) != 0.0, lane(has_missing, 0), sums[0, 0], sums[0, 1],
                         sums[0, 2], l2)
    large = _lane_result(lane(best_g, 1), lane(best_h, 1), lane(best_n, 1), np.int64(lane(best_bin, 1)),
                         lane(best_missing_left, 1) != 0.0, lane(has_missing, 1), sums[1, 0], sums[1, 1],
                         sums[1, 2], l2)
    return small, large, lane(enough_rows, 0), lane(enough_rows, 1)


class Split(NamedTuple):
    """The best split of a node: where it cuts and the λ, w and row sums of its left child.

    ``gain`` is -inf when no split is admissible (then the other fields mean nothing). Rows with bin code
    ``<= bin`` of ``feature`` go left, and missing values go left when ``missing_left``.
    """

    gain: float
    feature: int
    bin: int
    missing_left: bool
    left_grad: float
    left_hess: float
    left_count: float


class BlockSplits(NamedTuple):
    """The best split each feature block found for each node being searched: every array is (n_blocks, n_nodes).

    A block's thread writes its record once, at the end of its search (the grower's ``_split_block``), and
    :func:`best_of` picks a node's best over the blocks. With a record per feature instead, every split had the
    calling thread read all the other threads' results (to choose the split), which those threads then had to
    take back from its cache to write the next split's: fits of 16k generated rows took 4.5 % longer, LightGBM's
    example 2 %. ``feature`` is -1 where the block found no admissible split (or was not searched).
    """

    gain: np.ndarray
    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    left_grad: np.ndarray
    left_hess: np.ndarray
    left_count: np.ndarray


def new_block_splits(n_blocks, n_nodes):
    """Empty :class:`BlockSplits` for ``n_blocks`` blocks and ``n_nodes`` nodes (no split found yet).

    Made in Python and handed to the kernels: allocating these in a kernel compiled half a second of numba's array
    code on first use.
    """
    shape = (n_blocks, n_nodes)
    return BlockSplits(np.full(shape, -np.inf), np.full(shape, -1, dtype=np.int64), np.zeros(shape, dtype=np.int64),
                       np.zeros(shape, dtype=np.bool_), np.zeros(shape), np.zeros(shape), np.zeros(shape))


@inner_kernel
def best_of(splits, node, n_blocks):
    """The best of the first ``n_blocks`` blocks' splits of ``node``, as a :class:`Split`.

    Ties in gain go to the lowest feature index (as within a block), so the result does not depend on how the
    features are shared into blocks or on the thread count; gain -inf (feature -1) when no block found one.
    """
    best = -1
    for k in range(n_blocks):
        f = splits.feature[k, node]
        if f >= 0 and (best < 0 or splits.gain[k, node] > splits.gain[best, node]
                       or (splits.gain[k, node] == splits.gain[best, node] and f < splits.feature[best, node])):
            best = k
    if best < 0:
        return Split(-np.inf, -1, -1, False, 0.0, 0.0, 0.0)
    return Split(splits.gain[best, node], splits.feature[best, node], splits.bin[best, node],
                 splits.missing_left[best, node], splits.left_grad[best, node], splits.left_hess[best, node],
                 splits.left_count[best, node])


# ------------------------------------------------------------------------- one split for a whole level
# Symmetric (oblivious) trees split every node of a level by the same feature and threshold: the one whose gains,
# summed over the level's nodes, are largest. A node where that split leaves a side short of ``min_samples_leaf``
# rows or ``min_sum_hessian`` weight adds nothing to the sum and stays a leaf.


class LevelSplit(NamedTuple):
    """The split of a level: ``gain`` summed over its nodes (-inf when no node can take any split), ``feature``,
    ``bin`` and ``missing_left`` as in :class:`Split` (``missing_left`` for nodes that had missing values)."""

    gain: float
    feature: int
    bin: int
    missing_left: bool


@inner_kernel
def _node_side_sums(hist, base, n_value_bins, b, missing_left):
    """(λ, w, row) sums of the rows a node sends left by the split at bin ``b``; bins without rows add nothing (a
    subtracted histogram leaves rounding noise in them), so a threshold at an empty bin is exactly the one before."""
    g, h, n = 0.0, 0.0, 0.0
    for i in range(base, base + b + 1):
        if hist[i, 2] != 0.0:
            g += hist[i, 0]
            h += hist[i, 1]
            n += hist[i, 2]
    if missing_left:
        missing = base + n_value_bins
        g += hist[missing, 0]
        h += hist[missing, 1]
        n += hist[missing, 2]
    return g, h, n


@inner_kernel
def _node_gain(g, h, n, sum_grad, sum_hess, count, l2, min_samples_leaf, min_sum_hessian):
    """A node's gain from sending rows with sums ``g``, ``h``, ``n`` left; -inf when inadmissible or within rounding
    of its terms (as :func:`_checked` judges a node's best split)."""
    if n < min_samples_leaf or count - n < min_samples_leaf:
        return -np.inf
    children = _children_term(g, h, sum_grad, sum_hess, l2, min_sum_hessian)
    gain = children - leaf_objective(sum_grad, sum_hess, l2)
    return gain if gain > _RELATIVE_GAIN_TOLERANCE * children else -np.inf


@inner_kernel
def _feature_level_split(hists, slots, sums, base, n_value_bins, l2, min_samples_leaf, min_sum_hessian):
    """The best (summed gain, bin, missing_left) of one feature over a level's nodes. Ties go to the lowest bin,
    then to missing values right."""
    totals = np.zeros((n_value_bins, 2))  # summed gain per threshold bin and side for missing values
    missing = base + n_value_bins
    for k in range(slots.shape[0]):
        hist = hists[slots[k]]
        sum_grad, sum_hess, count = sums[k, 0], sums[k, 1], sums[k, 2]
        miss_g, miss_h, miss_n = hist[missing, 0], hist[missing, 1], hist[missing, 2]
        g, h, n = 0.0, 0.0, 0.0
        for b in range(n_value_bins):
            if hist[base + b, 2] != 0.0:
                g += hist[base + b, 0]
                h += hist[base + b, 1]
                n += hist[base + b, 2]
            gain = _node_gain(g, h, n, sum_grad, sum_hess, count, l2, min_samples_leaf, min_sum_hessian)
            if miss_n != 0.0:
                gain_missing_left = _node_gain(g + miss_g, h + miss_h, n + miss_n, sum_grad, sum_hess, count, l2,
                                               min_samples_leaf, min_sum_hessian)
            else:  # a node without missing values splits the same way whichever side they are sent
                gain_missing_left = gain
            if gain > 0.0:
                totals[b, 0] += gain
            if gain_missing_left > 0.0:
                totals[b, 1] += gain_missing_left
    best, best_bin, best_missing_left = 0.0, -1, False
    for b in range(n_value_bins):
        for side in range(2):
            if totals[b, side] > best:
                best, best_bin, best_missing_left = totals[b, side], b, side == 1
    return (best if best_bin >= 0 else -np.inf), best_bin, best_missing_left


@inner_kernel
def _first_best(gains, bins, missing_lefts, features):
    """The :class:`LevelSplit` of the features' best candidates, in feature order: ties to the lowest feature."""
    best = LevelSplit(-np.inf, -1, -1, False)
    for i in range(features.shape[0]):
        if gains[i] > best.gain:
            best = LevelSplit(gains[i], features[i], bins[i], missing_lefts[i])
    return best


@kernel
def level_best_split(hists, slots, sums, n_bins, bin_offsets, features, l2, min_samples_leaf, min_sum_hessian):
    """The :class:`LevelSplit` of the nodes whose histograms are ``hists[slots]`` and totals ``sums`` (one (Σλ, Σw,
    rows) row per node), over the sorted ``features``; ties go to the lowest feature."""
    n = features.shape[0]
    gains, bins, missing_lefts = np.empty(n), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.bool_)
    for i in range(n):
        f = features[i]
        gains[i], bins[i], missing_lefts[i] = _feature_level_split(hists, slots, sums, bin_offsets[f], n_bins[f], l2,
                                                                   min_samples_leaf, min_sum_hessian)
    return _first_best(gains, bins, missing_lefts, features)


@kernel(parallel=True)
def level_best_split_threaded(hists, slots, sums, n_bins, bin_offsets, features, l2, min_samples_leaf,
                              min_sum_hessian):
    """:func:`level_best_split` with the features shared among numba's threads (the same split)."""
    n = features.shape[0]
    gains, bins, missing_lefts = np.empty(n), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.bool_)
    for i in prange(n):
        f = features[i]
        gains[i], bins[i], missing_lefts[i] = _feature_level_split(hists, slots, sums, bin_offsets[f], n_bins[f], l2,
                                                                   min_samples_leaf, min_sum_hessian)
    return _first_best(gains, bins, missing_lefts, features)


@kernel
def level_node_splits(hists, slots, sums, split, n_bins, bin_offsets, l2, min_samples_leaf, min_sum_hessian):
    """What the level's split does at each node: (gain, -inf where the node does not split; left λ, w and row sums;
    missing_left: the split's where the node had missing values, else towards the larger side, as in
    :func:`_checked`), one array each over the nodes."""
    n_nodes = slots.shape[0]
    gain, left_grad, left_hess, left_count = np.empty(n_nodes), np.empty(n_nodes), np.empty(n_nodes), np.empty(n_nodes)
    missing_left = np.empty(n_nodes, dtype=np.bool_)
    f = split.feature
    base, n_value_bins = bin_offsets[f], n_bins[f]
    for k in range(n_nodes):
        hist = hists[slots[k]]
        has_missing = hist[base + n_value_bins, 2] != 0.0
        g, h, n = _node_side_sums(hist, base, n_value_bins, split.bin, split.missing_left and has_missing)
        gain[k] = _node_gain(g, h, n, sums[k, 0], sums[k, 1], sums[k, 2], l2, min_samples_leaf, min_sum_hessian)
        left_grad[k], left_hess[k], left_count[k] = g, h, n
        missing_left[k] = split.missing_left if has_missing else n >= sums[k, 2] - n
    return gain, left_grad, left_hess, left_count, missing_left
