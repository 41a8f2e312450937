"""Leaf-wise (best-first) growth of one regression tree on binned features, entirely in numba.

The rows of the tree live in one index array that is partitioned in place as nodes split (reading the column-major
codes), so every node owns a contiguous slice ``rows[start:stop]``. Each split builds the histogram of the smaller
child (from the histogram layout, block by block) and gets the larger child's by subtraction from the parent's.
Leaf values are Newton steps ``-Σλ / (Σw + l2)`` times the learning rate.
"""

import numpy as np
from numba import njit, prange

from .histogram import build_block, new_histograms, subtract_feature
from .split import best_of, leaf_value, store_feature_split


def make_workspace(n_rows, total_bins, max_leaf_nodes):
    """Scratch buffers for :func:`grow_tree`: one histogram per possible leaf, node-ordered λ and w, and rows."""
    return (new_histograms(max_leaf_nodes, total_bins), np.empty(n_rows), np.empty(n_rows),
            np.empty(n_rows, dtype=np.int64))


@njit(cache=True)
def _gather(grad, hess, rows, start, stop, ordered_grad, ordered_hess):
    """Copy the node's λ and w into node order, so histogram loops read them sequentially."""
    g = 0.0
    h = 0.0
    for i in range(start, stop):
        ordered_grad[i] = grad[rows[i]]
        ordered_hess[i] = hess[rows[i]]
        g += ordered_grad[i]
        h += ordered_hess[i]
    return g, h


@njit(cache=True)
def _partition(codes, rows, start, stop, feature, split_bin, missing_bin, missing_left, buffer):
    """Stable in-place partition of ``rows[start:stop]``: rows going left first. Returns the boundary."""
    column = codes[feature]
    n_left = 0
    n_right = 0
    for i in range(start, stop):
        r = rows[i]
        code = column[r]
        goes_left = missing_left if code == missing_bin else code <= split_bin
        # Both destinations are written and only one advances: the direction is data-dependent, so a branch
        # would be mispredicted about half the time. rows[start + n_left] was already read (n_left <= i - start).
        rows[start + n_left] = r
        buffer[n_right] = r
        n_left += goes_left
        n_right += not goes_left
    rows[start + n_left:stop] = buffer[:n_right]
    return start + n_left


@njit(cache=True)
def grow_tree(codes, n_bins, layout, features, grad, hess, rows, max_leaf_nodes, max_depth, min_samples_leaf,
              min_sum_hessian, l2, learning_rate, workspace):
    """Grow one tree on the rows ``rows`` (partitioned in place).

    Parameters
    ----------
    codes : uint8 array (n_features, n_samples)
    n_bins : int array (n_features,)
        Value bins per feature; code ``n_bins[f]`` is the missing bin.
    layout : tuple
        From :func:`lambdamart.histogram.make_layout` on ``codes``.
    features : int64 array
        Sorted indices of the features this tree may split on.
    grad, hess : float64 arrays (n_samples,)
        λ and w of every row.
    rows : int64 array
        Rows of this tree (all, or a subsample); reordered so each leaf's rows are contiguous.
    max_depth : int
        -1 for no limit.
    workspace : tuple
        Scratch buffers from :func:`make_workspace`, reused from tree to tree.

    Returns
    -------
    Node arrays (feature, split_bin, missing_left, left, right, value, gain, count) of length n_nodes, and
    ``node_start``, ``node_stop``: each node's slice of ``rows``.
    """
    n_rows = rows.shape[0]
    max_nodes = 2 * max_leaf_nodes - 1
    feature = np.full(max_nodes, -1, dtype=np.int32)
    split_bin = np.zeros(max_nodes, dtype=np.int32)
    missing_left = np.zeros(max_nodes, dtype=np.bool_)
    left = np.full(max_nodes, -1, dtype=np.int32)
    right = np.full(max_nodes, -1, dtype=np.int32)
    value = np.zeros(max_nodes)
    gain = np.zeros(max_nodes)
    count = np.zeros(max_nodes, dtype=np.int64)
    node_start = np.zeros(max_nodes, dtype=np.int64)
    node_stop = np.zeros(max_nodes, dtype=np.int64)
    depth = np.zeros(max_nodes, dtype=np.int64)
    slot = np.zeros(max_nodes, dtype=np.int64)
    sum_grad = np.zeros(max_nodes)
    sum_hess = np.zeros(max_nodes)
    # The best split found for each leaf, waiting to be taken.
    cand_gain = np.full(max_nodes, -np.inf)
    cand_feature = np.zeros(max_nodes, dtype=np.int64)
    cand_bin = np.zeros(max_nodes, dtype=np.int64)
    cand_missing_left = np.zeros(max_nodes, dtype=np.bool_)
    cand_left_grad = np.zeros(max_nodes)
    cand_left_hess = np.zeros(max_nodes)

    hists, ordered_grad, ordered_hess, buffer = workspace
    sums = np.empty((2, 3))
    # Best split per feature (see store_feature_split), filled for the features this tree may use.
    results = np.empty((2, n_bins.shape[0], 6))
    selected = np.zeros(n_bins.shape[0], dtype=np.bool_)
    selected[features] = True

    node_stop[0] = n_rows
    count[0] = n_rows
    sum_grad[0], sum_hess[0] = _gather(grad, hess, rows, 0, n_rows, ordered_grad, ordered_hess)
    n_nodes = 1
    n_leaves = 1
    if _splittable(count[0], 0, max_depth, min_samples_leaf):
        sums[0, 0], sums[0, 1], sums[0, 2] = sum_grad[0], sum_hess[0], count[0]
        _split_step(codes, layout, rows, ordered_grad, ordered_hess, n_bins, selected, hists[0], hists[0], True, False,
                    sums, l2, min_samples_leaf, min_sum_hessian, results)
        _take_candidate(0, results[0], features, cand_gain, cand_feature, cand_bin, cand_missing_left,
                        cand_left_grad, cand_left_hess)

    while n_leaves < max_leaf_nodes:
        node = -1
        for i in range(n_nodes):
            if left[i] == -1 and cand_gain[i] > 0.0 and (node == -1 or cand_gain[i] > cand_gain[node]):
                node = i
        if node == -1:
            break
        f = cand_feature[node]
        feature[node] = f
        split_bin[node] = cand_bin[node]
        missing_left[node] = cand_missing_left[node]
        gain[node] = cand_gain[node]
        start, stop = node_start[node], node_stop[node]
        boundary = _partition(codes, rows, start, stop, f, cand_bin[node], n_bins[f], cand_missing_left[node],
                              buffer)
        lc, rc = n_nodes, n_nodes + 1
        n_nodes += 2
        left[node], right[node] = lc, rc
        node_start[lc], node_stop[lc] = start, boundary
        node_start[rc], node_stop[rc] = boundary, stop
        count[lc], count[rc] = boundary - start, stop - boundary
        depth[lc] = depth[rc] = depth[node] + 1
        sum_grad[lc], sum_hess[lc] = cand_left_grad[node], cand_left_hess[node]
        sum_grad[rc], sum_hess[rc] = sum_grad[node] - sum_grad[lc], sum_hess[node] - sum_hess[lc]

        small, large = (lc, rc) if count[lc] <= count[rc] else (rc, lc)
        slot[large] = slot[node]
        slot[small] = n_leaves
        n_leaves += 1
        split_small = _splittable(count[small], depth[small], max_depth, min_samples_leaf)
        split_large = _splittable(count[large], depth[large], max_depth, min_samples_leaf)
        if not (split_small or split_large) or n_leaves == max_leaf_nodes:
            continue
        s0, s1 = node_start[small], node_stop[small]
        _gather(grad, hess, rows, s0, s1, ordered_grad, ordered_hess)
        for side, child in ((0, small), (1, large)):
            sums[side, 0], sums[side, 1], sums[side, 2] = sum_grad[child], sum_hess[child], count[child]
        _split_step(codes, layout, rows[s0:s1], ordered_grad[s0:s1], ordered_hess[s0:s1], n_bins, selected,
                    hists[slot[small]], hists[slot[large]], split_small, split_large, sums, l2, min_samples_leaf,
                    min_sum_hessian, results)
        for side, child, can_split in ((0, small, split_small), (1, large, split_large)):
            if can_split:
                _take_candidate(child, results[side], features, cand_gain, cand_feature, cand_bin,
                                cand_missing_left, cand_left_grad, cand_left_hess)

    for i in range(n_nodes):
        if left[i] == -1:
            value[i] = learning_rate * leaf_value(sum_grad[i], sum_hess[i], l2)
    return (feature[:n_nodes], split_bin[:n_nodes], missing_left[:n_nodes], left[:n_nodes], right[:n_nodes],
            value[:n_nodes], gain[:n_nodes], count[:n_nodes], node_start[:n_nodes], node_stop[:n_nodes])


@njit(cache=True)
def _splittable(n, node_depth, max_depth, min_samples_leaf):
    """Whether a node may split at all: room for two leaves of min_samples_leaf rows, and depth to spare."""
    return n >= 2 * min_samples_leaf and n >= 2 and (max_depth < 0 or node_depth < max_depth)


@njit(cache=True)
def _split_block(k, codes, layout, rows, ordered_grad, ordered_hess, n_bins, selected, hist_small, hist_large,
                 search_small, search_large, sums, l2, min_samples_leaf, min_sum_hessian, results):
    """For block ``k`` of the layout: build the smaller child's histograms, turn the parent's (held in
    ``hist_large``) into the larger child's by subtraction, and search both children's best split per selected
    feature into ``results[0]`` (smaller) and ``results[1]`` (larger)."""
    bin_offsets, block_features = layout[0], layout[1]
    build_block(codes, layout, k, rows, ordered_grad, ordered_hess, sums[0, 0], sums[0, 1], sums[0, 2], hist_small)
    for f in range(block_features[k], block_features[k + 1]):
        if not selected[f]:
            continue
        if search_small:
            store_feature_split(results[0], f, hist_small, bin_offsets[f], n_bins[f], sums[0, 0], sums[0, 1],
                                sums[0, 2], l2, min_samples_leaf, min_sum_hessian)
        if search_large:
            subtract_feature(hist_large, hist_small, bin_offsets, f)
            store_feature_split(results[1], f, hist_large, bin_offsets[f], n_bins[f], sums[1, 0], sums[1, 1],
                                sums[1, 2], l2, min_samples_leaf, min_sum_hessian)


@njit(cache=True, parallel=True)
def _split_step_parallel(codes, layout, *args):
    # One parallel region per split (not one per step); threads take blocks. A parallel loop cannot receive a
    # tuple of arrays, so the layout travels as its arrays and is put back together in the loop.
    l0, l1, l2, l3, l4, l5, l6 = layout
    for k in prange(l1.shape[0] - 1):
        _split_block(k, codes, (l0, l1, l2, l3, l4, l5, l6), *args)


@njit(cache=True)
def _split_step_serial(*args):
    for k in range(args[1][1].shape[0] - 1):
        _split_block(k, *args)


# Row-feature updates below which a node is done on the calling thread: a small node's work is shorter than waking
# the threads (and far shorter than waiting for them on a busy machine).
_PARALLEL_WORK = 500_000


@njit(cache=True)
def _split_step(codes, layout, rows, ordered_grad, ordered_hess, n_bins, selected, hist_small, hist_large,
                search_small, search_large, sums, l2, min_samples_leaf, min_sum_hessian, results):
    """Histograms and best splits of a split's children (of the root when ``search_large`` is False)."""
    args = (codes, layout, rows, ordered_grad, ordered_hess, n_bins, selected, hist_small, hist_large, search_small,
            search_large, sums, l2, min_samples_leaf, min_sum_hessian, results)
    if rows.shape[0] * n_bins.shape[0] < _PARALLEL_WORK:
        _split_step_serial(*args)
    else:
        _split_step_parallel(*args)


@njit(cache=True)
def _take_candidate(node, results, features, cand_gain, cand_feature, cand_bin, cand_missing_left, cand_left_grad,
                    cand_left_hess):
    g, f, b, ml, lg, lh, _ = best_of(results, features)
    cand_gain[node] = g
    cand_feature[node] = f
    cand_bin[node] = b
    cand_missing_left[node] = ml
    cand_left_grad[node] = lg
    cand_left_hess[node] = lh


@njit(cache=True, parallel=True)
def add_leaf_values(scores, rows, feature, value, node_start, node_stop):
    """Add each leaf's value to the training scores of the rows it holds (leaves hold disjoint rows)."""
    for node in prange(feature.shape[0]):
        if feature[node] == -1:
            v = value[node]
            for i in range(node_start[node], node_stop[node]):
                scores[rows[i]] += v
