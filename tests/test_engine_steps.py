"""The steps of tree growth, driven one by one from Python, grow the same tree as the all-in-numba grower.

This is the seam a grower outside numba uses (one that sums node histograms across machines, for instance): gather a
node's λ and w, build its histogram, find its best split, partition its rows. ``grow_tree_stepwise`` drives those
steps in the leaf-wise order of ``grow_tree``: on rows held in one shard it must reproduce ``grow_tree``'s trees
bit for bit, and on rows spread over shards (histograms summed) the same splits, with leaf values equal up to the
order of the sums.
"""

import numpy as np
import pytest

from lambdamart._engine.binning import bin_features, find_thresholds
from lambdamart._engine.grower import GrownTree, GrowthParams, grow_tree, make_workspace
from lambdamart._engine.histogram import make_layout
from lambdamart._engine.stepwise import RowShard, RowSource, grow_symmetric_stepwise, grow_tree_stepwise
from lambdamart._engine.symmetric import grow_symmetric_tree

GROWERS = {"leafwise": (grow_tree, grow_tree_stepwise), "symmetric": (grow_symmetric_tree, grow_symmetric_stepwise)}


class ShardedRows(RowSource):
    """The rows spread over several shards, as over the workers of a cluster: histograms are summed."""

    def __init__(self, shards):
        self.shards = shards

    def root(self):
        parts = [shard.root() for shard in self.shards]
        return (sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts),
                sum(p[3] for p in parts))

    def split(self, node, split, left, right, small_is_left, small_totals, histogram=True):
        hists = [shard.split(node, split, left, right, small_is_left, None, histogram) for shard in self.shards]
        return sum(hists) if histogram else None


@pytest.mark.parametrize("policy", GROWERS)
@pytest.mark.parametrize("seed, n_blocks, max_leaf_nodes, max_depth, min_samples_leaf, l2, feature_share", [
    (0, 1, 31, -1, 20, 0.0, 1.0),
    (1, 3, 15, 4, 5, 1.0, 1.0),
    (2, 2, 63, -1, 1, 0.0, 0.5),
    (3, 4, 8, 2, 50, 0.5, 0.7),
])
def test_stepwise_growth_equals_grow_tree(seed, n_blocks, max_leaf_nodes, max_depth, min_samples_leaf, l2,
                                          feature_share, policy):
    grow, grow_stepwise = GROWERS[policy]
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
    # parallel_work=1: numba's threads search every node, block by block, and grow the stepwise grower's tree.
    fast = grow(codes, n_bins, layout, features.astype(np.int64), grad, hess, fast_rows, params,
                make_workspace(n_rows, layout, max_leaf_nodes), 1)
    shard = RowShard(codes, n_bins, layout, grad, hess, subsample)
    steps = grow_stepwise(shard, n_bins, layout.bin_offsets, features.astype(np.int64), params)

    assert np.sum(fast.feature >= 0) > 2, "the tree should split several times"
    for name in GrownTree._fields:
        if name not in ("node_start", "node_stop"):
            np.testing.assert_array_equal(getattr(steps, name), getattr(fast, name), err_msg=name)
    np.testing.assert_array_equal(shard.rows, fast_rows)
    for node in np.flatnonzero(fast.feature < 0):
        np.testing.assert_array_equal(shard.leaf_rows(node), fast_rows[fast.node_start[node]:fast.node_stop[node]])

    # The same rows in three shards (each with its own layout, as on three machines): the same splits.
    cuts = np.array_split(subsample, 3)
    shards = [RowShard(codes, n_bins, make_layout(codes, n_bins, 1), grad, hess, part, local_totals=True)
              for part in cuts]
    spread = grow_stepwise(ShardedRows(shards), n_bins, layout.bin_offsets, features.astype(np.int64), params)
    for name in ("feature", "split_bin", "missing_left", "left", "right", "count"):
        np.testing.assert_array_equal(getattr(spread, name), getattr(fast, name), err_msg=name)
    np.testing.assert_allclose(spread.value, fast.value, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(spread.gain, fast.gain, rtol=1e-9)


@pytest.mark.parametrize("min_samples_leaf", [5, 20])
def test_grow_tree_skipping_exhausted_features_grows_the_same_tree(min_samples_leaf):
    # Features non-zero in a few dozen rows: a few nodes down no threshold of theirs leaves min_samples_leaf rows on
    # both sides, and grow_tree stops searching them below that node; the stepwise grower searches every feature
    # at every node. The trees must be the same.
    rng = np.random.default_rng(7)
    n_rows, n_features = 4000, 16
    X = rng.normal(size=(n_rows, n_features))
    for f in range(8):
        X[:, f] = np.where(rng.random(n_rows) < 0.004 * (f + 1), rng.integers(1, 4, n_rows), 0.0)
    X[rng.random(X.shape) < 0.03] = np.nan
    thresholds, offsets = find_thresholds(X, 32)
    rows = np.arange(n_rows, dtype=np.int64)
    codes = bin_features(X, rows, thresholds, offsets)
    n_bins = np.diff(offsets) + 1
    layout = make_layout(codes, n_bins, 2)
    grad = rng.normal(size=n_rows) + np.nan_to_num(X[:, :8]).sum(axis=1)
    hess = rng.uniform(0.2, 1.0, n_rows)
    features = np.arange(n_features, dtype=np.int64)
    params = GrowthParams(max_leaf_nodes=63, max_depth=-1, min_samples_leaf=min_samples_leaf, min_sum_hessian=1e-3,
                          l2_regularization=0.0, learning_rate=0.1)
    fast = grow_tree(codes, n_bins, layout, features, grad, hess, rows.copy(), params,
                     make_workspace(n_rows, layout, 63), None)
    steps = grow_tree_stepwise(RowShard(codes, n_bins, layout, grad, hess, rows.copy()), n_bins, layout.bin_offsets,
                               features, params)
    assert np.isin(np.arange(8), fast.feature).sum() >= 3, "the rare features should be split on somewhere"
    for name in GrownTree._fields:
        if name not in ("node_start", "node_stop"):
            np.testing.assert_array_equal(getattr(steps, name), getattr(fast, name), err_msg=name)
