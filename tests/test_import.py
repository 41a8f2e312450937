"""import_model reads LightGBM and XGBoost models into rankers whose predict equals the library's own.

Models are trained by the real libraries on data with NaN, imported from the saved file and from the model object,
and compared with the library's predict on the data and on rows at, beside and between every threshold (for
XGBoost also float64 values halfway between float32 neighbours, which XGBoost rounds to even). Unsupported models
(categorical splits, linear trees, multiclass, transformed outputs) and damaged files raise ValueError.
"""

import json

import numpy as np
import pytest
from exchange_probes import at_thresholds_f64, probe_rows
from helpers import make_data, run_cli

from lambdamart import LambdaMARTRanker, import_model, load_model

F32 = np.float32


@pytest.fixture(scope="module")
def data():
    X, y, qid = make_data(seed=5, n_queries=30, n_features=5, nan_fraction=0.15)
    X[:, 3] = np.where(y >= 2, np.nan, X[:, 3])
    return X, y, qid


def _group(qid):
    return np.unique(qid, return_counts=True)[1]


def _rows(ranker, X):
    return np.vstack([X, probe_rows(ranker._trees, X[:40], at_thresholds_f64)])


# ---------------------------------------------------------------- LightGBM


@pytest.fixture(scope="module")
def lgb_ranker(data):
    lgb = pytest.importorskip("lightgbm")
    X, y, qid = data
    return lgb.LGBMRanker(n_estimators=30, num_leaves=8, min_child_samples=5, verbose=-1).fit(X, y, group=_group(qid))


def test_lightgbm_model_file_and_objects_import_with_the_same_predictions(lgb_ranker, data, tmp_path):
    X = data[0]
    booster = lgb_ranker.booster_
    booster.save_model(str(tmp_path / "model.txt"))
    for source in (tmp_path / "model.txt", str(tmp_path / "model.txt"), booster, lgb_ranker):
        ranker = import_model(source)
        assert isinstance(ranker, LambdaMARTRanker)
        assert ranker.n_features_in_ == 5 and ranker.n_estimators_ == ranker.n_iter_ == booster.num_trees()
        assert not hasattr(ranker, "feature_names_in_")  # LightGBM's generated Column_i names are not kept
        rows = _rows(ranker, X)
        np.testing.assert_allclose(ranker.predict(rows), booster.predict(rows), rtol=0, atol=1e-12)


def test_lightgbm_missing_type_none_compares_nan_as_zero(data):
    lgb = pytest.importorskip("lightgbm")
    X, y, qid = data
    X = np.where(np.isnan(X), np.nan, np.round(X, 1))  # thresholds near 0 so that NaN-as-0 matters
    model = lgb.LGBMRanker(n_estimators=10, num_leaves=6, min_child_samples=5, use_missing=False,
                           verbose=-1).fit(X, y, group=_group(qid))
    text = model.booster_.model_to_string()
    decisions = [int(d) for line in text.splitlines() if line.startswith("decision_type=") for d in line[14:].split()]
    assert decisions and all((d >> 2) & 3 == 0 for d in decisions)  # missing type None on every split
    ranker = import_model(model)
    rows = _rows(ranker, X)
    rows = np.vstack([rows, np.where(np.arange(rows.shape[1]) % 2, np.nan, rows[:200])])  # more NaN
    np.testing.assert_allclose(ranker.predict(rows), model.booster_.predict(rows), rtol=0, atol=1e-12)


def test_lightgbm_zero_splits_send_tiny_values_as_lightgbm_does(data):
    """LightGBM splits zeros from the rest at ±1e-35 and its predict reads |x| <= 1e-35 as 0.0."""
    lgb = pytest.importorskip("lightgbm")
    X, y, qid = data
    X = np.where(np.abs(X) < 0.7, 0.0, X)  # many exact zeros: LightGBM's zero-threshold splits
    model = lgb.LGBMRanker(n_estimators=10, num_leaves=6, min_child_samples=5, verbose=-1).fit(X, y, group=_group(qid))
    assert "e-35" in model.booster_.model_to_string()
    ranker = import_model(model)
    k = float(np.float32(1e-35))
    tiny = [0.0, -0.0, k, -k, k / 2, -k / 2, np.nextafter(k, 1), np.nextafter(-k, -1), 2e-35, -2e-35, 1e-300]
    rows = np.repeat(X[:len(tiny)], X.shape[1], axis=0)
    rows[np.arange(rows.shape[0]), np.tile(np.arange(X.shape[1]), len(tiny))] = np.repeat(tiny, X.shape[1])
    rows = np.vstack([rows, _rows(ranker, X)])
    np.testing.assert_allclose(ranker.predict(rows), model.booster_.predict(rows), rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
def test_imported_model_keeps_real_feature_names_and_saves(lgb_ranker, data, tmp_path):
    lgb = pytest.importorskip("lightgbm")
    X, y, qid = data
    names = ["title", "body", "anchor", "url", "age"]
    model = lgb.LGBMRanker(n_estimators=5, num_leaves=4, min_child_samples=5, verbose=-1).fit(
        X, y, group=_group(qid), feature_name=names)
    ranker = import_model(model)
    assert list(ranker.feature_names_in_) == names
    ranker.save_model(tmp_path / "ours.json")
    np.testing.assert_array_equal(load_model(tmp_path / "ours.json").predict(X), ranker.predict(X))


def test_lightgbm_names_keep_whitespace_other_than_spaces(data):
    """LightGBM separates names by ' ' alone and ends lines at '\\n' alone: U+00A0 and U+2028 stay in a name."""
    lgb = pytest.importorskip("lightgbm")
    pd = pytest.importorskip("pandas")
    X, y, qid = data
    names = ["price\xa0usd", "age\u2028days", "size", "url", "len\xa0"]
    booster = lgb.train({"objective": "lambdarank", "num_leaves": 4, "min_data_in_leaf": 5, "verbose": -1},
                        lgb.Dataset(pd.DataFrame(X, columns=names), y, group=_group(qid)), 3)
    assert booster.feature_name() == names
    assert list(import_model(booster).feature_names_in_) == names


def _lgb_model_text(estimator, X, y, **fit_params):
    return estimator.fit(X, y, **fit_params).booster_.model_to_string()


@pytest.mark.parametrize("case, message", [
    ("categorical", "by category"),
    ("linear", "linear tree"),
    ("multiclass", "multiclass"),
    ("binary", "transforms the sum"),
    ("zero_as_missing", "zero as missing"),
    ("reg_sqrt", "squares the sum"),
])
def test_lightgbm_models_we_cannot_reproduce_are_refused(case, message, data, tmp_path):
    lgb = pytest.importorskip("lightgbm")
    X, y, qid = data
    params = dict(n_estimators=3, num_leaves=4, min_child_samples=5, verbose=-1)
    if case == "categorical":
        Xc = np.column_stack([y.astype(int), np.nan_to_num(X[:, 1:])])  # a category that predicts the label
        text = _lgb_model_text(lgb.LGBMRanker(**params, min_data_per_group=2, cat_smooth=1), Xc, y,
                               group=_group(qid), categorical_feature=[0])
    elif case == "linear":
        text = _lgb_model_text(lgb.LGBMRegressor(**params, linear_tree=True), np.nan_to_num(X), y)
    elif case == "multiclass":
        text = _lgb_model_text(lgb.LGBMClassifier(**params), X, y)
    elif case == "binary":
        text = _lgb_model_text(lgb.LGBMClassifier(**params), X, y > 1)
    elif case == "reg_sqrt":
        text = _lgb_model_text(lgb.LGBMRegressor(**params, reg_sqrt=True), X, y)
    else:
        text = _lgb_model_text(lgb.LGBMRegressor(**params, zero_as_missing=True), np.nan_to_num(X), y)
    (tmp_path / "model.txt").write_text(text)
    with pytest.raises(ValueError, match=message):
        import_model(tmp_path / "model.txt")


def test_categorical_error_names_the_feature(data):
    lgb = pytest.importorskip("lightgbm")
    X, y, qid = data
    Xc = np.column_stack([np.nan_to_num(X[:, :2]), y.astype(int)])
    model = lgb.LGBMRanker(n_estimators=3, num_leaves=4, min_child_samples=5, min_data_per_group=2, cat_smooth=1,
                           verbose=-1).fit(Xc, y, group=_group(qid), feature_name=["a", "b", "genre"],
                                           categorical_feature=["genre"])
    with pytest.raises(ValueError, match="'genre' \\(column 2\\)"):
        import_model(model)


# ---------------------------------------------------------------- XGBoost


@pytest.fixture(scope="module")
def xgb_ranker(data):
    xgb = pytest.importorskip("xgboost")
    X, y, qid = data
    return xgb.XGBRanker(n_estimators=30, max_depth=4, learning_rate=0.1, n_jobs=1).fit(X, y, qid=qid)


def _xgb_rows(ranker, X):
    """Float64 rows at every threshold, its neighbours, and halfway between the float32 values on each side of
    XGBoost's split condition (the tie XGBoost's float64 -> float32 rounding breaks to even)."""
    def values_at(t):
        c = F32(t)  # our threshold rounds to XGBoost's condition or the float32 below it
        below, above = np.nextafter(c, F32(-np.inf)), np.nextafter(c, F32(np.inf))
        mids = [(float(below) + float(c)) / 2, (float(c) + float(above)) / 2]
        return at_thresholds_f64(t)[:4] + [float(below), float(c), float(above)] + mids + [
            np.nextafter(m, s) for m in mids for s in (-np.inf, np.inf)]
    return np.vstack([X, probe_rows(ranker._trees, X[:40], values_at)])


def test_xgboost_model_file_and_objects_import_with_the_same_predictions(xgb_ranker, data, tmp_path):
    X = data[0]
    booster = xgb_ranker.get_booster()
    booster.save_model(str(tmp_path / "model.json"))
    for source in (tmp_path / "model.json", booster, xgb_ranker):
        ranker = import_model(source)
        assert ranker.n_features_in_ == 5 and ranker.n_estimators_ == 31  # 30 trees and base_score
        rows = _xgb_rows(ranker, X)
        for batch in (rows, rows.astype(F32)):
            theirs = booster.inplace_predict(batch)
            np.testing.assert_allclose(ranker.predict(batch), theirs, rtol=0,
                                       atol=1e-6 * max(1.0, np.abs(theirs).max()))


def test_xgboost_rows_go_xgboost_s_way_at_every_split_condition(xgb_ranker, data):
    """Tree by tree: each tree's output for each row is the leaf XGBoost reaches (float32 values, exact)."""
    X = data[0]
    booster = xgb_ranker.get_booster()
    ranker = import_model(booster)
    rows = _xgb_rows(ranker, X)
    from exchange_probes import leaves
    reached = leaves(ranker._trees, rows) + ranker._trees["tree_starts"]
    base = ranker._trees["value"][ranker._trees["tree_starts"][-1]]
    for k in range(30):
        theirs = booster.inplace_predict(rows, iteration_range=(k, k + 1)) - F32(base)
        np.testing.assert_allclose(theirs, ranker._trees["value"][reached[:, k]], rtol=0, atol=1e-6,
                                   err_msg=f"tree {k}")


def test_an_xgboost_scikit_learn_model_imports_what_its_predict_uses(data):
    """After early stopping its predict stops at best_iteration, and so does the import; a missing value other than
    NaN (missing=0) cannot be reproduced by splits on values, so it is refused."""
    xgb = pytest.importorskip("xgboost")
    X, y, qid = data
    queries = np.unique(qid)
    train, valid = qid < queries[20], qid >= queries[20]
    model = xgb.XGBRanker(n_estimators=200, max_depth=3, learning_rate=0.3, early_stopping_rounds=2, n_jobs=1,
                          eval_metric="ndcg").fit(X[train], y[train], qid=qid[train], eval_set=[(X[valid], y[valid])],
                                                  eval_qid=[qid[valid]], verbose=False)
    assert model.best_iteration + 1 < model.get_booster().num_boosted_rounds()  # stopped, with rounds after the best
    ranker = import_model(model)
    assert ranker.n_estimators_ == model.best_iteration + 2  # its trees and base_score
    np.testing.assert_allclose(ranker.predict(X), model.predict(X), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=r"treats 0.0 as missing .* refit with missing=np.nan"):
        import_model(xgb.XGBRanker(n_estimators=2, missing=0.0, n_jobs=1).fit(X, y, qid=qid))


def test_an_xgboost_scikit_learn_model_with_a_numpy_nan_as_missing_imports(data):
    xgb = pytest.importorskip("xgboost")
    X, y, qid = data
    model = xgb.XGBRanker(n_estimators=5, max_depth=3, missing=np.float32(np.nan), n_jobs=1).fit(X, y, qid=qid)
    np.testing.assert_allclose(import_model(model).predict(X), model.predict(X), rtol=0, atol=1e-6)


@pytest.mark.parametrize("case, message", [("multiclass", "multiclass"), ("binary", "transforms the sum"),
                                           ("categorical", "by category"), ("dart", "dart")])
def test_xgboost_models_we_cannot_reproduce_are_refused(case, message, data):
    xgb = pytest.importorskip("xgboost")
    X, y, qid = data
    params = dict(n_estimators=3, max_depth=2, n_jobs=1)
    if case == "multiclass":
        model = xgb.XGBClassifier(**params).fit(X, y.astype(int))
    elif case == "binary":
        model = xgb.XGBClassifier(**params).fit(X, (y > 1).astype(int))
    elif case == "categorical":
        pd = pytest.importorskip("pandas")
        frame = pd.DataFrame({"genre": pd.Categorical(y.astype(int)), "x": X[:, 0]})
        model = xgb.XGBRegressor(**params, enable_categorical=True, max_cat_to_onehot=1).fit(frame, y)
    else:
        model = xgb.XGBRegressor(**params, booster="dart").fit(X, y)
    with pytest.raises(ValueError, match=message):
        import_model(model)


# ---------------------------------------------------------------- damaged or foreign files


def test_garbage_truncated_and_foreign_files_are_refused(lgb_ranker, xgb_ranker, tmp_path):
    text = lgb_ranker.booster_.model_to_string()
    raw = bytes(xgb_ranker.get_booster().save_raw(raw_format="json"))
    cases = {
        "garbage.bin": (bytes(range(256)) * 4, "neither a LightGBM"),
        "lgb_truncated.txt": (text[:len(text) // 2].encode(), "truncated"),
        "lgb_cut_in_a_tree.txt": (text[:text.index("Tree=3")].encode() + b"end of trees\n", "tree_sizes"),
        "xgb_truncated.json": (raw[:len(raw) // 2], "not valid JSON"),
        "xgb_dump.json": (b'[{"nodeid": 0, "leaf": 0.5}]', "dump"),
        "empty.json": (b"{}", "lacks XGBoost's learner"),
        "pickle.pkl": (b"\x80\x04K\x01.", "pickle"),
        "model.ubj": (bytes(xgb_ranker.get_booster().save_raw(raw_format="ubj")), "UBJSON"),
        # A feature count no model has (0 gave a ranker that predicts nothing; 1e10 names to make on export).
        "no_features.json": (raw.replace(b'"num_feature":"5"', b'"num_feature":"0"'), "num_feature is 0"),
        "huge_width.json": (raw.replace(b'"num_feature":"5"', b'"num_feature":"10000000000"'), "damaged"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=message):
            import_model(tmp_path / name)
    ours = tmp_path / "ours.json"
    LambdaMARTRanker(n_estimators=2, n_jobs=1).fit(*make_data(seed=1)[:2], make_data(seed=1)[2]).save_model(ours)
    with pytest.raises(ValueError, match="load_model"):
        import_model(ours)
    with pytest.raises(TypeError, match="source must be"):
        import_model(42)


@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
def test_repeated_feature_names_are_refused_as_load_model_would_refuse_them(library, lgb_ranker, xgb_ranker, tmp_path,
                                                                           capsys):
    """Both libraries load a model whose feature names repeat; its import would save a file load_model refuses."""
    if library == "lightgbm":
        text = lgb_ranker.booster_.model_to_string()
        start = text.index("feature_names=")
        text = text[:start] + "feature_names=a b a d e" + text[text.index("\n", start):]
        path = tmp_path / "model.txt"
        path.write_text(text)
        assert pytest.importorskip("lightgbm").Booster(model_file=str(path)).feature_name() == list("abade")
    else:
        document = json.loads(bytes(xgb_ranker.get_booster().save_raw(raw_format="json")))
        document["learner"]["feature_names"] = list("abade")
        document["learner"]["feature_types"] = ["float"] * 5
        path = tmp_path / "model.json"
        path.write_text(json.dumps(document))
        booster = pytest.importorskip("xgboost").Booster()
        booster.load_model(str(path))
        assert booster.feature_names == list("abade")
    with pytest.raises(ValueError, match="feature names repeat 'a'.*distinct names"):
        import_model(path)
    code, _, err = run_cli(capsys, "import", "--input", path, "--model", tmp_path / "ours.json")
    assert code == 1 and "repeat 'a'" in err and not (tmp_path / "ours.json").exists()


def _edit_lgb(text, key, value):
    """``text`` with the first ``key=`` line's value replaced."""
    start = text.index(f"\n{key}=") + len(key) + 2
    return text[:start] + value + text[text.index("\n", start):]


def _edit_xgb(raw, edit):
    document = json.loads(raw)
    edit(document["learner"], document["learner"]["gradient_booster"]["model"])
    return json.dumps(document).encode()


_HUGE = "9" * 30  # beyond int64 and float32


@pytest.mark.parametrize("case, edit, message", [
    ("lgb", lambda t: _edit_lgb(t, "decision_type", _HUGE + " 2 2"), "decision_type holds a value that is not a"),
    ("lgb", lambda t: _edit_lgb(t, "split_feature", "-" + _HUGE + " 0 0"), "split_feature holds a value"),
    ("lgb", lambda t: _edit_lgb(t, "feature_names", "a b c"), "feature_names line holds 3 names"),
    ("xgb", lambda learner, m: learner["learner_model_param"].update(num_class=float("inf")), "num_class inf is not"),
    ("xgb", lambda learner, m: m["gbtree_model_param"].update(num_trees=float("-inf")), "num_trees -inf is not"),
    ("xgb", lambda learner, m: m["trees"][0].update(left_children=5), "tree 0: its left_children is not a list"),
    ("xgb", lambda learner, m: m["trees"][1].update(split_indices=[10 ** 20] * len(m["trees"][1]["split_indices"])),
     "tree 1: its split_indices is not a list of numbers in range"),
    ("xgb", lambda learner, m: m["trees"][0].update(default_left=[[1]]), "its default_left is not a list"),
    ("xgb", lambda learner, m: m["trees"][0].pop("split_conditions"), "tree 0: it has no split_conditions"),
    ("xgb", lambda learner, m: m["trees"][0].update(tree_param=[]), "its tree_param is not a JSON object"),
    ("xgb", lambda learner, m: m["trees"].__setitem__(0, 7), "tree 0: it is not a JSON object"),
    ("xgb", lambda learner, m: learner.update(feature_names=3), "feature_names entry is not a list of strings"),
    ("xgb", lambda learner, m: learner.update(feature_names=[1, 2, 3, 4, 5]), "not a list of strings"),
    ("xgb", lambda learner, m: m.update(tree_info=0), "trees and tree_info must be lists"),
    ("xgb", lambda learner, m: learner["objective"].update(name=["rank:ndcg"]), r"objective \['rank:ndcg'\]"),
])
def test_edited_or_corrupt_files_raise_value_error_and_the_command_line_says_so_in_one_line(
        case, edit, message, lgb_ranker, xgb_ranker, tmp_path, capsys):
    if case == "lgb":
        path = tmp_path / "model.txt"
        path.write_text(edit(lgb_ranker.booster_.model_to_string()))
    else:
        path = tmp_path / "model.json"
        path.write_bytes(_edit_xgb(bytes(xgb_ranker.get_booster().save_raw(raw_format="json")), edit))
    with pytest.raises(ValueError, match=message):
        import_model(path)
    code, _, err = run_cli(capsys, "import", "--input", path, "--model", tmp_path / "ours.json")
    assert code == 1 and err.count("\n") == 1 and "error: --input: cannot import" in err
