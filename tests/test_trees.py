"""The tree engine (lambdamart._engine): binning, histograms, the leaf-wise grower, the tree layout and
prediction, with a brute-force best-first tree written over raw sorted values as the reference. Growing a tree step
by step through the grower's parts is in test_engine_steps.py."""

import numba
import numpy as np
import pytest
from helpers import called_from_a_kernel, reference_predict

from lambdamart._engine import histogram
from lambdamart._engine import predict as predict_module
from lambdamart._engine import split as split_module
from lambdamart._engine.binning import MIN_SAMPLES_PER_BIN, bin_features, find_thresholds
from lambdamart._engine.grower import (
    GrowthParams,
    add_leaf_values,
    gather_node,
    grow_tree,
    make_workspace,
    partition_node,
    partition_node_threaded,
)
from lambdamart._engine.histogram import (
    GROUP_FEATURES,
    SPARSE_SHARE,
    make_layout,
    new_histograms,
)
from lambdamart._engine.predict import (
    add_tree_binned,
    quick_score_layout,
    quick_score_rows,
    row_key_buffer,
    score_rows,
    walk_layout,
)
from lambdamart._engine.tree import concatenate_trees, make_tree
from lambdamart._parallel import parallel_region, split_over_threads

# Kernels that only other kernels call in the package (no Python entry point), called here through a jitted caller.
build_block = called_from_a_kernel(histogram.build_block)
subtract_feature = called_from_a_kernel(histogram.subtract_feature)
feature_best_split = called_from_a_kernel(split_module.feature_best_split)
children_best_splits = called_from_a_kernel(split_module.children_best_splits)

# ---------------------------------------------------------------- helpers


def predict_serial(X, *walk):
    """Scores of ``X`` as a small predict computes them: all rows on the calling thread."""
    out = np.empty(X.shape[0])
    score_rows(X, 0, X.shape[0], row_key_buffer(*X.shape), *walk, out)
    return out


def predict_on_threads(X, *walk):
    """Scores of ``X`` as a large predict computes them: row ranges on numba's thread count of Python threads,
    each with its own key buffer."""
    out = np.empty(X.shape[0])
    split_over_threads(lambda lo, hi: score_rows(X, lo, hi, row_key_buffer(hi - lo, X.shape[1]), *walk, out),
                       X.shape[0])
    return out


def quick_on_threads(X, *layout):
    """Scores of ``X`` by QuickScorer, row ranges on numba's thread count of Python threads."""
    out = np.empty(X.shape[0])
    split_over_threads(lambda lo, hi: quick_score_rows(X, lo, hi, *layout, out), X.shape[0])
    return out


def walk_args(ens):
    """The walk layout of the flat ensemble ``ens``: the arguments after the keys of ``score_rows``."""
    return tuple(walk_layout(ens))


def _all_rows(X):
    return np.arange(X.shape[0], dtype=np.int64)


def feature_thresholds(thresholds, offsets, f):
    return thresholds[offsets[f]:offsets[f + 1]]


def binned(X, max_bins=255):
    thresholds, offsets = find_thresholds(X, max_bins)
    codes = bin_features(X, _all_rows(X), thresholds, offsets)
    n_bins = np.diff(offsets) + 1
    return thresholds, offsets, codes, n_bins


def grow_binned(codes, n_bins, grad, hess, max_leaf_nodes, max_depth=-1, min_samples_leaf=1, min_sum_hessian=0.0,
                l2=0.0, learning_rate=1.0, features=None, n_blocks=1):
    """grow_tree on all rows of ``codes``."""
    layout = make_layout(codes, n_bins, n_blocks)
    if features is None:
        features = np.arange(codes.shape[0], dtype=np.int64)
    rows = np.arange(codes.shape[1], dtype=np.int64)
    params = GrowthParams(max_leaf_nodes=max_leaf_nodes, max_depth=max_depth, min_samples_leaf=min_samples_leaf,
                          min_sum_hessian=float(min_sum_hessian), l2_regularization=float(l2),
                          learning_rate=float(learning_rate))
    out = grow_tree(codes, n_bins, layout, features, grad.astype(np.float64), hess.astype(np.float64), rows, params,
                    make_workspace(codes.shape[1], layout, max_leaf_nodes), None)
    return out, rows


def grow(X, grad, hess, max_leaf_nodes=2, max_depth=-1, min_samples_leaf=1, min_sum_hessian=0.0, l2=0.0,
         learning_rate=1.0, max_bins=255, features=None, n_blocks=1):
    """Bin X, grow one tree on all rows, and return its raw-threshold node arrays plus the kernel's outputs."""
    thresholds, offsets, codes, n_bins = binned(X, max_bins)
    out, rows = grow_binned(codes, n_bins, grad, hess, max_leaf_nodes, max_depth, min_samples_leaf, min_sum_hessian,
                            l2, learning_rate, features, n_blocks)
    tree = make_tree(out, thresholds, offsets)
    return dict(tree=tree, raw=out, rows=rows, codes=codes, n_bins=n_bins, thresholds=thresholds, offsets=offsets)


def node_depths(left, right):
    depth = np.zeros(left.shape[0], dtype=int)
    for i in range(left.shape[0]):
        if left[i] != -1:
            depth[left[i]] = depth[right[i]] = depth[i] + 1
    return depth


def predict_one_tree(tree, X):
    ens = concatenate_trees([tree])
    return predict_serial(X, *walk_args(ens))


def repeated_values_data(seed, n_features=4, n_distinct=60, repeat=5):
    """Features whose distinct values each occur ``repeat`` (>= 3) times, so every midpoint is a bin threshold."""
    rng = np.random.default_rng(seed)
    n = n_distinct * repeat
    X = np.empty((n, n_features))
    for f in range(n_features):
        values = np.sort(rng.choice(np.arange(-500, 500), n_distinct, replace=False) / 10.0)
        X[:, f] = rng.permutation(np.repeat(values, repeat))
    y = np.sin(X[:, 0] / 10) + 0.05 * X[:, 1] + (X[:, 2] > 10) + 0.3 * rng.normal(size=n)
    return X, y


# ---------------------------------------------------------------- brute-force reference tree


def brute_force_tree(X, grad, hess, max_leaf_nodes, max_depth=-1, min_samples_leaf=1, min_sum_hessian=0.0, l2=0.0,
                     learning_rate=1.0):
    """Best-first tree over raw sorted values (all distinct values frequent enough to be bin boundaries).

    Candidates per feature: "x <= v" for every distinct value v of the node, missing values on either side, and
    "all values | missing". The stored threshold is the midpoint between v and the next distinct value of the
    whole column (+inf after the largest). Ties: first feature, lowest value, missing right before left.
    Node numbering as the grower: the root is 0, children are appended as (left, right).
    """
    n, n_features = X.shape
    columns = [np.unique(X[~np.isnan(X[:, f]), f]) for f in range(n_features)]

    def threshold_after(f, v):
        col = columns[f]
        k = np.searchsorted(col, v)
        if k + 1 >= col.size:
            return np.inf
        lower, upper = col[k], col[k + 1]
        return lower + (upper - lower) / 2.0

    def best_split(rows):
        G, H = grad[rows].sum(), hess[rows].sum()
        parent = G * G / (H + l2)
        best = None
        for f in range(n_features):
            x = X[rows, f]
            miss = np.isnan(x)
            values = np.unique(x[~miss])
            for v in values:
                for missing_left in (False, True):
                    if missing_left and not miss.any():
                        continue
                    go_left = (x <= v) & ~miss
                    if missing_left:
                        go_left |= miss
                    nl = go_left.sum()
                    nr = rows.size - nl
                    if nl < min_samples_leaf or nr < min_samples_leaf:
                        continue
                    hl, hr = hess[rows[go_left]].sum(), hess[rows[~go_left]].sum()
                    if hl < min_sum_hessian or hr < min_sum_hessian:
                        continue
                    gl, gr = grad[rows[go_left]].sum(), grad[rows[~go_left]].sum()
                    gain = gl * gl / (hl + l2) + gr * gr / (hr + l2) - parent
                    if best is None or gain > best["gain"]:
                        if not miss.any():
                            # No missing value here: future ones go to the child with more rows.
                            missing_left = bool(nl >= nr)
                        best = dict(gain=gain, feature=f, threshold=threshold_after(f, v),
                                    missing_left=missing_left, left_rows=rows[go_left], right_rows=rows[~go_left])
        return best

    nodes = [dict(rows=np.arange(n), depth=0)]

    def consider(i):
        node = nodes[i]
        splittable = (node["rows"].size >= 2 * min_samples_leaf and node["rows"].size >= 2
                      and (max_depth < 0 or node["depth"] < max_depth))
        node["cand"] = best_split(node["rows"]) if splittable else None

    consider(0)
    n_leaves = 1
    while n_leaves < max_leaf_nodes:
        pick = None
        for i, node in enumerate(nodes):
            c = node.get("cand")
            if "split" in node or c is None or not c["gain"] > 0:
                continue
            if pick is None or c["gain"] > nodes[pick]["cand"]["gain"]:
                pick = i
        if pick is None:
            break
        node = nodes[pick]
        node["split"] = node["cand"]
        node["left"], node["right"] = len(nodes), len(nodes) + 1
        for side in ("left_rows", "right_rows"):
            nodes.append(dict(rows=node["split"][side], depth=node["depth"] + 1))
        n_leaves += 1
        consider(node["left"])
        consider(node["right"])
    for node in nodes:
        if "split" not in node:
            r = node["rows"]
            node["value"] = -learning_rate * grad[r].sum() / (hess[r].sum() + l2)
    return nodes


def kernel_node_rows(result):
    """Rows of every node of a grown tree (node_start/node_stop slices of the partitioned rows)."""
    raw = result["raw"]
    node_start, node_stop = raw.node_start, raw.node_stop
    return [np.sort(result["rows"][node_start[i]:node_stop[i]]) for i in range(node_start.shape[0])]


def assert_same_tree(result, nodes, check_thresholds=True):
    tree = result["tree"]
    rows = kernel_node_rows(result)
    assert tree["feature"].shape[0] == len(nodes)
    for i, node in enumerate(nodes):
        np.testing.assert_array_equal(rows[i], np.sort(node["rows"]), err_msg=f"rows of node {i}")
        if "split" in node:
            s = node["split"]
            assert tree["feature"][i] == s["feature"], f"feature of node {i}"
            assert tree["left"][i] == node["left"] and tree["right"][i] == node["right"]
            assert tree["gain"][i] == pytest.approx(s["gain"], rel=1e-9, abs=1e-9)
            assert bool(tree["missing_left"][i]) == s["missing_left"], f"missing side of node {i}"
            if check_thresholds:
                assert tree["threshold"][i] == pytest.approx(s["threshold"], rel=1e-12), f"threshold of node {i}"
        else:
            assert tree["left"][i] == -1
            assert tree["value"][i] == pytest.approx(node["value"], rel=1e-10, abs=1e-12), f"value of node {i}"
            assert tree["count"][i] == node["rows"].size


# ---------------------------------------------------------------- binning


def test_thresholds_of_each_feature_do_not_depend_on_the_chunk_it_is_sorted_in():
    """Features are sorted in chunks of _SORT_CHUNK: many features (a partial last chunk), a row sample and
    threads give each feature the thresholds it gets alone."""
    from lambdamart._engine.binning import _SORT_CHUNK

    rng = np.random.default_rng(3)
    n_features = 2 * _SORT_CHUNK + 5
    X = rng.normal(size=(400, n_features)).astype(np.float32)
    X[:, 1::3] = np.round(X[:, 1::3] * 2)  # some features with few distinct values
    X[::5, 2] = np.nan
    rows = np.sort(rng.choice(400, 250, replace=False))
    thresholds, offsets = find_thresholds(X, 32, rows, split_over_threads)
    for f in range(n_features):
        alone, _ = find_thresholds(np.ascontiguousarray(X[rows, f:f + 1]), 32)
        np.testing.assert_array_equal(thresholds[offsets[f]:offsets[f + 1]], alone)


@pytest.mark.parametrize("order", ["C", "F"])
def test_thresholds_leave_the_input_unchanged_in_either_memory_order(order):
    """find_thresholds sorts gathered copies of the values: never the caller's array, in either memory order."""
    rng = np.random.default_rng(0)
    X = np.asarray(rng.normal(size=(300, 3)), order=order)
    X[::7, 1] = np.nan
    before = X.copy()
    thresholds, offsets = find_thresholds(X, 16)
    np.testing.assert_array_equal(X, before)
    again, _ = find_thresholds(np.ascontiguousarray(X), 16)
    np.testing.assert_array_equal(thresholds, again)


def test_nan_goes_to_missing_bin_and_inf_to_extreme_bins():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    X[::7, 0] = np.nan
    X[::11, 1] = np.inf
    X[::13, 1] = -np.inf
    X[5, 2] = np.nan
    thresholds, offsets, codes, n_bins = binned(X, 16)
    assert codes.dtype == np.uint8 and codes.shape == (3, 200)
    for f in range(3):
        nan = np.isnan(X[:, f])
        assert np.all(codes[f][nan] == n_bins[f])
        assert np.all(codes[f][~nan] < n_bins[f])
    assert np.all(codes[1][np.isposinf(X[:, 1])] == n_bins[1] - 1)
    assert np.all(codes[1][np.isneginf(X[:, 1])] == 0)
    # Infinities never appear in a threshold that would leave an empty bin, and NaN never is a threshold.
    assert np.all(np.isfinite(thresholds) | np.isneginf(thresholds))


def test_infinities_keep_bins_of_their_own_with_few_distinct_values():
    X = np.repeat([-np.inf, -1.0, 2.0, np.inf], 4)[:, None]
    thresholds, offsets, codes, n_bins = binned(X)
    assert n_bins[0] == 4
    np.testing.assert_array_equal(codes[0], np.repeat([0, 1, 2, 3], 4))
    # Unseen values bin by the thresholds: above the largest finite value -> the +inf bin, below -1 -> the -1 bin.
    unseen = np.array([[5.0], [-7.0], [np.nan], [np.inf], [-np.inf]])
    np.testing.assert_array_equal(bin_features(unseen, _all_rows(unseen), thresholds, offsets)[0], [3, 1, 4, 3, 0])


@pytest.mark.parametrize("max_bins", [2, 3, 7, 16, 64, 255])
def test_number_of_bins_at_most_max_bins(max_bins):
    rng = np.random.default_rng(max_bins)
    X = np.column_stack([
        rng.normal(size=1000),  # continuous: quantile bins
        rng.integers(0, 400, 1000).astype(float),  # many ties
        np.where(rng.random(1000) < 0.9, 0.0, rng.normal(size=1000)),  # 90% zeros
        rng.integers(0, 5, 1000).astype(float),  # few distinct values
        np.full(1000, 3.0),  # constant
    ])
    X[rng.random(1000) < 0.1, 0] = np.nan
    thresholds, offsets, codes, n_bins = binned(X, max_bins)
    assert np.all(n_bins <= max_bins)
    assert np.all(n_bins >= 1)
    assert n_bins[4] == 1
    for f in range(X.shape[1]):
        t = feature_thresholds(thresholds, offsets, f)
        assert np.all(np.diff(t) > 0), "thresholds must be strictly increasing"
        assert codes[f].max() <= n_bins[f]
    if max_bins >= 5:
        assert n_bins[3] == 5
    # A continuous column uses (nearly) all the bins it may, and they are roughly balanced.
    counts = np.bincount(codes[0][~np.isnan(X[:, 0])], minlength=n_bins[0])
    assert n_bins[0] >= max(1, max_bins - 2)
    if max_bins <= 64:
        assert counts.max() <= 2.5 * counts.mean()


def test_255_bins_and_missing_fit_uint8():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 1))
    X[:10] = np.nan
    thresholds, offsets, codes, n_bins = binned(X, 255)
    assert n_bins[0] == 255
    assert np.all(codes[0][:10] == 255)
    assert codes[0][10:].max() == 254 and codes[0][10:].min() == 0


def test_frequent_distinct_values_each_get_a_bin():
    rng = np.random.default_rng(2)
    values = np.array([-3.5, -1.0, 0.0, 0.25, 7.0, 1e6])
    X = rng.permutation(np.repeat(values, MIN_SAMPLES_PER_BIN))[:, None]
    thresholds, offsets, codes, n_bins = binned(X, 255)
    assert n_bins[0] == values.size
    np.testing.assert_array_equal(thresholds, (values[:-1] + values[1:]) / 2)
    np.testing.assert_array_equal(codes[0], np.searchsorted(values, X[:, 0]))


def test_rare_values_share_a_bin():
    """A value seen fewer than MIN_SAMPLES_PER_BIN times closes no bin: it joins the next value(s)."""
    assert MIN_SAMPLES_PER_BIN == 3
    column = np.array([1.0] * 1 + [2.0] * 1 + [3.0] * 1 + [4.0] * 5 + [5.0] * 2 + [6.0] * 4)
    thresholds, offsets, codes, n_bins = binned(column[:, None])
    # Bins: {1, 2, 3} (3 rows), {4} (5 rows), {5, 6}: cut after 3 -> 3.5, after 4 -> 4.5; 5 alone is too rare.
    np.testing.assert_array_equal(thresholds, [3.5, 4.5])
    assert n_bins[0] == 3


def test_max_bins_distinct_values_exactly():
    values = np.arange(16, dtype=float)
    X = np.repeat(values, 3)[:, None]
    assert binned(X, 16)[3][0] == 16  # 16 distinct values, 16 bins allowed: one bin each
    assert binned(X, 15)[3][0] <= 15  # one too many: quantiles


def test_thresholds_from_a_row_subsample():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 2))
    rows = np.sort(rng.choice(500, 100, replace=False))
    t1, o1 = find_thresholds(X, 32, rows)
    t2, o2 = find_thresholds(X[rows], 32)
    np.testing.assert_array_equal(t1, t2)
    np.testing.assert_array_equal(o1, o2)


def test_all_nan_and_constant_columns():
    X = np.column_stack([np.full(20, np.nan), np.full(20, 2.0)])
    thresholds, offsets, codes, n_bins = binned(X)
    np.testing.assert_array_equal(n_bins, [1, 1])
    assert np.all(codes[0] == 1) and np.all(codes[1] == 0)


# 16 and 17 bins: 15 and 16 thresholds, either side of the binning kernel's shorter search for few thresholds.
@pytest.mark.parametrize("max_bins", [4, 16, 17, 32, 255])
def test_bin_le_b_iff_raw_le_threshold(max_bins):
    rng = np.random.default_rng(max_bins + 7)
    train = np.column_stack([rng.normal(size=600), rng.integers(0, 10, 600).astype(float),
                             np.round(rng.exponential(size=600), 1)])
    train[rng.random(600) < 0.05, 2] = np.nan
    thresholds, offsets = find_thresholds(train, max_bins)
    if max_bins in (16, 17):
        assert np.diff(offsets)[0] == max_bins - 1
    # Unseen values, values equal to thresholds, out of range, infinities.
    test = np.concatenate([rng.normal(scale=3, size=(300, 3)), np.tile(thresholds[:, None], (1, 3)),
                           np.array([[np.inf] * 3, [-np.inf] * 3, [1e300] * 3, [-1e300] * 3])])
    test = np.concatenate([test, np.nextafter(test, np.inf), np.nextafter(test, -np.inf)])
    codes = bin_features(test, _all_rows(test), thresholds, offsets)
    for f in range(3):
        t = feature_thresholds(thresholds, offsets, f)
        x = test[:, f]
        for b in range(t.size):
            np.testing.assert_array_equal(codes[f] <= b, x <= t[b])
        # And the code is the number of thresholds strictly below the value.
        np.testing.assert_array_equal(codes[f], (x[:, None] > t[None, :]).sum(axis=1))


def test_float32_features_bin_like_float64():
    rng = np.random.default_rng(4)
    X32 = rng.normal(size=(300, 2)).astype(np.float32)
    X32[::9, 1] = np.nan
    t32, o32 = find_thresholds(X32, 32)
    t64, o64 = find_thresholds(X32.astype(np.float64), 32)
    np.testing.assert_array_equal(t32, t64)
    np.testing.assert_array_equal(bin_features(X32, _all_rows(X32), t32, o32),
                                  bin_features(X32.astype(np.float64), _all_rows(X32), t64, o64))


# Regression test: the midpoint of two adjacent doubles can round onto the larger one (merging them), and the
# midpoint of two huge values of opposite sign can overflow to +inf (dropping the threshold).
@pytest.mark.parametrize("values", [[1.0 + 2.0 ** -52, 1.0 + 2.0 ** -51], [-1.5e308, 1.5e308]],
                         ids=["adjacent-doubles", "huge-opposite"])
def test_frequent_distinct_extreme_values_each_get_a_bin(values):
    X = np.repeat(values, 5)[:, None]
    thresholds, offsets, codes, n_bins = binned(X)
    assert n_bins[0] == 2
    np.testing.assert_array_equal(codes[0], np.repeat([0, 1], 5))


# ---------------------------------------------------------------- histograms


def _histogram_data(seed, n=400):
    """Dense, sparse (mostly one value), mostly-missing and constant features, for the histogram layout."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 7))
    X[rng.random((n, 7)) < 0.1] = np.nan
    X[:, 2] = np.where(rng.random(n) < 0.8, 0.0, rng.integers(1, 5, n))  # most frequent bin: a value
    X[:, 3] = np.where(rng.random(n) < 0.7, np.nan, rng.normal(size=n))  # most frequent bin: missing
    X[:, 4] = 1.0  # one bin
    X[:, 6] = rng.random(n) < 0.9  # a flag
    return rng, binned(X, 32)


def build_histogram(codes, layout, rows, ordered_grad, ordered_hess, sum_grad, sum_hess, hist):
    """The whole histogram of a node, block after block, as the grower builds it (there, one thread per block)."""
    for k in range(layout.n_blocks):
        build_block(codes, layout, k, rows, ordered_grad, ordered_hess, sum_grad, sum_hess, float(rows.size), hist)


def _direct_histogram(codes, n_bins, bin_offsets, rows, grad, hess):
    hist = np.zeros((bin_offsets[-1], 4))
    for f in range(codes.shape[0]):
        # int64 codes: numpy 1.x would add an offset below 256 to uint8 codes in uint8, wrapping around.
        where = bin_offsets[f] + codes[f][rows].astype(np.int64)
        np.add.at(hist[:, 0], where, grad[rows])
        np.add.at(hist[:, 1], where, hess[rows])
        np.add.at(hist[:, 2], where, 1.0)
    return hist


def test_histogram_subtraction_equals_direct_build():
    rng, (thresholds, offsets, codes, n_bins) = _histogram_data(5)
    layout = make_layout(codes, n_bins, 2)
    bin_offsets = layout.bin_offsets
    assert np.sum(layout.mode_bin >= 0) >= 4, "the data should exercise sparse features"
    grad, hess = rng.normal(size=400), rng.uniform(0.1, 1.0, 400)
    parent_rows = np.sort(rng.choice(400, 300, replace=False)).astype(np.int64)
    in_child = rng.random(300) < 0.35
    child_rows, sibling_rows = parent_rows[in_child], parent_rows[~in_child]

    def built(rows):
        hist = new_histograms(1, bin_offsets[-1])[0]
        hist[:] = np.nan
        build_histogram(codes, layout, rows, grad[rows], hess[rows], grad[rows].sum(), hess[rows].sum(), hist)
        return hist

    parent, child, sibling = built(parent_rows), built(child_rows), built(sibling_rows)
    # Per feature and bin, the sums of λ, w and the row count (a sparse feature's skipped bin from the totals).
    direct = _direct_histogram(codes, n_bins, bin_offsets, parent_rows, grad, hess)
    np.testing.assert_array_equal(parent[:, 2:], direct[:, 2:])
    np.testing.assert_allclose(parent[:, :2], direct[:, :2], rtol=0, atol=1e-12)
    for f in range(codes.shape[0]):
        subtract_feature(parent, child, bin_offsets, f)
    np.testing.assert_allclose(parent[:, :2], sibling[:, :2], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(parent[:, 2], sibling[:, 2])


def _child_histogram(rng, n_value_bins, n_rows, empty_share, missing_share):
    """A histogram of one feature (value bins, then the missing bin) of ``n_rows`` rows with random λ and w."""
    hist = np.zeros((n_value_bins + 1, 4))
    weights = rng.random(n_value_bins) * (rng.random(n_value_bins) >= empty_share)
    weights = weights / weights.sum() if weights.sum() > 0 else np.full(n_value_bins, 1 / n_value_bins)
    codes = rng.choice(n_value_bins, n_rows, p=weights)
    codes[rng.random(n_rows) < missing_share] = n_value_bins
    grad, hess = rng.normal(size=n_rows), rng.uniform(0.0, 1.0, n_rows) * (rng.random(n_rows) < 0.9)
    np.add.at(hist[:, 0], codes, grad)
    np.add.at(hist[:, 1], codes, hess)
    np.add.at(hist[:, 2], codes, 1.0)
    return hist


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("min_samples_leaf, min_sum_hessian, l2", [(1, 1e-3, 0.0), (20, 1e-3, 0.0), (5, 0.0, 1.0),
                                                                   (3, 2.0, 0.5)])
def test_both_children_in_one_scan_find_the_scalar_scans_splits(seed, min_samples_leaf, min_sum_hessian, l2):
    # The two-lane scan of a split's children against subtract_feature and feature_best_split on each: every field,
    # including which side missing values take and whether the feature can still split, over empty bins, missing
    # values in one, both or neither child, and nodes too small to split.
    rng = np.random.default_rng(seed)
    for case in range(60):
        n_value_bins = int(rng.integers(1, 40))
        missing = [rng.choice([0.0, 0.2]) for _ in range(2)]
        small = _child_histogram(rng, n_value_bins, int(rng.integers(0, 60)), rng.random(), missing[0])
        parent = small + _child_histogram(rng, n_value_bins, int(rng.integers(0, 300)), rng.random(), missing[1])
        large = parent.copy()
        subtract_feature(large, small, np.array([0, n_value_bins + 1]), 0)
        sums = np.array([[h[:, 0].sum(), h[:, 1].sum(), h[:, 2].sum()] for h in (small, large)])
        # The parent's histogram becomes the larger child's in the same pass.
        both = children_best_splits(small, parent, 0, n_value_bins, sums, l2, min_samples_leaf, min_sum_hessian)
        np.testing.assert_array_equal(parent, large)
        for side, hist in enumerate((small, large)):
            scalar = feature_best_split(hist, 0, n_value_bins, *sums[side], l2, min_samples_leaf, min_sum_hessian)
            assert tuple(both[side]) + (both[2 + side],) == scalar, (seed, case, side)


@pytest.mark.parametrize("shared_lists", [False, True])
@pytest.mark.parametrize("n_blocks", [1, 3])
def test_histogram_of_many_dense_features_equals_direct_build(n_blocks, shared_lists, monkeypatch):
    monkeypatch.setattr(histogram, "_SHARED_LISTS_ROWS", 0 if shared_lists else 1 << 62)
    # More dense features than one row-major group holds (GROUP_FEATURES), beside sparse ones: blocks of several
    # groups of different widths, and rows scattered over the training set.
    rng = np.random.default_rng(11)
    n = 1500
    X = rng.normal(size=(n, GROUP_FEATURES * 2 + 9))
    X[:, ::7] = np.where(rng.random((n, X[:, ::7].shape[1])) < 0.8, 0.0, X[:, ::7])  # sparse
    X[rng.random(X.shape) < 0.05] = np.nan
    _, offsets, codes, n_bins = binned(X, 16)
    layout = make_layout(codes, n_bins, n_blocks)
    widths = np.diff(layout.group_dense)
    assert layout.dense_features.shape[0] > GROUP_FEATURES and np.all(widths <= GROUP_FEATURES) and np.all(widths > 0)
    for k in range(layout.n_blocks):  # a block's groups hold dense features of that block only
        dense = layout.dense_features
        held = dense[layout.group_dense[layout.block_groups[k]]:layout.group_dense[layout.block_groups[k + 1]]]
        members = layout.block_members[layout.block_ptr[k]:layout.block_ptr[k + 1]]
        np.testing.assert_array_equal(held, members[layout.mode_bin[members] < 0])
    grad, hess = rng.normal(size=n), rng.uniform(0.1, 1.0, n)
    rows = np.sort(rng.choice(n, 40, replace=False)).astype(np.int64)
    hist = new_histograms(1, layout.total_bins)[0]
    hist[:] = np.nan
    build_histogram(codes, layout, rows, grad[rows], hess[rows], grad[rows].sum(), hess[rows].sum(), hist)
    direct = _direct_histogram(codes, n_bins, layout.bin_offsets, rows, grad, hess)
    np.testing.assert_array_equal(hist[:, 2:3], direct[:, 2:3])
    np.testing.assert_allclose(hist[:, :2], direct[:, :2], rtol=0, atol=1e-12)


@pytest.mark.parametrize("shared_lists", [False, True])
def test_histogram_layout_does_not_change_the_sums(shared_lists, monkeypatch):
    monkeypatch.setattr(histogram, "_SHARED_LISTS_ROWS", 0 if shared_lists else 1 << 62)
    rng, (thresholds, offsets, codes, n_bins) = _histogram_data(6, n=2000)
    grad, hess = rng.normal(size=2000), rng.uniform(0.1, 1.0, 2000)
    rows = np.sort(rng.choice(2000, 1500, replace=False)).astype(np.int64)
    hists = []
    for n_blocks in (1, 2, 3, 7, 50):
        layout = make_layout(codes, n_bins, n_blocks)
        # The blocks share out every feature once, none empty, no more blocks than asked for (bins permitting).
        blocks = [layout.block_members[a:b] for a, b in zip(layout.block_ptr[:-1], layout.block_ptr[1:])]
        np.testing.assert_array_equal(np.sort(layout.block_members), np.arange(codes.shape[0]))
        assert all(block.size > 0 and np.all(np.diff(block) > 0) for block in blocks) and len(blocks) <= n_blocks
        if shared_lists and n_blocks == 2:  # each block's lists cost per row: here they fit in one block
            assert sum(np.any(layout.mode_bin[block] >= 0) for block in blocks) == 1
        hist = new_histograms(1, layout.total_bins)[0]
        hist[:] = np.nan
        build_histogram(codes, layout, rows, grad[rows], hess[rows], grad[rows].sum(), hess[rows].sum(), hist)
        hists.append(hist)
    # Every bin sums the node's rows in the same order whatever the blocks: bit-identical.
    for hist in hists[1:]:
        np.testing.assert_array_equal(hist, hists[0])
    # Sparse: exactly the concentrated features. The dense ones are in row-major groups within their block.
    share = np.array([np.bincount(c).max() for c in codes]) / codes.shape[1]
    np.testing.assert_array_equal(layout.mode_bin >= 0, share >= SPARSE_SHARE)
    np.testing.assert_array_equal(layout.dense_features, np.flatnonzero(share < SPARSE_SHARE))
    n_rows = codes.shape[1]
    for q in range(layout.group_dense.shape[0] - 1):
        a, b = layout.group_dense[q], layout.group_dense[q + 1]
        group = layout.group_codes[a * n_rows:b * n_rows].reshape(n_rows, b - a)
        np.testing.assert_array_equal(group, codes[layout.dense_features[a:b]].T)


@pytest.mark.parametrize("shared_lists", [False, True])
def test_tree_does_not_depend_on_the_histogram_blocks(shared_lists, monkeypatch):
    monkeypatch.setattr(histogram, "_SHARED_LISTS_ROWS", 0 if shared_lists else 1 << 62)
    rng, (thresholds, offsets, codes, n_bins) = _histogram_data(8, n=3000)
    grad, hess = rng.normal(size=3000), rng.uniform(0.1, 1.0, 3000)
    trees = [grow_binned(codes, n_bins, grad, hess, 12, min_samples_leaf=20, n_blocks=k)[0] for k in (1, 2, 5)]
    for out in trees[1:]:
        for a, b in zip(out, trees[0]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shared_lists", [False, True])
def test_histogram_layout_blocks_respect_the_uint16_bin_range(shared_lists, monkeypatch):
    monkeypatch.setattr(histogram, "_SHARED_LISTS_ROWS", 0 if shared_lists else 1 << 62)
    # 300 features of 255 value bins: more bins than a uint16 can index, so blocks must split them.
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 256, size=(300, 500)).astype(np.uint8)
    codes[::2] = np.where(rng.random((150, 500)) < 0.9, 0, codes[::2])  # half of them sparse
    n_bins = np.full(300, 255, dtype=np.int64)
    layout = make_layout(codes, n_bins, 1)
    bin_offsets = layout.bin_offsets
    assert layout.n_blocks >= 2
    for k in range(layout.n_blocks):
        members = layout.block_members[layout.block_ptr[k]:layout.block_ptr[k + 1]]
        listed = members[layout.mode_bin[members] >= 0]
        assert listed.size == 0 or bin_offsets[listed.max() + 1] - layout.sparse_base[k] <= 1 << 16
    rows = np.arange(500, dtype=np.int64)
    grad, hess = rng.normal(size=500), np.ones(500)
    hist = new_histograms(1, bin_offsets[-1])[0]
    build_histogram(codes, layout, rows, grad, hess, grad.sum(), hess.sum(), hist)
    direct = _direct_histogram(codes, n_bins, bin_offsets, rows, grad, hess)
    np.testing.assert_array_equal(hist[:, 2], direct[:, 2])
    np.testing.assert_allclose(hist[:, :2], direct[:, :2], rtol=0, atol=1e-10)


@pytest.mark.parametrize("n_blocks", [1, 2])
def test_sparse_slot_tables_pad_short_rows_and_list_long_ones_apart(n_blocks):
    # Rows with no, few and many entries in the sparse features, so that each table has padded rows and rows whose
    # entries overflow their slots; the histogram is still the direct one, and padding never touches a value bin.
    rng = np.random.default_rng(5)
    n, n_sparse = 3000, 24
    X = rng.normal(size=(n, n_sparse + 3))
    busy = rng.random(n) < 0.15  # rows with most of their sparse features set
    keep = rng.random((n, n_sparse)) < np.where(busy, 0.9, 0.1)[:, None]
    X[:, :n_sparse] = np.where(keep, X[:, :n_sparse], 0.0)
    _, _, codes, n_bins = binned(X, 16)
    layout = make_layout(codes, n_bins, n_blocks)
    listed = [k for k in range(layout.n_blocks) if layout.slot_width[k] > 0]
    assert listed and layout.overflow_bin.size > 0
    assert layout.sparse_slots.ctypes.data % 64 == 0
    for k in listed:
        width = layout.slot_width[k]
        table = layout.sparse_slots[layout.slot_start[k]:layout.slot_start[k + 1]].reshape(n, -1)
        assert table.shape[1] % 32 == 0 and table.shape[1] >= width and np.all(table[:, width:] == 0)
        members = layout.block_members[layout.block_ptr[k]:layout.block_ptr[k + 1]]
        sparse = members[layout.mode_bin[members] >= 0]
        entries = sum((codes[f] != layout.mode_bin[f]).astype(np.int64) for f in sparse)
        extra = np.diff(layout.overflow_ptr[k])
        np.testing.assert_array_equal(extra, np.maximum(entries - width, 0))
        assert np.any(entries < width) and np.any(extra > 0)
        # Padding points at skipped bins only: the bins the fill overwrites.
        skipped = layout.bin_offsets[sparse] + layout.mode_bin[sparse] - layout.sparse_base[k]
        padding = np.arange(width)[None, :] >= entries[:, None]
        assert np.all(np.isin(table[:, :width][padding], skipped))
        assert not np.any(np.isin(table[:, :width][~padding], skipped))
    grad, hess = rng.normal(size=n), rng.uniform(0.1, 1.0, n)
    for rows in (np.arange(n), np.sort(rng.choice(n, 200, replace=False))):
        hist = new_histograms(1, layout.total_bins)[0]
        hist[:] = np.nan
        build_histogram(codes, layout, rows, grad[rows], hess[rows], grad[rows].sum(), hess[rows].sum(), hist)
        direct = _direct_histogram(codes, n_bins, layout.bin_offsets, rows, grad, hess)
        np.testing.assert_array_equal(hist[:, 2], direct[:, 2])
        np.testing.assert_allclose(hist[:, :2], direct[:, :2], rtol=0, atol=1e-10)


def test_slot_width_is_the_cheapest_under_the_work_model():
    rng = np.random.default_rng(0)
    for trial in range(100):
        entries = rng.poisson(rng.uniform(0, 20), size=rng.integers(1, 300))
        if trial % 10 == 0:
            entries[:] = 0
        widths = np.arange(entries.max() + 2)
        work = [w * histogram._SLOT_WORK + ((entries > w).sum() * histogram._OVERFLOW_ROW_WORK
                                            + np.maximum(entries - w, 0).sum() * histogram._OVERFLOW_ENTRY_WORK)
                / entries.size for w in widths]
        assert histogram._slot_width(entries) == int(np.argmin(work))
    assert histogram._slot_width(np.zeros(0, dtype=np.int64)) == 0


# ---------------------------------------------------------------- trees against the brute force


@pytest.mark.parametrize("max_leaf_nodes", [2, 3, 5, 12])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_regression_tree_matches_brute_force(seed, max_leaf_nodes):
    X, y = repeated_values_data(seed)
    grad, hess = -y, np.ones_like(y)
    result = grow(X, grad, hess, max_leaf_nodes=max_leaf_nodes, learning_rate=0.1)
    nodes = brute_force_tree(X, grad, hess, max_leaf_nodes, learning_rate=0.1)
    assert_same_tree(result, nodes)
    assert (result["tree"]["left"] == -1).sum() == max_leaf_nodes


# Regression test: a bin that holds no row of the node repeats the previous candidate split, but in a histogram
# obtained by subtraction (parent - sibling) its λ sum is rounding noise instead of exactly 0, so its gain could
# beat the equal candidate of the lowest bin by an ulp: the same rows went left, but the threshold landed in a
# later, empty bin (unseen values in between routed differently). These seeds showed it before splits skipped
# empty bins. NB: numba's cache does not notice a change in split.py for grow_tree (cached from grower.py); a
# stale lambdamart/__pycache__ brings the old behaviour back.
@pytest.mark.parametrize("seed", [11, 21])
def test_deep_tree_thresholds_match_brute_force(seed):
    X, y = repeated_values_data(seed, n_features=3)
    grad, hess = -y, np.ones_like(y)
    result = grow(X, grad, hess, max_leaf_nodes=30)
    nodes = brute_force_tree(X, grad, hess, 30)
    assert_same_tree(result, nodes, check_thresholds=False)  # rows, features and values agree ...
    assert_same_tree(result, nodes)  # ... but one threshold sits at a later, empty bin


@pytest.mark.parametrize("params", [
    dict(min_samples_leaf=40),
    dict(max_depth=2),
    dict(max_depth=3, min_samples_leaf=15, l2=5.0),
    dict(min_sum_hessian=30.0),
], ids=["min_samples_leaf", "max_depth", "depth-leaf-l2", "min_sum_hessian"])
def test_constrained_tree_matches_brute_force(params):
    X, y = repeated_values_data(3)
    rng = np.random.default_rng(3)
    grad = -y
    hess = np.ones_like(y) if "min_sum_hessian" not in params else rng.uniform(0.2, 1.0, y.size)
    kw = dict(max_depth=-1, min_samples_leaf=1, min_sum_hessian=0.0, l2=0.0) | params
    result = grow(X, grad, hess, max_leaf_nodes=20, learning_rate=0.3, **kw)
    nodes = brute_force_tree(X, grad, hess, 20, learning_rate=0.3, **kw)
    assert_same_tree(result, nodes)
    tree = result["tree"]
    leaves = tree["left"] == -1
    node_rows = kernel_node_rows(result)
    assert np.all(tree["count"][leaves] >= kw["min_samples_leaf"])
    for i in np.flatnonzero(leaves):
        assert hess[node_rows[i]].sum() >= kw["min_sum_hessian"]
    if kw["max_depth"] > 0:
        assert node_depths(tree["left"], tree["right"]).max() <= kw["max_depth"]


def test_leaves_partition_rows_and_values_are_newton_steps():
    X, y = repeated_values_data(4)
    rng = np.random.default_rng(4)
    grad, hess = -y, rng.uniform(0.5, 2.0, y.size)
    result = grow(X, grad, hess, max_leaf_nodes=9, min_samples_leaf=10, l2=2.0, learning_rate=0.2)
    tree = result["tree"]
    node_rows = kernel_node_rows(result)
    leaves = np.flatnonzero(tree["left"] == -1)
    assert np.array_equal(np.sort(np.concatenate([node_rows[i] for i in leaves])), np.arange(y.size))
    for i in leaves:
        r = node_rows[i]
        assert tree["value"][i] == pytest.approx(-0.2 * grad[r].sum() / (hess[r].sum() + 2.0), rel=1e-10)
    # Children's rows are the parent's, split by the stored raw threshold.
    for i in np.flatnonzero(tree["left"] != -1):
        x = X[node_rows[i], tree["feature"][i]]
        np.testing.assert_array_equal(node_rows[tree["left"][i]], node_rows[i][x <= tree["threshold"][i]])
    # add_leaf_values adds each leaf's value to its rows: the same as predicting the training rows.
    scores = np.zeros(y.size)
    raw = result["raw"]
    add_leaf_values(scores, result["rows"], raw.feature, raw.value, raw.node_start, raw.node_stop, False)
    np.testing.assert_array_equal(scores, predict_one_tree(tree, X))


def test_min_samples_leaf_and_max_depth_on_continuous_data():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(1000, 6))
    y = X[:, 0] * 2 + np.sin(3 * X[:, 1]) + rng.normal(size=1000)
    for msl, depth in [(1, -1), (25, -1), (5, 3), (60, 2)]:
        result = grow(X, -y, np.ones(1000), max_leaf_nodes=31, max_depth=depth, min_samples_leaf=msl, max_bins=64)
        tree = result["tree"]
        leaves = tree["left"] == -1
        assert np.all(tree["count"][leaves] >= msl)
        assert tree["count"][leaves].sum() == 1000
        if depth > 0:
            assert node_depths(tree["left"], tree["right"]).max() <= depth
            assert leaves.sum() <= 2 ** depth
        else:
            assert leaves.sum() <= 31
            # Growth stops early only when no leaf can be split any more (each needs 2 * min_samples_leaf rows).
            assert leaves.sum() == 31 or np.all(tree["count"][leaves] < 2 * msl)


def test_no_split_when_nothing_to_gain():
    X, _ = repeated_values_data(5)
    result = grow(X, np.zeros(X.shape[0]), np.ones(X.shape[0]), max_leaf_nodes=8)
    assert result["tree"]["feature"].shape == (1,) and result["tree"]["left"][0] == -1
    assert result["tree"]["value"][0] == 0.0


@pytest.mark.parametrize("n_blocks", [1, 2, 3])
def test_feature_subset_is_respected_and_ties_go_to_lowest_feature(n_blocks):
    X, y = repeated_values_data(6)
    X = np.column_stack([X[:, 0], X[:, 0], X[:, 0]])  # three identical columns: every gain ties
    # With several blocks the tied features are searched in different blocks: best_of breaks the tie across them.
    result = grow(X, -y, np.ones_like(y), max_leaf_nodes=6, n_blocks=n_blocks)
    assert set(result["tree"]["feature"][result["tree"]["left"] != -1].tolist()) == {0}
    sub = grow(X, -y, np.ones_like(y), max_leaf_nodes=6, features=np.array([1, 2], dtype=np.int64), n_blocks=n_blocks)
    assert set(sub["tree"]["feature"][sub["tree"]["left"] != -1].tolist()) == {1}
    np.testing.assert_array_equal(sub["tree"]["value"], result["tree"]["value"])


# ---------------------------------------------------------------- missing values


def missing_data(seed, nan_label):
    rng = np.random.default_rng(seed)
    x = rng.permutation(np.repeat(np.arange(10, dtype=float), 20))
    y = x + 0.1 * rng.normal(size=200)
    nan = rng.random(200) < 0.2
    x[nan] = np.nan
    y[nan] = nan_label + 0.1 * rng.normal(size=nan.sum())
    noise = rng.permutation(np.repeat(np.arange(20, dtype=float), 10))
    return np.column_stack([noise, x]), y, nan


@pytest.mark.parametrize("nan_label, side", [(9.0, "high"), (0.0, "low"), (30.0, "alone")])
def test_missing_values_go_to_the_better_side(nan_label, side):
    X, y, nan = missing_data(0, nan_label)
    result = grow(X, -y, np.ones_like(y), max_leaf_nodes=2)
    tree = result["tree"]
    assert tree["feature"][0] == 1
    pred = predict_one_tree(tree, X)
    x = X[:, 1]
    if side == "alone":
        # The missing rows differ from everything else: they form a leaf of their own.
        assert np.all(pred[nan] == pred[nan][0]) and np.all(pred[~nan] != pred[nan][0])
    elif side == "high":
        assert np.all(pred[nan] == pred[x == 9][0]) and pred[nan][0] != pred[x == 0][0]
    else:
        assert np.all(pred[nan] == pred[x == 0][0]) and pred[nan][0] != pred[x == 9][0]
    # The learned side is the one that maximises the gain: same partition as the brute force.
    nodes = brute_force_tree(X, -y, np.ones_like(y), 2)
    assert {frozenset(nodes[1]["rows"].tolist()), frozenset(nodes[2]["rows"].tolist())} == \
        {frozenset(r.tolist()) for r in kernel_node_rows(result)[1:3]}
    assert tree["gain"][0] == pytest.approx(nodes[0]["split"]["gain"], rel=1e-9)


def test_missing_values_tree_leaves_match_brute_force():
    rng = np.random.default_rng(9)
    X, y = repeated_values_data(9)
    X[rng.random(X.shape) < 0.15] = np.nan
    y[np.isnan(X[:, 0])] += 1.5
    result = grow(X, -y, np.ones_like(y), max_leaf_nodes=8, min_samples_leaf=5)
    nodes = brute_force_tree(X, -y, np.ones_like(y), 8, min_samples_leaf=5)
    kernel_leaves = {frozenset(r.tolist()): v for r, v, left in
                     zip(kernel_node_rows(result), result["tree"]["value"], result["tree"]["left"]) if left == -1}
    brute_leaves = {frozenset(n["rows"].tolist()): n["value"] for n in nodes if "split" not in n}
    assert kernel_leaves.keys() == brute_leaves.keys()
    for k, v in kernel_leaves.items():
        assert v == pytest.approx(brute_leaves[k], rel=1e-10)


@pytest.mark.parametrize("left_fraction, expected_missing_left", [(0.7, True), (0.3, False)])
def test_unseen_missing_values_go_to_the_larger_child(left_fraction, expected_missing_left):
    n = 100
    n_left = int(left_fraction * n)
    x = np.concatenate([np.zeros(n_left), np.ones(n - n_left)])
    y = np.concatenate([np.zeros(n_left), np.ones(n - n_left)])
    result = grow(x[:, None], -y, np.ones(n), max_leaf_nodes=2)
    tree = result["tree"]
    assert tree["feature"][0] == 0 and bool(tree["missing_left"][0]) == expected_missing_left
    pred = predict_one_tree(tree, np.array([[np.nan], [0.0], [1.0]]))
    assert pred[0] == (pred[1] if expected_missing_left else pred[2])


def test_split_values_from_missing_uses_infinite_threshold():
    """A constant feature with missing values splits "values | missing": the threshold is +inf."""
    x = np.array([1.0] * 10 + [np.nan] * 10)
    y = np.array([0.0] * 10 + [1.0] * 10)
    result = grow(x[:, None], -y, np.ones(20), max_leaf_nodes=2)
    tree = result["tree"]
    assert tree["feature"][0] == 0 and tree["threshold"][0] == np.inf and not tree["missing_left"][0]
    pred = predict_one_tree(tree, np.array([[1.0], [1e300], [np.inf], [-np.inf], [np.nan]]))
    assert pred[0] == pred[1] == pred[2] == pred[3] != pred[4]


# ---------------------------------------------------------------- prediction paths agree


@pytest.mark.parametrize("binned_threads", [False, True], ids=["binned-serial", "binned-parallel"])
def test_predict_serial_parallel_and_binned_agree(binned_threads, monkeypatch):
    """Both versions of the binned walk too (the parallel one from the first row when threads are allowed)."""
    monkeypatch.setattr(predict_module, "_PARALLEL_BINNED_ROWS", 0 if binned_threads else 10**9)
    rng = np.random.default_rng(10)
    X = rng.normal(size=(600, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 3] = np.round(X[:, 3], 1)
    thresholds, offsets, codes, n_bins = binned(X, 32)
    y = np.nan_to_num(X[:, 0]) + np.isnan(X[:, 1]) + rng.normal(size=600)
    trees = []
    X_test = np.concatenate([rng.normal(scale=2, size=(300, 5)), X[:100]])
    X_test[rng.random(X_test.shape) < 0.1] = np.nan
    X_test[::17, 2] = np.inf
    X_test[::19, 4] = -np.inf
    X_test[::23, 0] = np.repeat(thresholds[:5], 4)[: X_test[::23, 0].shape[0]]  # values on thresholds
    test_codes = bin_features(X_test, _all_rows(X_test), thresholds, offsets)
    binned_scores = np.zeros(X_test.shape[0])
    for t in range(4):
        grad = -(y - 0.5 * t)
        hess = rng.uniform(0.5, 1.5, 600)
        out, _ = grow_binned(codes, n_bins, grad, hess, 15, -1, 5, 1e-3, 0.5, 0.1)
        trees.append(make_tree(out, thresholds, offsets))
        add_tree_binned(test_codes, n_bins, out, np.arange(X_test.shape[0], dtype=np.int64), binned_scores)
    ens = concatenate_trees(trees)
    args = walk_args(ens)
    serial = predict_serial(X_test, *args)
    parallel = predict_on_threads(X_test, *args)
    np.testing.assert_array_equal(serial, parallel)
    np.testing.assert_array_equal(serial, binned_scores)
    assert np.unique(serial).size > 10
    # A subset of rows through add_tree_binned touches only those rows.
    part = np.zeros(X_test.shape[0])
    some = np.arange(0, X_test.shape[0], 3, dtype=np.int64)
    out, _ = grow_binned(codes, n_bins, -y, np.ones(600), 15, -1, 5, 1e-3, 0.0, 0.1)
    add_tree_binned(test_codes, n_bins, out, some, part)
    full = predict_one_tree(make_tree(out, thresholds, offsets), X_test)
    np.testing.assert_array_equal(part[some], full[some])
    assert np.all(np.delete(part, some) == 0.0)


def _random_tree(rng, n_features, n_leaves, values):
    """A random tree in ensemble layout (children after their parent); splits at ``values``, often lopsided."""
    feature, threshold, missing_left, left, right = [-1], [np.nan], [False], [-1], [-1]
    leaves = [0]
    for _ in range(n_leaves - 1):
        # Splitting the newest leaf half of the time grows long chains next to shallow leaves.
        k = leaves.pop(-1 if rng.random() < 0.5 else int(rng.integers(len(leaves))))
        feature[k], threshold[k] = int(rng.integers(n_features)), rng.choice(values)
        missing_left[k] = rng.random() < 0.5
        left[k], right[k] = len(feature), len(feature) + 1
        leaves += [len(feature), len(feature) + 1]
        for column, empty in ((feature, -1), (threshold, np.nan), (missing_left, False), (left, -1), (right, -1)):
            column += [empty, empty]
    n = len(feature)
    is_leaf = np.array(left) < 0
    return dict(feature=np.array(feature, dtype=np.int32), threshold=np.array(threshold),
                missing_left=np.array(missing_left), left=np.array(left, dtype=np.int32),
                right=np.array(right, dtype=np.int32), value=np.where(is_leaf, rng.normal(size=n), 0.0),
                gain=np.where(is_leaf, 0.0, 1.0), count=np.ones(n, dtype=np.int64))


def test_walk_keys_order_values_as_floats_compare():
    """predict compares integer keys of the values: a > b exactly when key(a) > key(b), for every pair of special
    and ordinary values (-0.0 equal to 0.0), float32 rows as their float64 values, and NaN below every value in a
    row's even keys (splits sending it left) and above every value in its odd ones."""
    from lambdamart._engine.predict import _order_key

    tiny = np.finfo(np.float64).tiny
    values = np.array([-np.inf, -1e308, -1.0, np.nextafter(-1.0, 0.0), -tiny, -5e-324, -0.0, 0.0, 5e-324, tiny,
                       1.0, np.nextafter(1.0, 2.0), 1e308, np.inf, 3.5, -2.25])
    keys = _order_key(values)
    np.testing.assert_array_equal(keys[:, None] > keys[None, :], values[:, None] > values[None, :])
    # The keys score_rows makes of a row (left in its key buffer): a tree of one leaf walks nothing.
    leaf = walk_args(concatenate_trees([dict(feature=np.array([-1], dtype=np.int32), threshold=np.array([np.nan]),
                                             missing_left=np.array([False]), left=np.array([-1], dtype=np.int32),
                                             right=np.array([-1], dtype=np.int32), value=np.array([0.5]),
                                             gain=np.zeros(1), count=np.ones(1, dtype=np.int64))]))
    for dtype in (np.float64, np.float32):
        with np.errstate(over="ignore"):
            row = np.append(values, np.nan).astype(dtype)[None, :]
        buffer = np.empty((64, 2 * row.shape[1]), dtype=np.uint64)
        score_rows(row, 0, 1, buffer, *leaf, np.empty(1))
        out = buffer[0]
        np.testing.assert_array_equal(out[:-2:2], _order_key(row[0, :-1].astype(np.float64)))
        np.testing.assert_array_equal(out[1:-2:2], out[:-2:2])
        assert out[-2] < out[:-2].min() and out[-1] > out[:-2].max()


def test_row_key_buffers_are_as_large_as_the_call_needs_and_kept_only_while_small():
    """predict's per-thread key buffer: min(64, rows) rows of two keys per feature; one of a model with thousands of
    features is not kept after the call (64 rows x 100,000 features would hold 100 MB per thread)."""
    small = row_key_buffer(1, 10)
    assert small.shape == (1, 20) and row_key_buffer(1, 10) is small
    assert row_key_buffer(7, 10).shape == (7, 20) and row_key_buffer(500, 10).shape == (64, 20)
    assert row_key_buffer(3, 10).shape == (64, 20)  # a kept buffer with rows to spare serves smaller calls
    big = row_key_buffer(64, 100_000)
    assert big.shape == (64, 200_000) and row_key_buffer(64, 100_000) is not big
    assert row_key_buffer(1, 100_000).shape == (1, 200_000)


def _trees_and_rows_of_special_values(rng, leaf_counts, n_rows, n_features=6):
    """Random trees of ``leaf_counts`` leaves and ``n_rows`` rows over the values predict must compare exactly:
    signed zeros, ±inf, huge and subnormal values and values a rounding step apart, as thresholds and as 15 % of
    the cells; 10 % of the cells NaN."""
    values = np.concatenate([rng.normal(size=12), [0.0, -0.0, np.inf, -np.inf, 1e300, -1e300, 5e-324, -5e-324, 1.0,
                                                   np.nextafter(1.0, 2.0), -1.0, np.nextafter(-1.0, -2.0)]])
    trees = [_random_tree(rng, n_features, n_leaves, values) for n_leaves in leaf_counts]
    X = rng.normal(size=(n_rows, n_features))
    cells = rng.random(X.shape)
    X[cells < 0.15] = rng.choice(values, size=int((cells < 0.15).sum()))
    X[(cells >= 0.15) & (cells < 0.25)] = np.nan
    return trees, X


@pytest.mark.parametrize("seed", range(3))
def test_predict_rows_walked_together_match_one_row_at_a_time(seed):
    # predict walks a block of 64 rows down a tree level by level, to the tree's depth (rows at a leaf stay there):
    # row counts around the block's size and multiples of it, trees from a single leaf to long chains, NaN, ±inf
    # and values exactly on thresholds, or a rounding step away; signed zeros and subnormals, where the walk's
    # integer keys must order values as the floats compare.
    rng = np.random.default_rng(seed)
    trees, X = _trees_and_rows_of_special_values(rng, (1, 2, 31, 1, 40, 5, 64, 3), 200)
    assert np.any(walk_layout(concatenate_trees(trees)).lockstep_depth < walk_layout(concatenate_trees(trees)).depth)
    for ens in (concatenate_trees(trees), concatenate_trees(trees[:1]), concatenate_trees([])):
        layout = walk_layout(ens)
        # The layout's lock-step levels, then none (every row walks on alone) and all (every row to the depth).
        for lockstep in (layout.lockstep_depth, np.zeros_like(layout.depth), layout.depth):
            args = tuple(layout._replace(lockstep_depth=lockstep))
            for n in (0, 1, 7, 8, 9, 63, 64, 65, 100, 200):
                for dtype in (np.float64, np.float32):
                    with np.errstate(over="ignore"):  # 1e300 becomes inf in float32
                        X_n = np.ascontiguousarray(X[:n], dtype=dtype)
                    expected = reference_predict(ens, X_n)  # each row walks each tree alone, in plain Python
                    np.testing.assert_array_equal(predict_serial(X_n, *args), expected)
                    np.testing.assert_array_equal(predict_on_threads(X_n, *args), expected)


@pytest.mark.parametrize("n_features", [6, 19])
@pytest.mark.parametrize("seed", range(3))
def test_quickscorer_scores_as_the_walk(seed, n_features):
    # predict's QuickScorer (trees of up to 32 leaves): blocks of 16 rows, each feature's splits in threshold order,
    # all of them for a block of 8 rows or more and those below the block's largest value for fewer (1 row, the
    # last block of 17 and 33 rows; 120 rows end in a block of 8). Row counts around the block, trees from a single
    # leaf to 32 leaves, NaN thresholds (every value left), NaN, ±inf, signed zeros and values on thresholds; the
    # same bits as the walk (itself checked against each row walking each tree alone), on one thread and on
    # several. The block's values are transposed eight features at a time and the rest one by one: 6 features are
    # all "rest", 19 are two tiles and three more.
    rng = np.random.default_rng(seed)
    trees, X = _trees_and_rows_of_special_values(rng, (1, 2, 31, 1, 32, 5, 17, 3), 120, n_features)
    trees[2]["threshold"][np.flatnonzero(trees[2]["left"] >= 0)[:3]] = np.nan
    X[:, 5] = np.nan  # a feature missing everywhere
    for ens in (concatenate_trees(trees), concatenate_trees(trees[:1]), concatenate_trees([])):
        args = tuple(quick_score_layout(ens))
        for n in (0, 1, 15, 16, 17, 33, 120):
            for dtype in (np.float64, np.float32):
                with np.errstate(over="ignore"):  # 1e300 becomes inf in float32
                    X_n = np.ascontiguousarray(X[:n], dtype=dtype)
                expected = predict_serial(X_n, *walk_args(ens))
                serial = np.empty(n)
                quick_score_rows(X_n, 0, n, *args, serial)
                np.testing.assert_array_equal(serial, expected)
                np.testing.assert_array_equal(quick_on_threads(X_n, *args), expected)


def test_trees_of_more_than_32_leaves_are_walked():
    """A leaf set is 32 bits: an ensemble with a larger tree has no QuickScorer layout, and predict walks it."""
    from lambdamart.ranker import _predict_trees

    rng = np.random.default_rng(4)
    values = rng.normal(size=10)
    ens = concatenate_trees([_random_tree(rng, 3, 5, values), _random_tree(rng, 3, 33, values)])
    assert quick_score_layout(ens) is None and quick_score_layout(concatenate_trees([_random_tree(
        rng, 3, 32, values)])) is not None
    X = rng.normal(size=(50, 3))
    np.testing.assert_array_equal(_predict_trees(ens, X, 1), reference_predict(ens, X))


def test_rows_walk_together_to_the_level_where_few_training_rows_remain():
    """The walk's lock-step levels per tree: a long chain whose deep leaves hold few training rows is walked
    together only to where most rows have stopped; a balanced tree, and a tree without row counts (as an imported
    model may be), all the way down."""
    def chain(depth, counts):
        # Node 2k + 1 is the leaf at depth k + 1, node 2k + 2 the split below it; the last split has two leaves.
        n = 2 * depth + 1
        left = np.full(n, -1, dtype=np.int32)
        right = np.full(n, -1, dtype=np.int32)
        splits = np.r_[0, np.arange(2, n - 1, 2)]
        left[splits], right[splits] = splits + 1, splits + 2
        count = np.zeros(n, dtype=np.int64)
        count[left < 0] = counts
        return dict(feature=np.where(left >= 0, 0, -1).astype(np.int32), threshold=np.zeros(n),
                    missing_left=np.zeros(n, dtype=bool), left=left, right=right, value=np.zeros(n), gain=np.zeros(n),
                    count=count)

    rows_by_leaf_depth = np.r_[900, 50, 30, 10, np.full(8, 1), 1]  # leaves at depths 1..12, and the last one
    tree = chain(12, rows_by_leaf_depth)
    no_counts = chain(12, 0)
    balanced = dict(feature=np.array([0, 0, 0, -1, -1, -1, -1], dtype=np.int32), threshold=np.zeros(7),
                    missing_left=np.zeros(7, dtype=bool), left=np.array([1, 3, 5, -1, -1, -1, -1], np.int32),
                    right=np.array([2, 4, 6, -1, -1, -1, -1], np.int32), value=np.zeros(7), gain=np.zeros(7),
                    count=np.array([0, 0, 0, 5, 5, 5, 5]))
    layout = walk_layout(concatenate_trees([tree, no_counts, balanced]))
    assert layout.depth.tolist() == [12, 12, 2]
    assert 1 <= layout.lockstep_depth[0] <= 4 and layout.lockstep_depth[1:].tolist() == [12, 2]


def test_concatenate_trees_layout():
    X, y = repeated_values_data(11, n_features=3)
    a = grow(X, -y, np.ones_like(y), max_leaf_nodes=3)["tree"]
    b = grow(X, y, np.ones_like(y), max_leaf_nodes=4)["tree"]
    ens = concatenate_trees([a, b])
    np.testing.assert_array_equal(ens["tree_starts"], [0, a["feature"].size])
    n_a = a["feature"].size
    np.testing.assert_array_equal(ens["left"][n_a:], np.where(b["left"] >= 0, b["left"] + n_a, -1))
    both = predict_serial(X, *walk_args(ens))
    np.testing.assert_array_equal(both, predict_one_tree(a, X) + predict_one_tree(b, X))


def test_binning_on_threads_equals_one_thread(monkeypatch):
    """Features shared among Python threads (from _THREADED_VALUES values) get the same thresholds and codes."""
    import lambdamart._engine.binning as binning

    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 13)).astype(np.float32)
    X[:, 2] = rng.integers(0, 5, X.shape[0])
    X[rng.random(X.shape) < 0.1] = np.nan
    rows = np.sort(rng.choice(X.shape[0], 2000, replace=False))
    t1, o1 = find_thresholds(X, 64, rows)
    c1 = bin_features(X, _all_rows(X), t1, o1)
    monkeypatch.setattr(binning, "_THREADED_VALUES", 0)
    for n_threads in (1, 2, numba.config.NUMBA_NUM_THREADS):
        with parallel_region(n_threads):
            t2, o2 = find_thresholds(X, 64, rows, split_over_threads)
            codes = bin_features(X, _all_rows(X), t1, o1, split_over_threads)
        np.testing.assert_array_equal(t2, t1)
        np.testing.assert_array_equal(o2, o1)
        np.testing.assert_array_equal(codes, c1)


def test_layout_on_threads_equals_one_thread(monkeypatch):
    """The row-major groups and the sparse lists, copied and filled over row ranges on Python threads (and in
    steps of a few rows), are the same arrays as in one call."""
    import lambdamart._engine.binning as binning
    import lambdamart._engine.histogram as histogram

    _, (_, _, codes, n_bins) = _histogram_data(8, n=3000)
    for n_blocks in (1, 2, 3):
        serial = make_layout(codes, n_bins, n_blocks)
        with monkeypatch.context() as patch:
            patch.setattr(binning, "_THREADED_VALUES", 0)
            patch.setattr(histogram, "_COPY_ROWS", 7)
            for n_threads in (1, 2, numba.config.NUMBA_NUM_THREADS):
                with parallel_region(n_threads):
                    threaded = make_layout(codes, n_bins, n_blocks, split_over_threads)
                assert threaded.sparse_slots.size > 0 and threaded.group_codes.size > 0
                for name, value in serial._asdict().items():
                    np.testing.assert_array_equal(getattr(threaded, name), value, err_msg=name)


def test_predict_does_not_depend_on_node_order():
    """The walk layout's depths do not rely on the nodes' order (checked models number a child after its parent,
    but predict is not the place that relies on it)."""
    rng = np.random.default_rng(5)
    values = rng.normal(size=10)
    trees = [_random_tree(rng, 4, n_leaves, values) for n_leaves in (1, 9, 30)]
    X = rng.normal(size=(150, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    shuffled = []
    for tree in trees:
        n = tree["feature"].shape[0]
        new_index = np.concatenate([[0], 1 + rng.permutation(n - 1)])  # the root stays first
        old_index = np.argsort(new_index)
        moved = {name: column[old_index] for name, column in tree.items()}
        for name in ("left", "right"):
            moved[name] = np.where(moved[name] >= 0, new_index[np.maximum(moved[name], 0)], -1).astype(np.int32)
        shuffled.append(moved)
    assert any(np.any((t["left"] >= 0) & (t["left"] < np.arange(t["left"].shape[0]))) for t in shuffled)
    expected = reference_predict(concatenate_trees(trees), X)
    args = walk_args(concatenate_trees(shuffled))
    np.testing.assert_array_equal(predict_serial(X, *args), expected)


def _trees_with_missing_values(rng, n_rows, n_features, max_bins, n_blocks, max_leaf_nodes):
    """Normal features with 10 % missing values, binned and laid out in ``n_blocks`` blocks, and growth parameters
    for trees of ``max_leaf_nodes`` leaves: ``(X, codes, n_bins, layout, params)``."""
    X = rng.normal(size=(n_rows, n_features))
    X[rng.random(X.shape) < 0.1] = np.nan
    _, _, codes, n_bins = binned(X, max_bins)
    params = GrowthParams(max_leaf_nodes=max_leaf_nodes, max_depth=-1, min_samples_leaf=5, min_sum_hessian=1e-3,
                          l2_regularization=0.0, learning_rate=0.1)
    return X, codes, n_bins, make_layout(codes, n_bins, n_blocks), params


@pytest.mark.parametrize("parallel_work, partition_rows", [(None, None), (1, None), (1, 1)],
                         ids=["serial", "threaded", "threaded partition"])
def test_a_workspace_reused_from_tree_to_tree_grows_the_same_trees(parallel_work, partition_rows):
    """A fit grows every tree in one workspace (histograms, row order, per-feature splits): what a tree leaves there
    must not change the next one, whatever its features, rows or gradients."""
    rng = np.random.default_rng(21)
    _, codes, n_bins, layout, params = _trees_with_missing_values(rng, 700, 9, 64, 2, 15)
    shared = make_workspace(700, layout, 15)
    for t in range(4):
        features = np.sort(rng.choice(9, 5 + t, replace=False)).astype(np.int64)
        rows = np.sort(rng.choice(700, 600, replace=False)).astype(np.int64)
        grad, hess = rng.normal(size=700), rng.uniform(0.2, 1.0, 700)
        with parallel_region(2):
            reused = grow_tree(codes, n_bins, layout, features, grad, hess, rows.copy(), params, shared, parallel_work,
                               partition_rows)
            fresh = grow_tree(codes, n_bins, layout, features, grad, hess, rows.copy(), params,
                              make_workspace(700, layout, 15), parallel_work, partition_rows)
        assert np.sum(fresh.feature >= 0) > 3
        for name in fresh._fields:
            np.testing.assert_array_equal(getattr(reused, name), getattr(fresh, name), err_msg=f"tree {t}: {name}")


@pytest.mark.parametrize("n_chunks", [1, 2, 3, 7])
@pytest.mark.parametrize("small_is_left", [False, True])
def test_threaded_partition_equals_partition_then_gather(n_chunks, small_is_left):
    """The threaded partition puts the rows in the serial partition's order and gathers the named child's λ and w,
    whatever the chunks (more than rows in some nodes) and wherever the missing values go."""
    rng = np.random.default_rng(5)
    n = 1000
    codes = rng.integers(0, 6, size=(3, n)).astype(np.uint8)  # code 5 is feature 1's missing bin
    grad, hess = rng.normal(size=n), rng.uniform(0.1, 1.0, n)
    order = rng.permutation(n).astype(np.int64)
    buffers = np.empty((2, n), dtype=np.int64)
    for start, stop in [(0, n), (100, 105), (200, 201), (300, 300 + n_chunks - 1), (0, 0)]:
        for split_bin, missing_left in [(2, False), (2, True), (-1, True), (5, False)]:
            rows, expected_rows = order.copy(), order.copy()
            ordered_grad, ordered_hess = np.zeros(n), np.zeros(n)
            expected_grad, expected_hess = np.zeros(n), np.zeros(n)
            boundary = partition_node_threaded(codes, rows, start, stop, 1, split_bin, 5, missing_left, small_is_left,
                                               grad, hess, ordered_grad, ordered_hess, buffers, n_chunks)
            expected = partition_node(codes, expected_rows, start, stop, 1, split_bin, 5, missing_left, buffers[1])
            assert boundary == expected
            np.testing.assert_array_equal(rows, expected_rows)
            lo, hi = (start, boundary) if small_is_left else (boundary, stop)
            gather_node(grad, hess, expected_rows, lo, hi, expected_grad, expected_hess)
            np.testing.assert_array_equal(ordered_grad, expected_grad)
            np.testing.assert_array_equal(ordered_hess, expected_hess)


def test_threaded_partition_grows_the_same_trees():
    """Partitioning nodes on threads changes neither the trees nor the order of their rows."""
    rng = np.random.default_rng(8)
    X, codes, n_bins, layout, params = _trees_with_missing_values(rng, 3000, 6, 32, 3, 31)
    grad, hess = rng.normal(size=3000) + np.nan_to_num(X[:, 0]), rng.uniform(0.2, 1.0, 3000)
    rows = np.sort(rng.choice(3000, 2500, replace=False)).astype(np.int64)
    trees, orders = [], []
    for partition_rows in (None, 1, 400):
        tree_rows = rows.copy()
        with parallel_region(2):
            trees.append(grow_tree(codes, n_bins, layout, np.arange(6, dtype=np.int64), grad, hess, tree_rows, params,
                                   make_workspace(3000, layout, 31), 1, partition_rows))
        orders.append(tree_rows)
    assert np.sum(trees[0].feature >= 0) == 30
    for tree, order in zip(trees[1:], orders[1:]):
        np.testing.assert_array_equal(order, orders[0])
        for name in tree._fields:
            np.testing.assert_array_equal(getattr(tree, name), getattr(trees[0], name), err_msg=name)
