"""LambdaMARTRanker's behaviour end to end: quality on LightGBM's example data, training progress, query and feature
sampling, predictions in input order, early stopping, sample weights, progress output, importances and score().

Other concerns of the estimator have their own files: test_features.py (X), test_queries_and_labels.py (qid, group,
y), test_input_validation.py (bad input), test_determinism.py, test_persistence.py, test_sklearn.py.
"""

from pathlib import Path

import numpy as np
import pytest
from helpers import assert_same_model, make_data, models_differ
from sklearn.datasets import load_svmlight_file

from lambdamart.metrics import ndcg
from lambdamart.ranker import LambdaMARTRanker

EXAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "lightgbm-lambdarank-example"

SMALL = dict(n_estimators=15, max_leaf_nodes=8, min_samples_leaf=5, learning_rate=0.2)


def make_ranker_data(seed, n_queries=30):
    """Six features, 4 to 25 documents a query, labels from a mix of every feature."""
    return make_data(seed, n_queries, n_features=6, max_docs=25, relevance="mixed")


def small(**params):
    return LambdaMARTRanker(**(SMALL | params))


def fit(X, y, qid=None, **params):
    return small(**params).fit(X, y, qid)


@pytest.fixture(scope="module")
def data():
    """make_ranker_data(0) (replaces conftest's data in this file)."""
    return make_ranker_data(0)


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
    X, y, qid = make_ranker_data(1)
    X_v, y_v, q_v = make_ranker_data(2)
    ranker = small(n_estimators=30, early_stopping=False).fit(X, y, qid, eval_set=[(X_v, y_v, q_v)])
    s = ranker.train_score_
    assert s.shape == (30,) and ranker.validation_score_.shape == (30,)
    assert s[0] < s[9] < s[-1]
    assert ranker.validation_score_[-1] > ranker.validation_score_[0]
    assert ndcg(y, ranker.predict(X), qid, k=10) == pytest.approx(s[-1], abs=1e-12)
    assert ndcg(y_v, ranker.predict(X_v), q_v, k=10) == pytest.approx(ranker.validation_score_[-1], abs=1e-12)


def test_fits_the_training_ranking():
    X, y, qid = make_ranker_data(3)
    ranker = fit(X, y, qid, n_estimators=40)
    assert ndcg(y, ranker.predict(X), qid, k=10) > ndcg(y, np.zeros_like(y), qid, k=10) + 0.1


# ---------------------------------------------------------------- query and feature sampling


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


# ---------------------------------------------------------------- predictions


def test_predictions_in_input_row_order(model, data):
    X, y, qid = data
    rng = np.random.default_rng(3)
    perm = rng.permutation(X.shape[0])
    full = model.predict(X)
    np.testing.assert_array_equal(model.predict(X[perm]), full[perm])
    np.testing.assert_array_equal(np.array([model.predict(X[i:i + 1])[0] for i in range(0, X.shape[0], 37)]),
                                  full[::37])
    assert model.predict(X[:0]).shape == (0,)


def test_score_method(model, data):
    X, y, qid = data
    assert model.score(X, y, qid) == pytest.approx(ndcg(y, model.predict(X), qid, k=10), abs=1e-15)
    with pytest.raises(ValueError, match="no qid, but this ranker was fitted on several queries"):
        model.score(X, y)


# ---------------------------------------------------------------- early stopping


def test_early_stopping_on_eval_set():
    X, y, qid = make_ranker_data(4)
    X_v, _, q_v = make_ranker_data(5)
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
    X, y, qid = make_ranker_data(4)
    X_v, y_v, q_v = make_ranker_data(5)
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
    X, y, qid = make_ranker_data(6, n_queries=40)
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
    two = np.isin(qid, np.unique(qid)[:2])
    with pytest.raises(ValueError, match="0.9 of the 2 queries, 2, which leaves none to train on; lower"):
        LambdaMARTRanker(early_stopping=True, validation_fraction=0.9).fit(X[two], y[two], qid[two])


# ---------------------------------------------------------------- sample weights


def test_sample_weight_changes_the_model(data, model):
    X, y, qid = data
    rng = np.random.default_rng(4)
    weighted = LambdaMARTRanker(**SMALL, random_state=0).fit(X, y, qid, sample_weight=rng.uniform(0.1, 3, y.size))
    assert models_differ(model, weighted)
    ones = LambdaMARTRanker(**SMALL, random_state=0).fit(X, y, qid, sample_weight=np.ones(y.size))
    assert_same_model(model, ones)


def test_sample_weights_whose_gradient_sums_would_overflow_raise(data):
    """From ~1e154 the split gains' squared sums overflowed and the model silently had no splits."""
    X, y, qid = data
    with pytest.raises(ValueError, match="weights up to 1e\\+160.*Divide the weights by a constant"):
        LambdaMARTRanker(**SMALL).fit(X, y, qid, sample_weight=np.full(y.size, 1e160))


def test_zero_weight_query_equals_dropping_it():
    """A query of weight 0 contributes no λ and no w. Its rows still count towards min_samples_leaf and bin
    thresholds, so the comparison uses min_samples_leaf=1 and features whose values all occur often in the kept
    rows (the same thresholds either way)."""
    X, y, qid = make_ranker_data(7, n_queries=25)
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


# ---------------------------------------------------------------- output and attributes


def test_verbose_prints_progress(capsys, data):
    X, y, qid = data
    fit(X, y, qid, n_estimators=10, verbose=5)
    *lines, profile = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[5/10]") and lines[1].startswith("[10/10]")
    assert all("train NDCG@10" in line for line in lines)
    assert profile.startswith("fit profile: binning") and "tree_growth" in profile
    X_v, y_v, q_v = make_ranker_data(10)
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

