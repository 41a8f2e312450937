"""Scoring rows with a tree ensemble: raw features for predict, bin codes inside the boosting loop."""

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

# Rows per block: each tree is walked for a whole block of rows before the next, so its nodes stay in cache.
_BLOCK = 64


@intrinsic
def _select(typingctx, condition, if_true, if_false):
    """``if_true if condition else if_false`` for integers, compiled to a conditional move, never a branch.

    Left to itself, LLVM's x86 backend turns the child selection into a branch (it assumes branches are predicted
    well), but the way a row goes at a split depends on its data: on rows the CPU has not seen before, the walk
    below ran ~2.4x slower with that branch. The ``!unpredictable`` mark keeps the conditional move.
    """
    if not (isinstance(condition, types.Boolean) and isinstance(if_true, types.Integer)
            and isinstance(if_false, types.Integer)):
        return None
    result = typingctx.unify_pairs(if_true, if_false)

    def codegen(context, builder, signature, args):
        a = context.cast(builder, args[1], signature.args[1], result)
        b = context.cast(builder, args[2], signature.args[2], result)
        selected = builder.select(args[0], a, b)
        selected.set_metadata("unpredictable", builder.module.add_metadata([]))
        return selected
    return result(condition, if_true, if_false), codegen


class WalkLayout(NamedTuple):
    """The node arrays :func:`score_rows` walks, derived from a flat ensemble by :func:`walk_layout`.

    Every row takes exactly ``depth[t]`` steps down tree ``t``, so the walk has no data-dependent exit: a leaf's
    children are the leaf itself, and a row that reaches it early stays there.
    """

    feature: np.ndarray  # int32 per node: the split's feature; 0 at a leaf (read, then either way leads back)
    missing_right: np.ndarray  # bool per node: whether missing values go right (False at a leaf)
    left: np.ndarray  # int32 per node: the left child; at a leaf, the leaf itself
    right: np.ndarray
    depth: np.ndarray  # int64 per tree: its deepest leaf's depth


def walk_layout(feature, missing_left, left, right, tree_starts):
    """The :class:`WalkLayout` of flat ensemble arrays (``lambdamart._engine.tree``).

    numpy, not a kernel: it runs once per model, and a kernel cost half a second of compilation on first use.
    """
    n_nodes = feature.shape[0]
    leaf = left < 0
    own = np.arange(n_nodes, dtype=np.int32)
    # Depths level by level from the roots, whatever the order of the nodes.
    node_depth = np.zeros(n_nodes, dtype=np.int64)
    level, d = np.asarray(tree_starts, dtype=np.int64), 0
    while level.shape[0]:
        if d > n_nodes:
            raise ValueError("the trees' child indices form a cycle; a model's trees must be trees.")
        node_depth[level] = d
        splits = level[~leaf[level]]
        level, d = np.concatenate((left[splits], right[splits])).astype(np.int64), d + 1
    depth = np.maximum.reduceat(node_depth, tree_starts) if n_nodes else np.zeros(0, dtype=np.int64)
    return WalkLayout(np.where(leaf, 0, feature).astype(np.int32), ~missing_left & ~leaf,
                      np.where(leaf, own, left).astype(np.int32), np.where(leaf, own, right).astype(np.int32), depth)


@njit(cache=True, nogil=True)
def score_rows(X, lo, hi, feature, missing_right, left, right, depth, threshold, value, tree_starts, out):
    """Scores of the rows ``lo:hi`` of ``X`` into ``out[lo:hi]`` (sums in tree order), from a :class:`WalkLayout`
    (``feature`` … ``depth``) and the flat ensemble's ``threshold``, ``value`` and ``tree_starts``; ``nogil``, so
    that row ranges can be scored on several threads.

    A block of rows goes down a tree level by level, every row one step per level. The rows' steps are
    independent, so the CPU overlaps their chains of dependent loads (node, feature, value, child), which one row
    walked alone would leave waiting on each other. Walking every row to the tree's depth with no exit test beat
    stopping rows at their leaf, eight rows in lock-step (-20 % per 100-row query), although rows take more steps.
    """
    # The block's nodes and sums in arrays of their own: LLVM then knows that no store to them changes the trees,
    # which it cannot know of `out` (-6 %).
    node = np.empty(_BLOCK, dtype=np.int64)
    scores = np.empty(_BLOCK)
    for start in range(lo, hi, _BLOCK):
        n = min(start + _BLOCK, hi) - start
        for j in range(n):
            scores[j] = 0.0
        for t in range(tree_starts.shape[0]):
            for j in range(n):
                node[j] = tree_starts[t]
            for _ in range(depth[t]):
                for j in range(n):
                    # Unsigned indices skip numba's negative-index fix-up.
                    u = np.uint64(node[j])
                    x = X[np.uint64(start + j), np.uint64(feature[u])]
                    # NaN fails every comparison, so it goes right only where missing values go right.
                    go_right = (x > threshold[u]) | ((x != x) & missing_right[u])
                    node[j] = _select(go_right, right[u], left[u])
            for j in range(n):
                scores[j] += value[node[j]]
        for j in range(n):
            out[start + j] = scores[j]


@njit(cache=True)
def predict_serial(X, feature, missing_right, left, right, depth, threshold, value, tree_starts):
    """Scores of all rows of ``X`` on the calling thread (arguments as :func:`score_rows`'s): no thread hand-off
    for a single query."""
    out = np.empty(X.shape[0])
    score_rows(X, np.int64(0), X.shape[0], feature, missing_right, left, right, depth, threshold, value, tree_starts,
               out)
    return out


@njit(cache=True)
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


@njit(cache=True)
def _add_tree_binned_serial(codes, n_bins, tree, rows, scores):
    for k in range(rows.shape[0]):
        scores[rows[k]] += tree.value[_binned_leaf(codes, n_bins, tree, rows[k])]


@njit(cache=True, parallel=True)
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
