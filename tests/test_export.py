"""export_model writes models the other libraries load and predict like ours, split by split.

Each format is loaded by the real library (lightgbm, xgboost, onnxruntime) and compared with our predict on the
training rows and on rows with values exactly at every threshold, at the neighbouring floats, NaN and ±inf; the
leaf every row reaches is compared where the library reports it. Tolerances: LightGBM 1e-12 (float64 throughout),
ONNX 1e-5 (float64 here too), XGBoost 1e-6 of the score's magnitude (float32 leaves summed in float32).
"""

import json

import numpy as np
import pytest
from exchange_probes import at_thresholds_f32, at_thresholds_f64, leaf_ranks, leaves, probe_rows
from helpers import FAST, fit, make_data, run_cli

from lambdamart import LambdaMARTRanker, import_model, load_model

F32 = np.float32


def _data():
    X, y, qid = make_data(seed=3, n_queries=40, n_features=5, nan_fraction=0.2)
    X[:, 2] = np.where(y >= 2, np.nan, X[:, 2])  # NaN that predicts relevance: splits with a +inf threshold
    return X, y, qid


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def model(data):
    """Many trees, NaN in the data, +inf thresholds."""
    X, y, qid = data
    ranker = fit(X, y, qid, n_estimators=40, max_leaf_nodes=8, learning_rate=0.1)
    thresholds = ranker._trees["threshold"][ranker._trees["left"] >= 0]
    assert np.isnan(X).any() and np.isposinf(thresholds).any() and ranker.n_estimators_ == 40
    assert ranker._trees["missing_left"][ranker._trees["left"] >= 0].any()
    return ranker


@pytest.fixture(scope="module")
def single_leaf_model(data):
    """One-leaf trees (an init_model that cannot split) followed by ordinary ones."""
    X, y, qid = data
    stump = fit(X, y, qid, n_estimators=2, min_samples_leaf=10 ** 5)
    ranker = LambdaMARTRanker(**FAST).fit(X, y, qid, init_model=stump)
    assert (ranker._trees["left"][ranker._trees["tree_starts"][:2]] == -1).all()
    return ranker


@pytest.fixture(scope="module", params=["model", "single_leaf_model"])
def any_model(request):
    return request.getfixturevalue(request.param)


def _probes64(ranker, X):
    return np.vstack([X, probe_rows(ranker._trees, X[:50], at_thresholds_f64)])


def _probes32(ranker, X, with_inf=True):
    rows = np.vstack([X.astype(F32), probe_rows(ranker._trees, X[:50], at_thresholds_f32, dtype=F32)])
    if with_inf:
        extra = rows[:20].copy()
        extra[::2] = np.inf
        extra[1::2] = -np.inf
        rows = np.vstack([rows, extra])
    return rows


def _xgb_tolerance(scores):
    return 1e-6 * max(1.0, float(np.abs(scores).max()))


# ---------------------------------------------------------------- LightGBM


def test_lightgbm_booster_predicts_like_us_at_every_threshold(any_model, data, tmp_path):
    lgb = pytest.importorskip("lightgbm")
    path = tmp_path / "model.txt"
    assert any_model.export_model(path, format="lightgbm") is any_model
    booster = lgb.Booster(model_file=str(path))
    rows = _probes64(any_model, data[0])
    np.testing.assert_allclose(booster.predict(rows), any_model.predict(rows), rtol=0, atol=1e-12)
    theirs = booster.predict(rows, pred_leaf=True)
    ours = leaf_ranks(any_model._trees, leaves(any_model._trees, rows))
    np.testing.assert_array_equal(theirs, ours)
    assert booster.num_trees() == any_model.n_estimators_


def test_lightgbm_round_trip_through_import_is_exact(model, data, tmp_path):
    pytest.importorskip("lightgbm")
    path = tmp_path / "model.txt"
    model.export_model(path, format="lightgbm")
    back = import_model(path)
    rows = _probes64(model, data[0])
    np.testing.assert_array_equal(back.predict(rows), model.predict(rows))


def test_lightgbm_keeps_real_feature_names(data, tmp_path):
    lgb = pytest.importorskip("lightgbm")
    pd = pytest.importorskip("pandas")
    X, y, qid = data
    frame = pd.DataFrame(X, columns=["bm25 title", "pagerank", "age", "clicks", "len"])
    ranker = fit(frame, y, qid)
    ranker.export_model(tmp_path / "model.txt", format="lightgbm")
    booster = lgb.Booster(model_file=str(tmp_path / "model.txt"))
    assert booster.feature_name() == ["bm25_title", "pagerank", "age", "clicks", "len"]  # no whitespace in the format
    np.testing.assert_allclose(booster.predict(X), ranker.predict(frame), rtol=0, atol=1e-12)


def test_lightgbm_reads_tiny_inputs_as_zero_at_a_zero_threshold(tmp_path):
    """Training values {-1, 1} give a threshold of exactly 0.0. LightGBM reads |x| <= 1e-35 as 0.0, so such a
    positive x goes left there (0.0 <= 0.0) and right in ours; every other input goes the same way (as documented
    in lightgbm_text)."""
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.choice([-1.0, 1.0], size=(400, 1))
    ranker = fit(X, (X[:, 0] > 0) * 2 + rng.integers(0, 2, 400), np.repeat(np.arange(40), 10), n_estimators=3)
    assert (ranker._trees["threshold"][ranker._trees["left"] >= 0] == 0.0).all()
    ranker.export_model(tmp_path / "model.txt", format="lightgbm")
    booster = lgb.Booster(model_file=str(tmp_path / "model.txt"))
    same = np.array([[-1.0], [-1e-36], [0.0], [-0.0], [2e-35], [1.0], [np.nan], [np.inf], [-np.inf]])
    np.testing.assert_allclose(booster.predict(same), ranker.predict(same), rtol=0, atol=1e-12)
    zero, one = ranker.predict(np.array([[0.0], [1.0]]))
    assert zero != one
    tiny = np.array([[1e-36], [5e-324], [float(np.float32(1e-35))]])
    np.testing.assert_array_equal(ranker.predict(tiny), one)  # right in ours, as 1.0
    np.testing.assert_allclose(booster.predict(tiny), zero, rtol=0, atol=1e-12)  # left in LightGBM, as 0.0


# ---------------------------------------------------------------- XGBoost


def test_xgboost_booster_predicts_like_us_on_float32_at_every_threshold(any_model, data, tmp_path):
    xgb = pytest.importorskip("xgboost")
    path = tmp_path / "model.json"
    any_model.export_model(path, format="xgboost")
    booster = xgb.Booster()
    booster.load_model(str(path))
    rows = _probes32(any_model, data[0])
    finite = _probes32(any_model, data[0], with_inf=False)
    ours = any_model.predict(finite)
    np.testing.assert_allclose(booster.inplace_predict(finite), ours, rtol=0, atol=_xgb_tolerance(ours))
    # Every row reaches the same leaf in every tree, +inf excepted at a +inf threshold (see xgboost_json): each
    # tree's output is the float32 of that leaf's value, whether XGBoost predicts all rows at once or one by one.
    reached = leaves(any_model._trees, rows, right_from=np.inf) + any_model._trees["tree_starts"]
    for k in range(any_model.n_estimators_):
        expected = any_model._trees["value"][reached[:, k]].astype(F32)
        np.testing.assert_array_equal(booster.inplace_predict(rows, iteration_range=(k, k + 1)), expected,
                                      err_msg=f"tree {k}")
        one_by_one = [booster.inplace_predict(rows[i:i + 1], iteration_range=(k, k + 1))[0]
                      for i in range(0, len(rows), 37)]
        np.testing.assert_array_equal(one_by_one, expected[::37], err_msg=f"tree {k}, one row at a time")
    # base_score is 0: the margin is the sum of the leaves, and predict adds no transform
    dmatrix = xgb.DMatrix(rows[np.isfinite(rows).all(axis=1) | np.isnan(rows).any(axis=1)], missing=np.nan)
    np.testing.assert_array_equal(booster.predict(dmatrix, output_margin=True), booster.predict(dmatrix))


def test_xgboost_round_trip_through_import(model, data, tmp_path):
    pytest.importorskip("xgboost")
    model.export_model(tmp_path / "model.json", format="xgboost")
    back = import_model(tmp_path / "model.json")
    rows = _probes32(model, data[0])
    # As XGBoost reads the file: +inf goes right at a +inf threshold, every other value our way.
    reached = leaves(model._trees, rows.astype(np.float64), right_from=np.inf) + model._trees["tree_starts"]
    np.testing.assert_allclose(back.predict(rows), model._trees["value"][reached].sum(axis=1), rtol=0, atol=1e-6)


def _dump_predict(dump, rows, names):
    """The Elasticsearch/OpenSearch LTR plugins' evaluation of a dump: float32 ``x < split_condition`` goes "yes",
    missing follows "missing", leaves summed in float32."""
    column = {name: i for i, name in enumerate(names)}
    out = np.zeros(rows.shape[0], dtype=F32)
    for r, row in enumerate(rows):
        for tree in dump:
            node = tree
            while "leaf" not in node:
                x = row[column[node["split"]]]
                yes = x < F32(node["split_condition"])
                nxt = node["missing"] if np.isnan(x) else node["yes"] if yes else node["no"]
                node = next(c for c in node["children"] if c["nodeid"] == nxt)
            out[r] += F32(node["leaf"])
    return out


def test_xgboost_dump_matches_xgboost_s_own_dump_and_routes_like_us(model, data, tmp_path):
    xgb = pytest.importorskip("xgboost")
    model.export_model(tmp_path / "model.json", format="xgboost")
    model.export_model(tmp_path / "dump.json", format="xgboost-dump")
    ours = json.loads((tmp_path / "dump.json").read_text())  # strict JSON: no NaN or infinities
    booster = xgb.Booster()
    booster.load_model(str(tmp_path / "model.json"))
    # XGBoost prints inf (not JSON) where we write the largest float32
    theirs = [json.loads(t.replace(": inf", ": 3.4028234663852886e+38"))
              for t in booster.get_dump(dump_format="json")]
    assert len(ours) == len(theirs) == model.n_estimators_

    def compare(a, b):
        assert set(a) == set(b)
        for key in a:
            if key == "children":
                assert [c["nodeid"] for c in a[key]] == [a["yes"], a["no"]]  # the plugins require yes first
                for ca, cb in zip(a[key], b[key]):
                    compare(ca, cb)
            elif key in ("split_condition", "leaf"):
                assert F32(a[key]) == F32(b[key])
            else:
                assert a[key] == b[key]

    for a, b in zip(ours, theirs):
        compare(a, b)
    rows = _probes32(model, data[0])
    names = [f"f{i}" for i in range(model.n_features_in_)]
    largest = np.finfo(F32).max
    reached = leaves(model._trees, rows.astype(np.float64), right_from=largest) + model._trees["tree_starts"]
    expected = model._trees["value"][reached].sum(axis=1)
    np.testing.assert_allclose(_dump_predict(ours, rows, names), expected, rtol=0, atol=_xgb_tolerance(expected))


# ---------------------------------------------------------------- ONNX


def test_onnxruntime_predicts_like_us_at_every_threshold(any_model, data, tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "model.onnx"
    any_model.export_model(path, format="onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, inp.type, inp.shape[1], out.name) == ("X", "tensor(double)", any_model.n_features_in_, "score")
    rows = _probes64(any_model, data[0])
    (scores,) = session.run(None, {"X": rows})
    assert scores.shape == (rows.shape[0], 1)
    np.testing.assert_allclose(scores[:, 0], any_model.predict(rows), rtol=0, atol=1e-5)
    # double thresholds and sums: in fact the same paths and scores to rounding
    np.testing.assert_allclose(scores[:, 0], any_model.predict(rows), rtol=0, atol=1e-12)


def test_onnx_model_records_feature_names(tmp_path):
    onnx = pytest.importorskip("onnx")
    pd = pytest.importorskip("pandas")
    X, y, qid = make_data(seed=4)
    ranker = fit(pd.DataFrame(X, columns=list("abcd")), y, qid)
    ranker.export_model(tmp_path / "m.onnx", format="onnx")
    props = {p.key: p.value for p in onnx.load(str(tmp_path / "m.onnx")).metadata_props}
    assert json.loads(props["feature_names"]) == list("abcd")


def test_xgboost_reads_non_ascii_feature_names_and_refuses_none(tmp_path):
    """Names are written as UTF-8 (XGBoost keeps a \\uXXXX escape as six characters, and predicting with the
    DataFrame then failed on the names); names XGBoost forbids are refused at export, not at its predict."""
    xgb = pytest.importorskip("xgboost")
    pd = pytest.importorskip("pandas")
    X, y, qid = make_data(seed=4)
    frame = pd.DataFrame(X, columns=["größe", "preis", "rang", "x"])
    ranker = fit(frame, y, qid)
    ranker.export_model(tmp_path / "u.json", format="xgboost")
    booster = xgb.Booster()
    booster.load_model(str(tmp_path / "u.json"))
    assert booster.feature_names == ["größe", "preis", "rang", "x"]
    np.testing.assert_allclose(booster.predict(xgb.DMatrix(frame)), ranker.predict(frame), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"XGBoost refuses feature names with '\[', '\]' or '<' \(e.g. 'a\[1\]'\)"):
        fit(frame.rename(columns={"x": "a[1]"}), y, qid).export_model(tmp_path / "v.json", format="xgboost")


def test_a_model_without_trees_exports_to_onnx_as_zero(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    xgb = pytest.importorskip("xgboost")
    X, y, _ = make_data(seed=4)
    empty = import_model(xgb.train({"objective": "reg:squarederror", "base_score": 0.0}, xgb.DMatrix(X, y), 0))
    empty.export_model(tmp_path / "z.onnx", format="onnx")
    session = ort.InferenceSession(str(tmp_path / "z.onnx"))
    np.testing.assert_array_equal(session.run(None, {"X": X})[0].ravel(), empty.predict(X))


def test_a_tree_too_deep_for_the_json_dump_is_refused_in_one_line(tmp_path):
    """A chain of 2000 splits (an imported model can be one): the other formats take it."""
    depth = 2000
    lines = ["tree", "version=v4", "num_class=1", "num_tree_per_iteration=1", "label_index=0", "max_feature_idx=0",
             "objective=regression", "feature_names=Column_0", "feature_infos=[0:1]", "tree_sizes=0", "",
             "Tree=0", f"num_leaves={depth + 1}", "num_cat=0",
             "split_feature=" + " ".join(["0"] * depth), "split_gain=" + " ".join(["1"] * depth),
             "threshold=" + " ".join(str(i + 0.5) for i in range(depth)),
             "decision_type=" + " ".join(["10"] * depth),
             "left_child=" + " ".join(str(-(i + 1)) for i in range(depth)),
             "right_child=" + " ".join(str(i + 1) for i in range(depth - 1)) + f" {-(depth + 1)}",
             "leaf_value=" + " ".join(str(float(i)) for i in range(depth + 1)),
             "leaf_weight=" + " ".join(["1"] * (depth + 1)), "leaf_count=" + " ".join(["1"] * (depth + 1)),
             "internal_value=" + " ".join(["0"] * depth), "internal_weight=" + " ".join(["1"] * depth),
             "internal_count=" + " ".join(["1"] * depth), "is_linear=0", "shrinkage=1", "", "end of trees", ""]
    (tmp_path / "chain.txt").write_text("\n".join(lines))
    chain = import_model(tmp_path / "chain.txt")
    assert chain.predict(np.array([[10.2], [1e9]])).tolist() == [10.0, 2000.0]
    with pytest.raises(ValueError, match="tree 0 is too deep for the JSON tree dump.*format='xgboost'"):
        chain.export_model(tmp_path / "chain.json", format="xgboost-dump")
    chain.export_model(tmp_path / "chain.onnx", format="onnx")


# ---------------------------------------------------------------- the method


def test_export_rejects_unknown_formats_and_unfitted_models(model, tmp_path):
    with pytest.raises(ValueError, match="format must be one of"):
        model.export_model(tmp_path / "m", format="pmml")
    with pytest.raises(Exception, match="not fitted"):
        LambdaMARTRanker().export_model(tmp_path / "m", format="lightgbm")
    assert not list(tmp_path.iterdir())


def test_export_writes_atomically_over_an_existing_file(model, tmp_path):
    path = tmp_path / "model.txt"
    path.write_text("old")
    model.export_model(path, format="xgboost-dump")
    assert json.loads(path.read_text()) and [p.name for p in tmp_path.iterdir()] == ["model.txt"]


def test_all_four_send_every_probe_row_the_same_way(model, data, tmp_path):
    """Rows of float32 values (XGBoost's input type) at, below and above every threshold, NaN and ±inf: ours,
    LightGBM, XGBoost and onnxruntime reach the same leaf in every tree (LightGBM and XGBoost checked tree by tree,
    ONNX through its float64 sum, which a single different leaf would move by far more than 1e-12)."""
    lgb = pytest.importorskip("lightgbm")
    xgb = pytest.importorskip("xgboost")
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    rows32 = _probes32(model, data[0])
    rows = rows32.astype(np.float64)
    for fmt, name in (("lightgbm", "m.txt"), ("xgboost", "m.json"), ("onnx", "m.onnx")):
        model.export_model(tmp_path / name, format=fmt)
    ours = leaves(model._trees, rows)
    np.testing.assert_array_equal(lgb.Booster(model_file=str(tmp_path / "m.txt")).predict(rows, pred_leaf=True),
                                  leaf_ranks(model._trees, ours))
    booster = xgb.Booster()
    booster.load_model(str(tmp_path / "m.json"))
    values = model._trees["value"][ours + model._trees["tree_starts"]]
    reached = leaves(model._trees, rows, right_from=np.inf) + model._trees["tree_starts"]
    xgboost_values = model._trees["value"][reached]
    for k in range(model.n_estimators_):
        np.testing.assert_array_equal(booster.inplace_predict(rows32, iteration_range=(k, k + 1)),
                                      xgboost_values[:, k].astype(F32))
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"X": rows})[0][:, 0], values.sum(axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.predict(rows), values.sum(axis=1), rtol=0, atol=1e-12)


# ---------------------------------------------------------------- command line: lambdamart export / import


def test_the_command_line_offers_every_export_format():
    from lambdamart import _exchange, cli

    assert set(cli._EXPORT_FORMATS) == set(_exchange.WRITERS)


@pytest.mark.parametrize("fmt", ["lightgbm", "xgboost", "xgboost-dump", "onnx"])
def test_cli_export_writes_what_export_model_writes(model, tmp_path, capsys, fmt):
    if fmt == "onnx":
        pytest.importorskip("onnx")
    saved = tmp_path / "model.json"
    model.save_model(saved)
    code, out, err = run_cli(capsys, "export", "--model", saved, "--format", fmt, "--output", tmp_path / "exported")
    assert code == 0 and out == "" and f"wrote 40 trees to {tmp_path / 'exported'} ({fmt})" in err
    model.export_model(tmp_path / "direct", format=fmt)
    assert (tmp_path / "exported").read_bytes() == (tmp_path / "direct").read_bytes()


def test_cli_import_gives_a_model_file_that_predicts_like_lightgbm(data, tmp_path, capsys):
    lightgbm = pytest.importorskip("lightgbm")
    X, y, qid = data
    booster = lightgbm.LGBMRanker(n_estimators=20, num_leaves=7, min_child_samples=5, verbose=-1).fit(
        X, y, group=np.bincount(qid)).booster_
    booster.save_model(tmp_path / "lightgbm.txt")
    code, _, err = run_cli(capsys, "import", "--input", tmp_path / "lightgbm.txt", "--model", tmp_path / "ours.json")
    assert code == 0 and "wrote 20 trees over 5 features" in err
    np.testing.assert_allclose(load_model(tmp_path / "ours.json").predict(X), booster.predict(X), rtol=0, atol=1e-12)


def test_cli_export_and_import_errors(model, tmp_path, capsys):
    saved = tmp_path / "model.json"
    model.save_model(saved)
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not a model\n")
    code, _, err = run_cli(capsys, "import", "--input", garbage, "--model", tmp_path / "out.json")
    assert code == 1 and "--input" in err and "neither a LightGBM text model" in err
    assert not (tmp_path / "out.json").exists()
    code, _, err = run_cli(capsys, "export", "--model", tmp_path / "missing.json", "--format", "lightgbm",
                           "--output", tmp_path / "out.txt")
    assert code == 1 and "missing.json" in err
    code, _, err = run_cli(capsys, "export", "--model", saved, "--format", "pmml", "--output", tmp_path / "out.txt")
    assert code == 2 and "invalid choice: 'pmml'" in err  # a usage error
