"""Scorers: real scikit-learn scorers that route qid, and refuse to score without it."""

import pickle

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_validate

from lambdamart.metrics import mean_average_precision, ndcg, precision_at_k
from lambdamart.scoring import make_ranking_scorer, map_scorer, ndcg_scorer


@pytest.fixture(scope="module")
def data():
    """30 queries of 12 documents, labels 0..4 from feature 0 (replaces conftest's data in this file)."""
    rng = np.random.RandomState(0)
    qid = np.repeat(np.arange(30), 12)
    X = rng.rand(qid.size, 4)
    y = np.clip(np.round(3 * X[:, 0] + rng.rand(qid.size) - 0.5), 0, 4)
    return X, y, qid


def test_scorer_equals_metric_with_qid(routing, data):
    X, y, qid = data
    model = Ridge().fit(X, y)
    scores = model.predict(X)
    assert ndcg_scorer(5)(model, X, y, qid=qid) == ndcg(y, scores, qid, k=5)
    assert map_scorer()(model, X, y, qid=qid) == mean_average_precision(y, scores, qid)
    p_at_3 = make_ranking_scorer(precision_at_k, k=3)
    assert p_at_3(model, X, y, qid=qid) == precision_at_k(y, scores, qid, k=3)


def test_metric_kwargs_are_passed(routing, data):
    X, y, qid = data
    model = Ridge().fit(X, y)
    linear = ndcg_scorer(10, gain="linear", empty=0.0)(model, X, y, qid=qid)
    assert linear == ndcg(y, model.predict(X), qid, k=10, gain="linear", empty=0.0)


def test_greater_is_better_false_negates(routing, data):
    X, y, qid = data
    model = Ridge().fit(X, y)
    scorer = make_ranking_scorer(ndcg, greater_is_better=False, k=5)
    assert scorer(model, X, y, qid=qid) == -ndcg(y, model.predict(X), qid, k=5)


def test_scorer_requests_qid_by_default(routing):
    request = ndcg_scorer(10).get_metadata_routing()
    assert request.score.requests == {"qid": True}


def test_scorer_without_qid_explains_routing(data):
    X, y, _ = data
    model = Ridge().fit(X, y)
    with pytest.raises(ValueError, match=r"enable_metadata_routing=True"):
        ndcg_scorer(10)(model, X, y)


def test_a_scorer_keeps_qid_when_sample_weight_is_requested(routing, data):
    X, y, qid = data
    w = np.random.default_rng(0).uniform(0.5, 2.0, y.size)
    scorer = ndcg_scorer(5).set_score_request(sample_weight=True)
    assert scorer.get_metadata_routing().score.requests == {"qid": True, "sample_weight": True}
    cv = GroupKFold(3).set_split_request(groups="qid")
    result = cross_validate(Ridge().set_fit_request(sample_weight=False), X, y, cv=cv, scoring=scorer,
                            params={"qid": qid, "sample_weight": w},
                            error_score="raise", return_estimator=True)
    test = next(test for _, test in cv.split(X, y, qid))
    model = result["estimator"][0]
    assert result["test_score"][0] == ndcg(y[test], model.predict(X[test]), qid[test], k=5, sample_weight=w[test])
    assert ndcg_scorer(5).set_score_request(qid=False).get_metadata_routing().score.requests == {"qid": False}


def test_a_scorer_without_qid_under_routing_says_the_caller_routed_none(routing, data):
    X, y, _ = data
    with pytest.raises(ValueError, match="though metadata routing is on: the caller did not route qid"):
        ndcg_scorer(10)(Ridge().fit(X, y), X, y)


def test_cross_validate_without_routing_fails_loudly(data):
    X, y, qid = data
    with pytest.raises(ValueError, match="enable_metadata_routing"):
        cross_validate(Ridge(), X, y, groups=qid, cv=GroupKFold(3), scoring=ndcg_scorer(5), error_score="raise")


def test_qid_cannot_be_fixed_in_the_scorer():
    with pytest.raises(ValueError, match="routed per call"):
        make_ranking_scorer(ndcg, qid=[0, 0, 1])


def test_scorers_pickle(routing, data):
    X, y, qid = data
    model = Ridge().fit(X, y)
    scorer = pickle.loads(pickle.dumps(ndcg_scorer(5)))
    assert scorer(model, X, y, qid=qid) == ndcg(y, model.predict(X), qid, k=5)
    assert "ndcg" in repr(scorer)


def test_grid_search_with_a_pointwise_regressor(routing, data):
    X, y, qid = data
    cv = GroupKFold(3).set_split_request(groups="qid")
    search = GridSearchCV(
        HistGradientBoostingRegressor(max_iter=10, random_state=0),
        {"max_leaf_nodes": [3, 7]},
        scoring={"ndcg@5": ndcg_scorer(5), "map": map_scorer()},
        refit="ndcg@5",
        cv=cv,
    )
    search.fit(X, y, qid=qid)
    assert set(search.best_params_) == {"max_leaf_nodes"}
    for name in ("mean_test_ndcg@5", "mean_test_map"):
        values = search.cv_results_[name]
        assert values.shape == (2,) and np.all((values > 0) & (values <= 1))
    # Each fold is scored per query: recompute one fold by hand.
    train, test = next(iter(GroupKFold(3).split(X, y, qid)))
    model = HistGradientBoostingRegressor(max_iter=10, random_state=0, max_leaf_nodes=3).fit(X[train], y[train])
    expected = ndcg(y[test], model.predict(X[test]), qid[test], k=5)
    assert search.cv_results_["split0_test_ndcg@5"][0] == pytest.approx(expected)


def test_score_of_a_ranker_without_qid_under_routing_says_the_caller_routed_none(routing, data):
    from lambdamart import LambdaMARTRanker

    X, y, qid = data
    ranker = LambdaMARTRanker(n_estimators=2, random_state=0).fit(X, y, qid)
    with pytest.raises(ValueError, match="Metadata routing is on, but the caller routed no qid"):
        ranker.score(X, y)
