"""Checkpoints and init_model: a fit killed at any round and resumed ends with the uninterrupted fit's model.

The must-show tests kill a real training process with SIGKILL at a random round (printed in the failure message),
resume it, and compare the model with an uninterrupted run's bit for bit.
"""

import json
import random
import signal
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from lambdamart import LambdaMARTRanker, load_model
from lambdamart.datasets import make_ranking_data

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


def _same_model(a, b):
    return (a._trees.keys() == b._trees.keys()
            and all(np.array_equal(a._trees[k], b._trees[k], equal_nan=True) for k in a._trees))


def _run_and_kill(command, kill_after_round):
    """Run ``command`` until it prints round ``kill_after_round``'s progress line, then SIGKILL it."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in child.stdout:
            seen.append(line)
            if line.startswith(f"[{kill_after_round}/"):
                child.send_signal(signal.SIGKILL)
                break
        child.wait(timeout=300)
    finally:
        child.kill()
    assert child.returncode == -signal.SIGKILL, "".join(seen)


def _run(command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def letor_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("letor")
    X, y, qid = make_ranking_data(90, n_features=20, random_state=7)
    X = np.nan_to_num(X)  # LETOR files have no missing values
    valid = qid >= 70
    for name, rows in (("train", ~valid), ("valid", valid)):
        dump_svmlight_file(X[rows], y[rows], str(folder / f"{name}.txt"), query_id=qid[rows], zero_based=False)
    return folder


@posix_only
def test_cli_resume_after_sigkill_equals_the_uninterrupted_fit(letor_files, tmp_path):
    """lambdarank with subsample and max_features below 1 and early stopping on a validation file."""
    base = [sys.executable, "-m", "lambdamart", "train", "--train", str(letor_files / "train.txt"),
            "--valid", str(letor_files / "valid.txt"),
            "--param", "n_estimators=60", "subsample=0.7", "max_features=0.6", "n_iter_no_change=15",
            "learning_rate=0.3", "random_state=11", "verbose=1"]
    _run(base + ["--model", str(tmp_path / "full.json")])
    full = load_model(tmp_path / "full.json")
    assert full.best_iteration_ is not None

    kill_round = random.randrange(1, full.n_iter_)
    checkpointed = base + ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "10",
                           "--model", str(tmp_path / "resumed.json")]
    _run_and_kill(checkpointed, kill_round)
    assert not (tmp_path / "resumed.json").exists()
    out = _run(checkpointed + ["--resume"])
    resumed = load_model(tmp_path / "resumed.json")
    where = f"killed after round {kill_round} of {full.n_iter_}"
    assert (kill_round < 10) != ("continuing from" in out), where
    assert _same_model(full, resumed), where
    assert (resumed.n_iter_, resumed.best_iteration_) == (full.n_iter_, full.best_iteration_), where
    assert np.array_equal(resumed.validation_score_, full.validation_score_), where
    X, _, _ = make_ranking_data(10, n_features=20, random_state=8)
    assert np.array_equal(full.predict(X), resumed.predict(X)), where


@posix_only
def test_unbiased_lambdamart_resumed_after_sigkill_equals_the_uninterrupted_fit(tmp_path):
    X, y, qid = make_ranking_data(60, n_features=20, missing_rate=0, random_state=3)
    rng = np.random.RandomState(0)
    position = np.concatenate([rng.permutation(n) + 1 for n in np.bincount(qid)])
    clicks = ((y >= 2) & (rng.random_sample(y.shape[0]) < 1.0 / position ** 0.5)).astype(float)
    dump_svmlight_file(X, clicks, str(tmp_path / "clicks.txt"), query_id=qid, zero_based=False)
    (tmp_path / "clicks.position").write_text("".join(f"{p}\n" for p in position))
    base = [sys.executable, "-m", "lambdamart", "train", "--train", str(tmp_path / "clicks.txt"),
            "--position", str(tmp_path / "clicks.position"),
            "--param", "n_estimators=60", "subsample=0.8", "random_state=5", "verbose=1"]
    _run(base + ["--model", str(tmp_path / "full.json")])
    kill_round = random.randrange(1, 60)
    checkpointed = base + ["--checkpoint-dir", str(tmp_path / "ckpt"), "--model", str(tmp_path / "resumed.json")]
    _run_and_kill(checkpointed, kill_round)
    _run(checkpointed + ["--resume"])
    full, resumed = load_model(tmp_path / "full.json"), load_model(tmp_path / "resumed.json")
    where = f"killed after round {kill_round}"
    assert _same_model(full, resumed), where
    assert np.array_equal(full.position_bias_, resumed.position_bias_), where
    assert not np.allclose(full.position_bias_, 1.0)  # biases were learned


# ------------------------------------------------------------------------------------------------ in one process


@pytest.fixture(scope="module")
def data():
    return make_ranking_data(40, n_features=12, random_state=0)


def _checkpoint_rounds(directory):
    return sorted(int(p.name[6:12]) for p in directory.glob("round-*.npz"))


def test_checkpoints_every_n_rounds_and_at_the_end_keeping_the_newest_two(data, tmp_path):
    X, y, qid = data
    LambdaMARTRanker(n_estimators=25, checkpoint_dir=tmp_path, checkpoint_every=10, random_state=0).fit(X, y, qid)
    assert _checkpoint_rounds(tmp_path) == [20, 25]
    # No pickle inside: every member is a plain array that numpy reads with allow_pickle=False.
    with np.load(tmp_path / "round-000025.npz", allow_pickle=False) as archive:
        header = json.loads(str(archive["header"]))
    assert header["rounds"] == 25 and header["params"]["n_estimators"] == 25
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_fresh_fit_clears_an_earlier_fits_checkpoints(data, tmp_path):
    X, y, qid = data
    LambdaMARTRanker(n_estimators=30, checkpoint_dir=tmp_path, random_state=0).fit(X, y, qid)
    LambdaMARTRanker(n_estimators=5, checkpoint_dir=tmp_path, checkpoint_every=2, random_state=1).fit(X, y, qid)
    assert _checkpoint_rounds(tmp_path) == [4, 5]


def test_resuming_from_each_checkpoint_and_with_more_rounds(data, tmp_path):
    X, y, qid = data
    params = dict(subsample=0.6, max_features=0.5, random_state=4, objective="listmle")
    full = LambdaMARTRanker(n_estimators=24, **params).fit(X, y, qid)
    LambdaMARTRanker(n_estimators=12, checkpoint_dir=tmp_path, checkpoint_every=4, **params).fit(X, y, qid)
    # n_estimators may grow when resuming: 12 checkpointed rounds plus 12 more equal 24 in one go.
    more = LambdaMARTRanker(n_estimators=24, checkpoint_dir=tmp_path, warm_start=True, **params).fit(X, y, qid)
    assert _same_model(full, more) and more.n_iter_ == 24
    assert _checkpoint_rounds(tmp_path) == [20, 24]
    (tmp_path / "round-000024.npz").unlink()
    again = LambdaMARTRanker(n_estimators=24, checkpoint_dir=tmp_path, warm_start=True, **params).fit(X, y, qid)
    assert _same_model(full, again)


def test_a_finished_checkpoint_gives_its_model_without_training(data, tmp_path):
    X, y, qid = data
    eval_set = [(X[:300], y[:300], qid[:300])]
    params = dict(n_estimators=200, learning_rate=0.5, n_iter_no_change=3, random_state=0, checkpoint_dir=tmp_path)
    first = LambdaMARTRanker(**params).fit(X, y, qid, eval_set=eval_set)
    assert first.n_iter_ < 200  # early stopping ended it
    again = LambdaMARTRanker(**params, warm_start=True).fit(X, y, qid, eval_set=eval_set)
    assert _same_model(first, again) and not hasattr(again, "fit_profile_")
    assert (again.n_iter_, again.best_iteration_, again.n_estimators_) == \
        (first.n_iter_, first.best_iteration_, first.n_estimators_)


def test_resuming_with_other_parameters_or_data_is_refused(data, tmp_path):
    X, y, qid = data
    LambdaMARTRanker(n_estimators=10, checkpoint_dir=tmp_path, random_state=0).fit(X, y, qid)
    with pytest.raises(ValueError, match=r"other parameters \(learning_rate=0.1 there, 0.2 here\)"):
        LambdaMARTRanker(n_estimators=20, learning_rate=0.2, checkpoint_dir=tmp_path, warm_start=True,
                         random_state=0).fit(X, y, qid)
    y_other = y.copy()
    y_other[:50] = 0
    with pytest.raises(ValueError, match="the data differ"):
        LambdaMARTRanker(n_estimators=20, checkpoint_dir=tmp_path, warm_start=True, random_state=0).fit(
            X, y_other, qid)
    with pytest.raises(ValueError, match="at least the 10 rounds"):
        LambdaMARTRanker(n_estimators=5, checkpoint_dir=tmp_path, warm_start=True, random_state=0).fit(X, y, qid)


def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(data, tmp_path):
    X, y, qid = data
    params = dict(random_state=0, checkpoint_dir=tmp_path, checkpoint_every=5)
    full = LambdaMARTRanker(n_estimators=15, **params).fit(X, y, qid)
    newest = tmp_path / "round-000015.npz"
    newest.write_bytes(newest.read_bytes()[:1000])
    with pytest.warns(UserWarning, match="skipped damaged checkpoints"):
        again = LambdaMARTRanker(n_estimators=15, warm_start=True, **params).fit(X, y, qid)
    assert _same_model(full, again)
    for path in tmp_path.glob("round-*.npz"):
        path.write_bytes(b"PK\x03\x04 not an archive")
    with pytest.raises(ValueError, match="no checkpoint .* can be read"):
        LambdaMARTRanker(n_estimators=20, warm_start=True, **params).fit(X, y, qid)
    # A file holding pickled objects: said so, without numpy's advice to load it unsafely.
    for path in tmp_path.glob("round-*.npz"):
        np.savez(path, header=np.array([{"format": "x"}], dtype=object))
    with pytest.raises(ValueError, match="holds pickled Python objects, which no checkpoint does") as raised:
        LambdaMARTRanker(n_estimators=20, warm_start=True, **params).fit(X, y, qid)
    assert "allow_pickle" not in str(raised.value)


def test_a_finished_checkpoint_checks_the_data_it_is_given(data, tmp_path):
    X, y, qid = data
    params = dict(n_estimators=5, random_state=0, checkpoint_dir=tmp_path, warm_start=True)
    LambdaMARTRanker(**params).fit(X, y, qid)
    with pytest.raises(ValueError, match=r"had \d+ training rows of 12 features; got 100 rows of 3"):
        LambdaMARTRanker(**params).fit(X[:100, :3], y[:100], qid[:100])
    y_other = y.copy()
    y_other[:50] = 0
    with pytest.raises(ValueError, match="the data differ"):
        LambdaMARTRanker(**params).fit(X, y_other, qid)
    with pytest.raises(ValueError):
        LambdaMARTRanker(**params).fit("not data", None)


def _rewritten(path, **changes):
    """Rewrite the checkpoint ``path`` with some of its arrays (or its header, a dict) replaced."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    header = json.loads(str(arrays["header"]))
    for name, value in changes.items():
        if name == "header":
            header = value(header)
        else:
            arrays[name] = value(arrays[name])
    arrays["header"] = np.array(json.dumps(header))
    np.savez(path, **arrays)


def _without(key):
    return lambda d: {k: v for k, v in d.items() if k != key}


@pytest.mark.parametrize("changes, message", [
    (dict(tree_feature=lambda a: np.where(a >= 0, 10**6, a).astype(np.int32)), "feature index is outside"),
    (dict(tree_feature=lambda a: a.astype(np.float64)), "not the arrays a fit writes"),
    (dict(tree_left=lambda a: np.where(a >= 0, 0, a).astype(np.int32)), "child index is out of range"),
    (dict(tree_split_bin=lambda a: (a + 10**6).astype(np.int32)), "bin is outside its feature's bins"),
    (dict(tree_value=lambda a: np.full_like(a, np.nan)), "leaf value is NaN"),
    (dict(tree_sizes=lambda a: a + 1), "not the arrays a fit writes"),
    (dict(end_rng_key=lambda a: a[:5]), "random states"),
    (dict(thresholds=lambda a: a[:-3]), "bin thresholds"),
    (dict(header=lambda h: [1, 2]), "not a lambdamart-checkpoint file"),
    (dict(header=_without("params")), "'params'"),
    (dict(header=lambda h: {**h, "n_features": "12"}), "sizes, parameters or digest"),
    (dict(header=lambda h: {**h, "record": _without("stopped")(h["record"])}), "'stopped'"),
    (dict(header=lambda h: {**h, "record": {**h["record"], "train_score": "x"}}), "early-stopping record"),
    (dict(header=lambda h: {**h, "rng": {**h["rng"], "end_rng": [10**4, 0, 0.0]}}), "random states"),
    (dict(header=lambda h: {**h, "feature_names": ["a"]}), "feature names"),
])
def test_an_edited_checkpoint_is_refused_and_the_one_before_used(data, tmp_path, changes, message):
    X, y, qid = data
    params = dict(random_state=0, checkpoint_dir=tmp_path, checkpoint_every=5)
    full = LambdaMARTRanker(n_estimators=10, **params).fit(X, y, qid)
    _rewritten(tmp_path / "round-000010.npz", **changes)
    with pytest.warns(UserWarning, match=f"skipped damaged checkpoints.*{message}"):
        again = LambdaMARTRanker(n_estimators=10, warm_start=True, **params).fit(X, y, qid)
    assert _same_model(full, again)


def test_warm_start_without_a_checkpoint_starts_afresh(data, tmp_path):
    X, y, qid = data
    fresh = LambdaMARTRanker(n_estimators=8, random_state=0).fit(X, y, qid)
    warm = LambdaMARTRanker(n_estimators=8, random_state=0, warm_start=True, checkpoint_dir=tmp_path / "new")
    assert _same_model(fresh, warm.fit(X, y, qid))


def test_checkpoint_parameters_are_validated(data):
    X, y, qid = data
    with pytest.raises(ValueError, match="checkpoint_every"):
        LambdaMARTRanker(checkpoint_every=0).fit(X, y, qid)
    with pytest.raises((TypeError, ValueError), match="checkpoint_dir"):
        LambdaMARTRanker(checkpoint_dir=3).fit(X, y, qid)


def test_checkpoint_dir_that_is_a_file_raises(data, tmp_path):
    X, y, qid = data
    (tmp_path / "file").write_text("not a directory")
    for warm_start in (False, True):
        with pytest.raises(ValueError, match="checkpoint_dir=.*is a file; give a directory"):
            LambdaMARTRanker(checkpoint_dir=tmp_path / "file", warm_start=warm_start).fit(X, y, qid)


# ------------------------------------------------------------------------------------------------------ init_model


def test_init_model_trees_start_the_new_model(data, tmp_path):
    X, y, qid = data
    first = LambdaMARTRanker(n_estimators=10, random_state=0).fit(X, y, qid)
    first.save_model(tmp_path / "first.json")
    grown = LambdaMARTRanker(n_estimators=5, random_state=1).fit(X, y, qid, init_model=first)
    assert grown.n_estimators_ == 15 and grown.n_iter_ == 5
    n_first = first._trees["feature"].shape[0]
    for name in ("feature", "threshold", "value"):
        assert np.array_equal(grown._trees[name][:n_first], first._trees[name], equal_nan=True)
    from_file = LambdaMARTRanker(n_estimators=5, random_state=1).fit(X, y, qid, init_model=tmp_path / "first.json")
    assert _same_model(grown, from_file)
    # The new trees were fitted to the gradients at the first model's scores: ranking improves on the data.
    assert grown.score(X, y, qid) > first.score(X, y, qid)


def test_init_model_on_new_data_with_eval_set_and_warm_start(data):
    X, y, qid = data
    X2, y2, qid2 = make_ranking_data(30, n_features=12, random_state=9)
    eval_set = [(X2[:200], y2[:200], qid2[:200])]
    first = LambdaMARTRanker(n_estimators=10, random_state=0).fit(X, y, qid)
    one_go = LambdaMARTRanker(n_estimators=12, random_state=2, early_stopping=False).fit(
        X2, y2, qid2, eval_set=eval_set, init_model=first)
    # The eval set's scores start from the init model's predictions too.
    assert one_go.validation_score_[0] != LambdaMARTRanker(n_estimators=1, random_state=2).fit(
        X2, y2, qid2, eval_set=eval_set).validation_score_[0]
    warm = LambdaMARTRanker(n_estimators=6, random_state=2, early_stopping=False, warm_start=True)
    warm.fit(X2, y2, qid2, eval_set=eval_set, init_model=first)
    warm.set_params(n_estimators=12).fit(X2, y2, qid2, eval_set=eval_set)
    assert _same_model(one_go, warm)
    other = LambdaMARTRanker(n_estimators=3, random_state=5).fit(X, y, qid)
    with pytest.raises(ValueError, match="did not start from this init_model"):
        warm.set_params(n_estimators=14).fit(X2, y2, qid2, init_model=other)


def test_init_model_misuse(data):
    X, y, qid = data
    with pytest.raises(TypeError, match="init_model must be a fitted LambdaMARTRanker"):
        LambdaMARTRanker(n_estimators=2).fit(X, y, qid, init_model=42)
    narrow = LambdaMARTRanker(n_estimators=2).fit(X[:, :5], y, qid)
    with pytest.raises(ValueError, match="init_model was fitted on 5 features, but X has 12"):
        LambdaMARTRanker(n_estimators=2).fit(X, y, qid, init_model=narrow)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        LambdaMARTRanker(n_estimators=2).fit(X, y, qid, init_model=LambdaMARTRanker())


def test_cli_option_errors(tmp_path, letor_files):
    train = [sys.executable, "-m", "lambdamart", "train", "--train", str(letor_files / "train.txt"),
             "--model", str(tmp_path / "m.json")]
    done = subprocess.run(train + ["--resume"], capture_output=True, text=True)
    assert done.returncode == 2 and "--checkpoint-dir" in done.stderr
    (tmp_path / "bad.position").write_text("1\n2\nthree\n")
    done = subprocess.run(train + ["--position", str(tmp_path / "bad.position")], capture_output=True, text=True)
    assert done.returncode == 1 and "line 3" in done.stderr, done.stderr
    done = subprocess.run(train + ["--init-model", str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert done.returncode == 1 and "--init-model" in done.stderr, done.stderr
