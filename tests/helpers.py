"""Helpers shared by the test files: data builders, small fits, model comparison, row orders, a reference predict
and the command-line runner, a LocalCluster for the Dask tests, and a jitted caller for the kernels that have no
Python entry point.

Test files import them by name (``from helpers import make_data``): ``pythonpath = ["tests"]`` in pyproject.toml
puts this folder on sys.path. The fixtures built on them (``data``, ``model``, ``routing``) live in conftest.py.
"""

import contextlib

import numba
import numpy as np

from lambdamart import LambdaMARTRanker, cli

# A few small trees, one thread, a fixed seed: the parameters of most fits whose only purpose is to get a model.
FAST = dict(n_estimators=6, max_leaf_nodes=6, min_samples_leaf=3, learning_rate=0.3, n_jobs=1, random_state=0)


def called_from_a_kernel(inner):
    """A Python-callable jitted function that calls ``inner``, an ``_jit.inner_kernel`` (which has no Python entry
    point of its own), with the same arguments."""
    return numba.njit(lambda *args: inner(*args))


# ---------------------------------------------------------------- data

# How the hidden relevance of a document depends on its features (noise is added on top).
RELEVANCE = {
    "first-feature": lambda X: X[:, 0],
    "mixed": lambda X: X @ np.linspace(1.0, -0.5, X.shape[1]) + np.sin(2 * X[:, 0]),
    "square": lambda X: X[:, 0] + 0.5 * X[:, 1] ** 2,
}


def random_queries(rng, n_queries, n_features, min_docs, max_docs):
    """Query ids 0, 1, ... in contiguous blocks of ``min_docs..max_docs`` rows, and standard normal features."""
    sizes = rng.integers(min_docs, max_docs + 1, n_queries)
    qid = np.repeat(np.arange(n_queries), sizes)
    X = rng.normal(size=(qid.size, n_features))
    return X, qid


def make_data(seed=0, n_queries=20, n_features=4, min_docs=4, max_docs=16, *, relevance="first-feature", noise=0.5,
              label_quantiles=(0.5, 0.75, 0.9), decimals=None, nan_fraction=0.0):
    """(X, y, qid): graded labels 0..3 cut at quantiles of a noisy relevance of the features.

    ``relevance`` names a formula of RELEVANCE; ``decimals`` rounds X (before the labels are drawn) so that scores
    tie often; ``nan_fraction`` blanks that share of X afterwards (labels stay those of the full features).
    """
    rng = np.random.default_rng(seed)
    X, qid = random_queries(rng, n_queries, n_features, min_docs, max_docs)
    if decimals is not None:
        X = np.round(X, decimals)
    score = RELEVANCE[relevance](X) + noise * rng.normal(size=qid.size)
    y = np.digitize(score, np.quantile(score, label_quantiles)).astype(float)
    if nan_fraction:
        X[rng.random(X.shape) < nan_fraction] = np.nan
    return X, y, qid


# ---------------------------------------------------------------- models


def fit(X, y, qid=None, *, eval_set=None, group=None, **params):
    """A ranker with FAST parameters (overridden by ``params``) fitted on the data."""
    return LambdaMARTRanker(**(FAST | params)).fit(X, y, qid, eval_set=eval_set, group=group)


def assert_same_model(a, b):
    """The same model: every tree array of the two fitted rankers is equal, dtype and bits."""
    assert a._trees.keys() == b._trees.keys()
    for key in a._trees:
        assert a._trees[key].dtype == b._trees[key].dtype, key
        np.testing.assert_array_equal(a._trees[key], b._trees[key], err_msg=key)


def models_differ(a, b):
    """True when some tree array of the two fitted rankers differs (in shape or in a value)."""
    ta, tb = a._trees, b._trees
    return any(ta[k].shape != tb[k].shape or not np.array_equal(ta[k], tb[k], equal_nan=True) for k in ta)


def reference_predict(trees, X):
    """Scores of the rows of X in plain Python, one row and one tree at a time, summing leaves in tree order from
    0.0; checks every index it follows (and fails on a cycle) instead of trusting the tree arrays."""
    feature, threshold, left, right = trees["feature"], trees["threshold"], trees["left"], trees["right"]
    n_nodes = feature.shape[0]
    out = np.zeros(X.shape[0])
    for i in range(X.shape[0]):
        for start in trees["tree_starts"]:
            node, steps = int(start), 0
            while left[node] != -1:
                assert 0 <= feature[node] < X.shape[1]
                x = X[i, feature[node]]
                go_left = trees["missing_left"][node] if np.isnan(x) else x <= threshold[node]
                node = left[node] if go_left else right[node]
                steps += 1
                assert 0 <= node < n_nodes and steps < n_nodes
            out[i] += trees["value"][node]
    return out


# ---------------------------------------------------------------- row orders


def interleave(qid, seed):
    """A row order that interleaves the queries at random but keeps each query's own rows in order."""
    slots = np.random.default_rng(seed).permutation(qid)
    order = np.empty(qid.size, dtype=np.int64)
    for q in np.unique(qid):
        order[slots == q] = np.flatnonzero(qid == q)
    return order


def shuffle_blocks(qid, seed):
    """A row order with whole queries moved as blocks into a random order."""
    ids = np.random.default_rng(seed).permutation(np.unique(qid))
    return np.concatenate([np.flatnonzero(qid == q) for q in ids])


def reverse_blocks(qid):
    """A row order with whole queries moved as blocks into descending id order."""
    return np.concatenate([np.flatnonzero(qid == q) for q in np.unique(qid)[::-1]])


# ---------------------------------------------------------------- command line


def run_cli(capsys, *argv):
    """Run ``lambdamart *argv`` in this process: (exit code, stdout, stderr). No output may hold a traceback."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@contextlib.contextmanager
def local_cluster(n_workers):
    """A client of a ``distributed.LocalCluster`` of ``n_workers`` single-threaded worker processes, closed on leaving.

    Closing allows the one failure that is the CI machine's, not the code's: distributed 2024.1 gives a nanny a fixed
    5 s to stop its worker, and on a loaded 2-core machine (the oldest-versions run is niced beside the main suite) a
    worker can take longer to exit; the nanny then kills it and ``close`` raises TimeoutError although nothing is
    left running.
    """
    import distributed

    cluster = distributed.LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1,
                                       dashboard_address=":0")
    try:
        with distributed.Client(cluster) as client:
            yield client
    finally:
        try:
            cluster.close()
        except TimeoutError:
            pass
