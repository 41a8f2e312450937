"""warm_start: a second fit with a larger n_estimators adds rounds, and equals one fit of them all, bit for bit."""

import pickle

import numpy as np
import pytest
from helpers import assert_same_model

from lambdamart import LambdaMARTRanker, load_model
from lambdamart.datasets import make_ranking_data


@pytest.fixture(scope="module")
def data():
    return make_ranking_data(60, random_state=0)


POSITION = "position"


@pytest.mark.parametrize("params", [
    dict(subsample=0.7, max_features=0.6, random_state=3),
    dict(objective="listmle", random_state=1),
    dict(objective="ranknet", pairs_per_document=2, random_state=2),
    dict(objective="lambdarank_map", l2_regularization=1.0, random_state=0),
    dict(random_state=4, position=POSITION),  # Unbiased LambdaMART: the position biases carry over
    dict(early_stopping=True, n_iter_no_change=1000, random_state=5),  # the held-out queries and the record too
], ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_30_then_30_more_rounds_equal_60_rounds(data, params):
    X, y, qid = data
    params = dict(params)
    fit_params = {}
    if params.pop("position", None):
        fit_params["position"] = np.tile(np.arange(1, 11), y.shape[0] // 10 + 1)[:y.shape[0]]
    once = LambdaMARTRanker(n_estimators=60, **params).fit(X, y, qid, **fit_params)
    warm = LambdaMARTRanker(n_estimators=30, warm_start=True, **params).fit(X, y, qid, **fit_params)
    warm.set_params(n_estimators=60).fit(X, y, qid, **fit_params)
    assert_same_model(warm, once)
    np.testing.assert_array_equal(warm.predict(X), once.predict(X))
    for name in ("n_iter_", "n_estimators_", "best_iteration_"):
        assert getattr(warm, name) == getattr(once, name), name
    for name in ("train_score_", "validation_score_", "position_bias_"):
        if hasattr(once, name):
            np.testing.assert_array_equal(getattr(warm, name), getattr(once, name), err_msg=name)


def test_a_pickled_ranker_continues_and_a_random_state_instance_is_replayed(data):
    X, y, qid = data
    once = LambdaMARTRanker(n_estimators=20, subsample=0.5, random_state=np.random.RandomState(7)).fit(X, y, qid)
    shared = np.random.RandomState(7)  # consumed by the first fit and by anything else in between
    warm = LambdaMARTRanker(n_estimators=10, subsample=0.5, warm_start=True, random_state=shared).fit(X, y, qid)
    shared.random_sample(5)
    warm = pickle.loads(pickle.dumps(warm))
    warm.set_params(n_estimators=20).fit(X, y, qid)
    assert_same_model(warm, once)


def test_misuse_is_refused_with_what_to_do(tmp_path, data):
    X, y, qid = data
    warm = LambdaMARTRanker(n_estimators=10, warm_start=True, random_state=0).fit(X, y, qid)
    trees = warm._trees
    assert warm.fit(X, y, qid)._trees is trees  # as many rounds as asked for: nothing to do
    with pytest.raises(ValueError, match="at least the 10 rounds"):
        warm.set_params(n_estimators=5).fit(X, y, qid)
    rows = qid < np.unique(qid)[30]
    with pytest.raises(ValueError, match="same data.*warm_start=False"):
        warm.set_params(n_estimators=20).fit(X[rows], y[rows], qid[rows])
    warm.save_model(tmp_path / "model.json")
    loaded = load_model(tmp_path / "model.json").set_params(warm_start=True, n_estimators=20)
    with pytest.raises(ValueError, match="model file.*warm_start=False"):
        loaded.fit(X, y, qid)
    # Other parameters or other data of the same shape: refused too, as a checkpoint's continuation refuses them
    # (the data are known to differ when the fit continued had warm_start=True: it kept a digest of them).
    continued = LambdaMARTRanker(n_estimators=10, warm_start=True, random_state=0).fit(X, y, qid)
    with pytest.raises(ValueError, match=r"other parameters \(max_bins=255 there, 3 here"):
        continued.set_params(n_estimators=20, max_bins=3).fit(X, y, qid)
    with pytest.raises(ValueError, match="the data differ.*warm_start=False"):
        continued.set_params(n_estimators=20, max_bins=255).fit(X, y[::-1], qid)
    # Without warm_start, a fitted ranker fits afresh, as always.
    fresh = LambdaMARTRanker(n_estimators=20, random_state=0).fit(X, y, qid)
    assert_same_model(warm.set_params(warm_start=False).fit(X, y, qid), fresh)


def test_a_data_digest_written_before_0_2_is_checked_the_old_way(data, monkeypatch):
    """Fits before 0.2 kept one hash of the whole arrays (no "queries:" prefix): a continuation of such a state
    computes that hash of its data and compares it, so old states still refuse other data."""
    import dataclasses

    import lambdamart.ranker as ranker_module

    X, y, qid = data
    first = LambdaMARTRanker(n_estimators=3, warm_start=True, random_state=0).fit(X, y, qid)
    assert first._boosting_state.fingerprint.startswith("queries:")
    old_way, check = [], ranker_module.check_same_data

    def check_recording_the_old_digest(recorded, digest, legacy=None):
        old_way.append(legacy())
        return check(recorded, digest, legacy)

    with monkeypatch.context() as patched:
        patched.setattr(ranker_module, "check_same_data", check_recording_the_old_digest)
        LambdaMARTRanker(n_estimators=3, warm_start=True, random_state=0).fit(X, y, qid).set_params(
            n_estimators=4).fit(X, y, qid)
    legacy = old_way[0]
    assert len(legacy) == 32 and not legacy.startswith("queries:")
    state = first._boosting_state
    first._boosting_state = dataclasses.replace(state, fingerprint=legacy)
    assert first.set_params(n_estimators=4).fit(X, y, qid).n_estimators_ == 4  # the same data: it continues
    first._boosting_state = dataclasses.replace(state, fingerprint=legacy)
    with pytest.raises(ValueError, match="the data differ"):
        first.set_params(n_estimators=4).fit(X, y[::-1], qid)


def test_a_refused_continuation_leaves_the_model_as_it_was(data):
    X, y, qid = data
    position = np.tile(np.arange(1, 11), X.shape[0] // 10 + 1)[:X.shape[0]]
    warm = LambdaMARTRanker(n_estimators=5, warm_start=True, random_state=0).fit(X, y, qid, position=position)
    before = {name: getattr(warm, name) for name in ("n_features_in_", "position_bias_", "n_estimators_")}
    scores = warm.predict(X)
    narrow = np.ascontiguousarray(X[:, :3])
    with pytest.raises(ValueError, match="same data"):
        warm.set_params(n_estimators=10).fit(narrow, y, qid, position=position)
    assert {name: getattr(warm, name) for name in before} == before
    np.testing.assert_array_equal(warm.predict(X), scores)
    with pytest.raises(ValueError, match="expecting 136 features"):
        warm.predict(narrow)


def test_continuing_with_renamed_columns_is_refused(data):
    pd = pytest.importorskip("pandas")
    X, y, qid = data
    frame = pd.DataFrame(X[:, :5], columns=list("abcde"))
    warm = LambdaMARTRanker(n_estimators=3, warm_start=True, random_state=0).fit(frame, y, qid)
    with pytest.raises(ValueError, match=r"features named \['a', 'b'.*differ from X's \['v', 'w'"):
        warm.set_params(n_estimators=6).fit(frame.set_axis(list("vwxyz"), axis=1), y, qid)
    assert list(warm.feature_names_in_) == list("abcde")


def test_a_recorded_continuation_of_an_unrecorded_fit_marks_the_missing_rounds(data):
    X, y, qid = data
    warm = LambdaMARTRanker(n_estimators=4, warm_start=True, random_state=0).fit(X, y, qid)
    assert warm.train_score_.shape == (0,)
    warm.set_params(n_estimators=6, verbose=100).fit(X, y, qid)
    assert warm.n_iter_ == 6 and warm.train_score_.shape == (6,)
    assert np.isnan(warm.train_score_[:4]).all() and np.isfinite(warm.train_score_[4:]).all()
    # And the other way round: rounds a continuation did not record are NaN at the end.
    warm.set_params(n_estimators=8, verbose=0).fit(X, y, qid)
    assert warm.train_score_.shape == (8,) and np.isnan(warm.train_score_[6:]).all()
