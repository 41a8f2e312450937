"""LambdaMARTRanker as a scikit-learn citizen: estimator checks, tags, metadata routing through GridSearchCV,
RandomizedSearchCV, cross_validate and Pipeline, feature importances and thread safety."""

import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import sklearn
from helpers import make_data
from scipy.stats import loguniform, randint
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, GroupKFold, RandomizedSearchCV, cross_validate
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks

from lambdamart import LambdaMARTRanker
from lambdamart.metrics import mean_average_precision, ndcg
from lambdamart.scoring import map_scorer, ndcg_scorer

# One thread: these tests are about the scikit-learn API, and tiny fits on a busy machine are much faster without
# thread hand-offs (the model is the same for any thread count, see test_determinism.py).
FAST = dict(n_estimators=5, max_leaf_nodes=7, min_samples_leaf=5, n_jobs=1)

# Checks that cannot hold for a ranker, and why. Everything else in scikit-learn's suite passes.
EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": (
        "ranking is not separable over rows: repeating a document adds a competitor to its query (shifting every "
        "rank, pair and the ideal DCG), so a weight of 2 is not two copies; and a weight-0 row still counts in "
        "min_samples_leaf and bin thresholds, as in LightGBM."
    ),
    "check_sample_weight_equivalence_on_sparse_data": "as check_sample_weight_equivalence_on_dense_data.",
}


# The checks call score() without qid: all rows are one query, as documented, and the warning says so.
@pytest.mark.filterwarnings("ignore:score\\(\\) received no qid:UserWarning")
@parametrize_with_checks([LambdaMARTRanker(n_estimators=5, n_jobs=1)],
                         expected_failed_checks=lambda estimator: EXPECTED_FAILED_CHECKS)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ---------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def data():
    """24 queries of 6 to 15 documents, 5 features; features 0 and 1 carry the relevance (replaces conftest's data
    in this file)."""
    return make_data(0, 24, 5, min_docs=6, max_docs=15, relevance="square", label_quantiles=(0.5, 0.8, 0.95))


def group_cv(n_splits=3):
    return GroupKFold(n_splits).set_split_request(groups="qid")


def first_fold(X, y, qid, n_splits=3):
    return next(iter(GroupKFold(n_splits).split(X, y, qid)))


# ---------------------------------------------------------------- tags and parameters


def test_tags():
    tags = get_tags(LambdaMARTRanker())
    assert tags.estimator_type == "ranker"
    assert tags.target_tags.required and tags.target_tags.single_output and not tags.target_tags.multi_output
    assert tags.input_tags.allow_nan and tags.input_tags.sparse
    assert tags.regressor_tags is None and tags.classifier_tags is None
    assert not sklearn.base.is_regressor(LambdaMARTRanker()) and not sklearn.base.is_classifier(LambdaMARTRanker())
    # A pipeline ending in the ranker is a ranker too.
    assert get_tags(Pipeline([("scale", StandardScaler()), ("rank", LambdaMARTRanker())])).estimator_type == "ranker"


def test_clone_and_params():
    ranker = LambdaMARTRanker(learning_rate=0.3, importance_type="split", gain=[0.0, 1.0, 3.0])
    params = ranker.get_params()
    assert params["importance_type"] == "split" and params["learning_rate"] == 0.3
    assert clone(ranker).get_params()["gain"] == [0.0, 1.0, 3.0]
    assert "importance_type='split'" in repr(ranker)


def test_fit_and_score_request_qid_by_default(routing):
    routing_info = LambdaMARTRanker().get_metadata_routing()
    assert routing_info.fit.requests["qid"] is True
    assert routing_info.score.requests == {"qid": True, "sample_weight": None}  # weights only when requested


# ---------------------------------------------------------------- feature importances


def test_importance_types(data):
    X, y, qid = data
    ranker = LambdaMARTRanker(**FAST, random_state=0).fit(X, y, qid)
    t = ranker._trees
    split = t["feature"] >= 0
    gain = np.bincount(t["feature"][split], weights=t["gain"][split], minlength=X.shape[1])
    counts = np.bincount(t["feature"][split], minlength=X.shape[1]).astype(float)
    np.testing.assert_allclose(ranker.feature_importances_, gain / gain.sum(), rtol=1e-15)
    ranker.set_params(importance_type="split")
    np.testing.assert_allclose(ranker.feature_importances_, counts / counts.sum(), rtol=1e-15)
    assert ranker.feature_importances_.dtype == np.float64
    assert ranker.feature_importances_.sum() == pytest.approx(1.0, abs=1e-12)
    # The two strongest features carry most of the gain.
    assert set(np.argsort(LambdaMARTRanker(**FAST, random_state=0).fit(X, y, qid).feature_importances_)[-2:]) \
        == {0, 1}
    ranker.set_params(importance_type="weight")
    with pytest.raises(ValueError, match="importance_type"):
        _ = ranker.feature_importances_
    with pytest.raises(ValueError, match="importance_type"):
        LambdaMARTRanker(importance_type="weight").fit(X, y, qid)


def test_importances_without_splits_are_zero(data):
    X, y, qid = data
    with pytest.warns(UserWarning, match="all labels equal"):
        ranker = LambdaMARTRanker(**FAST).fit(X, np.zeros_like(y), qid)
    for kind in ("gain", "split"):
        np.testing.assert_array_equal(ranker.set_params(importance_type=kind).feature_importances_,
                                      np.zeros(X.shape[1]))


# ---------------------------------------------------------------- model selection with routed qid


def test_grid_search_with_ranking_scorers(routing, data):
    X, y, qid = data
    grid = {"learning_rate": [0.05, 0.1], "max_leaf_nodes": [15, 31]}
    search = GridSearchCV(LambdaMARTRanker(n_estimators=5, min_samples_leaf=5, n_jobs=1, random_state=0), grid,
                          scoring={"ndcg@10": ndcg_scorer(10), "map": map_scorer()}, refit="ndcg@10",
                          cv=group_cv())
    search.fit(X, y, qid=qid)
    assert set(search.best_params_) == {"learning_rate", "max_leaf_nodes"}
    for name in ("mean_test_ndcg@10", "mean_test_map", "split2_test_ndcg@10", "rank_test_map"):
        assert search.cv_results_[name].shape == (4,)
    assert np.all((search.cv_results_["mean_test_ndcg@10"] > 0) & (search.cv_results_["mean_test_ndcg@10"] <= 1))
    best = search.best_index_
    assert search.cv_results_["mean_test_ndcg@10"][best] == search.cv_results_["mean_test_ndcg@10"].max()
    # Each fold was trained and scored per query: redo the first fold of the first candidate by hand.
    train, test = first_fold(X, y, qid)
    params = search.cv_results_["params"][0]
    model = LambdaMARTRanker(n_estimators=5, min_samples_leaf=5, n_jobs=1, random_state=0, **params)
    model.fit(X[train], y[train], qid[train])
    scores = model.predict(X[test])
    assert search.cv_results_["split0_test_ndcg@10"][0] == ndcg(y[test], scores, qid[test], k=10)
    assert search.cv_results_["split0_test_map"][0] == mean_average_precision(y[test], scores, qid[test])
    # The refit model was trained on all rows with their qid.
    refit = LambdaMARTRanker(n_estimators=5, min_samples_leaf=5, n_jobs=1, random_state=0, **search.best_params_)
    np.testing.assert_array_equal(search.best_estimator_.predict(X), refit.fit(X, y, qid).predict(X))
    assert search.score(X, y, qid=qid) == ndcg(y, search.predict(X), qid, k=10)


def test_grid_search_without_scoring_uses_score_per_query(routing, data):
    X, y, qid = data
    search = GridSearchCV(LambdaMARTRanker(**FAST, random_state=0), {"eval_at": [3, 10]}, cv=group_cv())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # qid reaches score(): no "scored as one query" warning
        search.fit(X, y, qid=qid)
    train, test = first_fold(X, y, qid)
    for i, k in enumerate((3, 10)):
        model = LambdaMARTRanker(**FAST, random_state=0, eval_at=k).fit(X[train], y[train], qid[train])
        assert search.cv_results_["split0_test_score"][i] == ndcg(y[test], model.predict(X[test]), qid[test], k=k)


def test_randomized_search(routing, data):
    X, y, qid = data
    search = RandomizedSearchCV(LambdaMARTRanker(n_estimators=5, min_samples_leaf=5, n_jobs=1, random_state=0),
                                {"learning_rate": loguniform(0.01, 0.5), "max_leaf_nodes": randint(4, 32)},
                                n_iter=3, scoring=ndcg_scorer(5), cv=group_cv(), random_state=0)
    search.fit(X, y, qid=qid)
    assert search.cv_results_["mean_test_score"].shape == (3,)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert 0.01 <= search.best_params_["learning_rate"] <= 0.5 and 4 <= search.best_params_["max_leaf_nodes"] < 32


def test_pipeline_cross_validate_routes_qid_to_the_ranker(routing, data):
    X, y, qid = data
    X = X * [1.0, 10.0, 100.0, 1.0, 1e-3] + 5.0  # scales the StandardScaler has something to do with
    pipe = Pipeline([("scale", StandardScaler()), ("rank", LambdaMARTRanker(**FAST, random_state=0))])
    result = cross_validate(pipe, X, y, cv=group_cv(), scoring={"ndcg@10": ndcg_scorer(10), "map": map_scorer()},
                            params={"qid": qid}, return_estimator=True)
    assert result["test_ndcg@10"].shape == (3,) and result["test_map"].shape == (3,)
    train, test = first_fold(X, y, qid)
    by_hand = clone(pipe).fit(X[train], y[train], qid=qid[train])  # routed to the step that requests it
    expected = ndcg(y[test], by_hand.predict(X[test]), qid[test], k=10)
    assert result["test_ndcg@10"][0] == expected
    # Training without qid (all rows one query) gives another model: qid really reached the ranker's fit.
    one_query = clone(pipe).fit(X[train], y[train])
    assert not np.array_equal(one_query.predict(X[test]), by_hand.predict(X[test]))
    np.testing.assert_array_equal(result["estimator"][0].predict(X[test]), by_hand.predict(X[test]))


def test_grid_search_over_a_pipeline(routing, data):
    X, y, qid = data
    pipe = Pipeline([("scale", StandardScaler()), ("rank", LambdaMARTRanker(**FAST, random_state=0))])
    search = GridSearchCV(pipe, {"rank__learning_rate": [0.05, 0.2]}, scoring=ndcg_scorer(10), cv=group_cv())
    search.fit(X, y, qid=qid)
    assert set(search.best_params_) == {"rank__learning_rate"}
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


@pytest.mark.xfail(tuple(int(p) for p in sklearn.__version__.split(".")[:2]) < (1, 8), strict=True,
                   reason="scikit-learn < 1.8 does not route score() metadata through a Pipeline when GridSearchCV "
                          "has no scoring (the ranker then warns that it got no qid)")
def test_grid_search_over_a_pipeline_without_scoring_routes_qid_to_score(routing, data):
    X, y, qid = data
    pipe = Pipeline([("scale", StandardScaler()), ("rank", LambdaMARTRanker(**FAST, random_state=0))])
    search = GridSearchCV(pipe, {"rank__learning_rate": [0.05, 0.2]}, cv=group_cv())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search.fit(X, y, qid=qid)


# ---------------------------------------------------------------- routing disabled


def test_without_routing_scorers_raise_with_instructions(data):
    X, y, qid = data
    search = GridSearchCV(LambdaMARTRanker(**FAST), {"learning_rate": [0.1]}, scoring=ndcg_scorer(10),
                          cv=GroupKFold(3), error_score="raise")
    with pytest.raises(ValueError, match=r"enable_metadata_routing=True"):
        search.fit(X, y, groups=qid, qid=qid)
    with pytest.raises(ValueError, match=r"enable_metadata_routing=True"):
        cross_validate(LambdaMARTRanker(**FAST), X, y, groups=qid, cv=GroupKFold(3), scoring=map_scorer(),
                       error_score="raise")
    # With the default error_score the failure is not silent either: NaN scores and the message in a warning.
    search.set_params(error_score=np.nan)
    with pytest.warns(UserWarning) as record:
        search.fit(X, y, groups=qid, qid=qid)
    assert any("enable_metadata_routing=True" in str(w.message) for w in record)
    assert np.all(np.isnan(search.cv_results_["mean_test_score"]))


def test_without_routing_score_refuses_to_score_a_model_of_several_queries_as_one(data):
    X, y, qid = data
    # scikit-learn still hands fit parameters to fit without routing, so the models are trained per query, but
    # score() gets no qid: it raises rather than score every test fold as one query (a warning would stay in the
    # workers of a parallel search, which would then pick parameters by a meaningless NDCG).
    search = GridSearchCV(LambdaMARTRanker(**FAST, random_state=0), {"learning_rate": [0.1]}, cv=GroupKFold(3),
                          error_score="raise")
    with pytest.raises(ValueError, match=r"no qid, but this ranker was fitted on several queries.*"
                                         r"enable_metadata_routing=True"):
        search.fit(X, y, groups=qid, qid=qid)
    quiet = GridSearchCV(LambdaMARTRanker(**FAST, random_state=0), {"learning_rate": [0.1]}, cv=GroupKFold(3))
    with pytest.warns(UserWarning, match="Scoring failed"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "One or more of the test scores are non-finite")
        quiet.fit(X, y, groups=qid, qid=qid)
    assert np.isnan(quiet.cv_results_["mean_test_score"]).all()
    train, test = first_fold(X, y, qid)
    model = LambdaMARTRanker(**FAST, random_state=0).fit(X[train], y[train], qid[train])
    with pytest.raises(ValueError, match="Pass qid"):
        model.score(X[test], y[test])
    # A ranker fitted on one query scores one query, with a warning.
    one = LambdaMARTRanker(**FAST, random_state=0).fit(X[train], y[train])
    with pytest.warns(UserWarning, match="one query"):
        assert one.score(X[test], y[test]) == ndcg(y[test], one.predict(X[test]), k=10)


def test_score_with_sample_weight(data):
    X, y, qid = data
    model = LambdaMARTRanker(**FAST, random_state=0).fit(X, y, qid)
    w = np.random.default_rng(0).uniform(0, 2, y.size)
    assert model.score(X, y, qid, sample_weight=w) == ndcg(y, model.predict(X), qid, k=10, sample_weight=w)
    assert model.score(X, y, qid, sample_weight=w) != model.score(X, y, qid)


# ---------------------------------------------------------------- thread safety


def _predict_concurrently(model, X, n_threads=4, repeats=5):
    results, errors = [], []
    barrier = threading.Barrier(n_threads)

    def work():
        try:
            barrier.wait()
            for _ in range(repeats):
                results.append(model.predict(X))
        except Exception as e:  # reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@pytest.mark.parametrize("n_rows", [50, 12_000], ids=["serial-path", "parallel-path"])
def test_concurrent_predict_is_identical(data, n_rows):
    X, y, qid = data
    model = LambdaMARTRanker(**(FAST | dict(n_estimators=20, max_leaf_nodes=15)), random_state=0).fit(X, y, qid)
    model.set_params(n_jobs=None)  # predict on all cores
    X_new = np.random.default_rng(1).normal(size=(n_rows, X.shape[1]))
    X_new[::7, 2] = np.nan
    expected = model.predict(X_new)
    results = _predict_concurrently(model, X_new)
    assert len(results) == 20
    for r in results:
        np.testing.assert_array_equal(r, expected)


_WORKQUEUE_SCRIPT = """
import threading, numpy as np, numba
from lambdamart import LambdaMARTRanker
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4)); y = (X[:, 0] > 0).astype(float); qid = np.repeat(np.arange(30), 10)
model = LambdaMARTRanker(n_estimators=20, max_leaf_nodes=8, min_samples_leaf=3).fit(X, y, qid)
X_big = rng.normal(size=(12_000, 4))
expected = model.predict(X_big)
assert numba.threading_layer() == "workqueue", numba.threading_layer()
expected_score = model.score(X, y, qid)
refit = LambdaMARTRanker(n_estimators=3, min_samples_leaf=3).fit(X, y, qid).predict(X)
same = []
def work():
    for _ in range(3):
        same.append(np.array_equal(model.predict(X_big), expected))
    same.append(model.score(X, y, qid) == expected_score)
    same.append(np.array_equal(LambdaMARTRanker(n_estimators=3, min_samples_leaf=3).fit(X, y, qid).predict(X), refit))
threads = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
assert len(same) == 20 and all(same), same
print("ok")
"""


def test_concurrent_predict_on_the_workqueue_layer():
    """numba's fallback threading layer aborts the whole process on concurrent parallel launches; the ranker
    serialises its launches (predict, score, fit) there instead."""
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue")
    proc = subprocess.run([sys.executable, "-c", _WORKQUEUE_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
