"""The feature matrix X: missing and infinite values, columns without information, extreme shapes, and every
container, dtype and memory layout the ranker accepts (each gives the model of the same float64 values).

Bad X (text, categories, dates, a wrong number of columns) is in test_input_validation.py.
"""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from helpers import assert_same_model, fit, make_data

from lambdamart import LambdaMARTRanker
from lambdamart.metrics import ndcg

# ---------------------------------------------------------------- missing and infinite values


def test_nan_is_missing_and_trained_and_predicted_consistently():
    """NaN goes to a learned side in training and the same side in predict, including NaN in a feature that had
    none in training; the binned scores of the boosting loop equal predict on the raw features."""
    X, y, qid = make_data(1)
    rng = np.random.default_rng(1)
    X[rng.random(X.shape) < 0.15] = np.nan
    X[y == 3, 1] = np.nan  # missing feature 1 marks the best documents
    ranker = fit(X, y, qid, n_estimators=10, early_stopping=False, eval_set=[(X, y, qid)])
    pred = ranker.predict(X)
    assert np.isfinite(pred).all()
    assert ndcg(y, pred, qid, k=10) == pytest.approx(ranker.validation_score_[-1], abs=1e-12)
    assert pred[np.isnan(X[:, 1])].mean() > pred[~np.isnan(X[:, 1])].mean()
    # Row by row equals the batch, and an all-NaN row is scored like any other (the missing side everywhere).
    np.testing.assert_array_equal([ranker.predict(X[i:i + 1])[0] for i in range(0, len(X), 17)], pred[::17])
    assert np.isfinite(ranker.predict(np.full((3, X.shape[1]), np.nan))).all()


def test_missing_values_are_learned_and_predicted_on_train_and_validation_data():
    params = dict(n_features=6, max_docs=25, relevance="mixed", nan_fraction=0.1)
    X, y, qid = make_data(8, 30, **params)
    rng = np.random.default_rng(8)
    informative = rng.random(y.size) < 0.2
    X[informative, 5] = np.nan
    y[informative] = 3.0  # a missing value in feature 5 marks a relevant document
    X_v, y_v, q_v = make_data(9, 30, **params)
    informative_v = rng.random(y_v.size) < 0.2
    X_v[informative_v, 5] = np.nan
    y_v[informative_v] = 3.0
    ranker = LambdaMARTRanker(n_estimators=20, max_leaf_nodes=8, min_samples_leaf=5, learning_rate=0.2,
                              early_stopping=False).fit(X, y, qid, eval_set=[(X_v, y_v, q_v)])
    pred = ranker.predict(X_v)
    assert np.all(np.isfinite(pred))
    t = ranker._trees
    assert np.any(t["feature"] == 5)
    assert pred[np.isnan(X_v[:, 5])].mean() > pred[~np.isnan(X_v[:, 5])].mean()
    # The binned scores of the boosting loop and predict on raw features with NaN agree.
    assert ndcg(y_v, pred, q_v, k=10) == pytest.approx(ranker.validation_score_[-1], abs=1e-12)
    assert ndcg(y, ranker.predict(X), qid, k=10) == pytest.approx(ranker.train_score_[-1], abs=1e-12)
    # NaN in a feature never missing in training still predicts (the larger child's side).
    X_new = X_v.copy()
    X_new[:, 1] = np.nan
    assert np.all(np.isfinite(ranker.predict(X_new)))


def test_infinite_values_are_values_not_missing():
    """±inf are the extreme values of a feature: the model splits the rows exactly as when they are ±1e300."""
    X, y, qid = make_data(2)
    rng = np.random.default_rng(2)
    X[(y == 3) & (rng.random(y.size) < 0.5), 0] = np.inf
    X[(y == 0) & (rng.random(y.size) < 0.3), 0] = -np.inf
    finite = np.where(np.isinf(X), np.sign(X) * 1e300, X)
    with_inf, with_big = fit(X, y, qid), fit(finite, y, qid)
    pred = with_inf.predict(X)
    assert np.isfinite(pred).all()
    np.testing.assert_array_equal(pred, with_big.predict(finite))
    for key in ("feature", "left", "right", "value", "missing_left"):
        np.testing.assert_array_equal(with_inf._trees[key], with_big._trees[key], err_msg=key)
    assert pred[X[:, 0] == np.inf].min() >= pred[X[:, 0] == -np.inf].max()


# ---------------------------------------------------------------- columns and shapes


@pytest.mark.parametrize("column", ["all-nan", "constant"])
def test_column_without_information_is_never_split_on(data, model, column):
    X, y, qid = data
    extra = np.full(X.shape[0], np.nan if column == "all-nan" else 3.0)
    X_extra = np.column_stack([X[:, :2], extra, X[:, 2:]])
    ranker = fit(X_extra, y, qid)
    assert ranker.feature_importances_[2] == 0.0
    np.testing.assert_array_equal(ranker.predict(X_extra), model.predict(X))
    # At predict time the column may hold anything: it is never looked at.
    X_other = X_extra.copy()
    X_other[:, 2] = np.linspace(-1e9, 1e9, X.shape[0])
    np.testing.assert_array_equal(ranker.predict(X_other), model.predict(X))


def test_single_feature(data):
    X, y, qid = data
    ranker = fit(X[:, :1], y, qid, n_estimators=10)
    assert ranker.n_features_in_ == 1
    pred = ranker.predict(X[:, :1])
    assert ndcg(y, pred, qid, k=10) > ndcg(y, np.zeros_like(y), qid, k=10) + 0.1
    assert ranker.predict(X[:1, :1]).shape == (1,)


def test_ten_thousand_features_few_rows():
    rng = np.random.default_rng(3)
    qid = np.repeat(np.arange(3), 10)
    X = rng.normal(size=(30, 10_000))
    y = (X[:, 1234] > 0).astype(float)
    ranker = LambdaMARTRanker(n_estimators=3, max_leaf_nodes=4, min_samples_leaf=2, n_jobs=1,
                              random_state=0).fit(X, y, qid)
    assert ranker.n_features_in_ == 10_000 and ranker.feature_importances_.shape == (10_000,)
    pred = ranker.predict(X)
    assert pred.shape == (30,) and np.isfinite(pred).all()
    assert ndcg(y, pred, qid) == 1.0


@pytest.mark.parametrize("kind", ["array", "dataframe", "csr", "float32"])
def test_predict_on_empty_input_returns_an_empty_array(data, kind):
    X, y, qid = data
    df = pd.DataFrame(X, columns=list("abcd"))
    ranker = fit(df if kind == "dataframe" else X, y, qid)
    empty = {"array": X[:0], "dataframe": df.iloc[:0], "csr": sp.csr_matrix(X[:0]), "float32": X[:0].astype(
        np.float32)}[kind]
    pred = ranker.predict(empty)
    assert pred.shape == (0,) and pred.dtype == np.float64


# ---------------------------------------------------------------- containers, dtypes and layouts


@pytest.mark.parametrize("kind", ["float32", "float16", "int", "uint8", "bool", "object"])
def test_feature_dtypes_give_the_model_of_the_same_float64_values(data, kind):
    X, y, qid = data
    converted = {
        "float32": X.astype(np.float32),
        "float16": X.astype(np.float16),
        "int": np.round(X * 10).astype(np.int64),
        "uint8": np.clip(X * 40 + 128, 0, 255).astype(np.uint8),
        "bool": X > 0,
        "object": X.astype(object),
    }[kind]
    as_float = converted.astype(np.float64)
    ranker = fit(converted, y, qid)
    assert_same_model(ranker, fit(as_float, y, qid))
    np.testing.assert_array_equal(ranker.predict(converted), ranker.predict(as_float))


def test_dataframe_gives_the_model_of_its_values_and_keeps_the_column_names(data, model):
    X, y, qid = data
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    from_df = fit(df, y, pd.Series(qid))
    assert_same_model(model, from_df)
    assert list(from_df.feature_names_in_) == list(df.columns)
    np.testing.assert_array_equal(from_df.predict(df), model.predict(X))


def test_numeric_object_and_nullable_dataframe_columns_are_accepted(data):
    X, y, qid = data
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    df["f1"] = df["f1"].astype(object)
    df["f2"] = pd.array(df["f2"], dtype="Float64")
    df.loc[3, "f2"] = pd.NA  # pandas' NA is a missing value, like NaN
    X_nan = X.copy()
    X_nan[3, 2] = np.nan
    ranker = fit(df, y, qid)
    assert_same_model(ranker, fit(X_nan, y, qid))


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "csr-float32", "csr-explicit-nan"])
def test_sparse_features(data, fmt):
    X, y, qid = data
    dense = np.where(np.abs(X) < 0.7, 0.0, X)
    if fmt == "csr-explicit-nan":
        dense[::9, 1] = np.nan  # stored entries that are NaN stay missing values, not zeros
    if fmt == "csr-float32":
        dense = dense.astype(np.float32)
    matrix = {"csc": sp.csc_matrix, "coo": sp.coo_matrix}.get(fmt, sp.csr_matrix)(dense)
    ranker = fit(matrix, y, qid)
    assert_same_model(ranker, fit(dense, y, qid))
    np.testing.assert_array_equal(ranker.predict(matrix), ranker.predict(dense))


@pytest.mark.parametrize("layout", ["fortran", "column-slice", "row-slice", "negative-stride", "read-only"])
def test_memory_layouts(data, model, layout):
    X, y, qid = data
    wide = np.repeat(X, 2, axis=1)
    if layout == "fortran":
        Xl = np.asfortranarray(X)
    elif layout == "column-slice":
        Xl = wide[:, ::2]
    elif layout == "row-slice":
        Xl = np.repeat(X, 2, axis=0)[::2]
    elif layout == "negative-stride":
        Xl = X[::-1].copy()[::-1]
    else:
        Xl = X.copy()
        Xl.setflags(write=False)
    assert not Xl.flags.c_contiguous or not Xl.flags.writeable
    np.testing.assert_array_equal(Xl, X)
    ranker = fit(Xl, y, qid)
    assert_same_model(ranker, model)
    np.testing.assert_array_equal(ranker.predict(Xl), model.predict(X))
