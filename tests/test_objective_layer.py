"""The objective layer's contract: one constructor, gradients for the queries asked for, learned state handed back.

The estimator asks ``make_objective`` for an object and then only calls ``gradients`` and ``state``;
these tests hold every objective to that contract and show that a new objective plugs in without touching the
estimator.
"""

import numpy as np
import pytest

from lambdamart import LambdaMARTRanker, load_model
from lambdamart._objectives import OBJECTIVES, Objective, TrainingQueries, make_objective
from lambdamart._objectives.base import apply_sample_weight


def _queries(seed=0, position=False, weights=False):
    rng = np.random.default_rng(seed)
    sizes = np.array([3, 1, 6, 4, 5])
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    labels = rng.integers(0, 4, offsets[-1]).astype(np.float64)
    return TrainingQueries(labels=labels, gains=2.0 ** labels - 1.0, offsets=offsets,
                           sample_weight=rng.uniform(0.5, 2.0, offsets[-1]) if weights else np.zeros(0),
                           position=rng.integers(1, 6, offsets[-1]) if position else np.zeros(0, dtype=np.int64))


def _data(n_queries=40, seed=0):
    rng = np.random.default_rng(seed)
    qid = np.repeat(np.arange(n_queries), 8)
    X = rng.normal(size=(qid.size, 5))
    y = np.clip(np.round(X[:, 0] + rng.normal(scale=0.5, size=qid.size)), 0, 3)
    position = np.tile(np.arange(1, 9), n_queries)
    return X, y, qid, position


def test_the_estimator_accepts_exactly_the_registered_objectives():
    options = LambdaMARTRanker._parameter_constraints["objective"][0].options
    assert set(OBJECTIVES) == set(options)
    assert all(cls.name == name and issubclass(cls, Objective) for name, cls in OBJECTIVES.items())
    with pytest.raises(ValueError, match="unknown objective 'nope'"):
        make_objective("nope", _queries(), LambdaMARTRanker().get_params(), np.random.RandomState(0))


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
@pytest.mark.parametrize("weights", [False, True])
def test_gradients_fill_only_the_queries_asked_for(name, weights):
    queries = _queries(weights=weights)
    objective = make_objective(name, queries, LambdaMARTRanker().get_params(), np.random.RandomState(0))
    scores = np.random.default_rng(1).normal(size=queries.labels.shape[0])
    asked = np.array([0, 2, 4], dtype=np.int64)
    grad = np.full(scores.shape, 7.0)
    hess = np.full(scores.shape, 7.0)
    objective.gradients(scores, asked, grad, hess)
    offsets = queries.offsets
    others = np.concatenate([np.arange(offsets[q], offsets[q + 1]) for q in (1, 3)])
    mine = np.setdiff1d(np.arange(scores.shape[0]), others)
    assert np.all(grad[others] == 7.0) and np.all(hess[others] == 7.0)
    assert np.all(np.isfinite(grad[mine])) and np.all(hess[mine] >= 0.0)
    assert np.any(grad[mine] != 7.0)
    assert objective.state() == {}


@pytest.mark.parametrize("name", sorted(n for n, cls in OBJECTIVES.items() if not cls.supports_position))
def test_objectives_without_position_support_say_which_have_it(name):
    with pytest.raises(ValueError, match="position .*'lambdarank'"):
        make_objective(name, _queries(position=True), LambdaMARTRanker().get_params(), np.random.RandomState(0))
    X, y, qid, position = _data()
    with pytest.raises(ValueError, match="position"):
        LambdaMARTRanker(name, n_estimators=2).fit(X, y, qid, position=position)


def test_unbiased_objective_hands_back_its_position_biases():
    queries = _queries(position=True)
    objective = make_objective("lambdarank", queries, LambdaMARTRanker().get_params(), np.random.RandomState(0))
    scores = np.zeros(queries.labels.shape[0])
    grad, hess = np.zeros_like(scores), np.zeros_like(scores)
    objective.gradients(np.random.default_rng(0).normal(size=scores.shape), np.arange(5, dtype=np.int64), grad,
                        hess)
    bias = objective.state()["position_bias"]
    assert bias.shape == (2, queries.position.max())
    assert np.all(bias[:, 0] == 1.0) and np.any(bias != 1.0)


class _SquaredHinge(Objective):
    """A pairwise squared hinge written for this test only: the estimator must run it without knowing it."""

    name = "squared_hinge"

    def gradients(self, scores, query_indices, grad, hess):
        q = self.queries
        for k in query_indices:
            start, stop = q.offsets[k], q.offsets[k + 1]
            grad[start:stop] = 0.0
            hess[start:stop] = 1e-3
            for i in range(start, stop):
                for j in range(start, stop):
                    margin = 1.0 - (scores[i] - scores[j])
                    if q.labels[i] > q.labels[j] and margin > 0.0:
                        grad[i] -= margin
                        grad[j] += margin
                        hess[i] += 1.0
                        hess[j] += 1.0
            apply_sample_weight(q.sample_weight, start, stop, grad, hess)


def test_a_new_objective_plugs_in_without_touching_the_estimator(monkeypatch):
    monkeypatch.setitem(OBJECTIVES, _SquaredHinge.name, _SquaredHinge)
    constraints = dict(LambdaMARTRanker._parameter_constraints)
    constraints["objective"] = [type(constraints["objective"][0])(set(OBJECTIVES))]
    monkeypatch.setattr(LambdaMARTRanker, "_parameter_constraints", constraints)
    X, y, qid, _ = _data()
    ranker = LambdaMARTRanker("squared_hinge", n_estimators=40, min_samples_leaf=5).fit(X, y, qid)
    baseline = LambdaMARTRanker("pointwise", n_estimators=1, learning_rate=1e-9, min_samples_leaf=5).fit(X, y, qid)
    assert ranker.score(X, y, qid) > 0.995 > baseline.score(X, y, qid)  # constant scores: ties averaged


def test_position_bias_is_saved_loaded_and_forgotten_by_a_refit(tmp_path):
    X, y, qid, position = _data()
    ranker = LambdaMARTRanker(n_estimators=5, min_samples_leaf=5).fit(X, y, qid, position=position)
    assert ranker.position_bias_.shape == (2, 8)
    path = tmp_path / "unbiased.json"
    ranker.save_model(path)
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.position_bias_, ranker.position_bias_)
    np.testing.assert_array_equal(loaded.predict(X), ranker.predict(X))

    ranker.fit(X, y, qid)  # no position: nothing of the unbiased fit may survive
    assert not hasattr(ranker, "position_bias_")
    ranker.save_model(path)
    assert not hasattr(load_model(path), "position_bias_")
    assert "\"position_bias_\"" not in path.read_text()


def test_fit_profile_times_every_stage():
    X, y, qid, _ = _data()
    ranker = LambdaMARTRanker(n_estimators=4, min_samples_leaf=5)
    ranker.fit(X, y, qid, eval_set=[(X[:80], y[:80], qid[:80])])
    profile = ranker.fit_profile_
    assert list(profile) == ["binning", "gradients", "tree_growth", "score_update", "validation", "total"]
    assert all(v >= 0.0 for v in profile.values())
    assert sum(v for k, v in profile.items() if k != "total") <= profile["total"]


@pytest.mark.parametrize("params, warns", [
    (dict(objective="ranknet"), "Pass pairs_per_document"),
    (dict(objective="frank"), "Objectives linear in the query's size"),
    (dict(objective="ranknet", pairs_per_document=3), None),
    (dict(objective="lambdarank"), None),
])
def test_an_objective_over_every_pair_warns_when_the_pairs_are_many(monkeypatch, params, warns):
    import warnings

    from lambdamart._objectives import base

    X, y, qid, _ = _data()
    monkeypatch.setattr(base, "_MANY_PAIRS", 8 * 7 // 2 * 40 - 1)  # one pair fewer than 40 queries of 8 have
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        LambdaMARTRanker(n_estimators=1, **params).fit(X, y, qid)
    messages = [str(w.message) for w in caught if "every pair" in str(w.message)]
    if warns is None:
        assert not messages
    else:
        assert len(messages) == 1 and "1,120 pairs a round" in messages[0] and warns in messages[0]
        assert caught[0].filename == __file__  # points at the fit call
    monkeypatch.setattr(base, "_MANY_PAIRS", 8 * 7 // 2 * 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LambdaMARTRanker(n_estimators=1, **params).fit(X, y, qid)
