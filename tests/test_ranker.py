"""End-to-end tests of LambdaMARTRanker: quality on LightGBM's example data, determinism, input layouts and types,
early stopping, weights, missing values, progress output and parameter validation."""

import pickle
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.exceptions import NotFittedError

from lambdamart.metrics import ndcg
from lambdamart.ranker import LambdaMARTRanker

EXAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "lightgbm-lambdarank-example"

SMALL = dict(n_estimators=15, max_leaf_nodes=8, min_samples_leaf=5, learning_rate=0.2)


# ---------------------------------------------------------------- helpers


def make_data(seed, n_queries=30, n_features=6, min_docs=4, max_docs=25, nan_fraction=0.0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(min_docs, max_docs + 1, n_queries)
    qid = np.repeat(np.arange(n_queries), sizes)
    n = qid.size
    X = rng.normal(size=(n, n_features))
    w = np.linspace(1.0, -0.5, n_features)
    relevance = X @ w + np.sin(2 * X[:, 0]) + 0.5 * rng.normal(size=n)
    y = np.digitize(relevance, np.quantile(relevance, [0.5, 0.75, 0.9])).astype(float)
    if nan_fraction:
        X[rng.random((n, n_features)) < nan_fraction] = np.nan
    return X, y, qid


def assert_same_model(a, b):
    ta, tb = a._trees, b._trees
    assert ta.keys() == tb.keys()
    for key in ta:
        np.testing.assert_array_equal(ta[key], tb[key], err_msg=key)
        assert ta[key].dtype == tb[key].dtype


def models_differ(a, b):
    ta, tb = a._trees, b._trees
    return any(ta[k].shape != tb[k].shape or not np.array_equal(ta[k], tb[k], equal_nan=True) for k in ta)


def small(**params):
    return LambdaMARTRanker(**(SMALL | params))


def fit(X, y, qid=None, **params):
    return small(**params).fit(X, y, qid)


@pytest.fixture(scope="module")
def data():
    return make_data(0)


@pytest.fixture(scope="module")
def model(data):
    X, y, qid = data
    return fit(X, y, qid, random_state=0)


# ---------------------------------------------------------------- quality on LightGBM's example


def load_example(name):
    X, y = load_svmlight_file(str(EXAMPLE / name), n_features=300)
    sizes = np.loadtxt(EXAMPLE / f"{name}.query", dtype=np.int64)
    return X.toarray(), y, np.repeat(np.arange(sizes.size), sizes)


@pytest.fixture(scope="module")
def example():
    if not (EXAMPLE / "rank.train").exists():
        pytest.skip(f"LightGBM's example data not found at {EXAMPLE}")
    X_train, y_train, q_train = load_example("rank.train")
    X_test, y_test, q_test = load_example("rank.test")
    ranker = LambdaMARTRanker(n_estimators=100, learning_rate=0.1, max_leaf_nodes=31, min_samples_leaf=20,
                              max_bins=255, random_state=0)
    # The training data as eval_set records train_score_ and validation_score_ without stopping early.
    ranker.set_params(early_stopping=False)
    ranker.fit(X_train, y_train, q_train, eval_set=[(X_train, y_train, q_train)])
    return ranker, (X_train, y_train, q_train), (X_test, y_test, q_test)


def test_quality_on_lightgbm_example(example):
    ranker, _, (X_test, y_test, q_test) = example
    score = ndcg(y_test, ranker.predict(X_test), q_test, k=10)
    # LightGBM 4.7.0 with the same settings: 0.736; XGBoost: 0.731.
    assert score >= 0.725
    assert ranker.score(X_test, y_test, q_test) == pytest.approx(score, abs=1e-12)
    assert ranker.n_estimators_ == ranker.n_iter_ == 100


def test_training_ndcg_increases_on_lightgbm_example(example):
    ranker, (X_train, y_train, q_train), _ = example
    s = ranker.train_score_
    assert s.shape == (100,)
    assert s[0] < s[9] < s[49] and s[-1] >= s[49] - 1e-3
    assert s[-1] > 0.95
    # At most rare, tiny decreases from round to round.
    assert np.diff(s).min() > -0.01
    # Scores kept in the boosting loop (binned) = predict on raw features; same data through the eval_set path.
    np.testing.assert_array_equal(ranker.validation_score_, s)
    assert ndcg(y_train, ranker.predict(X_train), q_train, k=10) == pytest.approx(s[-1], abs=1e-12)


# ---------------------------------------------------------------- training progress


def test_training_ndcg_increases_on_synthetic_data():
    X, y, qid = make_data(1)
    X_v, y_v, q_v = make_data(2)
    ranker = small(n_estimators=30, early_stopping=False).fit(X, y, qid, eval_set=[(X_v, y_v, q_v)])
    s = ranker.train_score_
    assert s.shape == (30,) and ranker.validation_score_.shape == (30,)
    assert s[0] < s[9] < s[-1]
    assert ranker.validation_score_[-1] > ranker.validation_score_[0]
    assert ndcg(y, ranker.predict(X), qid, k=10) == pytest.approx(s[-1], abs=1e-12)
    assert ndcg(y_v, ranker.predict(X_v), q_v, k=10) == pytest.approx(ranker.validation_score_[-1], abs=1e-12)


def test_fits_the_training_ranking():
    X, y, qid = make_data(3)
    ranker = fit(X, y, qid, n_estimators=40)
    assert ndcg(y, ranker.predict(X), qid, k=10) > ndcg(y, np.zeros_like(y), qid, k=10) + 0.1


# ---------------------------------------------------------------- determinism


@pytest.mark.parametrize("params", [dict(), dict(subsample=0.6), dict(max_features=0.5),
                                    dict(subsample=0.7, max_features=0.6)],
                         ids=["full", "subsample", "max_features", "both"])
def test_same_random_state_is_bit_identical(data, params):
    X, y, qid = data
    a = fit(X, y, qid, random_state=7, **params)
    b = fit(X, y, qid, random_state=7, **params)
    assert_same_model(a, b)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    if params:
        c = fit(X, y, qid, random_state=8, **params)
        assert models_differ(a, c)


def test_random_state_instance_and_subsample_uses_fewer_rows(data):
    X, y, qid = data
    a = fit(X, y, qid, random_state=np.random.RandomState(3), subsample=0.5)
    b = fit(X, y, qid, random_state=3, subsample=0.5)
    assert_same_model(a, b)
    full = fit(X, y, qid, random_state=3)
    assert models_differ(a, full)
    # Each tree's root holds the rows of round(0.5 * n_queries) queries, not all rows.
    root_counts = a._trees["count"][a._trees["tree_starts"]]
    assert np.all(root_counts < X.shape[0])
    assert np.all(full._trees["count"][full._trees["tree_starts"]] == X.shape[0])


def test_max_features_limits_features_per_tree(data):
    X, y, qid = data
    ranker = fit(X, y, qid, max_features=0.34, random_state=0)  # round(0.34 * 6) = 2 features per tree
    t = ranker._trees
    bounds = np.append(t["tree_starts"], t["feature"].size)
    seen = set()
    for s, e in zip(bounds[:-1], bounds[1:]):
        used = set(t["feature"][s:e][t["feature"][s:e] >= 0].tolist())
        assert len(used) <= 2
        seen |= used
    assert len(seen) > 2


@pytest.mark.parametrize("params", [dict(), dict(subsample=0.7, max_features=0.6)], ids=["full", "sampled"])
def test_thread_count_does_not_change_the_model(data, params):
    X, y, qid = data
    one = fit(X, y, qid, n_jobs=1, random_state=0, **params)
    two = fit(X, y, qid, n_jobs=2, random_state=0, **params)
    assert_same_model(one, two)
    np.testing.assert_array_equal(one.predict(X), two.predict(X))


# ---------------------------------------------------------------- row layouts


def test_query_blocks_in_any_order_give_the_same_model(data, model):
    X, y, qid = data
    rng = np.random.default_rng(1)
    order = np.concatenate([np.flatnonzero(qid == q) for q in rng.permutation(np.unique(qid))])
    shuffled = fit(X[order], y[order], qid[order], random_state=0)
    assert_same_model(model, shuffled)
    np.testing.assert_array_equal(shuffled.predict(X[order]), model.predict(X)[order])


def test_interleaved_queries_give_the_same_model(data, model):
    X, y, qid = data
    rng = np.random.default_rng(2)
    # A random interleaving of the queries that keeps each query's own row order.
    slots = rng.permutation(qid)
    order = np.empty(qid.size, dtype=np.int64)
    for q in np.unique(qid):
        order[slots == q] = np.flatnonzero(qid == q)
    assert not np.array_equal(order, np.sort(order))
    for q in np.unique(qid):
        assert np.all(np.diff(order[qid[order] == q]) > 0)
    interleaved = fit(X[order], y[order], qid[order], random_state=0)
    assert_same_model(model, interleaved)
    np.testing.assert_array_equal(interleaved.predict(X[order]), model.predict(X)[order])


def test_predictions_in_input_row_order(model, data):
    X, y, qid = data
    rng = np.random.default_rng(3)
    perm = rng.permutation(X.shape[0])
    full = model.predict(X)
    np.testing.assert_array_equal(model.predict(X[perm]), full[perm])
    np.testing.assert_array_equal(np.array([model.predict(X[i:i + 1])[0] for i in range(0, X.shape[0], 37)]),
                                  full[::37])
    assert model.predict(X[:0]).shape == (0,)


def test_group_sizes_equal_qid(data, model):
    X, y, qid = data
    sizes = np.bincount(qid)
    grouped = LambdaMARTRanker(**SMALL, random_state=0).fit(X, y, group=sizes)
    assert_same_model(model, grouped)


def test_string_qid(data, model):
    X, y, qid = data
    padded = np.array([f"query-{q:04d}" for q in qid])
    assert_same_model(model, fit(X, y, padded, random_state=0))
    # Unpadded strings sort differently ("q10" < "q2"): the same model as integer ids in that sorted order.
    plain = np.array([f"q{q}" for q in qid], dtype=object)
    ranks = np.unique(plain.astype(str), return_inverse=True)[1]
    assert_same_model(fit(X, y, plain, random_state=0), fit(X, y, ranks, random_state=0))


def test_no_qid_is_one_query(data):
    X, y, _ = data
    assert_same_model(fit(X, y, None, random_state=0), fit(X, y, np.zeros(X.shape[0]), random_state=0))


# ---------------------------------------------------------------- input types


def test_dataframe_and_sparse_inputs_give_the_same_model(data, model):
    X, y, qid = data
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    from_df = fit(df, y, pd.Series(qid), random_state=0)
    assert_same_model(model, from_df)
    assert list(from_df.feature_names_in_) == list(df.columns)
    np.testing.assert_array_equal(from_df.predict(df), model.predict(X))
    X_sparse = np.where(np.abs(X) < 0.5, 0.0, X)
    dense = fit(X_sparse, y, qid, random_state=0)
    for convert in (sp.csr_matrix, sp.csc_matrix):
        sparse_model = fit(convert(X_sparse), y, qid, random_state=0)
        assert_same_model(dense, sparse_model)
        np.testing.assert_array_equal(sparse_model.predict(convert(X_sparse)), dense.predict(X_sparse))


def test_float32_features_give_the_same_model(data):
    X, y, qid = data
    X32 = X.astype(np.float32)
    a = fit(X32, y, qid, random_state=0)
    b = fit(X32.astype(np.float64), y, qid, random_state=0)
    assert_same_model(a, b)
    np.testing.assert_array_equal(a.predict(X32), b.predict(X32.astype(np.float64)))


def test_pickle_round_trip(model, data):
    X, _, _ = data
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), model.predict(X))


# ---------------------------------------------------------------- early stopping


def test_early_stopping_on_eval_set():
    X, y, qid = make_data(4)
    X_v, _, q_v = make_data(5)
    y_v = np.random.default_rng(5).integers(0, 4, q_v.size).astype(float)  # noise: validation NDCG soon stalls
    ranker = LambdaMARTRanker(n_estimators=200, n_iter_no_change=4, learning_rate=0.3, max_leaf_nodes=8,
                              min_samples_leaf=5, random_state=0)
    ranker.fit(X, y, qid, eval_set=[(X_v, y_v, q_v)])
    assert ranker.n_iter_ < 200
    assert ranker.best_iteration_ is not None and ranker.n_estimators_ == ranker.best_iteration_
    assert ranker.n_iter_ == ranker.best_iteration_ + ranker.n_iter_no_change
    assert ranker.validation_score_.shape == (ranker.n_iter_,) == ranker.train_score_.shape
    v = ranker.validation_score_
    assert v[ranker.best_iteration_ - 1] >= v.max() - ranker.tol
    assert np.all(v[ranker.best_iteration_:] <= v[ranker.best_iteration_ - 1] + ranker.tol)
    assert ranker._trees["tree_starts"].size == ranker.n_estimators_
    # The kept trees are those of a model trained for best_iteration_ rounds.
    short = LambdaMARTRanker(n_estimators=ranker.best_iteration_, learning_rate=0.3, max_leaf_nodes=8,
                             min_samples_leaf=5, random_state=0).fit(X, y, qid)
    assert_same_model(ranker, short)


def test_early_stopping_false_records_but_keeps_all_rounds():
    X, y, qid = make_data(4)
    X_v, y_v, q_v = make_data(5)
    ranker = small(n_estimators=12, early_stopping=False).fit(X, y, qid, eval_set=[(X_v, y_v, q_v), (X, y, qid)])
    assert ranker.n_estimators_ == ranker.n_iter_ == 12
    assert ranker.validation_score_.shape == (12,)
    assert 1 <= ranker.best_iteration_ <= 12


def test_no_validation_no_early_stopping(data, model):
    assert model.n_estimators_ == model.n_iter_ == SMALL["n_estimators"]
    assert model.best_iteration_ is None
    assert model.validation_score_.shape == (0,)
    assert model.train_score_.shape == (0,)


def test_early_stopping_true_holds_out_queries():
    X, y, qid = make_data(6, n_queries=40)
    ranker = LambdaMARTRanker(n_estimators=150, n_iter_no_change=3, learning_rate=0.5, max_leaf_nodes=16,
                              min_samples_leaf=2, early_stopping=True, validation_fraction=0.25, random_state=0)
    ranker.fit(X, y, qid)
    assert ranker.validation_score_.shape == (ranker.n_iter_,)
    assert ranker.best_iteration_ is not None and ranker.n_estimators_ == ranker.best_iteration_
    assert ranker.n_iter_ <= 150
    # Held-out queries are not trained on: the root of every tree holds fewer rows than the data has.
    root_counts = ranker._trees["count"][ranker._trees["tree_starts"]]
    assert np.all(root_counts == root_counts[0]) and root_counts[0] < X.shape[0]
    again = LambdaMARTRanker(**ranker.get_params()).fit(X, y, qid)
    assert_same_model(ranker, again)
    with pytest.raises(ValueError, match="queries"):
        LambdaMARTRanker(early_stopping=True).fit(X[:10], y[:10], np.zeros(10))


# ---------------------------------------------------------------- sample weights


def test_sample_weight_changes_the_model(data, model):
    X, y, qid = data
    rng = np.random.default_rng(4)
    weighted = LambdaMARTRanker(**SMALL, random_state=0).fit(X, y, qid, sample_weight=rng.uniform(0.1, 3, y.size))
    assert models_differ(model, weighted)
    ones = LambdaMARTRanker(**SMALL, random_state=0).fit(X, y, qid, sample_weight=np.ones(y.size))
    assert_same_model(model, ones)


def test_zero_weight_query_equals_dropping_it():
    """A query of weight 0 contributes no λ and no w. Its rows still count towards min_samples_leaf and bin
    thresholds, so the comparison uses min_samples_leaf=1 and features whose values all occur often in the kept
    rows (the same thresholds either way)."""
    X, y, qid = make_data(7, n_queries=25)
    X = np.floor(np.clip(X * 2 + 5, 0, 9))  # integer values 0..9
    drop = qid == 3
    weights = np.where(drop, 0.0, 1.0)
    params = dict(n_estimators=10, max_leaf_nodes=8, min_samples_leaf=1, learning_rate=0.2, random_state=0)
    weighted = LambdaMARTRanker(**params).fit(X, y, qid, sample_weight=weights)
    dropped = LambdaMARTRanker(**params).fit(X[~drop], y[~drop], qid[~drop])
    kept = X[~drop]
    np.testing.assert_allclose(weighted.predict(kept), dropped.predict(kept), rtol=1e-9, atol=1e-12)
    t_w, t_d = weighted._trees, dropped._trees
    np.testing.assert_array_equal(t_w["feature"], t_d["feature"])
    np.testing.assert_allclose(t_w["value"], t_d["value"], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- missing values


def test_missing_values_are_learned_and_predicted():
    X, y, qid = make_data(8, nan_fraction=0.1)
    rng = np.random.default_rng(8)
    informative = rng.random(y.size) < 0.2
    X[informative, 5] = np.nan
    y[informative] = 3.0  # a missing value in feature 5 marks a relevant document
    X_v, y_v, q_v = make_data(9, nan_fraction=0.1)
    informative_v = rng.random(y_v.size) < 0.2
    X_v[informative_v, 5] = np.nan
    y_v[informative_v] = 3.0
    ranker = small(n_estimators=20, early_stopping=False).fit(X, y, qid, eval_set=[(X_v, y_v, q_v)])
    pred = ranker.predict(X_v)
    assert np.all(np.isfinite(pred))
    t = ranker._trees
    assert np.any(t["feature"] == 5)
    assert pred[np.isnan(X_v[:, 5])].mean() > pred[~np.isnan(X_v[:, 5])].mean()
    # The binned scores of the boosting loop and predict on raw features with NaN agree.
    assert ndcg(y_v, pred, q_v, k=10) == pytest.approx(ranker.validation_score_[-1], abs=1e-12)
    assert ndcg(y, ranker.predict(X), qid, k=10) == pytest.approx(ranker.train_score_[-1], abs=1e-12)
    # NaN in a feature never missing in training still predicts (the larger child's side).
    X_new = X_v.copy()
    X_new[:, 1] = np.nan
    assert np.all(np.isfinite(ranker.predict(X_new)))


# ---------------------------------------------------------------- output and attributes


def test_verbose_prints_progress(capsys, data):
    X, y, qid = data
    fit(X, y, qid, n_estimators=10, verbose=5)
    *lines, profile = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[5/10]") and lines[1].startswith("[10/10]")
    assert all("train NDCG@10" in line for line in lines)
    assert profile.startswith("fit profile: binning") and "tree_growth" in profile
    X_v, y_v, q_v = make_data(10)
    ranker = small(n_estimators=3, verbose=1, eval_at=5)
    ranker.fit(X, y, qid, eval_set=[(X_v, y_v, q_v)])
    *lines, profile = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and all("valid NDCG@5" in line for line in lines)
    assert ranker.train_score_.shape == (3,)
    fit(X, y, qid, verbose=0)
    assert capsys.readouterr().out == ""


def test_feature_importances(data):
    X, y, qid = data
    X = np.column_stack([X, np.full(X.shape[0], 1.0)])  # a constant feature is never split on
    ranker = fit(X, y, qid, random_state=0)
    imp = ranker.feature_importances_
    assert imp.shape == (X.shape[1],)
    assert imp.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(imp >= 0) and imp[-1] == 0.0
    assert imp[0] > 0  # the strongest feature is used


# A tree whose rows all have w = 0 (all labels equal, or a subsample of queries without pairs) gets leaf value 0,
# not 0/0.
def test_all_equal_labels_warns_and_predicts_constant(data):
    X, _, qid = data
    with pytest.warns(UserWarning, match="all labels equal"):
        ranker = fit(X, np.ones(X.shape[0]), qid)
    assert np.unique(ranker.predict(X)).size == 1


def test_subsample_of_queries_without_pairs():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    qid = np.repeat(np.arange(20), 10)
    y = np.zeros(200)
    y[:2] = [0.0, 2.0]  # only query 0 has a pair
    ranker = LambdaMARTRanker(n_estimators=20, subsample=0.1, random_state=0).fit(X, y, qid)
    assert np.all(np.isfinite(ranker.predict(X)))


# With min_sum_hessian=0 a split may leave a side with Σw = 0 (rows of queries whose labels are all equal): its
# gain term counts 0 instead of dividing 0 by 0.
def test_min_sum_hessian_zero_with_zero_weight_rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    qid = np.repeat(np.arange(20), 10)
    y = rng.integers(0, 3, 200).astype(float)
    y[:100] = 1.0  # the first ten queries have no pair: w = 0 on their rows
    X[:100, 0] = -5.0  # ... and feature 0 separates them from the rest
    ranker = LambdaMARTRanker(n_estimators=3, min_sum_hessian=0.0, min_samples_leaf=1).fit(X, y, qid)
    assert np.all(np.isfinite(ranker.predict(X)))


def test_score_method(model, data):
    X, y, qid = data
    assert model.score(X, y, qid) == pytest.approx(ndcg(y, model.predict(X), qid, k=10), abs=1e-15)
    with pytest.warns(UserWarning, match="qid"):
        model.score(X, y)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("name, value", [
    ("objective", "pairwise"),
    ("n_estimators", 0),
    ("learning_rate", 0.0),
    ("learning_rate", -0.1),
    ("max_leaf_nodes", 1),
    ("max_depth", 0),
    ("min_samples_leaf", 0),
    ("min_sum_hessian", -1.0),
    ("l2_regularization", -1.0),
    ("max_bins", 1),
    ("max_bins", 256),
    ("truncation_level", 0),
    ("sigma", 0.0),
    ("gain", "quadratic"),
    ("pair_normalization", "yes"),
    ("subsample", 0.0),
    ("subsample", 1.5),
    ("max_features", 0.0),
    ("max_features", 2.0),
    ("early_stopping", "sometimes"),
    ("validation_fraction", 1.0),
    ("n_iter_no_change", 0),
    ("tol", -1e-3),
    ("eval_at", 0),
    ("n_jobs", 0),
    ("n_jobs", 1.5),
    ("random_state", "seed"),
    ("verbose", -1),
])
def test_out_of_range_parameters_raise(name, value):
    X, y, qid = make_data(11, n_queries=5)
    with pytest.raises(ValueError, match=re.escape(name)):
        LambdaMARTRanker(**{name: value}).fit(X, y, qid)


def test_bad_labels_and_gain_table():
    X, y, qid = make_data(12, n_queries=5)
    with pytest.raises(ValueError, match="gain"):
        LambdaMARTRanker(gain=[0.0, -1.0, 3.0, 7.0]).fit(X, y, qid)
    with pytest.raises(ValueError, match="linear"):
        LambdaMARTRanker().fit(X, np.where(y > 2, 60.0, y), qid)
    with pytest.raises(ValueError):
        LambdaMARTRanker().fit(X, -y - 1, qid)
    ranker = small(n_estimators=3, gain=[0.0, 1.0, 3.0, 7.0]).fit(X, y, qid)
    assert np.all(np.isfinite(ranker.predict(X)))


def test_predict_before_fit_raises():
    with pytest.raises(NotFittedError):
        LambdaMARTRanker().predict(np.zeros((3, 2)))
    with pytest.raises(NotFittedError):
        LambdaMARTRanker().feature_importances_


def test_wrong_number_of_features_raises(model, data):
    X, _, _ = data
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :-1])
    with pytest.raises(ValueError, match="features"):
        model.predict(np.column_stack([X, X[:, 0]]))


def test_bad_query_arguments_raise(data):
    X, y, qid = data
    with pytest.raises(ValueError, match="qid"):
        LambdaMARTRanker().fit(X, y, qid[:-1])
    with pytest.raises(ValueError, match="group"):
        LambdaMARTRanker().fit(X, y, qid, group=np.bincount(qid))
    with pytest.raises(ValueError, match="group"):
        LambdaMARTRanker().fit(X, y, group=[X.shape[0] - 1])
    with pytest.raises(ValueError):
        LambdaMARTRanker().fit(X, y[:-1], qid)
