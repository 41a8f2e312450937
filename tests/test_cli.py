"""The ``lambdamart`` command line: train / predict / evaluate end to end on small generated LETOR files, the
demo, the console script in a subprocess, and every user error (message on stderr, exit code, no traceback)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli as run
from sklearn.datasets import dump_svmlight_file

import lambdamart
from lambdamart import cli, load_model, metrics
from lambdamart.datasets import load_letor, make_ranking_data

FAST = ["n_estimators=6", "max_leaf_nodes=4", "min_samples_leaf=3", "n_jobs=1", "random_state=0"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """train / vali / test LETOR files with qid: (test rows shuffled, so queries are not contiguous), and the same
    test data in LightGBM's layout (no qid:, sizes in a .query file)."""
    folder = tmp_path_factory.mktemp("letor")
    X, y, qid = make_ranking_data(40, n_features=8, mean_docs_per_query=12, missing_rate=0, random_state=0)
    X[:, 0] += 1  # column 0 never zero, so every file is 1-based without doubt
    parts = {"train": qid < 24, "vali": (qid >= 24) & (qid < 32), "test": qid >= 32}
    paths = {}
    for name, rows in parts.items():
        Xp, yp, qp = X[rows], y[rows], qid[rows]
        if name == "test":
            order = np.random.default_rng(0).permutation(len(qp))
            Xp, yp, qp = Xp[order], yp[order], qp[order]
        paths[name] = folder / f"{name}.txt"
        dump_svmlight_file(Xp, yp, str(paths[name]), query_id=qp, zero_based=False)
    rows = parts["test"]
    paths["lgb"] = folder / "rank.test"
    dump_svmlight_file(X[rows], y[rows], str(paths["lgb"]), zero_based=False)
    sizes = np.bincount(qid[rows])[32:]
    Path(f"{paths['lgb']}.query").write_text("".join(f"{s}\n" for s in sizes))
    return paths


@pytest.fixture(scope="module")
def model(files, tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "model.json"
    code = cli.main(["train", "--train", str(files["train"]), "--valid", str(files["vali"]), "--model", str(path),
                     "--param", *FAST])
    assert code == 0
    return path


# ---------------------------------------------------------------------------------------------- happy paths


def test_version_and_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"lambdamart {lambdamart.__version__}"
    code, out, _ = run(capsys)
    assert code == 0 and "demo" in out and "train" in out and "evaluate" in out
    for command in ("demo", "train", "predict", "evaluate"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0 and "Exit codes" in out


def test_train_writes_a_model_that_matches_the_python_api(files, model, capsys):
    ranker = load_model(model)
    assert ranker.get_params()["max_leaf_nodes"] == 4 and ranker.n_jobs == 1
    assert ranker.best_iteration_ is not None and len(ranker.validation_score_) == ranker.n_iter_
    # The same fit through the Python API gives the same trees.
    X, y, qid = load_letor(files["train"])
    X_v, y_v, qid_v = load_letor(files["vali"], n_features=X.shape[1])
    params = dict(cli.parse_params(FAST), verbose=10)
    same = lambdamart.LambdaMARTRanker(**params).fit(X, y, qid, eval_set=[(X_v, y_v, qid_v)])
    X_t, _, _ = load_letor(files["test"], n_features=X.shape[1])
    np.testing.assert_array_equal(ranker.predict(X_t), same.predict(X_t))


def test_train_prints_progress_and_summary(files, tmp_path, capsys):
    code, out, _ = run(capsys, "train", "--train", files["train"], "--valid", files["vali"], "--model",
                       tmp_path / "m.json", "--param", "n_estimators=4", "verbose=2", "n_jobs=1")
    assert code == 0
    assert "[2/4]" in out and "train NDCG@10" in out and "valid NDCG@10" in out and "elapsed" in out
    assert "24 queries" in out and "8 features" in out
    assert f"model written to {tmp_path / 'm.json'}" in out


def test_predict_writes_one_score_per_line_in_input_order(files, model, tmp_path, capsys):
    out_path = tmp_path / "scores.txt"
    code, out, err = run(capsys, "predict", "--model", model, "--data", files["test"], "--output", out_path)
    assert code == 0 and out == "" and "wrote" in err
    X, _, _ = load_letor(files["test"], n_features=load_model(model).n_features_in_)
    expected = load_model(model).predict(X)
    written = np.array([float(line) for line in out_path.read_text().splitlines()])
    np.testing.assert_array_equal(written, expected)  # repr round-trips float64 exactly
    code, out, _ = run(capsys, "predict", "--model", model, "--data", files["test"])
    assert code == 0 and out == out_path.read_text()


def test_predict_reads_values_in_float64_as_python_does(tmp_path, capsys):
    """Values float32 rounds across a threshold (six decimals around 30000) score as the model's own predict on the
    float64 data says, not as their float32 neighbours would."""
    rng = np.random.default_rng(3)
    X = np.round(30000 + rng.random((400, 3)), 6)
    y, qid = rng.integers(0, 3, 400), np.repeat(np.arange(40), 10)
    data = tmp_path / "fine.txt"
    dump_svmlight_file(X, y, str(data), query_id=qid)
    ranker = lambdamart.LambdaMARTRanker(n_estimators=20, min_samples_leaf=2, random_state=0).fit(X, y, qid)
    assert not np.array_equal(ranker.predict(X.astype(np.float32)), ranker.predict(X))  # the case in question
    ranker.save_model(tmp_path / "m.json")
    code, out, _ = run(capsys, "predict", "--model", tmp_path / "m.json", "--data", data)
    assert code == 0
    np.testing.assert_array_equal([float(line) for line in out.splitlines()], ranker.predict(X))


def test_a_zero_based_file_without_feature_0_is_noted_and_read_as_index_base_says(tmp_path, capsys):
    """scikit-learn writes 0-based files and leaves zeros out: a file in which no row has feature 0 would read as
    1-based, every column one to the left. train reads --valid with --train's numbering; predict and evaluate note
    the doubt, and --index-base 0 reads the file as the model was trained."""
    rng = np.random.default_rng(0)
    X, qid = rng.random((200, 4)), np.repeat(np.arange(20), 10)
    y = (X[:, 0] * 3).astype(int)
    X_test = X.copy()
    X_test[:, 0] = 0
    dump_svmlight_file(X, y, str(tmp_path / "train.txt"), query_id=qid)  # 0-based, feature 0 present
    dump_svmlight_file(X_test, y, str(tmp_path / "test.txt"), query_id=qid)  # 0-based, no feature 0 written
    code, out, _ = run(capsys, "train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "test.txt",
                       "--model", tmp_path / "m.json", "--param", "n_estimators=5", "min_samples_leaf=2")
    assert code == 0 and out.count("4 features") == 2, out
    ranker = load_model(tmp_path / "m.json")
    X_read, y_read, qid_read = load_letor(tmp_path / "train.txt", dtype=np.float64)
    in_python = lambdamart.LambdaMARTRanker(n_estimators=5, min_samples_leaf=2).fit(
        X_read, y_read, qid_read, eval_set=[(X_test, y, qid)])
    # --valid's columns are --train's:
    np.testing.assert_array_equal(ranker.validation_score_, in_python.validation_score_)
    code, out, err = run(capsys, "predict", "--model", tmp_path / "m.json", "--data", tmp_path / "test.txt")
    assert code == 0 and "has no feature index 0, so it is read 1-based" in err and "--index-base 0" in err
    code, out, err = run(capsys, "predict", "--model", tmp_path / "m.json", "--data", tmp_path / "test.txt",
                         "--index-base", "0")
    assert code == 0 and err == ""
    np.testing.assert_array_equal([float(line) for line in out.splitlines()], ranker.predict(X_test))
    code, _, err = run(capsys, "evaluate", "--model", tmp_path / "m.json", "--data", tmp_path / "test.txt")
    assert code == 0 and "has no feature index 0" in err
    code, _, err = run(capsys, "predict", "--model", tmp_path / "m.json", "--data", tmp_path / "train.txt",
                       "--index-base", "1")
    assert code == 1 and "invalid feature index 0; indices start at 1" in err


def test_evaluate_prints_the_metrics_of_the_python_api(files, model, capsys):
    code, out, err = run(capsys, "evaluate", "--model", model, "--data", files["test"], "--metrics",
                         "NDCG@10,ndcg,map,mrr@3,p@2,precision@3,recall@5,hits@1,err@5,dcg@3,kendall")
    assert code == 0 and "8 queries" in err
    ranker = load_model(model)
    X, y, qid = load_letor(files["test"], n_features=ranker.n_features_in_)
    s = ranker.predict(X)
    expected = {
        "ndcg@10": metrics.ndcg(y, s, qid, k=10), "ndcg": metrics.ndcg(y, s, qid),
        "map": metrics.mean_average_precision(y, s, qid), "mrr@3": metrics.mean_reciprocal_rank(y, s, qid, k=3),
        "p@2": metrics.precision_at_k(y, s, qid, k=2), "precision@3": metrics.precision_at_k(y, s, qid, k=3),
        "recall@5": metrics.recall_at_k(y, s, qid, k=5), "hits@1": metrics.hits_at_k(y, s, qid, k=1),
        "err@5": metrics.err(y, s, qid, k=5), "dcg@3": metrics.dcg(y, s, qid, k=3),
        "kendall": metrics.kendall_tau(y, s, qid),
    }
    printed = dict(line.split() for line in out.splitlines())
    assert list(printed) == list(expected)
    for name, value in expected.items():
        assert float(printed[name]) == pytest.approx(value, abs=5e-7), name


def test_evaluate_default_metrics_and_the_models_gain(files, tmp_path, capsys):
    path = tmp_path / "linear.json"
    code, _, _ = run(capsys, "train", "--train", files["train"], "--model", path, "--param", *FAST, "gain=linear")
    assert code == 0
    code, out, _ = run(capsys, "evaluate", "--model", path, "--data", files["test"])
    assert code == 0
    printed = dict(line.split() for line in out.splitlines())
    assert list(printed) == ["ndcg@1", "ndcg@5", "ndcg@10", "map", "mrr"]
    X, y, qid = load_letor(files["test"], n_features=8)
    s = load_model(path).predict(X)
    assert float(printed["ndcg@10"]) == pytest.approx(metrics.ndcg(y, s, qid, k=10, gain="linear"), abs=5e-7)


def test_lightgbm_layout_with_query_file(files, model, tmp_path, capsys):
    """Files without qid: take their queries from FILE.query; predict needs no query information at all."""
    path = tmp_path / "m.json"
    code, out, _ = run(capsys, "train", "--train", files["lgb"], "--model", path, "--param", *FAST)
    assert code == 0 and "8 queries" in out
    code, out, _ = run(capsys, "evaluate", "--model", model, "--data", files["lgb"], "--metrics", "ndcg@10")
    assert code == 0
    bare = tmp_path / "bare.txt"
    shutil.copy(files["lgb"], bare)  # no bare.txt.query
    code, out, _ = run(capsys, "predict", "--model", model, "--data", bare)
    assert code == 0 and len(out.splitlines()) == len(Path(files["lgb"]).read_text().splitlines())


def test_files_narrower_or_wider_than_the_model(model, tmp_path, capsys):
    ranker = load_model(model)
    rng = np.random.default_rng(1)
    X = rng.random((6, 12)).astype(np.float32) + 1
    X_narrow = X.copy()
    X_narrow[:, 5:] = 0  # written as 5 features
    dump_svmlight_file(X_narrow, np.zeros(6), str(tmp_path / "narrow.txt"), zero_based=False)
    dump_svmlight_file(X, np.zeros(6), str(tmp_path / "wide.txt"), zero_based=False)

    code, out, err = run(capsys, "predict", "--model", model, "--data", tmp_path / "narrow.txt")
    assert code == 0 and err == ""
    expected = ranker.predict(np.ascontiguousarray(X_narrow[:, :8]))
    np.testing.assert_array_equal([float(v) for v in out.split()], expected)

    code, out, err = run(capsys, "predict", "--model", model, "--data", tmp_path / "wide.txt")
    assert code == 0 and "12 feature columns but the model was trained on 8" in err
    np.testing.assert_array_equal([float(v) for v in out.split()], ranker.predict(np.ascontiguousarray(X[:, :8])))


def test_valid_file_wider_than_train_file(files, tmp_path, capsys):
    X, y, qid = load_letor(files["train"])
    X = np.ascontiguousarray(X[:, :5])  # the training file lists only 5 features, the validation file 8
    dump_svmlight_file(X, y, str(tmp_path / "narrow.txt"), query_id=qid, zero_based=False)
    code, out, _ = run(capsys, "train", "--train", tmp_path / "narrow.txt", "--valid", files["vali"], "--model",
                       tmp_path / "m.json", "--param", *FAST)
    assert code == 0 and "8 features" in out
    assert load_model(tmp_path / "m.json").n_features_in_ == 8


def test_parse_params_reads_python_literals():
    params = cli.parse_params(["learning_rate=0.05", "max_leaf_nodes=63", "max_depth=None", "early_stopping=true",
                               "gain=linear", "pair_normalization=False", "random_state=none", "max_depth=4",
                               "gain=[0, 1, 3, 7, 15]", " tol = 1e-3 "])
    assert params == {"learning_rate": 0.05, "max_leaf_nodes": 63, "max_depth": 4, "early_stopping": True,
                      "gain": [0, 1, 3, 7, 15], "pair_normalization": False, "random_state": None, "tol": 1e-3}
    assert type(params["max_leaf_nodes"]) is int


def test_other_libraries_names_point_at_real_parameters():
    known = lambdamart.LambdaMARTRanker().get_params()
    assert set(cli._ALIASES.values()) <= set(known)
    assert not set(cli._ALIASES) & set(known)


def test_parse_metrics():
    parsed = cli.parse_metrics(" NDCG@10, map ,mrr,p@5,,kendall")
    assert [(name, kwargs) for name, _, kwargs in parsed] == [
        ("ndcg@10", {"k": 10}), ("map", {}), ("mrr", {}), ("p@5", {"k": 5}), ("kendall", {})]
    assert parsed[3][1] is metrics.precision_at_k


def test_warnings_are_one_line_notes(tmp_path, capsys):
    path = tmp_path / "flat.txt"
    path.write_text("1 qid:1 1:0.5\n1 qid:1 1:0.7\n2 qid:2 1:0.1\n")
    code, _, err = run(capsys, "train", "--train", path, "--model", tmp_path / "m.json", "--param", "n_estimators=2")
    assert code == 0
    assert "lambdamart train: warning: every training query has all labels equal" in err
    assert "ranker.py" not in err


def test_demo_runs_small(capsys):
    code, out, err = run(capsys, "demo", "--queries", "12", "--rounds", "3", "--jobs", "1")
    assert code == 0, err
    for text in ("[3/3]", "train NDCG@10", "valid NDCG@10", "elapsed", "eta", "pointwise", "NDCG@1 ", "NDCG@5",
                 "NDCG@10", "MAP", "MRR", "Top features by gain"):
        assert text in out, text


def test_console_script_runs_in_a_subprocess(files, model):
    exe = shutil.which("lambdamart", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if exe is None:
        pytest.skip("the lambdamart console script is not installed (pip install -e .)")
    done = subprocess.run([exe, "evaluate", "--model", str(model), "--data", str(files["test"]), "--metrics",
                           "ndcg@10,map"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["ndcg@10", "map"]
    done = subprocess.run([exe, "predict", "--model", str(model), "--data", "missing.txt"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == "lambdamart predict: error: --data file not found: missing.txt\n"


def test_python_dash_m_lambdamart(files, model):
    """``python -m lambdamart`` is the same command line, for when the scripts folder is not on PATH."""
    done = subprocess.run([sys.executable, "-m", "lambdamart", "evaluate", "--model", str(model), "--data",
                           str(files["test"]), "--metrics", "mrr"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mrr ")


def test_train_summary_without_early_stopping(files, tmp_path, capsys):
    code, out, _ = run(capsys, "train", "--train", files["train"], "--valid", files["vali"], "--model",
                       tmp_path / "m.json", "--param", *FAST, "early_stopping=false", "verbose=0")
    assert code == 0 and "[" not in out
    ranker = load_model(tmp_path / "m.json")
    assert ranker.n_estimators_ == ranker.n_iter_ == 6
    assert "trained 6 trees" in out and f"at round {ranker.best_iteration_})" in out


# ---------------------------------------------------------------------------------------------- user errors


def test_user_errors(files, model, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 qid:1 1:0.5 2:0.3\n0 qid:1 1:0.2 2:oops\n")
    noq = tmp_path / "noq.txt"
    noq.write_text("1 1:0.5\n0 1:0.2\n")
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("1 qid:1 1:0.5\n0 1:0.2\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text(Path(model).read_text()[:200])
    big = tmp_path / "big.txt"
    big.write_text("60 qid:1 1:0.5\n0 qid:1 1:0.2\n")
    out = tmp_path / "out.json"
    train = ["train", "--train", files["train"], "--model", out]
    n_train = sum(1 for _ in open(files["train"]))
    superscript, huge = tmp_path / "superscript.txt", tmp_path / "huge.txt"
    superscript.write_text("1\n" * (n_train - 1) + "\u00b2\n")  # str.isdigit() says yes; int() says no
    huge.write_text("99999999999999999999\n" + "1\n" * (n_train - 1))
    cases = [
        (train + ["--position", superscript], 1, f"line {n_train}: expected a rank"),
        (train + ["--position", huge], 1, "line 1: expected a rank"),
        (["train", "--train", files["train"], "--model", ""], 1, "is a directory; give a file name"),
        (["train", "--train", files["train"], "--model", f"{tmp_path}/new/"], 1, "is a directory"),
        # (argv, exit code, text in the error line)
        (["train", "--train", tmp_path / "missing.txt", "--model", out], 1, "--train file not found"),
        (train + ["--valid", tmp_path / "missing.txt"], 1, "--valid file not found"),
        (["train", "--train", tmp_path, "--model", out], 1, "is a directory"),
        (["train", "--train", bad, "--model", out], 1, "bad.txt line 2: value 'oops' of feature 2 is not a number"),
        (["train", "--train", noq, "--model", out], 1, "noq.txt.query"),
        (["train", "--train", mixed, "--model", out], 1, "mixed.txt line 2: no qid: field"),
        (["train", "--train", big, "--model", out], 1, "gain='linear'"),
        (["train", "--train", files["train"], "--model", tmp_path / "no" / "m.json"], 1, "does not exist"),
        (train + ["--param", "num_leaves=7"], 2, "unknown parameter 'num_leaves'. LambdaMARTRanker calls it "
                                                 "'max_leaf_nodes'"),
        (train + ["--param", "learnin_rate=0.1"], 2, "Did you mean 'learning_rate'?"),
        (train + ["--param", "learning_rate=-1"], 2, "'learning_rate' parameter of LambdaMARTRanker must be"),
        (train + ["--param", "max_leaf_nodes"], 2, "is not key=value"),
        (train + ["--param", "gain={1: 2}"], 2, "cannot be written to a model file"),
        (["train", "--model", out], 2, "required: --train"),
        (["predict", "--model", tmp_path / "missing.json", "--data", files["test"]], 1, "--model file not found"),
        (["predict", "--model", files["test"], "--data", files["test"]], 1, "not valid JSON"),
        (["predict", "--model", corrupt, "--data", files["test"]], 1, "truncated"),
        (["predict", "--model", model, "--data", bad], 1, "bad.txt line 2"),
        (["predict", "--model", model, "--data", empty], 1, "no data rows"),
        (["predict", "--model", model, "--data", files["test"], "--output", tmp_path / "no" / "s.txt"], 1,
         "does not exist"),
        (["evaluate", "--model", model, "--data", noq], 1, "noq.txt.query"),
        (["evaluate", "--model", model, "--data", files["test"], "--metrics", "ndcg@10,foo"], 2,
         "unknown metric 'foo'"),
        (["evaluate", "--model", model, "--data", files["test"], "--metrics", "ndgc@10"], 2, "Did you mean 'ndcg'"),
        (["evaluate", "--model", model, "--data", files["test"], "--metrics", "kendall@5"], 2, "kendall takes no @k"),
        (["evaluate", "--model", model, "--data", files["test"], "--metrics", "ndcg@0"], 2, "positive integer"),
        (["evaluate", "--model", model, "--data", files["test"], "--metrics", ","], 2, "--metrics is empty"),
        (["demo", "--queries", "5"], 2, "--queries must be at least 10"),
        (["demo", "--rounds", "0"], 2, "--rounds must be at least 1"),
        (["frobnicate"], 2, "invalid choice"),
    ]
    for argv, expected_code, text in cases:
        code, stdout, err = run(capsys, *argv)
        assert code == expected_code, (argv, err)
        assert text in err, (argv, err)
        assert f"lambdamart {argv[0]}: error:" in err or "lambdamart: error:" in err, (argv, err)
        if argv[0] != "train":
            assert stdout == "", argv
    assert not out.exists()


def test_interrupt_exits_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_demo", interrupted)
    code, _, err = run(capsys, "demo")
    assert code == 130 and err == "lambdamart demo: interrupted\n"


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """Data files that cannot be read, each as the problem named in BAD_FILE_ERRORS."""
    folder = tmp_path_factory.mktemp("bad")
    paths = {name: folder / f"{name}.txt" for name in ("malformed", "noquery", "sizes", "empty")}
    paths["malformed"].write_text("1 qid:1 1:0.5 2:0.3\n0 qid:1 1:0.2\n2 qid:2 1:0.4 2:0.3 2:0.1\n")
    paths["noquery"].write_text("1 1:0.5\n0 1:0.2\n2 1:0.4\n")
    paths["sizes"].write_text("1 1:0.5\n0 1:0.2\n2 1:0.4\n")
    (folder / "sizes.txt.query").write_text("2\n2\n")
    paths["empty"].write_text("")
    return {"malformed": paths["malformed"], "no-query-file": paths["noquery"], "bad-query-sizes": paths["sizes"],
            "empty": paths["empty"]}


BAD_FILE_ERRORS = {
    "malformed": r"malformed\.txt line 3: feature indices must be increasing and unique, but 2 follows 2",
    "no-query-file": r"noquery\.txt has no qid: fields, and no query file was found at .*noquery\.txt\.query",
    "bad-query-sizes": r"sizes\.txt\.query: the 2 query sizes sum to 4, but .*sizes\.txt has 3 rows",
    "empty": r"empty\.txt: no data rows",
}


# predict needs no query ids, so it reads neither qid: nor a .query file (see the next test).
@pytest.mark.parametrize("problem, command", [
    (problem, command) for problem in BAD_FILE_ERRORS for command in ("train", "train --valid", "predict", "evaluate")
    if not (command == "predict" and problem in ("no-query-file", "bad-query-sizes"))])
def test_data_file_errors_are_one_line_naming_the_file_and_line(files, model, bad_files, capsys, tmp_path, problem,
                                                                 command):
    bad = bad_files[problem]
    argv = {
        "train": ["train", "--train", bad, "--model", tmp_path / "m.json"],
        "train --valid": ["train", "--train", files["train"], "--valid", bad, "--model", tmp_path / "m.json"],
        "predict": ["predict", "--model", model, "--data", bad],
        "evaluate": ["evaluate", "--model", model, "--data", bad],
    }[command]
    code, out, err = run(capsys, *argv)
    assert code == 1, err
    assert re.search(BAD_FILE_ERRORS[problem], err), err
    assert err.startswith(f"lambdamart {argv[0]}: error:")
    assert err.count("\n") == 1  # one line, no traceback
    assert not (tmp_path / "m.json").exists()
    if command != "train":
        assert out == ""


@pytest.mark.parametrize("problem", ["no-query-file", "bad-query-sizes"])
def test_predict_needs_no_query_ids(model, bad_files, capsys, problem):
    code, out, err = run(capsys, "predict", "--model", model, "--data", bad_files[problem])
    assert code == 0, err
    assert len(out.split()) == 3


# ---------------------------------------------------------------------------------------------- broken pipes


def _without_unbuffered(unbuffered):
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
def test_predict_into_a_pipe_its_reader_closes_exits_141_quietly(model, tmp_path, unbuffered):
    """``lambdamart predict ... | head -1``: the reader leaves while predict is still writing. The command stops
    without a traceback or "Exception ignored" and exits 141 (128 + SIGPIPE), not 1 (a file error) and not 0 (its
    output was cut). PYTHONUNBUFFERED matters: there, a large unchecked write loses the rest without an error."""
    data = tmp_path / "many.txt"
    data.write_text("0 1:0.5 3:0.25\n" * 100_000)  # ~2 MB of scores: more than a pipe holds (1 MiB at most)
    proc = subprocess.Popen([sys.executable, "-m", "lambdamart", "predict", "--model", str(model), "--data",
                             str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_without_unbuffered(unbuffered))
    try:
        first = proc.stdout.readline()
        proc.stdout.close()  # the reader leaves, as head does
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=300)
    finally:
        proc.kill()
    float(first)  # a score came through before the pipe closed
    assert code == 141, err
    assert err == ""


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
def test_stdout_closed_before_the_output_exits_141_quietly(model, files, unbuffered):
    """A few lines printed into a pipe nobody reads: with a buffered stdout the failure shows only at the last flush,
    which the interpreter would otherwise report as "Exception ignored ... BrokenPipeError" and exit 120 after the
    command returned 0."""
    proc = subprocess.Popen([sys.executable, "-m", "lambdamart", "evaluate", "--model", str(model), "--data",
                             str(files["test"])], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_without_unbuffered(unbuffered))
    proc.stdout.close()  # before the interpreter has even started: nothing can be read
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert code == 141, err
    assert "Exception ignored" not in err and "Traceback" not in err and "error" not in err, err


def test_broken_pipe_in_process_returns_141_and_leaves_the_process_stdout_alone(files, model, monkeypatch, capfd):
    """``main`` called from Python with a ``sys.stdout`` that has no file descriptor: 141, and nothing to redirect."""
    import io

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli.main(["predict", "--model", str(model), "--data", str(files["test"])]) == 141
    assert cli.main(["evaluate", "--model", str(model), "--data", str(files["test"])]) == 141
    monkeypatch.undo()
    print("fd 1 still reaches the terminal")
    assert "fd 1 still reaches the terminal" in capfd.readouterr().out


def test_help_documents_exit_code_141(capsys):
    for argv in ([], ["predict", "--help"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and "141" in out and "130" in out
    assert "141" in cli.__doc__


# ---------------------------------------------------------------------------------------------- code hygiene


def _cli_syntax_tree():
    import ast

    return ast.parse(Path(cli.__file__).read_text(encoding="utf-8"))


def test_cli_binds_no_name_of_a_builtin():
    """No variable, parameter, exception target or function in cli.py hides a builtin (``exit``, ``help``...)."""
    import ast
    import builtins

    bound = set()
    for node in ast.walk(_cli_syntax_tree()):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
    assert not bound & set(dir(builtins))


def test_cli_imports_no_private_names():
    """The CLI goes through public functions (``load_features``, not ``datasets._locate_error``). The one import
    from a private module, ``_model_format.encode_param``, is a package-internal function without an underscore."""
    import ast

    private = [(node.module, alias.name) for node in ast.walk(_cli_syntax_tree()) if isinstance(node, ast.ImportFrom)
               for alias in node.names if alias.name.startswith("_") and not alias.name.endswith("__")]
    assert private == []


# ---------------------------------------------------------------------------------------------- load_features


def test_load_features_reads_what_predict_reads(files, tmp_path):
    """Files with qid:, without it and without a .query file, or mixing both: the features, in file order."""
    from lambdamart.datasets import load_features

    X_letor, _, _ = load_letor(files["test"])
    np.testing.assert_array_equal(load_features(files["test"]), X_letor)
    np.testing.assert_array_equal(load_features(str(files["lgb"])), load_letor(files["lgb"])[0])
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("1 qid:1 1:0.5 3:2\n# a comment\n\n0 2:0.25\n2 qid:abc 1:-1 # qid: is skipped, not read\n")
    X = load_features(mixed)
    assert X.dtype == np.float32 and X.flags.c_contiguous
    np.testing.assert_array_equal(X, [[0.5, 0, 2], [0, 0.25, 0], [-1, 0, 0]])
    X_sparse = load_features(mixed, sparse=True, n_features=5, dtype=np.float64)
    assert X_sparse.format == "csr" and X_sparse.shape == (3, 5) and X_sparse.dtype == np.float64
    np.testing.assert_array_equal(X_sparse.toarray()[:, :3], X)
    assert load_features(mixed, zero_based=True).shape == (3, 4)


def test_load_features_errors_name_the_file_and_line(tmp_path):
    from lambdamart.datasets import load_features

    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_features(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n\n")
    with pytest.raises(ValueError, match=r"empty\.txt: no data rows"):
        load_features(empty)
    bad = tmp_path / "bad.txt"
    bad.write_text("0 1:0.5\n0 1:0.5 2:oops\n")
    with pytest.raises(ValueError, match=r"bad\.txt line 2: value 'oops' of feature 2 is not a number"):
        load_features(bad)
    wide = tmp_path / "wide.txt"
    wide.write_text("0 1:0.5\n0 9:0.5\n")
    with pytest.raises(ValueError, match=r"wide\.txt line 2: feature index 9 is beyond n_features=4"):
        load_features(wide, n_features=4)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        load_features(3)


def test_load_features_and_predict_warn_when_a_value_overflows_float32(model, tmp_path, capsys):
    from lambdamart.datasets import load_features

    huge = tmp_path / "huge.txt"
    huge.write_text("0 1:0.5\n# comment\n0 1:0.5 2:1e39\n")
    with pytest.warns(UserWarning, match=r"huge\.txt line 3: value 1e39 of feature 2 is beyond the range of float32"):
        X = load_features(huge)
    assert np.isinf(X[1, 1])
    assert np.isfinite(load_features(huge, dtype=np.float64)).all()
    # The command line reads float64, as the file writes the values: nothing overflows there.
    code, out, err = run(capsys, "predict", "--model", model, "--data", huge)
    assert code == 0 and len(out.splitlines()) == 2 and "warning" not in err


# ---------------------------------------------------------------------------------------------- small fixes


def test_demo_rejects_a_seed_numpy_cannot_take(capsys):
    for seed in ("-1", str(2**32)):
        code, out, err = run(capsys, "demo", "--queries", "10", "--rounds", "1", "--seed", seed)
        assert code == 2 and out == "", err
        assert f"lambdamart demo: error: --seed must be between 0 and 2**32 - 1, got {seed}." in err


def test_existing_read_only_output_fails_before_the_work(files, model, tmp_path, capsys, monkeypatch):
    locked = tmp_path / "locked.txt"
    locked.write_text("keep\n")
    locked.chmod(0o444)
    access = os.access  # root may write a read-only file: make os.access answer as for anyone else

    def as_a_user(path, mode, **kwargs):
        return not (mode & os.W_OK and os.fspath(path) == str(locked)) and access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", as_a_user)
    for argv in (["train", "--train", files["train"], "--model", locked, "--param", *FAST],
                 ["predict", "--model", model, "--data", files["test"], "--output", locked]):
        code, out, err = run(capsys, *argv)
        assert code == 1 and "exists and is not writable" in err and "trained" not in out, err
    assert locked.read_text() == "keep\n"


# ---------------------------------------------------------------- training on a Dask cluster


@pytest.mark.slow
def test_train_on_a_local_dask_cluster_writes_the_single_machine_model(tmp_path, capsys):
    pytest.importorskip("distributed")
    X, y, qid = make_ranking_data(60, random_state=2)
    order = np.argsort(qid, kind="stable")
    X, y, qid = np.nan_to_num(X[order]), y[order], qid[order]  # SVMlight files hold no NaN
    half = np.searchsorted(qid, qid[len(qid) // 2])  # two files, whole queries in each
    for name, part in (("a", slice(0, half)), ("b", slice(half, None))):
        dump_svmlight_file(X[part], y[part], str(tmp_path / f"part-{name}.txt"), query_id=qid[part])
    dump_svmlight_file(X, y, str(tmp_path / "all.txt"), query_id=qid)
    params = ["--param", "n_estimators=5", "verbose=0"]
    assert run(capsys, "train", "--train", str(tmp_path / "part-*.txt"), "--model", str(tmp_path / "dask.json"),
               "--dask-workers", "2", *params)[0] == 0
    assert run(capsys, "train", "--train", str(tmp_path / "all.txt"), "--model", str(tmp_path / "local.json"),
               *params)[0] == 0
    on_cluster, local = load_model(tmp_path / "dask.json"), load_model(tmp_path / "local.json")
    for field in ("feature", "threshold", "left", "right", "missing_left"):
        np.testing.assert_array_equal(on_cluster._trees[field], local._trees[field])
    X_all = load_letor(tmp_path / "all.txt")[0]
    np.testing.assert_allclose(on_cluster.predict(X_all), local.predict(X_all), rtol=1e-9, atol=1e-12)
    # Several files without a cluster are a usage error, not a silent concatenation.
    code, _, err = run(capsys, "train", "--train", str(tmp_path / "part-a.txt"), str(tmp_path / "part-b.txt"),
                       "--model", str(tmp_path / "m.json"))
    assert code == 2 and "several files are for a cluster" in err
