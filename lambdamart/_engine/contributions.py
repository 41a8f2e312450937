"""Per-feature contributions of rows to their scores: exact path-dependent TreeSHAP over the flat trees.

Lundberg et al. (2020), "From local explanations to global understanding with explainable AI for trees",
Algorithm 2. A tree's value for a set S of known features is the path-dependent conditional expectation: at a split
on a feature in S the row's own branch is followed, at any other split both branches are, weighted by their share
of the node's training rows (the *cover*, ``count``). The Shapley values of that game are computed in
O(leaves · depth²) per row and tree by carrying, down each root-leaf path, the weights of all subset sizes of the
path's distinct features (EXTEND), and taking one feature back out at a leaf (UNWIND, or its sum).

The walk is iterative with an explicit stack rather than recursive: numba compiles recursion only with declared
types and calls each level through a function call, while a stack of pending nodes fits in arrays sized once per
block of rows. Each node's path lives in one segment of the path arrays. The hot child of a split (the branch the
row takes) is visited next, in a copy of its parent's path one segment further on; the cold child is visited after
the whole hot subtree, which writes only those further segments, so it takes over its parent's segment as it is,
without a copy.
"""

import numpy as np

from .._jit import inner_kernel, kernel

# Rows per block: each tree is explained for a whole block of rows before the next, so its nodes stay in cache,
# and the block's scratch arrays are allocated once.
_BLOCK = 64


@kernel
def expected_values(left, right, value, count, tree_starts):
    """Per tree, its expected value: the sum over leaves of the leaf value times the product, along its path, of
    each child's share of its parent's cover (``count[child] / count[parent]``).

    The tree's value when no feature is known, which with the contributions adds up to the row's leaf value. Nodes
    come after their parents, so one pass in node order suffices. Every split must have ``count > 0``.
    """
    n_trees = tree_starts.shape[0]
    n_nodes = left.shape[0]
    expected = np.zeros(n_trees)
    weight = np.zeros(n_nodes)
    for t in range(n_trees):
        start = tree_starts[t]
        stop = tree_starts[t + 1] if t + 1 < n_trees else n_nodes
        weight[start] = 1.0
        for node in range(start, stop):
            if left[node] < 0:
                expected[t] += weight[node] * value[node]
                continue
            share = weight[node] / count[node]
            weight[left[node]] = share * count[left[node]]
            weight[right[node]] = share * count[right[node]]
    return expected


@inner_kernel(inline="always")
def _extend(seg, length, zero_fraction, one_fraction, feature_index, path_feature, path_zero, path_one,
            path_weight):
    """EXTEND: append a feature with its zero/one fractions as element ``length`` of the path in segment ``seg``
    and update the weights of every subset size."""
    path_feature[seg + length] = feature_index
    path_zero[seg + length] = zero_fraction
    path_one[seg + length] = one_fraction
    path_weight[seg + length] = 1.0 if length == 0 else 0.0
    scale = 1.0 / (length + 1)
    for i in range(length - 1, -1, -1):
        path_weight[seg + i + 1] += one_fraction * path_weight[seg + i] * (i + 1) * scale
        path_weight[seg + i] = zero_fraction * path_weight[seg + i] * (length - i) * scale


@inner_kernel(inline="always")
def _unwind(seg, length, k, path_feature, path_zero, path_one, path_weight):
    """UNWIND: remove element ``k`` from the path of ``length + 1`` elements in segment ``seg`` (the inverse of
    EXTEND), leaving ``length`` elements."""
    one_fraction = path_one[seg + k]
    zero_fraction = path_zero[seg + k]
    carried = path_weight[seg + length]
    for j in range(length - 1, -1, -1):
        if one_fraction != 0.0:
            previous = path_weight[seg + j]
            path_weight[seg + j] = carried * (length + 1) / ((j + 1) * one_fraction)
            carried = previous - path_weight[seg + j] * zero_fraction * (length - j) / (length + 1)
        else:
            path_weight[seg + j] = path_weight[seg + j] * (length + 1) / (zero_fraction * (length - j))
    for j in range(k, length):
        path_feature[seg + j] = path_feature[seg + j + 1]
        path_zero[seg + j] = path_zero[seg + j + 1]
        path_one[seg + j] = path_one[seg + j + 1]


@inner_kernel(inline="always")
def _unwound_sum(seg, length, k, path_zero, path_one, path_weight):
    """The total weight of the path without element ``k``, whose one fraction is not 0: the sum of the weights
    UNWIND would leave, without changing the path."""
    inverse_one = 1.0 / path_one[seg + k]
    zero_fraction = path_zero[seg + k]
    total = 0.0
    # The loop is a chain through ``carried``; the factors in parentheses do not depend on it, so the CPU computes
    # them (and the division) alongside instead of in the chain.
    carried = path_weight[seg + length]
    for j in range(length - 1, -1, -1):
        step = carried * (inverse_one / (j + 1))
        total += step
        carried = path_weight[seg + j] - step * (zero_fraction * (length - j))
    return total * (length + 1)


@inner_kernel(inline="always")
def _cold_sum(seg, length, path_weight):
    """The unwound sum of any element whose one fraction is 0, times its zero fraction: the same for all of them.

    For such an element UNWIND needs no chain (each weight is divided by the zero fraction on its own), so its
    contribution, ``unwound sum * (0 - zero fraction) * leaf value``, is minus this times the leaf value.
    """
    total = 0.0
    for j in range(length - 1, -1, -1):
        total += path_weight[seg + j] / (length - j)
    return total * (length + 1)


@inner_kernel
def _explain_tree(X, i, root, width, feature, threshold, missing_left, left, right, value, count, out,
                  path_feature, path_zero, path_one, path_weight, stack_node, stack_slot, stack_length, stack_zero,
                  stack_one, stack_feature):
    """Add the TreeSHAP values of row ``i`` of ``X`` in the tree rooted at ``root`` to ``out[i, :]``.

    ``width`` is the tree's depth + 1 (a path holds at most that many elements): segment s of the path arrays is
    ``[s * width, (s + 1) * width)``, and a node's segment is at most its depth. The stack holds the nodes still to
    visit with what their parent hands down: the segment (a hot child's is its parent's + 1 and starts as a copy of
    it, made when it is pushed), the parent's path length, the fractions and the split feature.
    """
    top = 0
    stack_node[0] = root
    stack_slot[0] = 0
    stack_length[0] = -1  # the root copies nothing and puts the path's dummy first element at 0
    stack_zero[0] = 1.0
    stack_one[0] = 1.0
    stack_feature[0] = -1
    while top >= 0:
        node = stack_node[top]
        slot = stack_slot[top]
        length = stack_length[top] + 1
        zero_fraction = stack_zero[top]
        one_fraction = stack_one[top]
        split_feature = stack_feature[top]
        top -= 1
        seg = slot * width
        _extend(seg, length, zero_fraction, one_fraction, split_feature, path_feature, path_zero, path_one,
                path_weight)
        if left[node] < 0:
            leaf_value = value[node]
            cold_total = np.nan  # computed when first needed
            for k in range(1, length + 1):
                if path_one[seg + k] != 0.0:
                    w = _unwound_sum(seg, length, k, path_zero, path_one, path_weight)
                    out[i, path_feature[seg + k]] += w * (path_one[seg + k] - path_zero[seg + k]) * leaf_value
                else:
                    if cold_total != cold_total:
                        cold_total = _cold_sum(seg, length, path_weight)
                    out[i, path_feature[seg + k]] -= cold_total * leaf_value
            continue
        f = feature[node]
        x = X[i, f]
        # As predict: x <= threshold goes left (also for ±inf), NaN goes where the split sends missing values.
        if x <= threshold[node] or (x != x and missing_left[node]):
            hot, cold = left[node], right[node]
        else:
            hot, cold = right[node], left[node]
        # A feature split on again further down: take its earlier element out and carry its fractions on.
        incoming_zero = 1.0
        incoming_one = 1.0
        for k in range(1, length + 1):
            if path_feature[seg + k] == f:
                incoming_zero = path_zero[seg + k]
                incoming_one = path_one[seg + k]
                _unwind(seg, length, k, path_feature, path_zero, path_one, path_weight)
                length -= 1
                break
        node_count = count[node]
        # Cold first, so the hot child is visited next; a child both of whose fractions are 0 adds nothing (all its
        # path weights are 0) and is skipped, which also keeps UNWIND from dividing by zero.
        cold_zero = incoming_zero * count[cold] / node_count
        if cold_zero != 0.0:
            top += 1
            stack_node[top] = cold
            stack_slot[top] = slot
            stack_length[top] = length
            stack_zero[top] = cold_zero
            stack_one[top] = 0.0
            stack_feature[top] = f
        hot_zero = incoming_zero * count[hot] / node_count
        if hot_zero != 0.0 or incoming_one != 0.0:
            # The next segment holds no pending node's path (those are at most this one): copy the path there now.
            for k in range(length + 1):
                path_feature[seg + width + k] = path_feature[seg + k]
                path_zero[seg + width + k] = path_zero[seg + k]
                path_one[seg + width + k] = path_one[seg + k]
                path_weight[seg + width + k] = path_weight[seg + k]
            top += 1
            stack_node[top] = hot
            stack_slot[top] = slot + 1
            stack_length[top] = length
            stack_zero[top] = hot_zero
            stack_one[top] = incoming_one
            stack_feature[top] = f


@inner_kernel
def _explain_block(X, lo, hi, feature, threshold, missing_left, left, right, value, count, tree_starts, tree_depth,
                   max_depth, expected_value, out):
    """Contributions of rows ``lo:hi``: trees outer (their nodes stay in cache), rows inner; per row the trees add in
    tree order, so every blocking gives the same sums."""
    n_features = X.shape[1]
    for i in range(lo, hi):
        for j in range(n_features):
            out[i, j] = 0.0
        out[i, n_features] = expected_value
    size = (max_depth + 1) * (max_depth + 1)
    path_feature = np.empty(size, dtype=np.int64)
    path_zero = np.empty(size)
    path_one = np.empty(size)
    path_weight = np.empty(size)
    # Pending nodes: at most one cold child per level plus the hot child just pushed.
    stack_size = max_depth + 2
    stack_node = np.empty(stack_size, dtype=np.int64)
    stack_slot = np.empty(stack_size, dtype=np.int64)
    stack_length = np.empty(stack_size, dtype=np.int64)
    stack_zero = np.empty(stack_size)
    stack_one = np.empty(stack_size)
    stack_feature = np.empty(stack_size, dtype=np.int64)
    for t in range(tree_starts.shape[0]):
        root = np.int64(tree_starts[t])
        if left[root] < 0:
            continue  # a single leaf: all of it is expected value
        width = tree_depth[t] + 1
        for i in range(lo, hi):
            _explain_tree(X, i, root, width, feature, threshold, missing_left, left, right, value, count, out,
                          path_feature, path_zero, path_one, path_weight, stack_node, stack_slot, stack_length,
                          stack_zero, stack_one, stack_feature)


@kernel(nogil=True)
def explain_rows(X, lo, hi, feature, threshold, missing_left, left, right, value, count, tree_starts, tree_depth,
                 max_depth, expected_value, out):
    """TreeSHAP values of the rows ``lo:hi`` of ``X`` into ``out[lo:hi]`` (n_features + 1 columns, the last
    ``expected_value``); ``nogil``, so that row ranges can be explained on several threads."""
    for block in range(lo, hi, _BLOCK):
        _explain_block(X, block, min(block + _BLOCK, hi), feature, threshold, missing_left, left, right, value,
                       count, tree_starts, tree_depth, max_depth, expected_value, out)


@kernel
def contributions_serial(X, feature, threshold, missing_left, left, right, value, count, tree_starts, tree_depth,
                         max_depth, expected_value):
    """TreeSHAP values of all rows of ``X`` on the calling thread (no thread hand-off for a single query)."""
    out = np.empty((X.shape[0], X.shape[1] + 1))
    explain_rows(X, np.int64(0), X.shape[0], feature, threshold, missing_left, left, right, value, count, tree_starts,
                 tree_depth, max_depth, expected_value, out)
    return out
