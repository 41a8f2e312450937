"""Symmetric (oblivious) trees: one split per level, the summed gain's best, within the growth limits.

The grower is checked against a brute-force search written here in numpy: every feature, threshold and side for
missing values, each node's Newton gain from its own rows, summed over the nodes that can take it.
"""

import json
import pickle

import numpy as np
import pytest

from lambdamart import LambdaMARTRanker
from lambdamart._engine.binning import bin_features, find_thresholds
from lambdamart._engine.grower import GrowthParams, make_workspace
from lambdamart._engine.histogram import make_layout
from lambdamart._engine.symmetric import grow_symmetric_tree, nodes_to_split, symmetric_depth
from lambdamart.datasets import make_ranking_data


def _data(seed, n_rows=2000, n_features=6, missing=0.05):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    X[:, 2] = rng.integers(0, 4, n_rows)
    X[rng.random(X.shape) < missing] = np.nan
    grad = np.nan_to_num(X[:, 0]) - 0.7 * (X[:, 2] == 1) + 0.5 * np.isnan(X[:, 1]) + rng.normal(size=n_rows)
    hess = rng.uniform(0.2, 1.0, n_rows)
    thresholds, offsets = find_thresholds(X, 32)
    codes = bin_features(X, np.arange(n_rows, dtype=np.int64), thresholds, offsets)
    return codes, np.diff(offsets) + 1, grad, hess


def _grow(codes, n_bins, grad, hess, max_leaf_nodes=31, max_depth=-1, min_samples_leaf=20, n_blocks=2,
          parallel_work=None):
    layout = make_layout(codes, n_bins, n_blocks)
    rows = np.arange(codes.shape[1], dtype=np.int64)
    params = GrowthParams(max_leaf_nodes=max_leaf_nodes, max_depth=max_depth, min_samples_leaf=min_samples_leaf,
                          min_sum_hessian=1e-3, l2_regularization=0.0, learning_rate=1.0, symmetric=True)
    tree = grow_symmetric_tree(codes, n_bins, layout, np.arange(codes.shape[0], dtype=np.int64), grad, hess, rows,
                               params, make_workspace(codes.shape[1], layout, max_leaf_nodes), parallel_work)
    return tree, rows


def _levels(tree):
    """The nodes of each level, by depth."""
    levels, depth = [[0]], {0: 0}
    for node in range(tree.feature.shape[0]):
        if tree.left[node] >= 0:
            for child in (tree.left[node], tree.right[node]):
                depth[child] = depth[node] + 1
                if len(levels) <= depth[child]:
                    levels.append([])
                levels[depth[child]].append(child)
    return levels


def _node_gain(grad, hess, goes_left, min_samples_leaf):
    n_left, n_right = goes_left.sum(), (~goes_left).sum()
    if n_left < min_samples_leaf or n_right < min_samples_leaf:
        return 0.0
    g_left, h_left = grad[goes_left].sum(), hess[goes_left].sum()
    g, h = grad.sum(), hess.sum()
    return g_left ** 2 / h_left + (g - g_left) ** 2 / (h - h_left) - g ** 2 / h


def _brute_force_best(codes, n_bins, grad, hess, node_rows, min_samples_leaf):
    best = (0.0, None)
    for f in range(codes.shape[0]):
        for b in range(n_bins[f]):
            for missing_left in (False, True):
                total = 0.0
                for rows in node_rows:
                    code = codes[f, rows]
                    goes_left = np.where(code == n_bins[f], missing_left, code <= b)
                    total += _node_gain(grad[rows], hess[rows], goes_left, min_samples_leaf)
                if total > best[0] * (1 + 1e-9):
                    best = (total, (f, b))
    return best


@pytest.mark.parametrize("seed, max_leaf_nodes, max_depth, min_samples_leaf", [
    (0, 31, -1, 20), (1, 8, -1, 5), (2, 64, 3, 1), (3, 31, -1, 300), (4, 12, -1, 20),
])
def test_every_level_shares_one_split_within_the_limits(seed, max_leaf_nodes, max_depth, min_samples_leaf):
    codes, n_bins, grad, hess = _data(seed)
    tree, rows = _grow(codes, n_bins, grad, hess, max_leaf_nodes, max_depth, min_samples_leaf)
    levels = _levels(tree)
    leaves = tree.feature < 0
    assert leaves.sum() <= max_leaf_nodes
    assert len(levels) - 1 <= symmetric_depth(max_leaf_nodes, max_depth)
    assert len(levels) >= 3, "the tree should grow a few levels"
    for level in levels:
        split = {(tree.feature[n], tree.split_bin[n]) for n in level if tree.feature[n] >= 0}
        assert len(split) <= 1, f"one split per level, got {split}"
    assert tree.count[leaves].min() >= min_samples_leaf
    # Each leaf's rows are its slice of the partitioned rows, and they follow the splits above it.
    for node in np.flatnonzero(~leaves):
        f, b = tree.feature[node], tree.split_bin[node]
        for child, goes_left in ((tree.left[node], True), (tree.right[node], False)):
            code = codes[f, rows[tree.node_start[child]:tree.node_stop[child]]]
            went_left = np.where(code == n_bins[f], tree.missing_left[node], code <= b)
            assert np.all(went_left == goes_left)


def test_a_level_that_would_pass_max_leaf_nodes_splits_its_nodes_of_largest_gain():
    codes, n_bins, _, hess = _data(5)
    grad = np.random.default_rng(0).normal(size=hess.shape[0])  # noise: the third level's split gains at each node
    tree, rows = _grow(codes, n_bins, grad, hess, max_leaf_nodes=6, min_samples_leaf=1)
    levels = _levels(tree)
    assert [len(level) for level in levels] == [1, 2, 4, 4]
    split = [n for n in levels[2] if tree.feature[n] >= 0]  # 4 leaves so far: room for 2 more splits
    f, b = tree.feature[split[0]], tree.split_bin[split[0]]
    gains = {}
    for node in levels[2]:  # each node's gain from the level's split, from its rows
        node_rows = rows[tree.node_start[node]:tree.node_stop[node]]
        code = codes[f, node_rows]
        goes_left = np.where(code == n_bins[f], tree.missing_left[split[0]], code <= b)
        gains[node] = _node_gain(grad[node_rows], hess[node_rows], goes_left, 1)
    assert min(gains.values()) > 0
    assert sorted(split) == sorted(sorted(gains, key=gains.get)[-2:])
    np.testing.assert_allclose([tree.gain[n] for n in split], [gains[n] for n in split], rtol=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_nodes_to_split_keeps_the_budget_of_largest_gain_ties_to_the_first_node(seed):
    rng = np.random.default_rng(seed)
    gain = rng.choice([-1.0, 0.0, 0.5, 1.0, 2.0], size=rng.integers(1, 17))  # ties and non-gains
    budget = int(rng.integers(1, gain.shape[0] + 1))
    positive = np.flatnonzero(gain > 0)
    expected = np.zeros(gain.shape[0], dtype=bool)
    expected[positive[np.argsort(-gain[positive], kind="stable")][:budget]] = True
    np.testing.assert_array_equal(nodes_to_split(gain, budget), expected)


def test_the_split_of_each_level_is_the_brute_force_best():
    codes, n_bins, grad, hess = _data(6, n_rows=600, n_features=4)
    tree, rows = _grow(codes, n_bins, grad, hess, max_leaf_nodes=16, min_samples_leaf=10)
    for level in _levels(tree):
        splitting = [n for n in level if tree.feature[n] >= 0]
        if not splitting:
            continue
        node_rows = [rows[tree.node_start[n]:tree.node_stop[n]] for n in level]
        gain, (f, b) = _brute_force_best(codes, n_bins, grad, hess, node_rows, 10)
        assert (tree.feature[splitting[0]], tree.split_bin[splitting[0]]) == (f, b)
        np.testing.assert_allclose(tree.gain[splitting].sum(), gain, rtol=1e-9)


def test_threads_and_blocks_grow_the_same_symmetric_tree():
    codes, n_bins, grad, hess = _data(7)
    one, _ = _grow(codes, n_bins, grad, hess, n_blocks=1)
    many, _ = _grow(codes, n_bins, grad, hess, n_blocks=4, parallel_work=1)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a, b)


def test_grow_policy_auto_is_symmetric_except_for_unbiased_lambdamart():
    X, y, qid = make_ranking_data(60, random_state=0)[:3]
    position = np.concatenate([np.arange(1, n + 1) for n in np.bincount(qid)])

    def predictions(policy, **fit_params):
        ranker = LambdaMARTRanker(n_estimators=5, grow_policy=policy, random_state=0)
        return ranker.fit(X, y, qid=qid, **fit_params).predict(X)

    auto = predictions("auto")
    np.testing.assert_array_equal(auto, predictions("symmetric"))
    assert not np.allclose(auto, predictions("leafwise"))
    np.testing.assert_array_equal(predictions("auto", position=position), predictions("leafwise", position=position))
    with pytest.raises(ValueError, match="grow_policy"):
        LambdaMARTRanker(grow_policy="depthwise").fit(X, y, qid=qid)


def test_the_default_depth_comes_from_max_leaf_nodes_whatever_the_rows():
    # 414 rows of 30 at least per leaf hold 13 leaves; the depth is still the 5 levels that 31 leaves need.
    X, y, qid = make_ranking_data(4, random_state=0)[:3]
    params = dict(n_estimators=5, min_samples_leaf=30, random_state=0)
    default = LambdaMARTRanker(**params).fit(X, y, qid=qid)
    five = LambdaMARTRanker(max_depth=5, **params).fit(X, y, qid=qid)
    np.testing.assert_array_equal(default.predict(X), five.predict(X))


def test_continuations_saved_before_grow_policy_are_leaf_wise(tmp_path):
    # A checkpoint or a pickled ranker from before the parameter existed holds leaf-wise trees: a pickle continues
    # leaf-wise, and resuming such a checkpoint with the new default is refused as other parameters.
    X, y, qid = make_ranking_data(20, random_state=0)[:3]
    old = LambdaMARTRanker(n_estimators=2, grow_policy="leafwise", random_state=0).fit(X, y, qid=qid)
    del old.__dict__["grow_policy"]
    old._boosting_params.pop("grow_policy")
    unpickled = pickle.loads(pickle.dumps(old))
    assert unpickled.get_params()["grow_policy"] == "leafwise"
    unpickled.set_params(n_estimators=4, warm_start=True).fit(X, y, qid=qid)

    params = dict(random_state=0, checkpoint_dir=tmp_path, checkpoint_every=2)
    LambdaMARTRanker(n_estimators=4, grow_policy="leafwise", **params).fit(X, y, qid=qid)
    for path in tmp_path.glob("round-*.npz"):
        arrays = dict(np.load(path))
        header = json.loads(str(arrays["header"]))
        del header["params"]["grow_policy"]
        arrays["header"] = np.array(json.dumps(header))
        np.savez(path, **arrays)
    with pytest.raises(ValueError, match="grow_policy='leafwise' there, 'auto' here"):
        LambdaMARTRanker(n_estimators=8, warm_start=True, **params).fit(X, y, qid=qid)
