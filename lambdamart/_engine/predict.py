"""Scoring rows with a tree ensemble: raw features for predict, bin codes inside the boosting loop."""

import threading
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from .._jit import inner_kernel, kernel

# Rows per block: each tree is walked for a whole block of rows before the next, so its nodes stay in cache.
_BLOCK = 64


# The walk compares unsigned integer keys, not floats (see _order_key): exact for every value, ±inf and -0.0
# included, and NaN gets a key beyond every value, on the side the node sends it to. Unsigned, because x86 then adds
# an unsigned comparison's result to the child index with one instruction (12 % faster walk than signed keys).
_NAN_LEFT = np.uint64(0)
_NAN_RIGHT = np.uint64(np.iinfo(np.uint64).max)
_SIGN = np.uint64(1 << 63)
_CHILD_SHIFT = np.uint64(32)
_COLUMN_MASK = np.uint64(0xFFFFFFFF)
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)  # all bits of a float64 but its sign
_INF_BITS = np.int64(0x7FF0000000000000)  # the bits of +inf; a larger magnitude is NaN


class WalkLayout(NamedTuple):
    """The node arrays :func:`score_rows` walks, derived from a flat ensemble by :func:`walk_layout`.

    A tree's nodes are renumbered level by level from its root (which keeps its index) so that every split's two
    children are adjacent: the right child is the left one plus one, and a step down is an addition. A leaf's first
    child is the leaf itself and its threshold a key no row exceeds, so a row that reaches it early stays there:
    the rows of a block take ``lockstep_depth[t]`` steps down tree ``t`` together, with no data-dependent exit, and
    those not at a leaf by then walk on to ``depth[t]``.
    """

    step: np.ndarray  # uint64 per node: first child << 32 | the key column compared (2 * feature + NaN goes right)
    threshold: np.ndarray  # uint64 per node: the threshold's order key; rows with a larger key go right
    value: np.ndarray  # float64 per node (renumbered): the leaf values
    depth: np.ndarray  # int64 per tree: its deepest leaf's depth
    tree_starts: np.ndarray  # int64 per tree: its root (unchanged by the renumbering)
    lockstep_depth: np.ndarray  # int64 per tree: the levels every row of a block walks (see _lockstep_depth)


def _order_key(values):
    """uint64 keys of float64 ``values`` in the same order: ``a > b`` exactly when ``key(a) > key(b)``.

    -0.0 becomes +0.0 first (the floats are equal); then a non-negative float's bits sort as unsigned integers once
    the sign bit is set, above every negative one, and a negative one's bits sort in reverse, which flipping all of
    them puts right. NaN is the caller's to place.
    """
    bits = (np.asarray(values, dtype=np.float64) + 0.0).view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _levels(tree_starts, left, right):
    """The nodes of all trees level by level from their roots: a list of int64 arrays, the roots first."""
    split = left >= 0
    levels, level = [], np.asarray(tree_starts, dtype=np.int64)
    while level.shape[0]:
        if len(levels) > left.shape[0]:
            raise ValueError("the trees' child indices form a cycle; a model's trees must be trees.")
        levels.append(level)
        parents = level[split[level]]
        level = np.concatenate((left[parents], right[parents])).astype(np.int64)
    return levels


def walk_layout(trees):
    """The :class:`WalkLayout` of the flat ensemble ``trees`` (``lambdamart._engine.tree``).

    numpy, not a kernel: it runs once per model, and a kernel cost half a second of compilation on first use.
    """
    feature, left, right = trees["feature"], trees["left"], trees["right"]
    tree_starts = np.asarray(trees["tree_starts"], dtype=np.int64)
    n_nodes = feature.shape[0]
    split = left >= 0
    # New index of every node: a tree's root keeps its own; the children of each level's splits, in order, take
    # the tree's next free pairs of indices.
    new_index = np.full(n_nodes, -1, dtype=np.int64)
    new_index[tree_starts] = tree_starts
    next_free = tree_starts + 1
    node_depth = np.zeros(n_nodes, dtype=np.int64)
    for d, level in enumerate(_levels(tree_starts, left, right)):
        node_depth[level] = d
        parents = np.sort(level[split[level]])
        tree = np.searchsorted(tree_starts, parents, "right") - 1
        first_of_tree = np.searchsorted(tree, tree)  # index in `parents` of its tree's first parent
        pair = next_free[tree] + 2 * (np.arange(parents.shape[0]) - first_of_tree)
        new_index[left[parents]], new_index[right[parents]] = pair, pair + 1
        np.add.at(next_free, tree, 2)
    if np.any(new_index < 0) or np.unique(new_index).shape[0] != n_nodes:
        raise ValueError("every node of a model must be its tree's root or exactly one split's child.")
    goes_right = ~np.asarray(trees["missing_left"], dtype=np.bool_)
    leaf_step = new_index.astype(np.uint64) << _CHILD_SHIFT  # a leaf: itself, comparing column 0
    split_step = (new_index[np.where(split, left, 0)].astype(np.uint64) << _CHILD_SHIFT
                  | (2 * np.where(split, feature, 0) + goes_right).astype(np.uint64))
    threshold = np.asarray(trees["threshold"], dtype=np.float64)
    # A NaN threshold sends every value left and NaN the learned way; a leaf's key is above every row's.
    split_key = np.where(np.isnan(threshold), _NAN_RIGHT - np.uint64(1),
                         _order_key(np.where(np.isnan(threshold), 0.0, threshold)))
    step, key, value = (np.empty(n_nodes, dtype=dtype) for dtype in (np.uint64, np.uint64, np.float64))
    step[new_index] = np.where(split, split_step, leaf_step)
    key[new_index] = np.where(split, split_key, _NAN_RIGHT)
    value[new_index] = trees["value"]
    # Each tree's depth is its deepest leaf's.
    leaves = np.flatnonzero(~split)
    tree_of_leaf = np.searchsorted(tree_starts, leaves, "right") - 1
    depth = np.zeros(tree_starts.shape[0], dtype=np.int64)
    np.maximum.at(depth, tree_of_leaf, node_depth[leaves])
    lockstep = _lockstep_depth(tree_of_leaf, node_depth[leaves], trees["count"][leaves], depth)
    return WalkLayout(step, key, value, depth, tree_starts, lockstep)


# The cost of the walk past the lock-step levels, in lock-step levels of a whole block: collecting the rows not at
# a leaf costs about one level, and a step of those rows 1.5 steps of the block (their indices are one load more,
# and there are fewer steps to overlap). Fitted on LightGBM's example and generated data (100-row queries): 1.0
# and 1.5 did equally well, 2.5 worse.
_LATE_PASS = 1.0
_LATE_STEP = 1.5


def _lockstep_depth(tree_of_leaf, leaf_depth, leaf_count, depth):
    """Per tree, the levels a block of rows walks together before the rows not yet at a leaf go on alone.

    Leaf-wise trees grown on small data are deep and lopsided (LightGBM's example: 11 levels on average, up to 16,
    while a row reaches its leaf in 6.6 steps), and walking every row to the deepest leaf wasted a third of the
    steps. The level is the one that minimises the expected cost, in steps of the whole block, of ``d`` levels
    together plus the rows still walking after them (the training rows' share in deeper leaves, from ``count``)
    for the remaining levels (``_LATE_PASS``, ``_LATE_STEP``). Its minimum lies at a leaf's depth (between two
    leaf depths the cost is linear in ``d``), so only those are tried. A tree without row counts (an imported
    model may have none) is walked to its depth by every row, as the cost of any earlier level is then higher.
    """
    if leaf_depth.shape[0] == 0:  # no trees
        return depth.copy()
    count = np.maximum(np.asarray(leaf_count, dtype=np.float64), 0.0)
    # Leaves grouped by (tree, depth), in that order: the rows that end deeper than each group in its tree.
    width = depth.max() + 1
    keys, group_of_leaf = np.unique(tree_of_leaf * width + leaf_depth, return_inverse=True)
    group_rows = np.bincount(group_of_leaf.ravel(), weights=count, minlength=keys.shape[0])
    group_tree, group_depth = keys // width, keys % width
    tree_rows = np.bincount(group_tree, weights=group_rows, minlength=depth.shape[0])
    cumulative = np.cumsum(group_rows)
    first_group = np.searchsorted(group_tree, group_tree)  # each group's tree's first group
    through = cumulative - np.where(first_group > 0, cumulative[first_group - 1], 0.0)
    total = tree_rows[group_tree]
    deeper = np.where(total > 0, (total - through) / np.where(total > 0, total, 1.0), 1.0)
    remaining = depth[group_tree] - group_depth
    cost = group_depth + np.where(remaining > 0, _LATE_PASS + _LATE_STEP * deeper * remaining, 0.0)
    best = np.lexsort((cost, group_tree))  # per tree, its cheapest group first
    first = np.flatnonzero(np.r_[True, group_tree[best][1:] != group_tree[best][:-1]])
    lockstep = depth.copy()
    lockstep[group_tree[best[first]]] = group_depth[best[first]]
    return lockstep


_SCRATCH = threading.local()
# Key buffers up to this size are kept by their thread for its next call (136 features: 139 kB); larger ones, of
# models with thousands of features, are made per call, where their allocation is small next to the call's work.
_KEPT_KEY_BYTES = 1 << 20


def row_key_buffer(n_rows, n_features):
    """A buffer for :func:`score_rows`'s row keys when scoring ``n_rows`` rows of ``n_features`` features.

    Kept by the calling thread from call to call while small: allocating it in every call of a ~50 µs query cost
    up to 10 µs at times, the allocator handing back memory the system had taken back.
    """
    rows, width = min(_BLOCK, n_rows), 2 * n_features
    keys = getattr(_SCRATCH, "keys", None)
    if keys is not None and keys.shape[1] == width and keys.shape[0] >= rows:
        return keys
    keys = np.empty((rows, width), dtype=np.uint64)
    if keys.nbytes <= _KEPT_KEY_BYTES:
        _SCRATCH.keys = keys
    return keys


@kernel(nogil=True)
def score_rows(X, lo, hi, keys, step, threshold, value, depth, tree_starts, lockstep_depth, out):
    """Scores of the rows ``lo:hi`` of ``X`` into ``out[lo:hi]`` (sums in tree order), from a :class:`WalkLayout`
    (``step`` … ``lockstep_depth``), with a :func:`row_key_buffer` of at least ``min(_BLOCK, hi - lo)`` rows as
    ``keys`` (the thread's own); ``nogil``, so that row ranges can be scored on several threads.

    A block of rows goes down a tree level by level, every row one step per level. The rows' steps are
    independent, so the CPU overlaps their chains of dependent loads (node, key, child), which one row walked
    alone would leave waiting on each other. Taking every row the same ``lockstep_depth`` levels with no exit test
    beat stopping rows at their leaf, eight rows in lock-step (-20 % per 100-row query), although rows take more
    steps; past that level the rows not yet at a leaf (few, by its choice) go on as a list of their own, which
    took 6-10 % off a 100-row query on 100 trees against walking every row to the deepest leaf.
    A step is three loads besides the row's node, an integer comparison and an addition: the child and the key
    column share one word, and the rows' keys (NaN already placed) leave no NaN test in the loop.

    One kernel with no calls to others: split into a key kernel and a walk kernel, the walk ran 15 % slower
    whenever it was loaded from numba's cache rather than compiled in the process (measured, cause unknown).
    """
    n_features = X.shape[1]
    # A row's values as float64 (-0.0 made +0.0, as _order_key does) and their bits: numba has no bit view of a
    # scalar. The nodes and sums in arrays of their own: LLVM then knows that no store to them changes the
    # trees, which it cannot know of `out`.
    values = np.empty(n_features)
    bits = values.view(np.int64)
    node = np.empty(_BLOCK, dtype=np.int64)
    late = np.empty(_BLOCK, dtype=np.int64)  # the rows still walking past the lock-step levels
    scores = np.empty(_BLOCK)
    for start in range(lo, hi, _BLOCK):
        n = min(start + _BLOCK, hi) - start
        for j in range(n):
            # Row j's keys: for feature f, keys[j, 2f] with NaN below every value (the column of splits that send
            # NaN left), keys[j, 2f + 1] with NaN above. NaN found from the bits: vectorises better than x != x.
            for f in range(n_features):
                values[f] = np.float64(X[start + j, f]) + 0.0
            for f in range(n_features):
                b = bits[f]
                key = np.uint64(b) ^ (np.uint64(b >> 63) | _SIGN)  # as _order_key: all bits flipped if negative
                nan = (b & _MAGNITUDE) > _INF_BITS
                keys[j, 2 * f] = _NAN_LEFT if nan else key
                keys[j, 2 * f + 1] = _NAN_RIGHT if nan else key
            scores[j] = 0.0
        for t in range(tree_starts.shape[0]):
            for j in range(n):
                node[j] = tree_starts[t]
            for _ in range(lockstep_depth[t]):
                for j in range(n):
                    # Unsigned indices skip numba's negative-index fix-up.
                    u = np.uint64(node[j])
                    s = step[u]
                    go_right = threshold[u] < keys[np.uint64(j), s & _COLUMN_MASK]
                    node[j] = np.int64((s >> _CHILD_SHIFT) + np.uint64(go_right))
            if lockstep_depth[t] < depth[t]:
                n_late = 0
                for j in range(n):  # a leaf is its own first child
                    late[n_late] = j
                    n_late += (step[np.uint64(node[j])] >> _CHILD_SHIFT) != np.uint64(node[j])
                for _ in range(depth[t] - lockstep_depth[t]):
                    for i in range(n_late):
                        j = np.uint64(late[i])
                        u = np.uint64(node[j])
                        s = step[u]
                        go_right = threshold[u] < keys[j, s & _COLUMN_MASK]
                        node[j] = np.int64((s >> _CHILD_SHIFT) + np.uint64(go_right))
            for j in range(n):
                scores[j] += value[node[j]]
        for j in range(n):
            out[start + j] = scores[j]


# ----------------------------------------------------------------------------- QuickScorer (trees of <= 32 leaves)

# Rows scored together: one vector step (two halves of 8) per split (see _keep_leaves).
_LANES = 16
# A tree's reachable leaves are one uint32 bit set per row.
_MAX_QUICK_LEAVES = 32
_ALL_LEAVES = np.uint32(0xFFFFFFFF)


class QuickScoreLayout(NamedTuple):
    """The arrays :func:`quick_score_rows` reads, derived from a flat ensemble by :func:`quick_score_layout`.

    QuickScorer (Lucchese et al., SIGIR 2015): a tree's leaves are numbered left to right, and a row starts with
    all of them reachable. Each split the row goes right at makes the leaves of its left subtree unreachable, and
    the row's leaf is then the leftmost one still reachable: the splits on its path that it goes right at rule out
    everything left of the path, and its own leaf is in no cleared subtree (a split above it that has it on the
    left is one the row goes left at). The splits of all
    trees are grouped by feature and sorted by threshold, so the splits a value goes right at (``value >
    threshold``) are a prefix of its feature's list, and a block of rows stops where no row's value exceeds the
    threshold.
    """

    features: np.ndarray  # int64: the features some split tests, ascending
    feature_starts: np.ndarray  # int64 per entry of `features` + 1: its splits are [feature_starts[i], [i + 1])
    threshold: np.ndarray  # float64 per split, ascending per feature; a NaN threshold (every value left) is +inf
    lanes: np.ndarray  # uint64 per split: its tree's first entry in the rows' reachable-leaf sets (tree * _LANES)
    keep: np.ndarray  # uint32 per split: all leaves but those of its left subtree
    nan_right_starts: np.ndarray  # int64 per entry of `features` + 1: the splits that send NaN right, as above
    nan_right_lanes: np.ndarray  # uint64 per such split
    nan_right_keep: np.ndarray  # uint32 per such split
    leaf_value: np.ndarray  # float64: every tree's leaf values, left to right
    leaf_starts: np.ndarray  # int64 per tree + 1: tree t's leaves are leaf_value[leaf_starts[t]:leaf_starts[t + 1]]


def _grouped(split_feature, features, order):
    """``order`` (split indices) sorted stably by feature, and where each of ``features`` (ascending) starts in it,
    plus its end."""
    order = order[np.argsort(split_feature[order], kind="stable")]
    starts = np.searchsorted(split_feature[order], features, "left")
    return order, np.append(starts, order.shape[0]).astype(np.int64)


def quick_score_layout(trees):
    """The :class:`QuickScoreLayout` of the flat ensemble ``trees``, or None when a tree has more than 32 leaves
    (``score_rows`` walks those).

    numpy, level by level over all trees at once, as :func:`walk_layout`.
    """
    feature, left, right = trees["feature"], trees["left"], trees["right"]
    tree_starts = np.asarray(trees["tree_starts"], dtype=np.int64)
    n_nodes = feature.shape[0]
    split = left >= 0
    levels = _levels(tree_starts, left, right)
    # Leaves below every node (bottom up), then the left-to-right number of every node's first leaf (top down).
    leaves_below = (~split).astype(np.int64)
    for level in reversed(levels):
        parents = level[split[level]]
        leaves_below[parents] = leaves_below[left[parents]] + leaves_below[right[parents]]
    if leaves_below[tree_starts].max(initial=0) > _MAX_QUICK_LEAVES:
        return None
    first_leaf = np.zeros(n_nodes, dtype=np.int64)
    for level in levels:
        parents = level[split[level]]
        first_leaf[left[parents]] = first_leaf[parents]
        first_leaf[right[parents]] = first_leaf[parents] + leaves_below[left[parents]]
    tree = np.searchsorted(tree_starts, np.arange(n_nodes), "right") - 1
    leaf_starts = np.zeros(tree_starts.shape[0] + 1, dtype=np.int64)
    np.cumsum(leaves_below[tree_starts], out=leaf_starts[1:])
    leaves = np.flatnonzero(~split)
    leaf_value = np.empty(leaves.shape[0])
    leaf_value[leaf_starts[tree[leaves]] + first_leaf[leaves]] = trees["value"][leaves]

    splits = np.flatnonzero(split)
    threshold = np.asarray(trees["threshold"], dtype=np.float64)[splits]
    threshold = np.where(np.isnan(threshold), np.inf, threshold)
    left_bits = ((np.uint64(1) << leaves_below[left[splits]].astype(np.uint64)) - np.uint64(1)) \
        << first_leaf[splits].astype(np.uint64)
    keep = (~left_bits & np.uint64(_ALL_LEAVES)).astype(np.uint32)
    lanes = (tree[splits] * _LANES).astype(np.uint64)
    split_feature = feature[splits].astype(np.int64)
    features = np.unique(split_feature)
    by_threshold, feature_starts = _grouped(split_feature, features, np.argsort(threshold, kind="stable"))
    by_feature, nan_right_starts = _grouped(
        split_feature, features, np.flatnonzero(~np.asarray(trees["missing_left"], dtype=np.bool_)[splits]))
    return QuickScoreLayout(
        features=features, feature_starts=feature_starts, threshold=threshold[by_threshold],
        lanes=lanes[by_threshold], keep=keep[by_threshold], nan_right_starts=nan_right_starts,
        nan_right_lanes=lanes[by_feature], nan_right_keep=keep[by_feature], leaf_value=leaf_value,
        leaf_starts=leaf_starts)


@intrinsic
def _keep_leaves(typingctx, reachable, lanes, keep, thresholds, first, end, values):
    """For each split k in ``first:end`` and each of the _LANES rows d: ``reachable[lanes[k] + d] &= keep[k]`` if
    ``values[d] > thresholds[k]``.

    Written as LLVM vector code because numba's loop vectoriser left this loop scalar (a 100-row query on 100
    trees took 3x as long as this way). The whole loop over the feature's splits is here so that the rows' values
    are loaded into registers once, before it. Each half of the rows is compared with the threshold broadcast from
    memory and its eight leaf sets updated under the comparison's mask: against one 16-lane step per call that
    joined the two comparisons' masks and took the threshold from a register (broadcast with a shuffle), a
    100-row query 7 % faster.
    """
    def codegen(context, builder, signature, args):
        reachable_data, lanes_data, keep_data, threshold_data, values_data = (
            context.make_array(signature.args[i])(context, builder, args[i]).data for i in (0, 1, 2, 3, 6))
        half = _LANES // 2
        i32, i64 = ir.IntType(32), ir.IntType(64)
        sets, doubles = ir.VectorType(i32, half), ir.VectorType(ir.DoubleType(), half)
        broadcast = ir.Constant(ir.VectorType(i32, half), [0] * half)

        def splat(vector_type, scalar):
            one = builder.insert_element(ir.Constant(vector_type, ir.Undefined), scalar, ir.Constant(i32, 0))
            return builder.shuffle_vector(one, ir.Constant(vector_type, ir.Undefined), broadcast)
        row_pointer = builder.bitcast(values_data, doubles.as_pointer())
        row_values = [builder.load(builder.gep(row_pointer, [ir.Constant(i64, h)]), align=8) for h in range(2)]
        with cgutils.for_range_slice(builder, args[4], args[5], ir.Constant(i64, 1)) as (k, _):
            threshold = splat(doubles, builder.load(builder.gep(threshold_data, [k]), align=8))
            keep = splat(sets, builder.load(builder.gep(keep_data, [k])))
            lane = builder.load(builder.gep(lanes_data, [k]))
            set_pointer = builder.bitcast(builder.gep(reachable_data, [lane]), sets.as_pointer())
            for h in range(2):
                goes_right = builder.fcmp_ordered(">", row_values[h], threshold)
                mask = builder.select(goes_right, keep, ir.Constant(sets, [-1] * half))
                pointer = builder.gep(set_pointer, [ir.Constant(i64, h)])
                builder.store(builder.and_(builder.load(pointer, align=4), mask), pointer, align=4)
        return context.get_dummy_value()
    if (keep.dtype != types.uint32 or reachable.dtype != types.uint32 or lanes.dtype != types.uint64
            or thresholds.dtype != types.float64 or values.dtype != types.float64):
        return None  # a typing error: the vector types above are these
    return types.void(reachable, lanes, keep, thresholds, types.int64, types.int64, values), codegen


_TILE = 8  # rows and features of one transposed tile (see _transpose_tile)


@intrinsic
def _transpose_tile(typingctx, X, rows, lane, first_feature, columns, nan_lanes):
    """Eight features of eight rows of a block, feature by feature: for i, j < 8, f = first_feature + j,
    ``columns[f * _LANES + lane + i] = X[rows[lane + i], f]`` with NaN as -inf; bit ``lane + i`` of
    ``nan_lanes[f]`` says whether the value was NaN (the other half's bits kept with ``lane`` 8).

    The rows are loaded as eight vectors and transposed with shuffles (three rounds of pairwise interleaving), so
    that each feature's values of a block are contiguous. Reading them down the rows one value at a time, with the
    NaN test, took ~15 % of a 100-row query.
    """
    def codegen(context, builder, signature, args):
        i64, i32, double = ir.IntType(64), ir.IntType(32), ir.DoubleType()
        x = context.make_array(signature.args[0])(context, builder, args[0])
        row_index = context.make_array(signature.args[1])(context, builder, args[1]).data
        out, nan_data = (context.make_array(signature.args[i])(context, builder, args[i]).data for i in (4, 5))
        element = x.data.type.pointee
        width = builder.extract_value(x.shape, 1)
        loaded, doubles = ir.VectorType(element, _TILE), ir.VectorType(double, _TILE)
        second_half = builder.icmp_signed("!=", args[2], ir.Constant(i64, 0))
        vectors = []
        for i in range(_TILE):
            row = builder.load(builder.gep(row_index, [builder.add(args[2], ir.Constant(i64, i))]))
            first = builder.add(builder.mul(row, width), args[3])
            vector = builder.load(builder.bitcast(builder.gep(x.data, [first]), loaded.as_pointer()), align=4)
            vectors.append(vector if element == double else builder.fpext(vector, doubles))

        def shuffle(a, b, mask):
            return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(i32, _TILE), mask))
        low, high = [0, 8, 2, 10, 4, 12, 6, 14], [1, 9, 3, 11, 5, 13, 7, 15]
        t = []
        for i in range(0, _TILE, 2):
            t += [shuffle(vectors[i], vectors[i + 1], low), shuffle(vectors[i], vectors[i + 1], high)]
        low, high = [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]
        u = []
        for i in range(0, _TILE, 4):
            u += [shuffle(t[i], t[i + 2], low), shuffle(t[i + 1], t[i + 3], low),
                  shuffle(t[i], t[i + 2], high), shuffle(t[i + 1], t[i + 3], high)]
        low, high = [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]
        minus_inf = ir.Constant(doubles, [float("-inf")] * _TILE)
        for j in range(4):  # u[j] holds features j and j + 4 of rows 0-3, u[j + 4] of rows 4-7
            for offset, mask in ((j, low), (j + 4, high)):
                feature = builder.add(args[3], ir.Constant(i64, offset))
                column = shuffle(u[j], u[j + 4], mask)
                nan = builder.fcmp_unordered("uno", column, column)
                column = builder.select(nan, minus_inf, column)
                start = builder.add(builder.mul(feature, ir.Constant(i64, _LANES)), args[2])
                builder.store(column, builder.bitcast(builder.gep(out, [start]), doubles.as_pointer()), align=8)
                bits = builder.shl(builder.zext(builder.bitcast(nan, ir.IntType(_TILE)), i32),
                                   builder.trunc(args[2], i32))
                nan_pointer = builder.gep(nan_data, [feature])
                bits = builder.select(second_half, builder.or_(bits, builder.load(nan_pointer)), bits)
                builder.store(bits, nan_pointer)
        return context.get_dummy_value()
    if X.ndim != 2 or X.layout != "C" or columns.dtype != types.float64 or nan_lanes.dtype != types.uint32:
        return None
    return types.void(X, rows, types.int64, types.int64, columns, nan_lanes), codegen


@inner_kernel(inline="always")
def _aligned(buffer, n):
    """``n`` items of ``buffer`` (64 bytes longer) that start on a cache line, so that each vector operation of
    :func:`_keep_leaves` loads and stores whole lines, not parts of two."""
    skip = (-buffer.ctypes.data % 64) // buffer.itemsize
    return buffer[skip:skip + n]


@kernel(nogil=True, error_model="numpy")
def quick_score_rows(X, lo, hi, features, feature_starts, threshold, lanes, keep, nan_right_starts, nan_right_lanes,
                     nan_right_keep, leaf_value, leaf_starts, out):
    """Scores of the rows ``lo:hi`` of ``X`` into ``out[lo:hi]`` (sums in tree order, as :func:`score_rows`),
    from a :class:`QuickScoreLayout` (``features`` … ``leaf_starts``); ``nogil``, for row ranges on threads.

    Rows go in blocks of _LANES: the block's values feature by feature (NaN as -inf: NaN goes right only at the
    splits that send it there, applied after); then each feature's splits in threshold order, each one vector step
    over the block: all of them, or for a block of fewer than 8 rows those below the block's largest value.
    """
    n_trees = leaf_starts.shape[0] - 1
    reachable = _aligned(np.empty(n_trees * _LANES + 16, dtype=np.uint32), n_trees * _LANES)
    n_features = X.shape[1]
    # The block's values feature by feature and which are NaN (see _transpose_tile).
    columns = _aligned(np.empty(n_features * _LANES + 8), n_features * _LANES)
    nan_lanes = np.empty(n_features, dtype=np.uint32)
    block_rows = np.empty(_LANES, dtype=np.int64)
    tiled = n_features - n_features % _TILE
    for start in range(lo, hi, _LANES):
        n = min(start + _LANES, hi) - start
        for i in range(n_trees * _LANES):
            reachable[i] = _ALL_LEAVES
        for d in range(_LANES):
            # Lanes past the block's rows repeat its last row (their leaves are never read): no branch.
            block_rows[d] = start + min(d, n - 1)
        for f in range(0, tiled, _TILE):
            _transpose_tile(X, block_rows, 0, f, columns, nan_lanes)
            _transpose_tile(X, block_rows, _TILE, f, columns, nan_lanes)
        for f in range(tiled, n_features):  # the last few, one by one
            nan_lanes[f] = 0
            for d in range(_LANES):
                value = np.float64(X[block_rows[d], f])
                nan = value != value
                nan_lanes[f] |= np.uint32(nan) << np.uint32(d)
                value = -np.inf if nan else value
                columns[f * _LANES + d] = value
        for i in range(features.shape[0]):
            f = features[i]
            values = columns[f * _LANES:(f + 1) * _LANES]
            # A block of many rows steps through all the feature's splits: their largest value exceeds most
            # thresholds (~90 % on generated data), and a loop whose length depends on the values ends in a
            # mispredicted branch per feature (stopping at the last threshold below it: a 100-row query on 100
            # trees ~1.15x slower when the queries change from call to call). Fewer rows step through the prefix
            # of splits their largest value exceeds (thresholds ascend), counted in a loop that vectorises.
            first = feature_starts[i]
            end = feature_starts[i + 1]
            if n < _TILE:
                largest = values[0]
                for d in range(1, n):
                    largest = max(largest, values[d])
                end = first
                for k in range(np.uint64(first), np.uint64(feature_starts[i + 1])):
                    end += threshold[k] < largest
            _keep_leaves(reachable, lanes, keep, threshold, first, end, values)
            if nan_lanes[f]:
                for k in range(nan_right_starts[i], nan_right_starts[i + 1]):
                    for d in range(n):
                        if nan_lanes[f] >> np.uint32(d) & np.uint32(1):
                            reachable[nan_right_lanes[k] + np.uint64(d)] &= nan_right_keep[k]
        for d in range(n):
            score = 0.0
            for t in range(n_trees):
                score += leaf_value[leaf_starts[t] + trailing_zeros(reachable[t * _LANES + d])]
            out[start + d] = score


@inner_kernel
def _binned_leaf(codes, n_bins, tree, r):
    """The leaf of the :class:`~.grower.GrownTree` ``tree`` that row ``r`` of the binned data ``codes`` reaches."""
    feature, split_bin, missing_left, left, right = tree.feature, tree.split_bin, tree.missing_left, tree.left, \
        tree.right
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
    return node


@kernel
def _add_tree_binned_serial(codes, n_bins, tree, rows, scores):
    for k in range(rows.shape[0]):
        scores[rows[k]] += tree.value[_binned_leaf(codes, n_bins, tree, rows[k])]


@kernel(parallel=True)
def _add_tree_binned_parallel(codes, n_bins, tree, rows, scores):
    for k in prange(rows.shape[0]):
        scores[rows[k]] += tree.value[_binned_leaf(codes, n_bins, tree, rows[k])]


# Rows from which adding a tree's values to binned rows takes numba's threads (when the fit has several).
_PARALLEL_BINNED_ROWS = 50_000


def add_tree_binned(codes, n_bins, tree, rows, scores):
    """``scores[r] += tree(r)`` for the rows ``rows`` of binned data ``codes`` and a :class:`~.grower.GrownTree`."""
    # Whether threads pay, decided here: the engine imports nothing outside itself.
    threaded = rows.shape[0] >= _PARALLEL_BINNED_ROWS and numba.get_num_threads() > 1
    (_add_tree_binned_parallel if threaded else _add_tree_binned_serial)(codes, n_bins, tree, rows, scores)
