"""Scoring rows with a tree ensemble: raw features for predict, bin codes inside the boosting loop."""

import numba
import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

# Rows per block: each tree is walked for a whole block of rows before the next, so its nodes stay in cache.
_BLOCK = 64
# Rows walked down a tree together (the code below is written out for eight): one row's walk is a chain of
# dependent loads (node, then feature, then X[i, f], then the child); eight independent chains keep the CPU busy.
_LANES = 8


@intrinsic
def _select(typingctx, condition, if_true, if_false):
    """``if_true if condition else if_false`` for integers, compiled to a conditional move, never a branch.

    Left to itself, LLVM's x86 backend turns the child selection into a branch (it assumes branches are predicted
    well), but the way a row goes at a split depends on its data: on rows the CPU has not seen before, the
    eight-row walk below ran ~2.4x slower with that branch. The ``!unpredictable`` mark keeps the conditional move.
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


@njit(cache=True)
def _descend(X, i, node, node_left, feature, threshold, missing_left, left, right):
    """Row ``i`` one level down from ``node`` (whose left child is ``node_left``); a leaf stays where it is.

    Returns the new node and its left child (-1 for a leaf). Unsigned indices skip numba's negative-index fix-up.
    """
    u = np.uint64(node)
    f = feature[u]
    # A leaf's feature is -1: it reads column 0 instead, and the comparison is thrown away below.
    x = X[np.uint64(i), np.uint64(_select(f < 0, 0, f))]
    # NaN fails every comparison, so it goes right only where missing values go right.
    go_right = (x > threshold[u]) | ((x != x) & ~missing_left[u])
    child = _select(go_right, right[u], node_left)
    node = _select(node_left < 0, node, child)
    return node, left[np.uint64(node)]


@njit(cache=True)
def _leaves(X, r0, r1, r2, r3, r4, r5, r6, r7, root, feature, threshold, missing_left, left, right):
    """The leaves that rows ``r0`` … ``r7`` reach in the tree rooted at ``root``, walked level by level together.

    Every row takes a step each round (rows already at a leaf stay put) until all eight are at leaves, so the
    eight walks overlap in the CPU and the only data-dependent branch is the loop's exit.
    """
    n0 = n1 = n2 = n3 = n4 = n5 = n6 = n7 = root
    l0 = l1 = l2 = l3 = l4 = l5 = l6 = l7 = left[root]
    # A leaf's left child is -1 (all bits set) and a split's is >= 0: the AND is -1 once every row is at a leaf.
    while (l0 & l1 & l2 & l3 & l4 & l5 & l6 & l7) != -1:
        n0, l0 = _descend(X, r0, n0, l0, feature, threshold, missing_left, left, right)
        n1, l1 = _descend(X, r1, n1, l1, feature, threshold, missing_left, left, right)
        n2, l2 = _descend(X, r2, n2, l2, feature, threshold, missing_left, left, right)
        n3, l3 = _descend(X, r3, n3, l3, feature, threshold, missing_left, left, right)
        n4, l4 = _descend(X, r4, n4, l4, feature, threshold, missing_left, left, right)
        n5, l5 = _descend(X, r5, n5, l5, feature, threshold, missing_left, left, right)
        n6, l6 = _descend(X, r6, n6, l6, feature, threshold, missing_left, left, right)
        n7, l7 = _descend(X, r7, n7, l7, feature, threshold, missing_left, left, right)
    return n0, n1, n2, n3, n4, n5, n6, n7


@njit(cache=True)
def _score_block(X, lo, hi, feature, threshold, missing_left, left, right, value, tree_starts, out):
    out[lo:hi] = 0.0
    last = hi - 1
    for t in range(tree_starts.shape[0]):
        root = tree_starts[t]
        for i in range(lo, hi, _LANES):
            if i + _LANES <= hi:
                n = _leaves(X, i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, i + 7, root, feature, threshold,
                            missing_left, left, right)
                out[i] += value[n[0]]
                out[i + 1] += value[n[1]]
                out[i + 2] += value[n[2]]
                out[i + 3] += value[n[3]]
                out[i + 4] += value[n[4]]
                out[i + 5] += value[n[5]]
                out[i + 6] += value[n[6]]
                out[i + 7] += value[n[7]]
            else:
                # Fewer than eight rows left: the spare lanes walk the last row again and their leaves are dropped.
                n = _leaves(X, i, min(i + 1, last), min(i + 2, last), min(i + 3, last), min(i + 4, last),
                            min(i + 5, last), min(i + 6, last), min(i + 7, last), root, feature, threshold,
                            missing_left, left, right)
                for k in range(hi - i):
                    out[i + k] += value[n[k]]


@njit(cache=True, nogil=True)
def score_rows(X, lo, hi, feature, threshold, missing_left, left, right, value, tree_starts, out):
    """Scores of the rows ``lo:hi`` of ``X`` into ``out[lo:hi]`` (sums in tree order); ``nogil``, so that row ranges
    can be scored on several threads."""
    for block in range(lo, hi, _BLOCK):
        _score_block(X, block, min(block + _BLOCK, hi), feature, threshold, missing_left, left, right, value,
                     tree_starts, out)


@njit(cache=True)
def predict_serial(X, feature, threshold, missing_left, left, right, value, tree_starts):
    """Scores of all rows of ``X`` on the calling thread: no thread hand-off for a single query."""
    out = np.empty(X.shape[0])
    score_rows(X, np.int64(0), X.shape[0], feature, threshold, missing_left, left, right, value, tree_starts, out)
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
