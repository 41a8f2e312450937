"""DaskLambdaMARTRanker on real LocalClusters of worker processes: the same model as a single-machine fit."""

import os
import threading
import time

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")

from helpers import local_cluster  # noqa: E402

from lambdamart import LambdaMARTRanker  # noqa: E402
from lambdamart.dask import DaskLambdaMARTRanker  # noqa: E402
from lambdamart.dask import _workers as cluster_workers  # noqa: E402
from lambdamart.datasets import make_ranking_data  # noqa: E402

pytestmark = pytest.mark.slow  # cluster start-up and worker processes: seconds per test


@pytest.fixture(scope="module", params=[2, 3], ids=["2 workers", "3 workers"])
def client(request):
    with local_cluster(request.param) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    """Queries whose rows are shuffled across the whole set, so every partition holds pieces of many queries."""
    X, y, qid = make_ranking_data(90, random_state=1)
    X[np.random.default_rng(1).random(X.shape) < 0.02] = np.nan
    order = np.random.default_rng(0).permutation(y.shape[0])
    return X[order], y[order], qid[order]


# Small trees: every split is a round trip to all workers, and what is tested is that they are the same splits.
SMALL = dict(max_leaf_nodes=8, min_samples_leaf=10)


def _dask(X, y, qid, chunk=1500):
    return (da.from_array(X, chunks=(chunk, -1)), da.from_array(y, chunks=chunk), da.from_array(qid, chunks=chunk))


def assert_same_model(distributed_model, local_model, X):
    a, b = distributed_model._trees, local_model._trees
    for name in ("tree_starts", "feature", "threshold", "missing_left", "left", "right", "count"):
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    np.testing.assert_allclose(a["value"], b["value"], rtol=1e-9, atol=1e-12)
    assert distributed_model.n_estimators_ == local_model.n_estimators_
    expected = local_model.predict(X)
    # Relative to the scale of the scores: a score near 0 carries the rounding of the larger leaf values it sums.
    local_copy = distributed_model.to_local() if hasattr(distributed_model, "to_local") else distributed_model
    np.testing.assert_allclose(local_copy.predict(X), expected, rtol=1e-9,
                               atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("params", [
    dict(n_estimators=8),
    dict(n_estimators=8, subsample=0.6, max_features=0.5, random_state=3),
    dict(n_estimators=6, objective="lambdarank_map", l2_regularization=1.0, max_depth=4),
    dict(n_estimators=5, objective="ranknet", pairs_per_document=2, random_state=4),
    dict(n_estimators=5, objective="listmle", random_state=2),
    dict(n_estimators=5, objective="listnet"),
    dict(n_estimators=5, objective="pointwise"),
    dict(n_estimators=4, objective="xendcg", random_state=6),
    dict(n_estimators=4, objective="yetirank", random_state=7),
    dict(n_estimators=4, objective="lambdaloss"),
    dict(n_estimators=4, objective="frank"),
], ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_dask_arrays_give_the_local_model(client, data, params):
    X, y, qid = data
    params = {**SMALL, **params}
    model = DaskLambdaMARTRanker(client=client, **params).fit(*_dask(X, y, qid))
    assert_same_model(model, LambdaMARTRanker(**params).fit(X, y, qid), X)


def test_a_qid_list_beyond_int64_keeps_its_queries_apart(client, data):
    """numpy makes such a list float64, where ids 1 apart beyond 2**53 are equal; the queries must stay apart."""
    X, y, qid = data
    ids = [-1 if q == qid.min() else 2**63 + int(q) for q in qid]
    model = DaskLambdaMARTRanker(client=client, n_estimators=3, **SMALL).fit(X, y, ids)
    assert_same_model(model, LambdaMARTRanker(n_estimators=3, **SMALL).fit(X, y, qid), X)


def test_unbiased_lambdamart_learns_the_same_position_biases(client, data):
    X, y, qid = data
    position = np.random.default_rng(3).integers(1, 11, y.shape[0])
    model = DaskLambdaMARTRanker(client=client, n_estimators=6, **SMALL).fit(
        *_dask(X, y, qid), position=da.from_array(position, chunks=1500))
    local = LambdaMARTRanker(n_estimators=6, **SMALL).fit(X, y, qid, position=position)
    assert_same_model(model, local, X)
    np.testing.assert_allclose(model.position_bias_, local.position_bias_, rtol=1e-9)
    np.testing.assert_array_equal(model.to_local().position_bias_, model.position_bias_)


def test_dataframe_with_queries_scattered_over_partitions(client, data):
    X, y, qid = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    ddf = dd.from_pandas(frame, npartitions=5)
    weights = np.random.default_rng(5).uniform(0.5, 2.0, y.shape[0])
    chunks = tuple(int(n) for n in ddf.map_partitions(len).compute())
    model = DaskLambdaMARTRanker(client=client, n_estimators=6, random_state=0, **SMALL).fit(
        ddf, da.from_array(y, chunks=chunks), da.from_array(qid, chunks=chunks),
        sample_weight=da.from_array(weights, chunks=chunks))
    local = LambdaMARTRanker(n_estimators=6, random_state=0, **SMALL).fit(frame, y, qid, sample_weight=weights)
    assert_same_model(model, local, frame)
    assert list(model.feature_names_in_) == list(frame.columns)
    scores = model.predict(ddf)
    assert isinstance(scores, da.Array)
    expected = local.predict(frame)
    np.testing.assert_allclose(scores.compute(), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_early_stopping_stops_at_the_same_round(client, data):
    X, y, qid = data
    X_v, y_v, qid_v = make_ranking_data(30, random_state=7)
    params = dict(n_estimators=60, learning_rate=0.5, n_iter_no_change=3, random_state=0, **SMALL)
    model = DaskLambdaMARTRanker(client=client, **params).fit(*_dask(X, y, qid),
                                                              eval_set=[_dask(X_v, y_v, qid_v, chunk=700)])
    local = LambdaMARTRanker(**params).fit(X, y, qid, eval_set=[(X_v, y_v, qid_v)])
    assert local.n_iter_ < 60, "the case should stop early"
    assert (model.n_iter_, model.best_iteration_) == (local.n_iter_, local.best_iteration_)
    np.testing.assert_allclose(model.validation_score_, local.validation_score_, rtol=1e-12)
    np.testing.assert_allclose(model.train_score_, local.train_score_, rtol=1e-12)
    assert_same_model(model, local, X)
    # Held-out queries (early_stopping=True, no eval_set) are the ones a local fit holds out.
    params = dict(n_estimators=40, learning_rate=0.5, n_iter_no_change=3, early_stopping=True, random_state=1,
                  **SMALL)
    model = DaskLambdaMARTRanker(client=client, **params).fit(*_dask(X, y, qid))
    local = LambdaMARTRanker(**params).fit(X, y, qid)
    assert model.best_iteration_ == local.best_iteration_
    assert_same_model(model, local, X)


def test_predict_is_lazy_for_dask_and_numpy_for_numpy(client, data):
    X, y, qid = data
    model = DaskLambdaMARTRanker(client=client, n_estimators=3, **SMALL).fit(*_dask(X, y, qid))
    lazy = model.predict(da.from_array(X, chunks=(1000, -1)))
    assert isinstance(lazy, da.Array) and lazy.shape == (X.shape[0],)
    eager = model.predict(X)
    assert isinstance(eager, np.ndarray)
    np.testing.assert_array_equal(lazy.compute(), eager)
    with pytest.raises(ValueError, match=r"X must be 2-D .*X.reshape\(1, -1\)"):
        model.predict(da.from_array(X[0], chunks=2))
    local = model.to_local()
    assert type(local) is LambdaMARTRanker and "client" not in local.get_params()
    assert model.score(da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000),
                       da.from_array(qid, chunks=1000)) == local.score(X, y, qid)
    profile = model.fit_profile_
    # One call per round from the client; the histograms go between the workers, two exchanges per split or more.
    assert 3 <= profile["round_trips"] <= 3 + 10 and profile["exchanges"] >= 3 * 2 and profile["histogram_bytes"] > 0
    assert profile["regroup"] + profile["binning"] + profile["boosting"] <= profile["total"]


def test_bad_input_fails_before_training(client, data, monkeypatch):
    # At once: an input error is not a lost worker, so the fit does not wait for the scheduler to report one.
    def without_waiting(client, workers, stage, error=None, wait=False):
        assert not wait, f"the fit waited for a lost worker after {error!r}"

    monkeypatch.setattr("lambdamart.dask._raise_if_lost", without_waiting)
    X, y, qid = data
    Xd, yd, qd = _dask(X, y, qid)
    with pytest.raises(ValueError, match="do not line up"):
        DaskLambdaMARTRanker(client=client).fit(Xd, da.from_array(y, chunks=1000), qd)
    with pytest.raises(ValueError, match="needs qid"):
        DaskLambdaMARTRanker(client=client).fit(Xd, yd)
    bad = y.copy()
    bad[5] = -1.0
    with pytest.raises(ValueError, match="negative"):
        DaskLambdaMARTRanker(client=client, n_estimators=2).fit(Xd, da.from_array(bad, chunks=1500), qd)
    with pytest.raises(ValueError, match="learning_rate"):
        DaskLambdaMARTRanker(client=client, learning_rate=-1.0).fit(Xd, yd, qd)
    # The checks a local fit makes on weights and query ids (an infinite weight made every prediction NaN; a NaN
    # query id became a query of its own) and on X's type and shape (numba's typing errors, an IndexError).
    weights = {"NaN": np.r_[np.nan, np.ones(y.size - 1)], "inf": np.r_[np.inf, np.ones(y.size - 1)],
               "Negative": -np.ones(y.size), "weights up to 1e\\+200": np.full(y.size, 1e200)}
    for message, weight in weights.items():
        with pytest.raises(ValueError, match=message):
            DaskLambdaMARTRanker(client=client, n_estimators=2).fit(Xd, yd, qd, sample_weight=da.from_array(
                weight, chunks=Xd.chunks[0]))
    nan_qid = qid.astype(float)
    nan_qid[7] = np.nan
    with pytest.raises(ValueError, match="qid contains NaN"):
        DaskLambdaMARTRanker(client=client, n_estimators=2).fit(Xd, yd, da.from_array(nan_qid, chunks=Xd.chunks[0]))
    with pytest.raises(ValueError, match="X must hold numbers, got dtype object"):
        DaskLambdaMARTRanker(client=client, n_estimators=2).fit(Xd.astype(object), yd, qd)
    with pytest.raises(ValueError, match=r"X has shape \(\d+, 0\); fit needs at least one row and one feature"):
        DaskLambdaMARTRanker(client=client, n_estimators=2).fit(Xd[:, :0], yd, qd)
    unknown = yd[yd >= 0]  # a filter leaves the chunk sizes unknown
    with pytest.raises(ValueError, match=r"y has unknown chunk sizes; call y.compute_chunk_sizes\(\) first"):
        DaskLambdaMARTRanker(client=client, n_estimators=2).fit(Xd, unknown, qd)
    # Labels a gain table can't take were refused by the workers' set-up, which waited for a lost worker first.
    table = [0, 1, 3, 7, 15]
    for label in (1.5, 9.0):
        bad = y.copy()
        bad[5] = label
        with pytest.raises(ValueError, match=rf"^with a gain table of 5 entries.*y holds {label:g}\. Extend"):
            DaskLambdaMARTRanker(client=client, n_estimators=2, gain=table).fit(
                Xd, da.from_array(bad, chunks=1500), qd)
        with pytest.raises(ValueError, match=rf"eval_set\[0\] y holds {label:g}"):
            DaskLambdaMARTRanker(client=client, n_estimators=2, gain=table).fit(
                Xd, yd, qd, eval_set=[(Xd, da.from_array(bad, chunks=1500), qd)])
    with pytest.raises(ValueError, match="at least one non-zero number"):  # all rows, not a chunk (see below)
        DaskLambdaMARTRanker(client=client, n_estimators=2).fit(Xd, yd, qd, sample_weight=da.zeros_like(yd))
    bad_position = np.ones(y.size)
    bad_position[3] = 0.5
    with pytest.raises(ValueError, match="position must hold whole displayed ranks"):
        DaskLambdaMARTRanker(client=client, n_estimators=2).fit(Xd, yd, qd, position=da.from_array(
            bad_position, chunks=1500))


def test_weights_are_checked_per_row_and_over_all_chunks(client):
    # A chunk of zero weights, or of no rows, is valid input: a local fit asks only that some row of all weighs.
    X, y, qid = make_ranking_data(20, random_state=1)
    weights = np.random.default_rng(2).uniform(0.5, 2.0, y.size)
    weights[:500] = 0.0
    chunks = (500, 0, y.size - 500)
    params = dict(n_estimators=3, random_state=0, **SMALL)
    model = DaskLambdaMARTRanker(client=client, **params).fit(
        da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=(chunks,)), da.from_array(qid, chunks=(chunks,)),
        sample_weight=da.from_array(weights, chunks=(chunks,)))
    assert_same_model(model, LambdaMARTRanker(**params).fit(X, y, qid, sample_weight=weights), X)


def test_unbiased_lambdamart_with_a_worker_without_training_rows(client):
    # Query 3 holds the deepest positions and all the rows of its worker; early stopping holds it out, so that
    # worker trains on no rows and the position biases go only as deep as the training rows' (as a local fit).
    random_state = next(r for r in range(100) if np.random.RandomState(r).choice(4, 1, replace=False)[0] == 3)
    rng = np.random.default_rng(0)
    sizes = [30, 30, 30, 600]
    qid = np.repeat(np.arange(4), sizes)
    X, y = rng.normal(size=(qid.size, 5)), rng.integers(0, 3, qid.size).astype(float)
    position = np.concatenate([np.arange(1, n + 1) for n in sizes])
    position = np.minimum(position, np.where(qid == 3, 40, 20))
    params = dict(n_estimators=3, max_leaf_nodes=4, min_samples_leaf=5, random_state=random_state,
                  early_stopping=True, validation_fraction=0.25)
    model = DaskLambdaMARTRanker(client=client, **params).fit(*_dask(X, y, qid, chunk=200),
                                                              position=da.from_array(position, chunks=200))
    local = LambdaMARTRanker(**params).fit(X, y, qid, position=position)
    assert local.position_bias_.shape == (2, 20)
    assert model.position_bias_.shape == local.position_bias_.shape
    np.testing.assert_allclose(model.position_bias_, local.position_bias_, rtol=1e-9)
    assert_same_model(model, local, X)
    # One query, in two chunks: the worker it does not go to has no rows at all.
    qid, X, y = qid[:200] * 0, X[:200], (y[:200] > 0).astype(float)
    position = np.minimum(np.arange(1, 201), 20)
    params = dict(n_estimators=3, max_leaf_nodes=4, min_samples_leaf=5, random_state=0)
    model = DaskLambdaMARTRanker(client=client, **params).fit(*_dask(X, y, qid, chunk=100),
                                                              position=da.from_array(position, chunks=100))
    local = LambdaMARTRanker(**params).fit(X, y, qid, position=position)
    np.testing.assert_allclose(model.position_bias_, local.position_bias_, rtol=1e-9)
    assert_same_model(model, local, X)


def test_feature_names_and_dtypes_as_a_local_fit(client, data):
    X, y, qid = data
    X, y, qid = X[:1500], y[:1500], qid[:1500]
    params = dict(n_estimators=2, random_state=0, **SMALL)
    columns = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=columns)
    model = DaskLambdaMARTRanker(client=client, **params).fit(frame, y, qid)
    assert list(model.feature_names_in_) == columns
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(frame[columns[::-1]])  # was scored as if in fit order
    with pytest.raises(ValueError, match=r"eval_set\[0\] X has columns .* but X has"):
        DaskLambdaMARTRanker(client=client, **params).fit(frame, y, qid, eval_set=[(frame[columns[::-1]], y, qid)])
    # Columns that are not strings name no features, in a local fit and a Dask one alike.
    numbered = dd.from_pandas(pd.DataFrame(X), npartitions=2)
    chunks = tuple(int(n) for n in numbered.map_partitions(len).compute())
    model = DaskLambdaMARTRanker(client=client, **params).fit(
        numbered, da.from_array(y, chunks=chunks), da.from_array(qid, chunks=chunks))
    assert not hasattr(model, "feature_names_in_")
    assert not hasattr(LambdaMARTRanker(**params).fit(pd.DataFrame(X), y, qid), "feature_names_in_")
    # float16 is converted, as a local fit converts it (numba's kernels raised NotImplementedError).
    half = X.astype(np.float16)
    model = DaskLambdaMARTRanker(client=client, **params).fit(*_dask(half, y, qid, chunk=700))
    assert_same_model(model, LambdaMARTRanker(**params).fit(half, y, qid), half)


def test_an_abandoned_fit_leaves_nothing_on_the_workers(client, data, monkeypatch):
    # A second Ctrl-C (or any error) mid-fit left every worker's mailbox for the fit, and the actors alive while the
    # traceback held them.
    def left_behind(dask_worker):
        from lambdamart import dask as on_worker

        return len(on_worker._MAILBOXES), sum(type(a).__name__ == "_Shard" for a in dask_worker.state.actors.values())

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    X, y, qid = data
    before = client.run(left_behind)
    monkeypatch.setattr(DaskLambdaMARTRanker, "_boost_on", interrupted)
    with pytest.raises(KeyboardInterrupt):
        DaskLambdaMARTRanker(client=client, n_estimators=2, **SMALL).fit(*_dask(X, y, qid))
    def cleaned_up():
        # No more than before: an earlier test's actors may go meanwhile, when their last reference does.
        after = client.run(left_behind)
        return after.keys() == before.keys() and all(
            a <= b for w in after for a, b in zip(after[w], before[w]))

    deadline = time.monotonic() + 10  # the workers release the actors when the scheduler tells them
    while not cleaned_up() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cleaned_up(), (before, client.run(left_behind))


def _fit_killing_workers(data, params, kill_after_rounds, capsys, fit_kwargs=None):
    """Fit on a LocalCluster of 3 worker processes, killing (``os._exit``) one of the fit's first workers after
    each of the rounds in ``kill_after_rounds``; the model, the kills' rounds and the fit's profile."""
    X, y, qid = data
    with local_cluster(3) as client:
        first_workers = sorted(cluster_workers(client))
        model = DaskLambdaMARTRanker(client=client, verbose=1, **params)
        outcome = {}

        def fit():
            try:
                model.fit(*_dask(X, y, qid), **(fit_kwargs or {}))
            except Exception as error:  # the test inspects it below
                outcome["error"] = error

        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        deadline = time.monotonic() + 300
        printed, killed = "", []
        for victim, after in zip(first_workers, kill_after_rounds):
            while f"[{after}/" not in printed:  # training rounds are under way
                assert thread.is_alive() and time.monotonic() < deadline, (outcome, printed)
                time.sleep(0.01)
                printed += capsys.readouterr().out
            try:
                client.run(os._exit, 1, workers=[victim])
            except Exception:  # the worker died before it could answer, as it should
                pass
            killed.append(victim)
        thread.join(timeout=300)
        assert not thread.is_alive(), "the fit hangs after losing a worker"
        # The nannies restart the killed workers. Closing the cluster while a restarted one is still starting up
        # (slow on a loaded 2-core CI machine) can outlast the 5 s distributed 2024.1 gives a nanny to stop it.
        client.wait_for_workers(3, timeout=120)
    assert "error" not in outcome, repr(outcome.get("error"))
    return model, printed + capsys.readouterr().out


@pytest.mark.parametrize("kills", [[3], [3, 12]], ids=["one of 3 workers lost", "two of 3 lost"])
def test_a_fit_survives_lost_workers_with_the_fault_free_model(data, capsys, kills):
    X, y, qid = data
    X_v, y_v, qid_v = make_ranking_data(30, random_state=7)
    params = dict(n_estimators=40, learning_rate=0.05, subsample=0.7, max_features=0.6, random_state=5,
                  n_iter_no_change=25, **SMALL)
    model, printed = _fit_killing_workers(data, params, kills, capsys,
                                          dict(eval_set=[_dask(X_v, y_v, qid_v, chunk=700)]))
    assert model.fit_profile_["recoveries"] == len(kills), printed
    assert printed.count("Going on with the workers left") == len(kills)
    local = LambdaMARTRanker(**params).fit(X, y, qid, eval_set=[(X_v, y_v, qid_v)])
    assert (model.n_iter_, model.best_iteration_) == (local.n_iter_, local.best_iteration_)
    assert_same_model(model, local, X)


def test_a_fit_with_every_worker_alive_reports_none_lost(data, capsys):
    # The client refreshes its cached view of the scheduler every 5 ms here (2 s by default), in a form that lists
    # no workers on recent distributed: a fit that judged its workers by that view found live ones lost (a needless
    # redeployment, or "every worker of the cluster is lost") in about 1 check of 13.
    X, y, qid = data
    params = dict(n_estimators=15, random_state=3, **SMALL)
    with dask.config.set({"distributed.client.scheduler-info-interval": "5ms"}), local_cluster(2) as client:
        client.wait_for_workers(2)
        assert all(len(cluster_workers(client)) == 2 for _ in range(300))  # the fit's view of its workers
        model = DaskLambdaMARTRanker(client=client, verbose=1, **params).fit(*_dask(X, y, qid))
    assert model.fit_profile_["recoveries"] == 0, capsys.readouterr().out
    assert_same_model(model, LambdaMARTRanker(**params).fit(X, y, qid), X)


def test_unbiased_lambdamart_survives_a_lost_worker(data, capsys):
    X, y, qid = data
    position = pd.Series(qid).groupby(qid).cumcount().to_numpy() + 1  # displayed in input order
    clicks = (y >= 2).astype(float)
    params = dict(n_estimators=40, random_state=1, **SMALL)
    model, printed = _fit_killing_workers((X, clicks, qid), params, [4], capsys,
                                          dict(position=da.from_array(position, chunks=1500)))
    assert model.fit_profile_["recoveries"] == 1, printed
    local = LambdaMARTRanker(**params).fit(X, clicks, qid, position=position)
    np.testing.assert_allclose(model.position_bias_, local.position_bias_, rtol=1e-9)
    assert_same_model(model, local, X)


def test_dask_checkpoints_resume_to_the_uninterrupted_model(client, data, tmp_path):
    X, y, qid = data
    params = dict(n_estimators=12, subsample=0.7, random_state=2, checkpoint_dir=tmp_path, checkpoint_every=4,
                  **SMALL)
    DaskLambdaMARTRanker(client=client, **{**params, "n_estimators": 8}).fit(*_dask(X, y, qid))
    resumed = DaskLambdaMARTRanker(client=client, warm_start=True, **params).fit(*_dask(X, y, qid))
    assert resumed.n_iter_ == 12
    local = LambdaMARTRanker(**{**params, "checkpoint_dir": None}).fit(X, y, qid)
    assert_same_model(resumed, local, X)
    # A local fit continues a Dask fit's checkpoint too: the state is the same.
    more = LambdaMARTRanker(warm_start=True, **{**params, "n_estimators": 16}).fit(X, y, qid)
    assert_same_model(more, LambdaMARTRanker(**{**params, "n_estimators": 16, "checkpoint_dir": None}).fit(
        X, y, qid), X)


def test_a_finished_dask_checkpoint_checks_the_data_and_needs_qid_to_score(client, data, tmp_path):
    X, y, qid = data
    params = dict(n_estimators=3, random_state=0, checkpoint_dir=tmp_path, **SMALL)
    DaskLambdaMARTRanker(client=client, **params).fit(*_dask(X, y, qid))
    again = DaskLambdaMARTRanker(client=client, warm_start=True, **params).fit(*_dask(X, y, qid))
    with pytest.raises(ValueError, match="fitted on several queries"):
        again.score(X, y)
    half = qid < np.median(np.unique(qid))
    with pytest.raises(ValueError, match=r"training rows of \d+ features; got \d+ rows"):
        DaskLambdaMARTRanker(client=client, warm_start=True, **params).fit(*_dask(X[half], y[half], qid[half]))


def test_dask_continuations_check_the_data_by_their_digest(client, data, tmp_path):
    """Other data of the same shape do not continue a fit, as locally; the digest is the same whatever the chunks
    and workers, and the same as a local fit's, so a Dask fit continues a local checkpoint and the other way."""
    X, y, qid = data
    params = dict(n_estimators=2, random_state=0, checkpoint_dir=tmp_path, **SMALL)
    local = LambdaMARTRanker(**params).fit(X, y, qid)
    digest = local._boosting_state.fingerprint
    assert digest.startswith("queries:")
    model = DaskLambdaMARTRanker(client=client, warm_start=True, **{**params, "n_estimators": 3}).fit(
        *_dask(X, y, qid, chunk=700))
    assert model._boosting_state.fingerprint == digest
    swapped = y.copy()
    swapped[qid == qid[0]] = swapped[qid == qid[0]][::-1]  # one query's labels in another order
    assert not np.array_equal(swapped, y)
    with pytest.raises(ValueError, match="the data differ"):
        DaskLambdaMARTRanker(client=client, warm_start=True, **{**params, "n_estimators": 4}).fit(
            *_dask(X, swapped, qid))
    more = LambdaMARTRanker(warm_start=True, **{**params, "n_estimators": 4}).fit(X, y, qid)
    assert more._boosting_state.fingerprint == digest and more.n_estimators_ == 4


def test_dask_init_model_gives_the_local_model(client, data):
    X, y, qid = data
    first = LambdaMARTRanker(n_estimators=4, random_state=0, **SMALL).fit(X, y, qid)
    model = DaskLambdaMARTRanker(client=client, n_estimators=5, **SMALL).fit(*_dask(X, y, qid), init_model=first)
    local = LambdaMARTRanker(n_estimators=5, **SMALL).fit(X, y, qid, init_model=first)
    assert model.n_estimators_ == 9
    assert_same_model(model, local, X)


def test_a_lost_scheduler_ends_the_fit_and_its_checkpoints_continue_it(data, tmp_path):
    """A scheduler process killed mid-fit: a clear error; the checkpoints then finish the fit on a new cluster."""
    import signal
    import socket
    import subprocess
    import sys

    from lambdamart.exceptions import SchedulerLostError

    X, y, qid = data
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--dashboard-address", ":0"], **quiet)
    workers = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                 "--dashboard-address", ":0", "--death-timeout", "5"], **quiet) for _ in range(2)]
    params = dict(n_estimators=300, learning_rate=0.01, subsample=0.8, random_state=0, checkpoint_dir=tmp_path,
                  checkpoint_every=5, **SMALL)
    outcome = {}
    try:
        client = distributed.Client(address, timeout="5s")
        client.wait_for_workers(2, timeout=60)
        model = DaskLambdaMARTRanker(client=client, **params)

        def fit():
            try:
                model.fit(*_dask(X, y, qid))
            except Exception as error:  # the test inspects it below
                outcome["error"] = error

        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("round-*.npz"))) < 2:  # ten rounds done
            assert thread.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.05)
        scheduler.send_signal(signal.SIGKILL)
        thread.join(timeout=120)
        assert not thread.is_alive(), "the fit hangs after losing its scheduler"
        client.close()
    finally:
        for process in [scheduler, *workers]:
            process.kill()
            process.wait()
    error = outcome.get("error")
    assert isinstance(error, SchedulerLostError), repr(error)
    assert "warm_start=True" in str(error) and not hasattr(model, "_trees")
    checkpointed = max(int(p.name[6:12]) for p in tmp_path.glob("round-*.npz"))
    assert 10 <= checkpointed < 300, checkpointed
    with local_cluster(2) as client:
        resumed = DaskLambdaMARTRanker(client=client, warm_start=True, **params).fit(*_dask(X, y, qid))
    local = LambdaMARTRanker(**{**params, "checkpoint_dir": None}).fit(X, y, qid)
    assert_same_model(resumed, local, X)
