"""lambdamart on a Dask cluster: reading LETOR files on the workers, and searches through joblib's Dask backend.

Everything runs on one real ``distributed.LocalCluster`` of two worker processes (module scope), so the files are
opened, and the candidates fitted, in other processes than the test's.
"""

import re

import numpy as np
import pytest

pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import joblib  # noqa: E402
import sklearn  # noqa: E402
from helpers import local_cluster  # noqa: E402
from sklearn.datasets import dump_svmlight_file  # noqa: E402
from sklearn.model_selection import GridSearchCV, GroupKFold, RandomizedSearchCV  # noqa: E402

from lambdamart import LambdaMARTRanker  # noqa: E402
from lambdamart.dask import _workers as cluster_workers  # noqa: E402
from lambdamart.dask import read_letor  # noqa: E402
from lambdamart.datasets import load_letor, make_ranking_data  # noqa: E402
from lambdamart.scoring import ndcg_scorer  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """A client of a LocalCluster with two single-threaded worker processes, closed after the module."""
    with local_cluster(2) as client:
        yield client


# ----------------------------------------------------------------------------------------------------------------
# read_letor: LETOR/SVMlight files read into dask arrays on the workers
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def letor_files(tmp_path_factory):
    """Three LETOR files (qid: fields) of 12, 9 and 12 columns, and the arrays written to them.

    The middle file's last three columns are all zero, so SVMlight lists none of them and that file alone is
    9 columns wide. Query ids are written as 7·q + 3 (kept as written, not renumbered).
    """
    folder = tmp_path_factory.mktemp("letor")
    X, y, qid = make_ranking_data(30, n_features=12, mean_docs_per_query=15, missing_rate=0.0, random_state=0)
    X = np.round(X, 3).astype(np.float32)
    qid = 7 * qid + 3
    parts = []
    for i, rows in enumerate([qid < 73, (qid >= 73) & (qid < 143), qid >= 143]):
        X_i = X[rows].copy()
        if i == 1:
            X_i[:, 9:] = 0
        path = folder / f"part{i}.txt"
        dump_svmlight_file(X_i, y[rows], str(path), query_id=qid[rows])
        parts.append((path, X_i, y[rows], qid[rows]))
    return folder, parts


def _compute(client, *arrays):
    """The arrays computed on the cluster, with the tasks that ran and their workers."""
    with distributed.get_task_stream(client) as stream:
        values = client.compute(list(arrays), sync=True)
    return values, stream.data


def _check_blocks(X, y, qid):
    assert X.chunks[0] == y.chunks[0] == qid.chunks[0]
    assert len(X.chunks[1]) == 1
    assert not any(np.isnan(c) for c in X.chunks[0])


def test_read_letor_one_file_round_trip_on_the_workers(client, letor_files):
    _, parts = letor_files
    path = parts[0][0]
    with distributed.get_task_stream(client) as scan:
        X, y, qid = read_letor(path)
    _check_blocks(X, y, qid)
    assert (X.dtype, y.dtype, qid.dtype) == (np.float32, np.float64, np.int64)
    (X_c, y_c, qid_c), tasks = _compute(client, X, y, qid)
    X_l, y_l, qid_l = load_letor(path)
    assert X.shape == X_l.shape
    np.testing.assert_array_equal(X_c, X_l)
    np.testing.assert_array_equal(y_c, y_l)
    np.testing.assert_array_equal(qid_c, qid_l)
    np.testing.assert_array_equal(qid_c, parts[0][3])  # the ids as written
    # The quick pass (when read_letor was called) and the parsing (when computed) were tasks on the cluster's
    # workers, not work in this process.
    for stream, step in [(scan.data, "scan"), (tasks, "file")]:
        ran = [t["worker"] for t in stream if str(t["key"]).startswith(f"read_letor-{step}-")]
        assert len(ran) == 1 and set(ran) <= set(cluster_workers(client)), (step, [t["key"] for t in stream])

    X64, _, _ = read_letor(str(path), dtype=np.float64)
    assert X64.dtype == np.float64
    np.testing.assert_array_equal(X64.compute(), load_letor(path, dtype=np.float64)[0])


@pytest.mark.parametrize("how", ["list", "glob", "glob in a list"])
@pytest.mark.parametrize("blocksize", [None, 40])
def test_read_letor_several_files_of_different_widths(client, letor_files, how, blocksize):
    folder, parts = letor_files
    paths = [p for p, _, _, _ in parts]
    assert [load_letor(p)[0].shape[1] for p in paths] == [12, 9, 12]  # widths differ file by file
    source = {"list": paths, "glob": str(folder / "part*.txt"), "glob in a list": [str(folder / "part*.txt")]}[how]
    X, y, qid = read_letor(source, blocksize=blocksize)
    _check_blocks(X, y, qid)
    if blocksize is None:
        assert X.chunks[0] == tuple(len(p[2]) for p in parts)  # one block per file
    else:
        assert max(X.chunks[0]) == blocksize and len(X.chunks[0]) > len(parts)
    assert X.shape[1] == 12
    (X_c, y_c, qid_c), _ = _compute(client, X, y, qid)
    expected = [load_letor(p, n_features=12) for p in paths]
    np.testing.assert_array_equal(X_c, np.concatenate([e[0] for e in expected]))
    np.testing.assert_array_equal(y_c, np.concatenate([e[1] for e in expected]))
    np.testing.assert_array_equal(qid_c, np.concatenate([e[2] for e in expected]))
    np.testing.assert_array_equal(X_c, np.concatenate([p[1] for p in parts]))  # the narrow file padded with 0


def test_read_letor_n_features(client, letor_files):
    _, parts = letor_files
    paths = [p for p, _, _, _ in parts]
    X, _, _ = read_letor(paths, n_features=15, dtype=np.float64)
    assert X.shape[1] == 15
    X_c = client.compute(X, sync=True)
    np.testing.assert_array_equal(X_c, np.concatenate([load_letor(p, n_features=15, dtype=np.float64)[0]
                                                       for p in paths]))
    # Narrower than a file: load_letor's error, naming the first line with a feature beyond it.
    with pytest.raises(ValueError) as expected:
        load_letor(paths[0], n_features=10)
    with pytest.raises(ValueError) as got:
        read_letor(paths, n_features=10)
    assert str(got.value) == str(expected.value)
    assert "line " in str(got.value) and "beyond n_features=10" in str(got.value)


def test_read_letor_decides_zero_based_once_for_all_files(client, tmp_path):
    """Index 0 in any file makes all of them 0-based (sklearn's load_svmlight_files rule), so a file without a
    feature 0 is not shifted by one column."""
    rng = np.random.default_rng(1)
    X = np.round(rng.random((20, 5)), 3) + 0.5
    X[10:, 0] = 0  # the second file never lists index 0
    qid = np.repeat([1, 2, 3, 4], 5)
    for i in range(2):
        dump_svmlight_file(X[10 * i:10 * (i + 1)], np.zeros(10), str(tmp_path / f"f{i}.txt"),
                           query_id=qid[10 * i:10 * (i + 1)], zero_based=True)
    X_d, _, _ = read_letor(str(tmp_path / "f*.txt"))
    np.testing.assert_array_equal(client.compute(X_d, sync=True), X.astype(np.float32))
    # Read alone, "auto" takes the second file for 1-based: that is load_letor's per-file rule.
    np.testing.assert_array_equal(read_letor(tmp_path / "f1.txt")[0].compute(),
                                  load_letor(tmp_path / "f1.txt")[0])
    np.testing.assert_array_equal(read_letor(tmp_path / "f1.txt", zero_based=True)[0].compute(),
                                  X[10:].astype(np.float32))


def test_read_letor_query_files_number_queries_over_the_set(client, tmp_path):
    """Files without qid: take their sizes from FILE.query; their queries are numbered 0, 1, ... across the files,
    and a glob that also matches the .query files reads each of them only as its data file's sizes."""
    X, y, qid = make_ranking_data(9, n_features=4, mean_docs_per_query=6, missing_rate=0.0, random_state=2)
    X = np.round(X, 3).astype(np.float32)
    for i, rows in enumerate([qid < 4, qid >= 4]):
        path = tmp_path / f"rank{i}.train"
        dump_svmlight_file(X[rows], y[rows], str(path))
        np.savetxt(str(path) + ".query", np.bincount(qid[rows])[np.unique(qid[rows])], fmt="%d")
    X_d, y_d, qid_d = read_letor(str(tmp_path / "rank*"))
    assert X_d.chunks[0] == (int(np.sum(qid < 4)), int(np.sum(qid >= 4)))
    X_c, y_c, qid_c = client.compute([X_d, y_d, qid_d], sync=True)
    np.testing.assert_array_equal(X_c, X)
    np.testing.assert_array_equal(y_c, y)
    np.testing.assert_array_equal(qid_c, qid)  # 0..3 from the first file, 4..8 from the second
    # A .query file and qid: fields in one set: the numbering could clash with the written ids.
    dump_svmlight_file(X[:5], y[:5], str(tmp_path / "with_qid.txt"), query_id=np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match="has qid: fields but .* has none"):
        read_letor([tmp_path / "rank0.train", tmp_path / "with_qid.txt"])


def _same_error(client, path, **read):
    """read_letor's error on ``path`` (at read time or when computed) is load_letor's, word for word."""
    with pytest.raises((ValueError, FileNotFoundError)) as expected:
        load_letor(path, **read)
    with pytest.raises(type(expected.value)) as got:
        client.compute(list(read_letor(path, **read)), sync=True)
    assert str(got.value) == str(expected.value)
    return str(got.value)


def test_read_letor_malformed_lines_give_load_letors_message(client, letor_files, tmp_path):
    good = letor_files[1][0][0].read_text().splitlines(keepends=True)
    cases = {
        "bad value": (5, "0 qid:3 1:0.5 2:abc 3:1\n", "line 6: value 'abc' of feature 2 is not a number."),
        "bad last token": (7, "1 qid:3 1:0.5 4\n", "line 8: '4' is not an index:value pair."),
        "bad qid": (2, "1 qid:x 1:0.5\n", "line 3: malformed query id 'qid:x'"),
        "bad label": (4, "one qid:3 1:0.5\n", "line 5: label 'one' is not a number."),
    }
    for name, (at, line, message) in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.txt"
        path.write_text("".join(good[:at] + [line] + good[at:]))
        error = _same_error(client, path)
        assert error.startswith(f"{path} {message}"), (name, error)
    # In a set, the bad file is named; the others read fine.
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'bad_value.txt'} line 6")):
        client.compute(list(read_letor([letor_files[1][0][0], tmp_path / "bad_value.txt"])), sync=True)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing here\n\n")
    assert "no data rows" in _same_error(client, empty)
    no_sizes = tmp_path / "no_qid.txt"
    no_sizes.write_text("1 1:0.5\n0 2:1.5\n")
    assert "no query file was found" in _same_error(client, no_sizes)


def test_read_letor_missing_files(client, tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(FileNotFoundError) as expected:
        load_letor(missing)
    with pytest.raises(FileNotFoundError) as got:
        read_letor(missing)  # the quick pass opens every file when read_letor is called
    assert str(got.value) == str(expected.value) == f"LETOR data file not found: {missing}"
    with pytest.raises(FileNotFoundError, match="no LETOR data file matches"):
        read_letor(str(tmp_path / "nothing-*.txt"))
    with pytest.raises(ValueError, match="paths is empty"):
        read_letor([])
    with pytest.raises(ValueError, match="blocksize must be a positive integer"):
        read_letor(missing, blocksize=0)


# ----------------------------------------------------------------------------------------------------------------
# Hyper-parameter searches on the cluster through joblib's Dask backend
# ----------------------------------------------------------------------------------------------------------------


def _fit_calls(tasks):
    """Number of _fit_and_score calls in the joblib batches of a task stream, and the workers that ran them.

    joblib names a batch "batch_of_<function>_<n>_calls-<uuid>", with "mixed_" in front when it holds calls of
    several function objects (scikit-learn wraps each call in its own object, so batches of more than one are).
    """
    calls, workers = 0, set()
    for task in tasks:
        match = re.match(r"(?:mixed_)?batch_of__fit_and_score_(\d+)_calls", str(task["key"]))
        if match:
            calls += int(match.group(1))
            workers.add(task["worker"])
    return calls, workers


@pytest.mark.parametrize("search_class", [GridSearchCV, RandomizedSearchCV])
def test_search_on_the_cluster_equals_the_local_search(client, search_class):
    X, y, qid = make_ranking_data(60, n_features=20, mean_docs_per_query=40, random_state=0)
    grid = {"learning_rate": [0.05, 0.2], "max_leaf_nodes": [4, 8]}
    routing = sklearn.get_config()["enable_metadata_routing"]
    sklearn.set_config(enable_metadata_routing=True)
    try:
        def search():
            cv = GroupKFold(3).set_split_request(groups="qid")
            options = dict(n_iter=3, random_state=0) if search_class is RandomizedSearchCV else {}
            return search_class(LambdaMARTRanker(n_estimators=5, random_state=0), grid, scoring=ndcg_scorer(10),
                                cv=cv, n_jobs=-1, **options).fit(X, y, qid=qid)

        local = search()
        with distributed.get_task_stream(client) as stream, joblib.parallel_backend("dask"):
            remote = search()
    finally:
        sklearn.set_config(enable_metadata_routing=routing)
    assert sklearn.get_config()["enable_metadata_routing"] == routing

    assert remote.best_params_ == local.best_params_
    assert remote.best_score_ == local.best_score_
    np.testing.assert_array_equal(remote.cv_results_["mean_test_score"], local.cv_results_["mean_test_score"])
    assert remote.cv_results_["params"] == local.cv_results_["params"]
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    # Every candidate × fold was fitted and scored by a task on a worker of the cluster.
    calls, workers = _fit_calls(stream.data)
    assert calls == len(local.cv_results_["params"]) * 3
    assert workers and workers <= set(cluster_workers(client))


def test_the_dask_ranker_takes_every_parameter_of_the_local_one():
    from lambdamart.dask import DaskLambdaMARTRanker

    local = LambdaMARTRanker().get_params()
    dask = DaskLambdaMARTRanker().get_params()
    assert dask.keys() - {"client"} == local.keys()
    assert {name: dask[name] for name in local} == local  # the same defaults
