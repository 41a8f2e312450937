"""Leaf-wise (best-first) growth of one regression tree on binned features, entirely in numba.

The rows of the tree live in one index array that is partitioned in place as nodes split (reading the column-major
codes), so every node owns a contiguous slice ``rows[start:stop]``. Each split builds the histogram of the smaller
child (from the histogram layout, block by block) and gets the larger child's by subtraction from the parent's.
Leaf values are Newton steps ``-Σλ / (Σw + l2)`` times the learning rate.
"""

from typing import NamedTuple

import numpy as np
from numba import prange

from .._jit import inner_kernel, kernel
from .histogram import build_block, new_histograms, subtract_feature
from .split import BlockSplits, Split, best_of, children_best_splits, feature_best_split, leaf_value, new_block_splits


class GrowthParams(NamedTuple):
    """What limits a tree and sets its leaf values; the estimator's parameters of the same meaning."""

    max_leaf_nodes: int
    max_depth: int  # -1 for no limit
    min_samples_leaf: int
    min_sum_hessian: float
    l2_regularization: float
    learning_rate: float
    symmetric: bool = False  # grown by .symmetric's growers (the leaf-wise growers here do not read it)


class GrownTree(NamedTuple):
    """One tree as :func:`grow_tree` returns it: node arrays in bin space, node 0 the root.

    ``feature`` is -1 at a leaf; a split sends rows whose code of ``feature`` is ``<= split_bin`` to ``left`` and
    missing values to the side ``missing_left`` says. ``value`` is a leaf's score (learning rate applied), ``gain``
    a split's gain and ``count`` the rows that reached the node; the node's rows are ``rows[node_start:node_stop]``
    of the ``rows`` array the tree was grown on.
    """

    feature: np.ndarray
    split_bin: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    gain: np.ndarray
    count: np.ndarray
    node_start: np.ndarray
    node_stop: np.ndarray


class Workspace(NamedTuple):
    """Scratch buffers of :func:`grow_tree`, reused from tree to tree (see :func:`make_workspace`)."""

    histograms: np.ndarray  # one histogram per possible leaf
    ordered_grad: np.ndarray  # λ and w of the rows in node order
    ordered_hess: np.ndarray
    partition_buffers: np.ndarray  # (2, n_rows) int64: rows going left and right, while a node is partitioned
    splits: BlockSplits  # each block's best split of the two children being searched (0: smaller, 1: larger)


def make_workspace(n_rows, layout, max_leaf_nodes):
    """Scratch buffers for :func:`grow_tree` on up to ``n_rows`` rows binned into the histogram layout ``layout``
    and trees of ``max_leaf_nodes`` leaves."""
    return Workspace(new_histograms(max_leaf_nodes, layout.total_bins), np.empty(n_rows), np.empty(n_rows),
                     np.empty((2, n_rows), dtype=np.int64), new_block_splits(layout.n_blocks, 2))


# ----------------------------------------------------------------------------------------------- the steps
# Each step of growing a tree, callable on its own: what a grower outside numba (one that sums histograms across
# machines, say) drives node by node. The leaf-wise grower below is built from the same kernels.
#
# Constants and prange indices passed to other kernels are wrapped in np.int64 / np.bool_: numba compiles a callee
# once per literal value it receives (and a prange index is unsigned in the parallel loop, signed when typed
# serially), and each extra specialisation of these kernels costs a second or more of compilation on first use.


@kernel
def gather_node(grad, hess, rows, start, stop, ordered_grad, ordered_hess):
    """Copy λ and w of the node's rows ``rows[start:stop]`` into node order; return their sums (Σλ, Σw)."""
    g = 0.0
    h = 0.0
    for i in range(start, stop):
        ordered_grad[i] = grad[rows[i]]
        ordered_hess[i] = hess[rows[i]]
        g += ordered_grad[i]
        h += ordered_hess[i]
    return g, h


@inner_kernel
def _sums_if_in_order(grad, hess, rows):
    """(Σλ, Σw, whether ``rows`` is 0, 1, ..., n - 1), the sums added in row order as :func:`gather_node` adds them
    for rows in order (so they are the same bits)."""
    g = 0.0
    h = 0.0
    in_order = True
    for i in range(rows.shape[0]):
        in_order &= rows[i] == i
        g += grad[i]
        h += hess[i]
    return g, h, in_order


@kernel
def partition_node(codes, rows, start, stop, feature, split_bin, missing_bin, missing_left, buffer):
    """Stable in-place partition of the node's rows ``rows[start:stop]`` by a split: rows going left first.

    Returns the boundary: the left child's rows are ``rows[start:boundary]``.
    """
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
    # A loop, not a slice assignment: that one's shape check formats an error message, and compiling numba's
    # string formatting cost two seconds on first use.
    for i in range(n_right):
        rows[start + n_left + i] = buffer[i]
    return start + n_left


@kernel(parallel=True)
def partition_node_threaded(codes, rows, start, stop, feature, split_bin, missing_bin, missing_left, small_is_left,
                            grad, hess, ordered_grad, ordered_hess, buffers, n_chunks):
    """:func:`partition_node` on numba's threads (the same order of rows), followed by the :func:`gather_node` of
    the child ``small_is_left`` names; ``buffers`` is a (2, n) int64 scratch array. Returns the boundary.

    The node's rows are cut into ``n_chunks`` chunks (one per thread). Each thread sends its chunk's rows left or
    right into the buffers, then, once every chunk's counts are known, copies them to their places and gathers the
    smaller child's λ and w. On one thread the two passes took 18 % of a tree's growth at 570k rows, most of it
    loads scattered over the training set.
    """
    n = stop - start
    column = codes[feature]
    counts = np.zeros((n_chunks, 2), dtype=np.int64)
    for chunk in prange(n_chunks):
        first = start + n * np.int64(chunk) // n_chunks
        n_left = 0
        n_right = 0
        for i in range(first, start + n * (np.int64(chunk) + 1) // n_chunks):
            r = rows[i]
            code = column[r]
            goes_left = missing_left if code == missing_bin else code <= split_bin
            # partition_node's loop, written out again: a helper shared by the two cost the demo ~0.5 s more
            # compilation (numba's event recorder, two runs each way).
            buffers[0, first + n_left] = r  # as in partition_node: both written, one advances
            buffers[1, first + n_right] = r
            n_left += goes_left
            n_right += not goes_left
        counts[chunk, 0] = n_left
        counts[chunk, 1] = n_right
    boundary = start
    for chunk in range(n_chunks):
        boundary += counts[chunk, 0]
    for chunk in prange(n_chunks):
        first = start + n * np.int64(chunk) // n_chunks
        left_at, right_at = start, boundary  # where this chunk's rows go: after the earlier chunks' ones
        for earlier in range(np.int64(chunk)):
            left_at += counts[earlier, 0]
            right_at += counts[earlier, 1]
        for side in range(2):
            at = left_at if side == 0 else right_at
            gather = small_is_left == (side == 0)
            for i in range(counts[chunk, side]):
                r = buffers[side, first + i]
                rows[at + i] = r
                if gather:
                    ordered_grad[at + i] = grad[r]
                    ordered_hess[at + i] = hess[r]
    return boundary


@kernel(parallel=True)
def node_histogram(codes, layout, rows, ordered_grad, ordered_hess, sum_grad, sum_hess, count, hist):
    """The histogram ``hist`` of the node whose rows are ``rows`` (λ and w in node order), block by block.

    The same sums in the same order as the leaf-wise grower's, so a tree grown step by step is the same tree.
    """
    for k in prange(layout.block_ptr.shape[0] - 1):
        build_block(codes, layout, np.int64(k), rows, ordered_grad, ordered_hess, sum_grad, sum_hess, count, hist)


def find_node_split(hist, n_bins, bin_offsets, features, sum_grad, sum_hess, count, params):
    """The best :class:`~.split.Split` of a node from its histogram, over the sorted ``features``: ties in gain go
    to the lowest feature index, as :func:`~.split.best_of` breaks them; gain -inf when none is admissible."""
    return _best_node_split(hist, n_bins, bin_offsets, features, sum_grad, sum_hess, count, params)


@kernel
def _best_node_split(hist, n_bins, bin_offsets, features, sum_grad, sum_hess, count, params):
    best = Split(-np.inf, -1, -1, False, 0.0, 0.0, 0.0)
    for f in features:
        gain, b, missing_left, g, h, c, _ = feature_best_split(hist, bin_offsets[f], n_bins[f], sum_grad, sum_hess,
                                                               count, params.l2_regularization,
                                                               params.min_samples_leaf, params.min_sum_hessian)
        if best.feature < 0 or gain > best.gain:
            best = Split(gain, f, b, missing_left, g, h, c)
    return best


# ------------------------------------------------------------------------------------ the leaf-wise grower


@kernel
def grow_tree(codes, n_bins, layout, features, grad, hess, rows, params, workspace, parallel_work,
              partition_rows=None):
    """Grow one tree leaf-wise (best first) on the rows ``rows`` (partitioned in place).

    Parameters
    ----------
    codes : uint8 array (n_features, n_samples)
    n_bins : int array (n_features,)
        Value bins per feature; code ``n_bins[f]`` is the missing bin.
    layout : HistogramLayout
        From :func:`lambdamart._engine.histogram.make_layout` on ``codes``.
    features : int64 array
        Sorted indices of the features this tree may split on.
    grad, hess : float64 arrays (n_samples,)
        λ and w of every row.
    rows : int64 array
        Rows of this tree (all, or a subsample); reordered so each leaf's rows are contiguous.
    params : GrowthParams
    workspace : Workspace
        Scratch buffers from :func:`make_workspace`, reused from tree to tree.
    parallel_work : int or None
        A node whose rows × features reach this is searched by numba's threads, one feature block each (the tree
        is the same either way). None keeps every node on the calling thread, and the threaded step is then not
        even compiled (a single-threaded fit saves that compilation).
    partition_rows : int or None, default=None
        A node of at least this many rows is partitioned by numba's threads (:func:`partition_node_threaded`; the
        same tree). None partitions every node on the calling thread, and leaves the threaded partition out of the
        compilation (it pays only on large data).

    Returns
    -------
    GrownTree
    """
    max_leaf_nodes, max_depth, min_samples_leaf = params.max_leaf_nodes, params.max_depth, params.min_samples_leaf
    n_rows = rows.shape[0]
    max_nodes = 2 * max_leaf_nodes - 1
    (feature, split_bin, missing_left, left, right, value, gain, count, node_start, node_stop, slot, sum_grad,
     sum_hess) = new_node_arrays(max_nodes)
    depth = np.zeros(max_nodes, dtype=np.int64)
    # The best split found for each leaf, waiting to be taken.
    cand_gain = np.empty(max_nodes)
    for i in range(max_nodes):
        cand_gain[i] = -np.inf
    cand_feature = np.zeros(max_nodes, dtype=np.int64)
    cand_bin = np.zeros(max_nodes, dtype=np.int64)
    cand_missing_left = np.zeros(max_nodes, dtype=np.bool_)
    cand_left_grad = np.zeros(max_nodes)
    cand_left_hess = np.zeros(max_nodes)
    cand_left_count = np.zeros(max_nodes, dtype=np.int64)

    hists = workspace.histograms
    ordered_grad, ordered_hess = workspace.ordered_grad, workspace.ordered_hess
    # Totals (Σλ, Σw, count) of the two children being searched: the smaller one first.
    sums = np.empty((2, 3))
    # Each block's best split of the two children (a child's are all written before best_of reads them).
    splits = workspace.splits
    n_blocks = layout.block_ptr.shape[0] - 1
    # Per workspace histogram slot, the features its leaf may still split on (see _split_block).
    # Loops, not fancy indexing or 2-D slice assignment: those cost over a second of compilation here.
    usable = np.zeros((max_leaf_nodes, n_bins.shape[0]), dtype=np.bool_)
    for f in features:
        usable[0, f] = True

    node_stop[0] = n_rows
    count[0] = n_rows
    sum_grad[0], sum_hess[0], root_grad, root_hess = root_in_node_order(grad, hess, rows, ordered_grad, ordered_hess)
    n_nodes = 1
    n_leaves = 1
    if _splittable(count[0], depth[0], max_depth, min_samples_leaf):
        sums[0, 0], sums[0, 1], sums[0, 2] = sum_grad[0], sum_hess[0], count[0]
        _split_step(codes, layout, rows, root_grad, root_hess, n_bins, usable[0], usable[0], hists[0], hists[0],
                    np.bool_(True), np.bool_(False), sums, params, splits, parallel_work)
        best = best_of(splits, np.int64(0), n_blocks)
        cand_gain[0], cand_feature[0], cand_bin[0], cand_missing_left[0] = best.gain, best.feature, best.bin, \
            best.missing_left
        cand_left_grad[0], cand_left_hess[0], cand_left_count[0] = best.left_grad, best.left_hess, best.left_count

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
        threaded = False
        if partition_rows is not None:  # two tests: see _split_step
            threaded = stop - start >= partition_rows
        # Which child is smaller (left on a tie), known before partitioning: the histograms' row counts are exact.
        # The threaded partition gathers that child's λ and w.
        small_is_left = 2 * cand_left_count[node] <= stop - start
        if threaded:
            boundary = partition_node_threaded(codes, rows, start, stop, f, cand_bin[node], n_bins[f],
                                               cand_missing_left[node], small_is_left, grad, hess, ordered_grad,
                                               ordered_hess, workspace.partition_buffers,
                                               layout.block_ptr.shape[0] - 1)  # a block per thread
        else:
            boundary = partition_node(codes, rows, start, stop, f, cand_bin[node], n_bins[f],
                                      cand_missing_left[node], workspace.partition_buffers[1])
        small, large = add_children(node, start, boundary, stop, cand_left_grad[node], cand_left_hess[node],
                                    small_is_left, n_nodes, n_leaves, left, right, node_start, node_stop, count,
                                    sum_grad, sum_hess, slot)
        depth[small] = depth[large] = depth[node] + 1
        n_nodes += 2
        n_leaves += 1
        split_small = _splittable(count[small], depth[small], max_depth, min_samples_leaf)
        split_large = _splittable(count[large], depth[large], max_depth, min_samples_leaf)
        if not (split_small or split_large) or n_leaves == max_leaf_nodes:
            continue
        s0, s1 = node_start[small], node_stop[small]
        if not threaded:
            gather_node(grad, hess, rows, s0, s1, ordered_grad, ordered_hess)
        for side, child in ((0, small), (1, large)):
            sums[side, 0], sums[side, 1], sums[side, 2] = sum_grad[child], sum_hess[child], count[child]
        _split_step(codes, layout, rows[s0:s1], ordered_grad[s0:s1], ordered_hess[s0:s1], n_bins,
                    usable[slot[small]], usable[slot[large]], hists[slot[small]], hists[slot[large]], split_small,
                    split_large, sums, params, splits, parallel_work)
        for side, child, can_split in ((0, small, split_small), (1, large, split_large)):
            if can_split:
                best = best_of(splits, side, n_blocks)
                cand_gain[child], cand_feature[child], cand_bin[child] = best.gain, best.feature, best.bin
                cand_missing_left[child] = best.missing_left
                cand_left_grad[child], cand_left_hess[child] = best.left_grad, best.left_hess
                cand_left_count[child] = best.left_count

    return grown_tree(feature, split_bin, missing_left, left, right, value, gain, count, node_start, node_stop,
                      sum_grad, sum_hess, n_nodes, params)


@inner_kernel
def new_node_arrays(max_nodes):
    """A grower's per-node arrays for up to ``max_nodes`` nodes: feature, split_bin, missing_left, left, right (-1
    for none), value, gain, count, node_start, node_stop, slot (which workspace histogram a leaf's is), Σλ and Σw."""
    # Filled by loops rather than np.full: each np.full dtype is library code of its own to compile on first use.
    feature = np.empty(max_nodes, dtype=np.int32)
    left = np.empty(max_nodes, dtype=np.int32)
    right = np.empty(max_nodes, dtype=np.int32)
    for i in range(max_nodes):
        feature[i] = left[i] = right[i] = -1
    return (feature, np.zeros(max_nodes, dtype=np.int32), np.zeros(max_nodes, dtype=np.bool_), left, right,
            np.zeros(max_nodes), np.zeros(max_nodes), np.zeros(max_nodes, dtype=np.int64),
            np.zeros(max_nodes, dtype=np.int64), np.zeros(max_nodes, dtype=np.int64),
            np.zeros(max_nodes, dtype=np.int64), np.zeros(max_nodes), np.zeros(max_nodes))


@inner_kernel
def root_in_node_order(grad, hess, rows, ordered_grad, ordered_hess):
    """The root's (Σλ, Σw) and its λ and w in node order. When the tree has every row in order (no subsample), those
    are grad and hess themselves, and the serial copy (~1 ms a tree at 570k rows, while the other threads wait) is
    skipped; children are gathered into the workspace as before, and no later step reads the root's ordered values."""
    if rows.shape[0] == grad.shape[0]:
        sum_grad, sum_hess, in_order = _sums_if_in_order(grad, hess, rows)
        if in_order:
            return sum_grad, sum_hess, grad, hess
    sum_grad, sum_hess = gather_node(grad, hess, rows, np.int64(0), rows.shape[0], ordered_grad, ordered_hess)
    return sum_grad, sum_hess, ordered_grad, ordered_hess


@inner_kernel
def grown_tree(feature, split_bin, missing_left, left, right, value, gain, count, node_start, node_stop, sum_grad,
               sum_hess, n_nodes, params):
    """The first ``n_nodes`` nodes of a grower's arrays as a :class:`GrownTree`, each leaf's value set to its Newton
    step times the learning rate."""
    for i in range(n_nodes):
        if left[i] == -1:
            value[i] = params.learning_rate * leaf_value(sum_grad[i], sum_hess[i], params.l2_regularization)
    return GrownTree(feature[:n_nodes], split_bin[:n_nodes], missing_left[:n_nodes], left[:n_nodes],
                     right[:n_nodes], value[:n_nodes], gain[:n_nodes], count[:n_nodes], node_start[:n_nodes],
                     node_stop[:n_nodes])


@inner_kernel(inline="always")
def add_children(node, start, boundary, stop, left_grad, left_hess, small_is_left, n_nodes, n_leaves, left, right,
                 node_start, node_stop, count, sum_grad, sum_hess, slot):
    """Make nodes ``n_nodes`` and ``n_nodes + 1`` the children of ``node``: rows ``start:boundary`` to the left
    one, whose (Σλ, Σw) are ``left_grad``, ``left_hess``, and ``boundary:stop`` to the right one. The larger child
    keeps the parent's histogram slot and the smaller takes slot ``n_leaves``; returns (small, large)."""
    lc, rc = n_nodes, n_nodes + 1
    left[node], right[node] = lc, rc
    node_start[lc], node_stop[lc] = start, boundary
    node_start[rc], node_stop[rc] = boundary, stop
    count[lc], count[rc] = boundary - start, stop - boundary
    sum_grad[lc], sum_hess[lc] = left_grad, left_hess
    sum_grad[rc], sum_hess[rc] = sum_grad[node] - left_grad, sum_hess[node] - left_hess
    small, large = (lc, rc) if small_is_left else (rc, lc)
    slot[large] = slot[node]
    slot[small] = n_leaves
    return small, large


@kernel
def _splittable(n, node_depth, max_depth, min_samples_leaf):
    """Whether a node may split at all: room for two leaves of min_samples_leaf rows, and depth to spare."""
    return n >= 2 * min_samples_leaf and n >= 2 and (max_depth < 0 or node_depth < max_depth)


@inner_kernel
def _split_block(k, codes, layout, rows, ordered_grad, ordered_hess, n_bins, usable_small, usable_large, hist_small,
                 hist_large, search_small, search_large, sums, l2, min_samples_leaf, min_sum_hessian, splits):
    """For block ``k`` of the layout: build the smaller child's histograms, turn the parent's (held in
    ``hist_large``) into the larger child's by subtraction, and search both children's best split over the
    block's usable features into block ``k``'s records of ``splits`` (node 0 the smaller child, node 1 the larger).

    ``usable_large`` holds the parent's usable features on entry (``usable_small`` is the same array at the root);
    each searched child's entry becomes whether the feature can still split below it. Each block sets the entries
    of its own features (rather than the calling thread copying them all first), so no thread writes lines another
    reads; a child that is not searched never splits, and its entries are never read.
    """
    bin_offsets = layout.bin_offsets
    build_block(codes, layout, k, rows, ordered_grad, ordered_hess, sums[0, 0], sums[0, 1], sums[0, 2], hist_small)
    # Each child's best split so far. Features come in ascending order and only a strictly larger gain replaces
    # the best, so ties go to the lowest feature index.
    best_small = best_large = Split(-np.inf, np.int64(-1), np.int64(-1), False, 0.0, 0.0, 0.0)
    # Both children in one scan (see children_best_splits), which compares candidates without dividing by their
    # weights: it needs them positive.
    both = search_small and search_large and (min_sum_hessian > 0.0 or l2 > 0.0)
    for f in layout.block_members[layout.block_ptr[k]:layout.block_ptr[k + 1]]:
        if not usable_large[f]:
            # Not in this tree's features, or no threshold of it left min_samples_leaf rows on both sides of an
            # ancestor: then none does here (a subset of its rows). Its histograms below are never read again.
            usable_small[f] = False
            continue
        if both:  # also turns the parent's histogram of f into the larger child's
            small, large, usable_small[f], usable_large[f] = children_best_splits(
                hist_small, hist_large, bin_offsets[f], n_bins[f], sums, l2, min_samples_leaf, min_sum_hessian)
            if small[0] > best_small.gain:
                best_small = Split(small[0], f, small[1], small[2], small[3], small[4], small[5])
            if large[0] > best_large.gain:
                best_large = Split(large[0], f, large[1], large[2], large[3], large[4], large[5])
            continue
        if search_small:
            gain, b, missing_left, g, h, c, usable_small[f] = feature_best_split(
                hist_small, bin_offsets[f], n_bins[f], sums[0, 0], sums[0, 1], sums[0, 2], l2, min_samples_leaf,
                min_sum_hessian)
            if gain > best_small.gain:
                best_small = Split(gain, f, b, missing_left, g, h, c)
        if search_large:
            subtract_feature(hist_large, hist_small, bin_offsets, f)
            gain, b, missing_left, g, h, c, usable_large[f] = feature_best_split(
                hist_large, bin_offsets[f], n_bins[f], sums[1, 0], sums[1, 1], sums[1, 2], l2, min_samples_leaf,
                min_sum_hessian)
            if gain > best_large.gain:
                best_large = Split(gain, f, b, missing_left, g, h, c)
    for side, best in ((0, best_small), (1, best_large)):
        splits.gain[k, side], splits.feature[k, side], splits.bin[k, side] = best.gain, best.feature, best.bin
        splits.missing_left[k, side], splits.left_grad[k, side] = best.missing_left, best.left_grad
        splits.left_hess[k, side], splits.left_count[k, side] = best.left_hess, best.left_count


@inner_kernel(parallel=True)
def _split_step_parallel(codes, layout, rows, ordered_grad, ordered_hess, n_bins, usable_small, usable_large,
                         hist_small, hist_large, search_small, search_large, sums, l2, min_samples_leaf,
                         min_sum_hessian, gain, feature, bin, missing_left, left_grad, left_hess, left_count):
    # One parallel region per split (not one per step); threads take blocks. numba passes a tuple that the region
    # writes to only as separate arrays, so the split records travel as their arrays and are put back together.
    for k in prange(layout.block_ptr.shape[0] - 1):
        splits = BlockSplits(gain, feature, bin, missing_left, left_grad, left_hess, left_count)
        _split_block(np.int64(k), codes, layout, rows, ordered_grad, ordered_hess, n_bins, usable_small,
                     usable_large, hist_small, hist_large, search_small, search_large, sums, l2, min_samples_leaf,
                     min_sum_hessian, splits)


@inner_kernel
def _split_step(codes, layout, rows, ordered_grad, ordered_hess, n_bins, usable_small, usable_large, hist_small,
                hist_large, search_small, search_large, sums, params, splits, parallel_work):
    """Histograms and best splits of a split's children (of the root when ``search_large`` is False)."""
    l2, min_leaf, min_hessian = params.l2_regularization, params.min_samples_leaf, params.min_sum_hessian
    # Two plain tests, not one with `and`: numba prunes a branch on `argument is None` before typing it, which is
    # what keeps the parallel kernel out of a single-threaded fit's compilation.
    if parallel_work is not None:
        if rows.shape[0] * n_bins.shape[0] >= parallel_work:
            _split_step_parallel(codes, layout, rows, ordered_grad, ordered_hess, n_bins, usable_small,
                                 usable_large, hist_small, hist_large, search_small, search_large, sums, l2,
                                 min_leaf, min_hessian, splits.gain, splits.feature, splits.bin,
                                 splits.missing_left, splits.left_grad, splits.left_hess, splits.left_count)
            return
    # The blocks in turn, looped here rather than in a serial twin of the parallel kernel: one compiled layer less
    # (numba optimises a caller with its callees linked in, so each layer re-optimises the code below it).
    for k in range(layout.block_ptr.shape[0] - 1):
        _split_block(np.int64(k), codes, layout, rows, ordered_grad, ordered_hess, n_bins, usable_small, usable_large,
                     hist_small, hist_large, search_small, search_large, sums, l2, min_leaf, min_hessian, splits)


@inner_kernel
def _add_leaf_values_between(scores, rows, feature, value, node_start, node_stop, lo, hi, restore_order):
    """The positions ``lo:hi`` of ``rows``: each leaf's value added to the scores of its rows there, and with
    ``restore_order`` (``rows`` holding every row) those positions set back to 0, 1, ...: the next tree's rows when
    every tree takes them all."""
    for node in range(feature.shape[0]):
        if feature[node] == -1:
            for i in range(max(node_start[node], lo), min(node_stop[node], hi)):
                scores[rows[i]] += value[node]
    if restore_order:
        for i in range(lo, hi):
            rows[i] = i


@kernel
def add_leaf_values(scores, rows, feature, value, node_start, node_stop, restore_order):
    """Add each leaf's value to the training scores of the rows it holds (leaves hold disjoint rows); with
    ``restore_order``, put ``rows`` (every row) back in order afterwards.

    On one thread: a scatter of one addition per row, ~2 ms per million rows; large fits use
    :func:`add_leaf_values_threaded`.
    """
    _add_leaf_values_between(scores, rows, feature, value, node_start, node_stop, np.int64(0), rows.shape[0],
                             restore_order)


@kernel(parallel=True)
def add_leaf_values_threaded(scores, rows, feature, value, node_start, node_stop, restore_order, n_chunks):
    """:func:`add_leaf_values` on numba's threads, each taking one of ``n_chunks`` equal ranges of ``rows``.

    For the fits whose nodes are partitioned by the threads (``_parallel.node_partition_rows``), which compile it.
    Between two trees at 570k rows, the serial scatter took 2.3 ms a round and a serial copy of the rows in order
    1 ms (together 3 % of the fit), while the other threads waited.
    """
    n = rows.shape[0]
    for chunk in prange(n_chunks):
        _add_leaf_values_between(scores, rows, feature, value, node_start, node_stop, n * np.int64(chunk) // n_chunks,
                                 n * (np.int64(chunk) + 1) // n_chunks, restore_order)
