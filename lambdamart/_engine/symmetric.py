"""Symmetric (oblivious) growth of one regression tree: level by level, every node of a level split by the same
feature and threshold (CatBoost's trees), entirely in numba.

The split of a level is the one whose Newton gains, summed over the level's nodes, are largest
(:func:`~.split.level_best_split`); a node where it leaves a side short of ``min_samples_leaf`` rows (or
``min_sum_hessian`` weight) stays a leaf. Growth stops at ``max_depth`` levels (by default as many as
``max_leaf_nodes`` leaves need), when no split gains, or at ``max_leaf_nodes`` leaves: a level that would pass it
splits only its nodes of largest gain. One split shared by a
level is a coarser choice than one per node, so it fits less noise: across the issue 15 datasets it ranked better
than leaf-wise trees of as many leaves under both protocols (docs/design.md, Trees).

Rows, histograms and leaf values are handled as in :func:`~.grower.grow_tree` (the same steps), and the tree is a
:class:`~.grower.GrownTree` like any other: prediction, model files and exports do not know how it was grown.
"""

import numpy as np

from .._jit import inner_kernel, kernel
from .grower import (
    add_children,
    gather_node,
    grown_tree,
    new_node_arrays,
    node_histogram,
    partition_node,
    partition_node_threaded,
    root_in_node_order,
)
from .histogram import build_block, subtract_bin
from .split import level_best_split, level_best_split_threaded, level_node_splits


@inner_kernel
def _histogram(codes, layout, rows, ordered_grad, ordered_hess, sum_grad, sum_hess, count, hist, parallel_work):
    """The node histogram ``hist`` of ``rows``: on numba's threads (one block each) when the node is large enough
    for ``parallel_work``; None keeps the threaded kernel out of the compilation, as in the leaf-wise grower."""
    if parallel_work is not None:
        if rows.shape[0] * (layout.bin_offsets.shape[0] - 1) >= parallel_work:
            node_histogram(codes, layout, rows, ordered_grad, ordered_hess, sum_grad, sum_hess, count, hist)
            return
    for k in range(layout.block_ptr.shape[0] - 1):
        build_block(codes, layout, np.int64(k), rows, ordered_grad, ordered_hess, sum_grad, sum_hess, count, hist)


@inner_kernel
def _level_split(hists, slots, sums, n_bins, bin_offsets, features, params, n_rows, parallel_work):
    """The level's :class:`~.split.LevelSplit`, searched on numba's threads when the tree's rows × features reach
    ``parallel_work``."""
    l2, min_leaf, min_hessian = params.l2_regularization, params.min_samples_leaf, params.min_sum_hessian
    if parallel_work is not None:
        if n_rows * features.shape[0] >= parallel_work:
            return level_best_split_threaded(hists, slots, sums, n_bins, bin_offsets, features, l2, min_leaf,
                                             min_hessian)
    return level_best_split(hists, slots, sums, n_bins, bin_offsets, features, l2, min_leaf, min_hessian)


@kernel
def symmetric_depth(max_leaf_nodes, max_depth):
    """Levels of a symmetric tree: ``max_depth``, or when unlimited (-1) the fewest that hold ``max_leaf_nodes``
    leaves (5 for 31). Without that bound, a level whose nodes could not all split would let the next level split
    again, only its nodes of largest gain: leaf-wise growth by another name."""
    if max_depth >= 0:
        return max_depth
    depth = 0
    while (1 << depth) < max_leaf_nodes:
        depth += 1
    return depth


@kernel
def nodes_to_split(gain, budget):
    """Which of a level's nodes split: those with a gain, or only the ``budget`` of largest gain (ties to the first
    node) when more would pass ``max_leaf_nodes``."""
    chosen = gain > 0.0
    if np.count_nonzero(chosen) > budget:
        # A level has at most max_leaf_nodes / 2 nodes: picking the largest `budget` times is cheap. numba's
        # mergesort cost about 1.5 s of a first fit's compilation, and the package's sort (_sort) belongs to the
        # objectives' kernels, which the growth kernels must not share (_jit.compile_ahead compiles them apart).
        chosen[:] = False
        for _ in range(budget):
            best = -1
            for k in range(gain.shape[0]):
                if not chosen[k] and gain[k] > 0.0 and (best < 0 or gain[k] > gain[best]):
                    best = k
            chosen[best] = True
    return chosen


@kernel
def grow_symmetric_tree(codes, n_bins, layout, features, grad, hess, rows, params, workspace, parallel_work,
                        partition_rows=None):
    """Grow one symmetric tree on the rows ``rows`` (partitioned in place).

    The arguments and the result are those of :func:`~.grower.grow_tree`.
    """
    max_leaf_nodes, min_samples_leaf = params.max_leaf_nodes, params.min_samples_leaf
    max_depth = symmetric_depth(max_leaf_nodes, params.max_depth)
    n_rows = rows.shape[0]
    max_nodes = 2 * max_leaf_nodes - 1
    (feature, split_bin, missing_left, left, right, value, gain, count, node_start, node_stop, slot, sum_grad,
     sum_hess) = new_node_arrays(max_nodes)
    hists = workspace.histograms
    ordered_grad, ordered_hess = workspace.ordered_grad, workspace.ordered_hess

    node_stop[0] = count[0] = n_rows
    sum_grad[0], sum_hess[0], root_grad, root_hess = root_in_node_order(grad, hess, rows, ordered_grad, ordered_hess)
    n_nodes = n_leaves = 1
    level = np.zeros(1, dtype=np.int64)
    depth = 0
    if n_rows >= 2 * min_samples_leaf and n_rows >= 2 and max_depth > 0:
        _histogram(codes, layout, rows, root_grad, root_hess, sum_grad[0], sum_hess[0], float(n_rows), hists[0],
                   parallel_work)
    while n_leaves < max_leaf_nodes and depth < max_depth:
        candidates = level[count[level] >= max(2, 2 * min_samples_leaf)]
        if candidates.shape[0] == 0:
            break
        sums = np.empty((candidates.shape[0], 3))
        for k in range(candidates.shape[0]):
            node = candidates[k]
            sums[k, 0], sums[k, 1], sums[k, 2] = sum_grad[node], sum_hess[node], count[node]
        slots = slot[candidates]
        split = _level_split(hists, slots, sums, n_bins, layout.bin_offsets, features, params, n_rows, parallel_work)
        if not split.gain > 0.0:
            break
        node_gain, left_grad, left_hess, left_count, node_missing_left = level_node_splits(
            hists, slots, sums, split, n_bins, layout.bin_offsets, params.l2_regularization, min_samples_leaf,
            params.min_sum_hessian)
        chosen = nodes_to_split(node_gain, max_leaf_nodes - n_leaves)
        n_chosen = np.count_nonzero(chosen)
        depth += 1
        # The children are searched only if the tree can still grow below them.
        searched = n_leaves + n_chosen < max_leaf_nodes and depth < max_depth
        f = split.feature
        for k in np.flatnonzero(chosen):
            node = candidates[k]
            feature[node], split_bin[node], missing_left[node] = f, split.bin, node_missing_left[k]
            gain[node] = node_gain[k]
            start, stop = node_start[node], node_stop[node]
            small_is_left = 2 * left_count[k] <= stop - start
            threaded = False
            if partition_rows is not None:  # two tests: see grower._split_step
                threaded = stop - start >= partition_rows
            if threaded:
                boundary = partition_node_threaded(codes, rows, start, stop, f, split.bin, n_bins[f],
                                                   node_missing_left[k], small_is_left, grad, hess, ordered_grad,
                                                   ordered_hess, workspace.partition_buffers,
                                                   layout.block_ptr.shape[0] - 1)
            else:
                boundary = partition_node(codes, rows, start, stop, f, split.bin, n_bins[f], node_missing_left[k],
                                          workspace.partition_buffers[1])
            small, large = add_children(node, start, boundary, stop, left_grad[k], left_hess[k], small_is_left,
                                        n_nodes, n_leaves, left, right, node_start, node_stop, count, sum_grad,
                                        sum_hess, slot)
            n_nodes += 2
            n_leaves += 1
            if searched:
                s0, s1 = node_start[small], node_stop[small]
                if not threaded:
                    gather_node(grad, hess, rows, s0, s1, ordered_grad, ordered_hess)
                small_hist, large_hist = hists[slot[small]], hists[slot[large]]
                _histogram(codes, layout, rows[s0:s1], ordered_grad[s0:s1], ordered_hess[s0:s1], sum_grad[small],
                           sum_hess[small], float(count[small]), small_hist, parallel_work)
                # Bin by bin: the array expression `large[:, :3] -= small[:, :3]` compiled numba's broadcasting
                # and its error messages into the grower (about 3.5 s of a first fit's compilation).
                for b in range(large_hist.shape[0]):
                    subtract_bin(large_hist, small_hist, b)
        if not searched:
            break
        level = np.arange(n_nodes - 2 * n_chosen, n_nodes, dtype=np.int64)

    return grown_tree(feature, split_bin, missing_left, left, right, value, gain, count, node_start, node_stop,
                      sum_grad, sum_hess, n_nodes, params)
