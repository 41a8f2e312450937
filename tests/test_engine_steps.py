"""The steps of tree growth, driven one by one from Python, grow the same tree as the all-in-numba grower.

This is the seam a grower outside numba uses (one that sums node histograms across machines, for instance): gather a
node's λ and w, build its histogram, find its best split, partition its rows. A Python driver of those steps that
follows the leaf-wise order of ``grow_tree`` must reproduce its trees exactly, split for split and bit for bit.
"""

import numpy as np
import pytest

from lambdamart._engine.binning import bin_features, find_thresholds
from lambdamart._engine.grower import (
    GrownTree,
    GrowthParams,
    find_node_split,
    gather_node,
    grow_tree,
    make_workspace,
    node_histogram,
    partition_node,
)
from lambdamart._engine.histogram import make_layout, new_histograms
from lambdamart._engine.split import leaf_value


def _splittable(count, depth, params):
    return (count >= 2 * params.min_samples_leaf and count >= 2
            and (params.max_depth < 0 or depth < params.max_depth))


def grow_by_steps(codes, n_bins, layout, features, grad, hess, rows, params):
    """Leaf-wise growth in Python from the step kernels: the reference order of grow_tree, node by node."""
    rows = rows.copy()
    n = rows.shape[0]
    ordered_grad, ordered_hess = np.empty(n), np.empty(n)
    buffer = np.empty(n, dtype=np.int64)
    nodes = []

    def add_node(start, stop, depth, sum_grad, sum_hess, hist):
        nodes.append(dict(start=start, stop=stop, depth=depth, sum_grad=sum_grad, sum_hess=sum_hess, hist=hist,
                          split=None, feature=-1, bin=0, missing_left=False, left=-1, right=-1, gain=0.0))
        return len(nodes) - 1

    def search(node):
        d = nodes[node]
        count = d["stop"] - d["start"]
        if _splittable(count, d["depth"], params):
            d["split"] = find_node_split(d["hist"], n_bins, layout.bin_offsets, features, d["sum_grad"],
                                         d["sum_hess"], float(count), params)

    sum_grad, sum_hess = gather_node(grad, hess, rows, 0, n, ordered_grad, ordered_hess)
    root_hist = new_histograms(1, layout.total_bins)[0]
    node_histogram(codes, layout, rows, ordered_grad, ordered_hess, sum_grad, sum_hess, float(n), root_hist)
    add_node(0, n, 0, sum_grad, sum_hess, root_hist)
    search(0)
    n_leaves = 1
    while n_leaves < params.max_leaf_nodes:
        best = -1
        for i, d in enumerate(nodes):
            if d["left"] == -1 and d["split"] is not None and d["split"].gain > 0.0 and (
                    best == -1 or d["split"].gain > nodes[best]["split"].gain):
                best = i
        if best == -1:
            break
        parent = nodes[best]
        split = parent["split"]
        f = split.feature
        boundary = partition_node(codes, rows, parent["start"], parent["stop"], f, split.bin, n_bins[f],
                                  split.missing_left, buffer)
        parent.update(feature=f, bin=split.bin, missing_left=split.missing_left, gain=split.gain)
        left = add_node(parent["start"], boundary, parent["depth"] + 1, split.left_grad, split.left_hess, None)
        right = add_node(boundary, parent["stop"], parent["depth"] + 1, parent["sum_grad"] - split.left_grad,
                         parent["sum_hess"] - split.left_hess, None)
        parent["left"], parent["right"] = left, right
        n_leaves += 1
        # The smaller child's histogram is built, the larger one's is the parent's minus it.
        count = {c: nodes[c]["stop"] - nodes[c]["start"] for c in (left, right)}
        small, large = (left, right) if count[left] <= count[right] else (right, left)
        s = nodes[small]
        gather_node(grad, hess, rows, s["start"], s["stop"], ordered_grad, ordered_hess)
        s["hist"] = new_histograms(1, layout.total_bins)[0]
        part = slice(s["start"], s["stop"])
        node_histogram(codes, layout, rows[part], ordered_grad[part], ordered_hess[part], s["sum_grad"],
                       s["sum_hess"], float(count[small]), s["hist"])
        nodes[large]["hist"] = parent["hist"] - s["hist"]
        if n_leaves < params.max_leaf_nodes:
            search(small)
            search(large)

    value = np.array([params.learning_rate * leaf_value(d["sum_grad"], d["sum_hess"], params.l2_regularization)
                      if d["left"] == -1 else 0.0 for d in nodes])
    return GrownTree(
        feature=np.array([d["feature"] for d in nodes], dtype=np.int32),
        split_bin=np.array([d["bin"] for d in nodes], dtype=np.int32),
        missing_left=np.array([d["missing_left"] for d in nodes]),
        left=np.array([d["left"] for d in nodes], dtype=np.int32),
        right=np.array([d["right"] for d in nodes], dtype=np.int32),
        value=value, gain=np.array([d["gain"] for d in nodes]),
        count=np.array([d["stop"] - d["start"] for d in nodes], dtype=np.int64),
        node_start=np.array([d["start"] for d in nodes], dtype=np.int64),
        node_stop=np.array([d["stop"] for d in nodes], dtype=np.int64)), rows


@pytest.mark.parametrize("seed, n_blocks, max_leaf_nodes, max_depth, min_samples_leaf, l2, feature_share", [
    (0, 1, 31, -1, 20, 0.0, 1.0),
    (1, 3, 15, 4, 5, 1.0, 1.0),
    (2, 2, 63, -1, 1, 0.0, 0.5),
    (3, 4, 8, 2, 50, 0.5, 0.7),
])
def test_stepwise_growth_equals_grow_tree(seed, n_blocks, max_leaf_nodes, max_depth, min_samples_leaf, l2,
                                          feature_share):
    rng = np.random.default_rng(seed)
    n_rows, n_features = 3000, 12
    X = rng.normal(size=(n_rows, n_features))
    X[:, 3] = rng.integers(0, 3, n_rows)  # few distinct values
    X[:, 5] = np.where(rng.random(n_rows) < 0.8, 0.0, X[:, 5])  # mostly one value: a sparse-list feature
    X[rng.random(X.shape) < 0.05] = np.nan
    thresholds, offsets = find_thresholds(X, 64)
    all_rows = np.arange(n_rows, dtype=np.int64)
    codes = bin_features(X, all_rows, thresholds, offsets)
    n_bins = np.diff(offsets) + 1
    layout = make_layout(codes, n_bins, n_blocks)
    assert np.any(layout.mode_bin >= 0)
    grad = np.where(np.isnan(X[:, 0]), 1.0, X[:, 0]) + 0.5 * np.nan_to_num(X[:, 4]) + rng.normal(size=n_rows)
    hess = rng.uniform(0.2, 1.0, n_rows)
    features = np.sort(rng.choice(n_features, max(1, int(feature_share * n_features)), replace=False))
    params = GrowthParams(max_leaf_nodes=max_leaf_nodes, max_depth=max_depth, min_samples_leaf=min_samples_leaf,
                          min_sum_hessian=1e-3, l2_regularization=l2, learning_rate=0.1)
    subsample = np.sort(rng.choice(n_rows, 2400, replace=False)).astype(np.int64)

    fast_rows = subsample.copy()
    fast = grow_tree(codes, n_bins, layout, features.astype(np.int64), grad, hess, fast_rows, params,
                     make_workspace(n_rows, layout.total_bins, max_leaf_nodes))
    steps, step_rows = grow_by_steps(codes, n_bins, layout, features.astype(np.int64), grad, hess, subsample, params)

    assert np.sum(fast.feature >= 0) > 2, "the tree should split several times"
    for name in GrownTree._fields:
        np.testing.assert_array_equal(getattr(steps, name), getattr(fast, name), err_msg=name)
    np.testing.assert_array_equal(step_rows, fast_rows)
