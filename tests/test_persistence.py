"""Persistence: pickle and joblib round trips with a version check, a fresh process that loads and predicts from
the numba cache, and the safe JSON model file (round trips, format, and rejection of broken, truncated, bit-flipped
or crafted files without ever executing anything from them)."""

import copy
import io
import json
import os
import pickle
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
from helpers import assert_same_model, fit, make_data, random_queries, reference_predict
from sklearn.exceptions import NotFittedError

import lambdamart
import lambdamart.ranker
from lambdamart import InconsistentVersionWarning, LambdaMARTRanker, _model_format, load_model, model_io
from lambdamart._engine.tree import NODE_DTYPES

FAST = dict(n_estimators=8, max_leaf_nodes=6, min_samples_leaf=3, learning_rate=0.3, n_jobs=1)
FITTED = ("n_features_in_", "n_estimators_", "n_iter_", "best_iteration_", "train_score_", "validation_score_")


def make_data_with_missing_marker(seed=0, n_queries=20, n_features=4):
    """5 to 14 documents a query; labels 0..3 from feature 0, and label 3 wherever feature 1 is missing."""
    rng = np.random.default_rng(seed)
    X, qid = random_queries(rng, n_queries, n_features, 5, 14)
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=qid.size), [0.0, 0.8, 1.5]).astype(float)
    # A missing value in feature 1 marks a relevant document, so trees split "missing or not" (threshold +inf).
    missing = rng.random(qid.size) < 0.15
    X[missing, 1] = np.nan
    y[missing] = 3.0
    return X, y, qid


@pytest.fixture(scope="module")
def data():
    """make_data_with_missing_marker() (replaces conftest's data in this file)."""
    return make_data_with_missing_marker()


@pytest.fixture(scope="module")
def model(data):
    X, y, qid = data
    return LambdaMARTRanker(**FAST, random_state=0).fit(X, y, qid)


def assert_same_fitted(a, b):
    """The same trees, fitted attributes, feature names and parameters."""
    assert_same_model(a, b)
    for name in FITTED:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert hasattr(a, "feature_names_in_") == hasattr(b, "feature_names_in_")
    if hasattr(a, "feature_names_in_"):
        np.testing.assert_array_equal(a.feature_names_in_, b.feature_names_in_)
    pa, pb = a.get_params(), b.get_params()
    assert pa.keys() == pb.keys()
    for key in pa:
        if isinstance(pa[key], (list, np.ndarray)):
            np.testing.assert_array_equal(pa[key], pb[key], err_msg=key)
        else:
            assert pa[key] == pb[key], key


# ---------------------------------------------------------------- pickle and joblib


def test_pickle_and_joblib_round_trip(model, data):
    X, y, qid = data
    expected = model.predict(X)
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same version: no warning
        copies = [pickle.loads(pickle.dumps(model)), joblib.load(io.BytesIO(buffer.getvalue()))]
    for again in copies:
        assert_same_fitted(model, again)
        np.testing.assert_array_equal(again.predict(X), expected)
        assert again.score(X, y, qid) == model.score(X, y, qid)
    # Unfitted rankers pickle too.
    assert pickle.loads(pickle.dumps(LambdaMARTRanker(learning_rate=0.2))).learning_rate == 0.2


def test_pickling_leaves_the_estimator_alone_and_rederives_the_scoring_layouts(model, data):
    X, _, _ = data
    before = dict(vars(model))
    assert before["_layouts"][0] is model._trees  # derived with the trees
    state = model.__getstate__()
    assert vars(model).keys() == before.keys() and all(vars(model)[k] is before[k] for k in before)
    assert "_layouts" not in state  # not stored: derived again on unpickling
    again = pickle.loads(pickle.dumps(model))
    assert again._layouts[0] is again._trees
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    # Trees replaced without _set_trees are scored as they are, not through the stale layouts.
    again._trees = {**again._trees, "value": again._trees["value"] * 2}
    np.testing.assert_array_equal(again.predict(X), 2 * model.predict(X))


def test_pickle_records_the_version_and_warns_on_mismatch(model, data, monkeypatch):
    X, _, _ = data
    state = model.__getstate__()
    assert state["_lambdamart_version"] == lambdamart.__version__
    payload = pickle.dumps(model)
    monkeypatch.setattr(lambdamart.ranker, "__version__", "99.0.0")
    with pytest.warns(InconsistentVersionWarning, match=r"lambdamart 0\.1\.0 with lambdamart 99\.0\.0") as record:
        again = pickle.loads(payload)
    w = record[0].message
    assert (w.estimator_name, w.original_version, w.current_version) == ("LambdaMARTRanker", "0.1.0", "99.0.0")
    assert "save_model" in str(w)
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    assert "_lambdamart_version" not in vars(again)
    # A state that records no version (written before versions were recorded) warns as "unknown".
    monkeypatch.undo()
    bare = {k: v for k, v in state.items() if k != "_lambdamart_version"}
    with pytest.warns(InconsistentVersionWarning, match="unknown"):
        LambdaMARTRanker.__new__(LambdaMARTRanker).__setstate__(bare)
    # The warning itself pickles (it may cross process boundaries in joblib workers).
    assert str(pickle.loads(pickle.dumps(w))) == str(w)


# ---------------------------------------------------------------- a fresh process

_FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import numpy as np
    from numba.core.event import install_recorder

    import lambdamart
    from lambdamart._engine.predict import quick_score_rows

    kind, model_path, small_path, big_path, out_path = sys.argv[1:]
    if kind == "json":
        model = lambdamart.load_model(model_path)
    else:
        import joblib
        model = joblib.load(model_path)
    X_small, X_big = np.load(small_path), np.load(big_path)
    # Any compilation, of predict or of anything it calls, fires a "numba:compile" event; loading a function from
    # the cache does not.
    with install_recorder("numba:compile") as compiles:
        p_small = model.predict(X_small)
        p_big = model.predict(X_big)
    np.save(out_path, np.concatenate([p_small, p_big]))
    stats = {"quick_score_rows": (sum(quick_score_rows.stats.cache_hits.values()),
                                  sum(quick_score_rows.stats.cache_misses.values()))}
    print(json.dumps({"compile_events": len(compiles.buffer), "stats": stats}))
""")


@pytest.mark.parametrize("kind", ["json", "joblib"])
def test_fresh_process_loads_and_predicts_without_compiling(tmp_path, kind):
    X, y, qid = make_data_with_missing_marker(1)
    model = LambdaMARTRanker(n_estimators=20, max_leaf_nodes=8, min_samples_leaf=3, n_jobs=1, random_state=0)
    model.fit(X, y, qid)
    rng = np.random.default_rng(2)
    X_small = X[:40]
    X_big = rng.normal(size=(12_000, X.shape[1]))  # enough row-tree visits for the threaded predict
    X_big[rng.random(X_big.shape) < 0.1] = np.nan
    # Predicting here compiles the predict kernel, or loads it, and leaves it in numba's cache.
    expected = np.concatenate([model.predict(X_small), model.predict(X_big)])
    paths = {name: tmp_path / name for name in ("model", "small.npy", "big.npy", "out.npy")}
    if kind == "json":
        model.save_model(paths["model"])
    else:
        joblib.dump(model, paths["model"])
    np.save(paths["small.npy"], X_small)
    np.save(paths["big.npy"], X_big)

    proc = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, kind] + [str(p) for p in paths.values()],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(np.load(paths["out.npy"]), expected)  # bit for bit
    assert report["compile_events"] == 0, report
    for name, (hits, misses) in report["stats"].items():
        assert hits >= 1 and misses == 0, (name, report)


# ---------------------------------------------------------------- the model file: round trips


def _models():
    """Fitted rankers covering what a file must carry (built lazily: each test uses a few)."""
    X, y, qid = make_data_with_missing_marker(3)
    X_v, y_v, q_v = make_data_with_missing_marker(4)
    frame = pd.DataFrame(X, columns=[f"feature {i}" for i in range(X.shape[1])])
    return {
        "plain": lambda: LambdaMARTRanker(**FAST, random_state=0).fit(X, y, qid),
        "names-and-eval-set": lambda: LambdaMARTRanker(**(FAST | dict(n_estimators=30)), n_iter_no_change=3,
                                                       random_state=0).fit(frame, y, qid,
                                                                           eval_set=[(X_v, y_v, q_v)]),
        "params": lambda: LambdaMARTRanker(**FAST, gain=np.array([0.0, 1.0, 3.0, 7.0]), max_depth=3,
                                           subsample=0.7, importance_type="split", eval_at=5,
                                           random_state=7).fit(X, y, qid),
        "constant": lambda: LambdaMARTRanker(**FAST).fit(X, np.zeros_like(y), qid),
    }


@pytest.mark.filterwarnings("ignore:every training query has all labels equal")
@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
@pytest.mark.parametrize("name", list(_models()))
def test_model_file_round_trip_is_exact(tmp_path, name):
    model = _models()[name]()
    X, y, qid = make_data_with_missing_marker(5)
    path = tmp_path / "model.json"
    assert model.save_model(path) is model
    loaded = load_model(path)
    assert type(loaded) is LambdaMARTRanker
    assert_same_fitted(model, loaded)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(loaded.feature_importances_, model.feature_importances_)
    assert loaded.score(X, y, qid) == model.score(X, y, qid)
    # Saving the loaded model writes the same bytes: nothing is lost or reformatted on the way.
    loaded.save_model(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    # And the loaded ranker is a normal estimator: it refits and pickles.
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(loaded)).predict(X), model.predict(X))


def test_round_trip_keeps_non_finite_thresholds_and_feature_names(tmp_path, data):
    X, y, qid = data
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    model = LambdaMARTRanker(**FAST, random_state=0).fit(frame, y, qid)
    t = model._trees
    split = t["feature"] >= 0
    assert np.isposinf(t["threshold"][split]).any()  # "missing or not" splits
    path = tmp_path / "model.json"
    model.save_model(path)
    loaded = load_model(path)
    assert list(loaded.feature_names_in_) == ["a", "b", "c", "d"] and loaded.feature_names_in_.dtype == object
    np.testing.assert_array_equal(loaded.predict(frame), model.predict(frame))
    with pytest.raises(ValueError, match="feature names"):
        loaded.predict(frame.rename(columns={"a": "z"}))
    loaded.fit(frame, y, qid)  # refits with the saved parameters
    assert_same_fitted(model, loaded)


def test_model_file_is_strict_documented_json(tmp_path, model):
    path = tmp_path / "model.json"
    model.save_model(path)
    text = path.read_text(encoding="utf-8")

    def no_constants(token):
        raise AssertionError(f"non-standard JSON literal {token}")

    doc = json.loads(text, parse_constant=no_constants)
    assert doc["format"] == "lambdamart-model" and doc["format_version"] == 1
    assert doc["lambdamart_version"] == lambdamart.__version__
    assert set(doc) == {"format", "format_version", "lambdamart_version", "params", "n_features_in",
                        "feature_names_in", "fitted", "trees"}
    assert set(doc["trees"]) == {"tree_starts"} | set(NODE_DTYPES)
    assert doc["params"] == {k: v for k, v in model.get_params().items()}
    # Every documented field appears in the module's format description.
    for key in list(doc) + list(doc["trees"]) + list(doc["fitted"]):
        assert f'"{key}"' in model_io.__doc__, key
    # Leaves have no threshold (null); "missing or not" splits are +inf, spelled as a string.
    leaf = np.array(doc["trees"]["left"]) == -1
    assert all(v is None for v, is_leaf in zip(doc["trees"]["threshold"], leaf) if is_leaf)
    assert "inf" in doc["trees"]["threshold"]


def test_trees_fields_match_the_format():
    # A new field in the fitted trees must come with a new format version (_model_format._TREE_FIELDS).
    assert set(_model_format._TREE_FIELDS) == {"tree_starts"} | set(NODE_DTYPES)


def test_unknown_tree_field_in_a_model_refuses_to_save(tmp_path, model):
    odd = copy.deepcopy(model)
    odd._trees["split_bin"] = np.zeros_like(odd._trees["feature"])
    with pytest.raises(ValueError, match="tree fields"):
        odd.save_model(tmp_path / "model.json")


def test_random_state_instance_is_saved_as_none(tmp_path, data):
    X, y, qid = data
    model = LambdaMARTRanker(**FAST, random_state=np.random.RandomState(0)).fit(X, y, qid)
    with pytest.warns(UserWarning, match="random_state is a RandomState"):
        model.save_model(tmp_path / "model.json")
    loaded = load_model(tmp_path / "model.json")
    assert loaded.random_state is None
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_numpy_scalar_params(tmp_path, data):
    X, y, qid = data
    model = LambdaMARTRanker(**FAST, random_state=0).fit(X, y, qid)
    model.set_params(n_jobs=np.int64(2), learning_rate=np.float32(0.25), pair_normalization=np.bool_(False))
    model.save_model(tmp_path / "model.json")
    params = load_model(tmp_path / "model.json").get_params()
    assert params["n_jobs"] == 2 and type(params["n_jobs"]) is int
    assert params["learning_rate"] == float(np.float32(0.25))
    assert params["pair_normalization"] is False
    model.set_params(gain=["a", "b"])
    with pytest.raises(TypeError, match="gain"):
        model.save_model(tmp_path / "bad.json")


def test_save_is_atomic_and_overwrites(tmp_path, model, data):
    X, _, _ = data
    path = tmp_path / "model.json"
    path.write_text("an older model")
    model.save_model(str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["model.json"]  # no temporary file left behind
    np.testing.assert_array_equal(load_model(str(path)).predict(X), model.predict(X))
    missing = tmp_path / "no such folder"
    with pytest.raises(FileNotFoundError, match="the folder '.*no such folder' does not exist; create it first"):
        model.save_model(missing / "model.json")  # named as given, not as our temporary file


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="symbolic links and named pipes as on POSIX")
def test_save_follows_links_keeps_permissions_and_writes_pipes_in_place(tmp_path, model, data):
    """Replacing a file must not replace what a path points to: a link stays a link to the new model, a file
    keeps its mode, and a named pipe (or /dev/stdout) is written to, not renamed over."""
    X, _, _ = data
    target, link = tmp_path / "v1.json", tmp_path / "latest.json"
    target.write_text("an older model")
    target.chmod(0o600)
    link.symlink_to("v1.json")
    model.save_model(link)
    assert link.is_symlink() and stat.S_IMODE(target.stat().st_mode) == 0o600
    np.testing.assert_array_equal(load_model(target).predict(X), model.predict(X))
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()))
    reader.start()
    model.save_model(pipe)
    reader.join()
    assert stat.S_ISFIFO(pipe.stat().st_mode) and received == [(target).read_text()]
    for name in (tmp_path, f"{tmp_path}/new/", ""):
        with pytest.raises(ValueError, match="names a directory; give the path of a file"):
            model.save_model(name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.json", "pipe", "v1.json"]


# A child process that fits one large model, saves it once, says so, then saves it over and over until killed.
_SAVE_FOREVER = textwrap.dedent("""
    import sys
    from lambdamart import LambdaMARTRanker
    from lambdamart.datasets import make_ranking_data
    X, y, qid = make_ranking_data(40, random_state=0)
    model = LambdaMARTRanker(n_estimators=150, min_samples_leaf=2, random_state=0).fit(X, y, qid)
    model.save_model(sys.argv[1])
    print("saved", flush=True)
    while True:
        model.save_model(sys.argv[1])
""")


@pytest.mark.slow  # a fresh process per kill
def test_a_save_killed_midway_leaves_the_previous_file_loadable(tmp_path):
    path = tmp_path / "model.json"
    rng = np.random.default_rng(0)
    models = []
    for _ in range(6):
        child = subprocess.Popen([sys.executable, "-c", _SAVE_FOREVER, str(path)], stdout=subprocess.PIPE,
                                 text=True)
        try:
            assert child.stdout.readline().strip() == "saved", "the child failed before its first save"
            # Somewhere in the loop of writes: serialising, writing, fsyncing or renaming.
            time.sleep(rng.uniform(0.0, 0.3))
        finally:
            child.kill()  # SIGKILL: no clean-up runs
            child.wait()
        models.append(load_model(path))  # a half-written file would not even parse
        assert models[-1].n_estimators_ == models[0].n_estimators_
    for model in models[1:]:
        assert_same_model(model, models[0])
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "model.json"]
    assert all(name.startswith(".model.json.") and name.endswith(".tmp") for name in leftovers), leftovers


def test_save_unfitted_and_load_missing(tmp_path):
    with pytest.raises(NotFittedError):
        LambdaMARTRanker().save_model(tmp_path / "model.json")
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "missing.json")


def test_unknown_parameters_warn_and_are_ignored(tmp_path, model, data):
    X, _, _ = data
    path = tmp_path / "model.json"
    model.save_model(path)
    doc = json.loads(path.read_text())
    doc["params"]["a_future_option"] = 3
    del doc["params"]["verbose"]  # a missing parameter takes its default
    path.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match="a_future_option"):
        loaded = load_model(path)
    assert loaded.verbose == 0
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_a_file_from_before_grow_policy_continues_leaf_wise(tmp_path, model, data):
    # Files written before symmetric trees hold leaf-wise trees: continuing one grows leaf-wise trees too, not the
    # new default's.
    path = tmp_path / "model.json"
    model.save_model(path)
    doc = json.loads(path.read_text())
    assert doc["params"]["grow_policy"] == model.grow_policy
    del doc["params"]["grow_policy"]
    path.write_text(json.dumps(doc))
    assert load_model(path).grow_policy == "leafwise"


# ---------------------------------------------------------------- the model file: broken and crafted files


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "model.json"
    model.save_model(path)
    return path.read_bytes(), json.loads(path.read_bytes())


def _first_leaf(doc):
    return doc["trees"]["left"].index(-1)


def _set(field, index, value):
    def mutate(doc):
        i = index(doc) if callable(index) else index
        doc["trees"][field][i] = value
    return mutate


def _n_nodes(doc):
    return len(doc["trees"]["feature"])


TAMPERED = {
    "not-a-model": (lambda d: d.update(format="something-else"), "not a lambdamart model file"),
    "newer-format": (lambda d: d.update(format_version=2), r"format version 2 .*Upgrade lambdamart"),
    "older-format": (lambda d: d.update(format_version=0), "format version 0"),
    "format-version-string": (lambda d: d.update(format_version="1"), "format_version"),
    "format-version-null": (lambda d: d.update(format_version=None), "format_version"),
    "missing-field": (lambda d: d["trees"].pop("left"), "no 'left' entry"),
    "missing-params": (lambda d: d.pop("params"), "no 'params' entry"),
    "extra-tree-field": (lambda d: d["trees"].update(split_bin=[]), "does not define"),
    "child-beyond-the-end": (lambda d: d["trees"]["left"].__setitem__(0, _n_nodes(d)), "left child index"),
    "child-far-beyond": (_set("right", 0, 2**31 - 1), "right child index"),
    "child-negative": (_set("left", 0, -2), "left child index"),
    "child-cycle": (_set("left", 1, 0), "left child index"),
    "child-in-next-tree": (lambda d: d["trees"]["right"].__setitem__(0, d["trees"]["tree_starts"][1]),
                           "right child index"),
    "two-parents": (lambda d: d["trees"]["right"].__setitem__(0, d["trees"]["left"][0]), "exactly one parent"),
    "feature-out-of-range": (_set("feature", 0, 4), "feature index"),
    "feature-negative-at-split": (_set("feature", 0, -1), "feature index"),
    "feature-at-leaf": (_set("feature", _first_leaf, 0), "leaf"),
    "right-child-at-leaf": (_set("right", _first_leaf, 1), "leaf"),
    "short-array": (lambda d: d["trees"]["value"].pop(), "trees.value has"),
    "long-array": (lambda d: d["trees"]["missing_left"].append(True), "trees.missing_left has"),
    "nan-leaf-value": (_set("value", _first_leaf, None), "leaf value"),
    "inf-leaf-value": (_set("value", _first_leaf, "-inf"), "leaf value"),
    "nan-threshold-at-split": (_set("threshold", 0, None), "threshold"),
    "nan-string": (_set("threshold", 0, "nan"), "only \"inf\" and \"-inf\""),
    "nan-gain-at-split": (_set("gain", 0, None), "gain"),
    "float-in-int-array": (_set("feature", 0, 1.5), "only integers"),
    "bool-in-int-array": (_set("left", 0, True), "only integers"),
    "int-in-bool-array": (_set("missing_left", 0, 1), "true/false"),
    "nested-list": (_set("value", 0, [0.0]), "only numbers"),
    "huge-int": (_set("count", 0, 2**80), "out of range"),
    "negative-count": (_set("count", 0, -1), "count is negative"),
    "not-a-list": (lambda d: d["trees"].update(value="0.1, 0.2"), "must be a JSON list"),
    "trees-not-object": (lambda d: d.update(trees=[1, 2]), "trees must be a JSON object"),
    "starts-not-at-zero": (lambda d: d["trees"]["tree_starts"].__setitem__(0, 1), "tree_starts"),
    "starts-decreasing": (lambda d: d["trees"]["tree_starts"].reverse(), "tree_starts"),
    "starts-beyond-the-end": (lambda d: d["trees"]["tree_starts"].__setitem__(-1, _n_nodes(d)), "tree_starts"),
    "no-starts": (lambda d: d["trees"].update(tree_starts=[]), "tree_starts is empty"),
    "tree-count": (lambda d: d["fitted"].update(n_estimators_=d["fitted"]["n_estimators_"] + 1), "n_estimators_"),
    "n-iter": (lambda d: d["fitted"].update(n_iter_=0), "n_iter_"),
    "best-iteration": (lambda d: d["fitted"].update(best_iteration_=10**6), "best_iteration_"),
    "scores": (lambda d: d["fitted"].update(train_score_=["x"]), "train_score_"),
    "n-features-zero": (lambda d: d.update(n_features_in=0), "n_features_in"),
    "n-features-smaller": (lambda d: d.update(n_features_in=2), "feature index"),
    "feature-names-length": (lambda d: d.update(feature_names_in=["a", "b"]), "feature_names_in"),
    "feature-names-repeat": (lambda d: d.update(feature_names_in=["a", "a", "b", "c"]), "repeats"),
    "feature-names-types": (lambda d: d.update(feature_names_in=[1, 2, 3, 4]), "feature_names_in"),
    "invalid-param-value": (lambda d: d["params"].update(learning_rate=-1.0), "parameters are invalid"),
    "invalid-param-type": (lambda d: d["params"].update(n_estimators="many"), "parameters are invalid"),
    "param-object": (lambda d: d["params"].update(gain={"__class__": "os.system"}), "JSON object"),
    "params-not-object": (lambda d: d.update(params=[]), "params must be a JSON object"),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_tampered_files_raise_value_error(tmp_path, saved, case):
    _, doc = saved
    mutate, message = TAMPERED[case]
    doc = copy.deepcopy(doc)
    mutate(doc)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=message) as info:
        load_model(path)
    assert str(path) in str(info.value)
    assert str(info.value).startswith("cannot load ")


def _raw_cases(raw):
    text = raw.decode()
    return {
        "truncated": raw[: len(raw) // 2],
        "truncated-to-one-byte": raw[:1],
        "truncated-to-ten-bytes": raw[:10],
        "truncated-by-two": raw[:-2],
        "truncated-by-one": raw[:-3],
        "empty": b"",
        "text": b"ranker",
        "byte-order-mark-text": "caf\u00e9 \ufeff".encode(),
        "nul-bytes": b"\x00" * 64,
        "zip-header": b"PK\x03\x04npz",
        "nan-literal": text.replace('"format_version": 1', '"format_version": NaN').encode(),
        "infinity-literal": text.replace('"inf"', "Infinity", 1).encode(),
        "duplicate-key": text.replace('"format_version": 1', '"format_version": 1, "format_version": 1').encode(),
        "pickle": pickle.dumps({"format": "lambdamart-model"}),
        "npz": b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)),
        "binary": bytes(range(256)),
        "json-list": b"[1, 2, 3]",
        "json-empty-list": b"[]",
        "json-empty-object": b"{}",
        "json-null": b"null",
        "json-string": b'"lambdamart-model"',
        "format-only": b'{"format": "lambdamart-model"}',
        "deep-nesting": b"[" * 200_000 + b"]" * 200_000,
        "huge-number": text.replace('"n_features_in": 4', '"n_features_in": 4' + "0" * 5000).encode(),
    }


RAW_MESSAGES = {
    "truncated": "not valid JSON", "truncated-to-one-byte": "not valid JSON",
    "truncated-to-ten-bytes": "not valid JSON", "truncated-by-two": "not valid JSON",
    "truncated-by-one": "not valid JSON", "empty": "not valid JSON",
    "text": "not valid JSON", "byte-order-mark-text": "not valid JSON", "nul-bytes": "not valid JSON",
    "zip-header": "not valid JSON",
    "nan-literal": "non-JSON literal NaN", "infinity-literal": "non-JSON literal Infinity",
    "duplicate-key": "repeats a key", "pickle": "looks like a pickle", "npz": "not UTF-8", "binary": "not UTF-8",
    "json-list": "not a lambdamart model file", "json-empty-list": "not a lambdamart model file",
    "json-empty-object": "not a lambdamart model file", "json-null": "not a lambdamart model file",
    "json-string": "not a lambdamart model file", "format-only": "format_version is missing",
    "deep-nesting": "nests JSON too deeply|not valid JSON", "huge-number": "not a readable JSON|not valid JSON",
}


@pytest.mark.parametrize("case", list(RAW_MESSAGES))
def test_broken_files_raise_value_error(tmp_path, saved, case):
    raw, _ = saved
    path = tmp_path / "model.json"
    path.write_bytes(_raw_cases(raw)[case])
    with pytest.raises(ValueError, match=RAW_MESSAGES[case]) as info:
        load_model(path)
    assert re.match(r"cannot load .*model\.json", str(info.value))


def test_random_tampering_never_reaches_predict_unchecked(tmp_path, saved, data):
    """Random single edits of the tree arrays: each file either raises ValueError or loads into trees that a
    bounds-checking Python walk predicts exactly like the numba kernel (which checks nothing)."""
    _, doc = saved
    X, _, _ = data
    X = X[:25]
    rng = np.random.default_rng(0)
    n_nodes = _n_nodes(doc)
    values = [None, "inf", "-inf", True, 0.5, -1, 0, 1, n_nodes - 1, n_nodes, -2, 2**31, 4, 3]
    path = tmp_path / "model.json"
    outcomes = {"rejected": 0, "loaded": 0}
    for _ in range(300):
        edited = copy.deepcopy(doc)
        field = rng.choice(list(edited["trees"]))
        array = edited["trees"][field]
        if field == "tree_starts" or rng.random() < 0.5:
            value = values[rng.integers(len(values))]
        else:
            value = int(rng.integers(-2, n_nodes + 2))
        array[rng.integers(len(array))] = value
        path.write_text(json.dumps(edited))
        try:
            loaded = load_model(path)
        except ValueError:
            outcomes["rejected"] += 1
            continue
        outcomes["loaded"] += 1
        np.testing.assert_array_equal(loaded.predict(X), reference_predict(loaded._trees, X))
    assert outcomes["rejected"] > 100 and outcomes["loaded"] > 20, outcomes


@pytest.fixture(scope="module")
def small_saved(tmp_path_factory):
    """The bytes of the model file of a two-tree, four-leaf model of helpers.make_data()."""
    X, y, qid = make_data()
    path = tmp_path_factory.mktemp("small") / "model.json"
    fit(X, y, qid, n_estimators=2, max_leaf_nodes=4).save_model(path)
    return path.read_bytes()


def test_bit_flipped_model_files_raise_value_error_or_load_checked_trees(tmp_path, small_saved):
    """Single bit flips all over a small model file: each either raises ValueError or loads trees that a
    bounds-checking walk predicts exactly like the kernel. Nothing else (no crash, no other exception)."""
    X = make_data()[0][:20]
    rng = np.random.default_rng(0)
    flipped = tmp_path / "flipped.json"
    outcomes = {"rejected": 0, "loaded": 0}
    for position in rng.choice(len(small_saved), size=min(400, len(small_saved)), replace=False):
        edited = bytearray(small_saved)
        edited[position] ^= 1 << int(rng.integers(8))
        flipped.write_bytes(bytes(edited))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a flipped parameter name is an unknown parameter: it warns
                loaded = load_model(flipped)
        except ValueError as error:
            assert str(flipped) in str(error)
            outcomes["rejected"] += 1
            continue
        outcomes["loaded"] += 1
        np.testing.assert_array_equal(loaded.predict(X), reference_predict(loaded._trees, X))
    assert outcomes["rejected"] > 100, outcomes


class _Marker:
    """Unpickling this creates a file: proof that a pickle was executed."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_loading_never_executes_code_from_the_file(tmp_path, saved, monkeypatch):
    marker = tmp_path / "executed"
    payloads = {
        "pickle": pickle.dumps(_Marker(str(marker))),
        "pickle-protocol-0": pickle.dumps(_Marker(str(marker)), protocol=0),
    }
    _, doc = saved
    for name, value in {"gain": f"__import__('pathlib').Path({str(marker)!r}).touch()",
                        "objective": "eval", "random_state": {"py/reduce": [{"py/type": "os.system"}]}}.items():
        crafted = copy.deepcopy(doc)
        crafted["params"][name] = value
        payloads[f"param-{name}"] = json.dumps(crafted).encode()

    def forbidden(*args, **kwargs):
        raise AssertionError("load_model must not unpickle, eval or exec anything")

    for target in ("pickle.loads", "pickle.load", "pickle.Unpickler", "numpy.load", "builtins.eval",
                   "builtins.exec"):
        monkeypatch.setattr(target, forbidden)
    for name, payload in payloads.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(payload)
        with pytest.raises(ValueError, match="cannot load"):
            load_model(path)
        assert not marker.exists(), name


def test_a_saved_ranker_of_several_queries_still_needs_qid_to_score(tmp_path):
    X, y, qid = lambdamart.datasets.make_ranking_data(10, random_state=0)
    path = tmp_path / "model.json"
    LambdaMARTRanker(n_estimators=2, random_state=0).fit(X, y, qid).save_model(path)
    with pytest.raises(ValueError, match="fitted on several queries"):
        load_model(path).score(X, y)
    LambdaMARTRanker(n_estimators=2, random_state=0).fit(X, y).save_model(path)
    with pytest.warns(UserWarning, match="one query"):
        load_model(path).score(X, y)
