"""Determinism: the same data and random_state give a bit-identical model across runs, thread counts, row orders
that keep each query's rows in order, and fresh processes with another hash seed; another random_state gives
another model wherever randomness is used.

Every test runs twice: on the ``serial`` paths small data take, and with small data forced down the ``parallel``
paths of large data (threaded fit and predict, thresholds from a row subsample).
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import assert_same_model, fit, interleave, make_data, models_differ, reverse_blocks, shuffle_blocks

import lambdamart._parallel
import lambdamart.ranker

CASES = {
    "default": dict(),
    "subsample": dict(subsample=0.6),
    "max_features": dict(max_features=0.5),
    "sampled": dict(subsample=0.6, max_features=0.5),
    "held-out": dict(early_stopping=True, validation_fraction=0.25, n_iter_no_change=3),
    "listmle": dict(objective="listmle"),
    "ranknet-sampled-pairs": dict(objective="ranknet", pairs_per_document=3),
    "map-unnormalised": dict(objective="lambdarank_map", pair_normalization=False, query_normalization=False),
}
# The cases whose model depends on random_state: sampled queries or features, held-out queries, ListMLE's order of
# documents with equal labels, RankNet's sampled pairs.
RANDOM_CASES = ["subsample", "max_features", "sampled", "held-out", "listmle", "ranknet-sampled-pairs"]

ROW_ORDERS = {
    "reversed-blocks": reverse_blocks,
    "shuffled-blocks": lambda qid: shuffle_blocks(qid, 8),
    "interleaved": lambda qid: interleave(qid, 8),
}


@pytest.fixture(params=["serial", "parallel"])
def paths(request, monkeypatch):
    """The number of threads to fit with; ``parallel`` also makes small data take every large-data path."""
    if request.param == "serial":
        return 1
    monkeypatch.setattr(lambdamart._parallel, "_FIT_VALUES", {True: 0, False: 0})
    monkeypatch.setattr(lambdamart._parallel, "_PARTITION_FIT_ROWS", 0)
    monkeypatch.setattr(lambdamart._parallel, "_PARTITION_NODE_ROWS", {True: 1, False: 1})
    monkeypatch.setattr(lambdamart.ranker, "_SERIAL_PREDICT_WORK", 0)
    monkeypatch.setattr(lambdamart.ranker, "_BINNING_SUBSAMPLE", 150)
    return 2


@pytest.fixture(scope="module")
def tie_data():
    """Coarse features (so documents tie in score) with whole queries of equal labels mixed in."""
    X, y, qid = make_data(6, n_queries=24, decimals=1)
    y[qid % 7 == 0] = 1.0
    return X, y, qid


@pytest.mark.parametrize("case", list(CASES))
def test_same_data_and_random_state_give_bit_identical_models_across_runs_and_n_jobs(tie_data, paths, case):
    X, y, qid = tie_data
    params = CASES[case] | dict(n_estimators=8, random_state=3)
    models = [fit(X, y, qid, **params, n_jobs=n_jobs) for n_jobs in (1, 2, -1, 1)]
    for other in models[1:]:
        assert_same_model(models[0], other)
        assert other.n_estimators_ == models[0].n_estimators_
        np.testing.assert_array_equal(other.predict(X), models[0].predict(X))
    if case in RANDOM_CASES:
        assert models_differ(models[0], fit(X, y, qid, **(params | dict(random_state=4)), n_jobs=paths))


@pytest.mark.parametrize("order", list(ROW_ORDERS))
@pytest.mark.parametrize("case", list(CASES))
def test_row_orders_that_keep_each_query_in_order_give_the_same_model(tie_data, paths, case, order):
    """Queries as blocks in any order, or interleaved row by row: the model of the rows sorted by query, and
    predictions and scores in the input order."""
    X, y, qid = tie_data
    rows = ROW_ORDERS[order](qid)
    assert not np.array_equal(rows, np.sort(rows))
    for q in np.unique(qid):
        assert np.all(np.diff(rows[qid[rows] == q]) > 0)
    params = CASES[case] | dict(n_estimators=8, random_state=3, n_jobs=paths)
    reference = fit(X, y, qid, **params)
    moved = fit(X[rows], y[rows], qid[rows], **params)
    assert_same_model(moved, reference)
    np.testing.assert_array_equal(moved.predict(X[rows]), reference.predict(X)[rows])
    np.testing.assert_array_equal(moved.train_score_, reference.train_score_)
    assert moved.score(X[rows], y[rows], qid[rows]) == reference.score(X, y, qid)


_FRESH_PROCESS_FIT = textwrap.dedent("""
    import sys
    import numpy as np
    from lambdamart import LambdaMARTRanker
    data = np.load(sys.argv[1])
    params = dict(n_estimators=8, max_leaf_nodes=6, min_samples_leaf=3, learning_rate=0.3, random_state=0,
                  subsample=0.7, max_features=0.75, n_jobs=int(sys.argv[3]))
    LambdaMARTRanker(**params).fit(data["X"], data["y"], data["qid"]).save_model(sys.argv[2])
""")


def test_a_fresh_process_with_another_hash_seed_and_n_jobs_writes_the_same_model(tmp_path, tie_data):
    X, y, qid = tie_data
    np.savez(tmp_path / "data.npz", X=X, y=y, qid=qid)
    fit(X, y, qid, subsample=0.7, max_features=0.75, n_estimators=8).save_model(tmp_path / "here.json")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    done = subprocess.run([sys.executable, "-c", _FRESH_PROCESS_FIT, str(tmp_path / "data.npz"),
                           str(tmp_path / "there.json"), "2"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    here, there = (json.loads((tmp_path / name).read_text()) for name in ("here.json", "there.json"))
    assert there["params"].pop("n_jobs") == 2 and here["params"].pop("n_jobs") == 1
    assert there == here  # every tree array and fitted attribute, to the last bit (floats are written exactly)
