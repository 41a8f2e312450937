"""Robustness (issue 7): every bad input gets a clear error, edge cases are correct, results are deterministic.

One test (or parametrised case) per line of the issue, in its order: features X, labels y, query ids, predict,
parameters, determinism, loader and command line, model file. Where an existing test already pins a behaviour
down (test_ranker.py, test_queries.py, test_datasets.py, test_persistence.py, test_cli.py), the case here adds
what it leaves out rather than repeating it. Data stay small: no test here needs more than a few seconds.
"""

import json
import os
import pickle
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

import lambdamart.ranker
from lambdamart import LambdaMARTRanker, cli, load_model
from lambdamart.datasets import load_letor
from lambdamart.metrics import dcg, err, kendall_tau, mean_average_precision, mean_reciprocal_rank, ndcg

FAST = dict(n_estimators=6, max_leaf_nodes=6, min_samples_leaf=3, learning_rate=0.3, n_jobs=1, random_state=0)
OBJECTIVES = ["lambdarank", "lambdarank_map", "ranknet", "listnet", "listmle", "pointwise"]


# ---------------------------------------------------------------- helpers


def make_data(seed=0, n_queries=20, n_features=4, min_docs=4, max_docs=16, decimals=None):
    """Graded labels 0..3 driven mostly by feature 0; ``decimals`` rounds X so that scores tie often."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(min_docs, max_docs + 1, n_queries)
    qid = np.repeat(np.arange(n_queries), sizes)
    X = rng.normal(size=(qid.size, n_features))
    if decimals is not None:
        X = np.round(X, decimals)
    relevance = X[:, 0] + 0.5 * rng.normal(size=qid.size)
    y = np.digitize(relevance, np.quantile(relevance, [0.5, 0.75, 0.9])).astype(float)
    return X, y, qid


def fit(X, y, qid=None, *, eval_set=None, group=None, **params):
    return LambdaMARTRanker(**(FAST | params)).fit(X, y, qid, eval_set=eval_set, group=group)


def assert_same_model(a, b):
    assert a._trees.keys() == b._trees.keys()
    for key in a._trees:
        assert a._trees[key].dtype == b._trees[key].dtype, key
        np.testing.assert_array_equal(a._trees[key], b._trees[key], err_msg=key)


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


@pytest.fixture(scope="module")
def data():
    return make_data()


@pytest.fixture(scope="module")
def model(data):
    X, y, qid = data
    return fit(X, y, qid)


# ================================================================ X


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


@pytest.mark.parametrize("kind", ["float16", "int", "uint8", "bool", "object"])
def test_feature_dtypes_give_the_model_of_the_same_float64_values(data, kind):
    X, y, qid = data
    converted = {
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


@pytest.mark.parametrize("kind, column, message", [
    ("category", "colour", r"X column 'colour' is categorical .*OrdinalEncoder"),
    ("numeric-category", "size", r"X column 'size' is categorical .*astype\(float\)"),
    ("str", "city", r"X column 'city' holds text .*'paris' at row 0"),
    ("string", "city", r"X column 'city' holds text \(dtype string"),
    ("numbers-as-text", "price", r"X column 'price' holds text .*pd.to_numeric"),
    ("mixed-object", "misc", r"X column 'misc' holds text .*'n/a' at row 3"),
    ("datetime", "when", r"X column 'when' holds dates"),
])
def test_non_numeric_dataframe_columns_raise_naming_the_column(data, kind, column, message):
    X, y, qid = data
    n = X.shape[0]
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    values = {
        "category": pd.Categorical(np.resize(["red", "blue"], n)),
        "numeric-category": pd.Categorical(np.resize([1.0, 2.0, 3.0], n)),
        "str": np.resize(["paris", "oslo"], n).astype(object),
        "string": pd.array(np.resize(["paris", "oslo"], n), dtype="string"),
        "numbers-as-text": np.resize(["1.5", "2.5"], n).astype(object),
        "mixed-object": np.array([1.0, 2.0, 3.0, "n/a"] + [4.0] * (n - 4), dtype=object),
        "datetime": pd.date_range("2024-01-01", periods=n),
    }[kind]
    df.insert(1, column, values)
    with pytest.raises(ValueError, match=message):
        LambdaMARTRanker(**FAST).fit(df, y, qid)
    # The same check at predict and for an eval_set.
    numeric = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    numeric.insert(1, column, 0.0)
    ranker = fit(numeric, y, qid)
    with pytest.raises(ValueError, match=f"X column '{column}'"):
        ranker.predict(df)
    with pytest.raises(ValueError, match=rf"eval_set\[0\] X: X column '{column}'"):
        LambdaMARTRanker(**FAST).fit(numeric, y, qid, eval_set=[(df, y, qid)])


def test_numeric_object_and_nullable_dataframe_columns_are_accepted(data, model):
    X, y, qid = data
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    df["f1"] = df["f1"].astype(object)
    df["f2"] = pd.array(df["f2"], dtype="Float64")
    df.loc[3, "f2"] = pd.NA  # pandas' NA is a missing value, like NaN
    X_nan = X.copy()
    X_nan[3, 2] = np.nan
    ranker = fit(df, y, qid)
    assert_same_model(ranker, fit(X_nan, y, qid))


@pytest.mark.parametrize("container", ["object-array", "str-array", "list"])
def test_array_with_text_names_the_column_and_row(data, container):
    X, y, qid = data
    X_obj = X.astype(object)
    X_obj[5, 2] = "high"
    X_bad = {"object-array": X_obj, "str-array": X_obj.astype(str), "list": X_obj.tolist()}[container]
    with pytest.raises(ValueError, match=r"X column 2 holds a non-numeric value \('high' at row 5\)"):
        LambdaMARTRanker(**FAST).fit(X_bad, y, qid)


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


# ================================================================ y


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_labels_raise_naming_the_row(data, bad):
    X, y, qid = data
    y_bad = y.copy()
    y_bad[7] = bad
    message = r"y contains NaN or infinite labels \(first .* at row 7\)"
    with pytest.raises(ValueError, match=message):
        LambdaMARTRanker(**FAST).fit(X, y_bad, qid)
    with pytest.raises(ValueError, match=r"eval_set\[0\] " + message):
        LambdaMARTRanker(**FAST).fit(X, y, qid, eval_set=[(X, y_bad, qid)])
    with pytest.raises(ValueError, match=r"y_true contains NaN"):
        ndcg(y_bad, X[:, 0], qid)
    # A missing label in a pandas nullable column is the same mistake.
    with pytest.raises(ValueError, match=r"missing label|NaN"):
        LambdaMARTRanker(**FAST).fit(X, pd.array(np.where(np.arange(y.size) == 7, None, y), dtype="Float64"), qid)


def test_negative_labels_raise(data):
    X, y, qid = data
    y_bad = y.copy()
    y_bad[4] = -1
    with pytest.raises(ValueError, match=r"y contains a negative label \(-1 at row 4\); relevance labels must be >= 0"):
        LambdaMARTRanker(**FAST).fit(X, y_bad, qid)
    with pytest.raises(ValueError, match=r"eval_set\[0\] y contains a negative label"):
        LambdaMARTRanker(**FAST).fit(X, y, qid, eval_set=[(X, y_bad, qid)])
    with pytest.raises(ValueError, match=r"y_true contains a negative label"):
        mean_average_precision(y_bad, X[:, 0], qid)


def test_fractional_labels(data):
    X, y, qid = data
    frac = y * 0.7 + 0.25 * (y > 0)
    # Linear gain: accepted as they are.
    linear = fit(X, frac, qid, gain="linear")
    assert np.isfinite(linear.predict(X)).all()
    # Exponential gain is 2**l - 1 on the float labels: the same model as linear gain on those gains.
    for objective in ("lambdarank", "listnet"):
        assert_same_model(fit(X, frac, qid, objective=objective),
                          fit(X, np.exp2(frac) - 1, qid, objective=objective, gain="linear"))
    scores = X[:, 0]
    assert ndcg(frac, scores, qid) == ndcg(np.exp2(frac) - 1, scores, qid, gain="linear")
    # A gain table needs integer labels, and says which label is not one.
    with pytest.raises(ValueError, match=r"labels must be integers in \[0, 4\]; y holds 0\.95"):
        fit(X, frac, qid, gain=[0, 1, 3, 7, 15])


def test_labels_up_to_1000_with_linear_gain(data):
    X, y, qid = data
    big = np.round(y * 333)  # 0, 333, 666, 999
    ranker = fit(X, big, qid, gain="linear", n_estimators=10)
    pred = ranker.predict(X)
    assert np.isfinite(pred).all()
    assert ndcg(big, pred, qid, gain="linear", k=10) > ndcg(big, np.zeros_like(pred), qid, gain="linear", k=10)
    assert ranker.score(X, big, qid) == pytest.approx(ndcg(big, pred, qid, k=10, gain="linear"), abs=1e-15)
    # The gain stays linear in the metric kernel (no overflow): a single relevant document at the top scores 1.
    assert ndcg([1000, 0, 0], [3, 2, 1], gain="linear") == 1.0


@pytest.mark.parametrize("where", ["fit", "eval_set", "score", "ndcg", "dcg", "err", "kendall_tau"])
def test_labels_too_large_for_exponential_gain_name_the_label_and_the_fix(data, model, where):
    X, y, qid = data
    big = np.round(y * 333)
    fix = r"gain='linear'"
    if where == "fit":
        call, message = lambda: LambdaMARTRanker(**FAST).fit(X, big, qid), rf"y has label 999, .*{fix}"
    elif where == "eval_set":
        call = lambda: LambdaMARTRanker(**FAST).fit(X, y, qid, eval_set=[(X, big, qid)])  # noqa: E731
        message = rf"eval_set\[0\] y has label 999, .*{fix}"
    elif where == "score":
        call, message = lambda: model.score(X, big, qid), rf"y_true has label 999, .*{fix}"
    elif where == "err":  # ERR has no gain option: it asks for a graded scale instead
        call, message = lambda: err(big, X[:, 0], qid), r"y_true has label 999, .*rescale the labels"
    elif where == "kendall_tau":
        call = lambda: kendall_tau(big, X[:, 0], qid, pair_weight="gain")  # noqa: E731
        message = rf"y_true has label 999, .*{fix}"
    else:
        func = {"ndcg": ndcg, "dcg": dcg}[where]
        call, message = lambda: func(big, X[:, 0], qid), rf"y_true has label 999, .*{fix}"
    with pytest.raises(ValueError, match=message):
        call()
    # Labels up to 53 are exact in float64 and accepted.
    assert np.isfinite(ndcg(np.minimum(big, 53), X[:, 0], qid))


# All labels equal: λ and w are 0 for every document (ListMLE skips such queries; pointwise gradients are all
# equal and the grower refuses gains within rounding error), so every tree is a single leaf and the model predicts
# a constant.
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_all_labels_equal_warns_and_predicts_a_constant(data, objective):
    X, _, qid = data
    with pytest.warns(UserWarning, match="every training query has all labels equal .*nothing|no order"):
        ranker = fit(X, np.ones(X.shape[0]), qid, objective=objective)
    assert ranker.n_estimators_ == FAST["n_estimators"]
    assert np.unique(ranker.predict(X)).size == 1


@pytest.mark.parametrize("objective", ["lambdarank", "lambdarank_map", "ranknet", "listnet"])
def test_labels_equal_within_each_query_but_not_across_warns_and_predicts_a_constant(data, objective):
    X, _, qid = data
    y = (qid % 3).astype(float)  # every query has one label, queries differ
    with pytest.warns(UserWarning, match="every training query has all labels equal"):
        ranker = fit(X, y, qid, objective=objective)
    assert np.unique(ranker.predict(X)).size == 1


def test_no_warning_when_one_query_has_a_pair(data):
    X, _, qid = data
    y = np.zeros(X.shape[0])
    y[np.flatnonzero(qid == 5)[0]] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(X, y, qid)


@pytest.mark.parametrize("objective", ["lambdarank", "lambdarank_map", "ranknet", "listnet", "listmle"])
def test_a_single_relevant_document_per_query(objective):
    X, _, qid = make_data(4, n_queries=30)
    rng = np.random.default_rng(4)
    y = np.zeros(qid.size)
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        y[rows[np.argmax(X[rows, 0] + 0.3 * rng.normal(size=rows.size))]] = 1.0
    ranker = fit(X, y, qid, objective=objective, n_estimators=15)
    pred = ranker.predict(X)
    assert np.isfinite(pred).all()
    mrr = mean_reciprocal_rank(y, pred, qid)
    assert mrr > mean_reciprocal_rank(y, np.zeros_like(pred), qid) + 0.2  # constant scores: the mean over orders
    assert ndcg(y, pred, qid) > 0.7


# ================================================================ qid


@pytest.mark.parametrize("where", ["fit-qid", "fit-group", "eval_set", "score", "metric"])
def test_qid_length_mismatch_raises(data, model, where):
    X, y, qid = data
    short = qid[:-1]
    if where == "fit-qid":
        call, message = lambda: LambdaMARTRanker(**FAST).fit(X, y, short), r"qid has \d+ entries but there are"
    elif where == "fit-group":
        sizes = np.bincount(qid)
        sizes[-1] += 1
        call = lambda: LambdaMARTRanker(**FAST).fit(X, y, group=sizes)  # noqa: E731
        message = r"group sizes sum to \d+ but there are \d+ rows"
    elif where == "eval_set":
        call = lambda: LambdaMARTRanker(**FAST).fit(X, y, qid, eval_set=[(X, y, short)])  # noqa: E731
        message = r"eval_set\[0\]: qid has"
    elif where == "score":
        call, message = lambda: model.score(X, y, short), r"qid has \d+ entries"
    else:
        call, message = lambda: ndcg(y, X[:, 0], short), r"qid has \d+ entries"
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("order", ["reversed-blocks", "shuffled-blocks", "interleaved"])
def test_unsorted_and_interleaved_qid_give_the_sorted_model_and_input_order_predictions(data, model, order):
    X, y, qid = data
    if order == "reversed-blocks":
        rows = np.concatenate([np.flatnonzero(qid == q) for q in np.unique(qid)[::-1]])
    elif order == "shuffled-blocks":
        rows = shuffle_blocks(qid, 5)
    else:
        rows = interleave(qid, 5)
    ranker = fit(X[rows], y[rows], qid[rows])
    assert_same_model(ranker, model)
    np.testing.assert_array_equal(ranker.predict(X[rows]), model.predict(X)[rows])
    assert ranker.score(X[rows], y[rows], qid[rows]) == model.score(X, y, qid)


@pytest.mark.parametrize("kind", ["str", "object-str", "pandas-string", "pandas-category", "bytes"])
def test_string_qid_types(data, model, kind):
    X, y, qid = data
    names = np.array([f"query-{q:03d}" for q in qid])  # zero-padded: sorts like the integers
    converted = {
        "str": names,
        "object-str": names.astype(object),
        "pandas-string": pd.Series(names, dtype="string"),
        "pandas-category": pd.Categorical(names),
        "bytes": names.astype(bytes),
    }[kind]
    assert_same_model(fit(X, y, converted), model)


@pytest.mark.parametrize("qid, message", [
    (lambda q: np.where(q == 3, None, q).astype(object), r"missing query id \(None at row \d+\)"),
    (lambda q: np.where(q == 3, np.nan, q), r"qid contains NaN or infinite values \(first nan at row \d+\)"),
    (lambda q: pd.array(np.where(q == 3, None, q), dtype="Int64"), r"NaN|missing query id"),
    (lambda q: np.array([("three" if v == 3 else v) for v in q.tolist()], dtype=object),
     r"mixes types that cannot be compared"),
    (lambda q: q.reshape(-1, 1), r"qid must be one-dimensional"),
    (lambda q: q.astype(complex), r"qid must hold integers or strings"),
])
def test_bad_qid_values_raise(data, qid, message):
    X, y, q = data
    with pytest.raises((ValueError, TypeError), match=message):
        LambdaMARTRanker(**FAST).fit(X, y, qid(q))
    with pytest.raises((ValueError, TypeError), match=message):
        ndcg(y, X[:, 0], qid(q))


def test_one_query(data):
    X, y, _ = data
    one = fit(X, y, np.full(X.shape[0], 42))
    assert_same_model(one, fit(X, y, None))
    assert_same_model(one, fit(X, y, group=[X.shape[0]]))
    assert ndcg(y, one.predict(X), np.full(X.shape[0], 42)) == ndcg(y, one.predict(X))


def test_every_query_of_size_one(data):
    X, y, _ = data
    singletons = np.arange(X.shape[0])
    with pytest.warns(UserWarning, match="all labels equal .or a single document."):
        ranker = fit(X, y, singletons)
    assert np.unique(ranker.predict(X)).size == 1
    assert ndcg(y, X[:, 0], singletons) == 1.0  # one document is always in the ideal order
    # early stopping on singleton queries works too (nothing improves, so it stops after n_iter_no_change)
    with pytest.warns(UserWarning, match="all labels equal"):
        stopped = fit(X, y, singletons, early_stopping=True, n_iter_no_change=2, n_estimators=20)
    assert stopped.n_iter_ == 3 and stopped.n_estimators_ == 1


_LARGE_QUERY = textwrap.dedent("""
    import json, resource
    import numpy as np
    from lambdamart import LambdaMARTRanker
    from lambdamart.metrics import err, kendall_tau, mean_average_precision, ndcg

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux

    rng = np.random.default_rng(0)
    n = 20_000
    X = rng.normal(size=(n, 5))
    y = rng.integers(0, 5, n).astype(float)
    small = dict(n_estimators=2, max_leaf_nodes=4, n_jobs=1, random_state=0)
    runs = [dict(truncation_level=30), dict(truncation_level=1000), dict(objective="lambdarank_map"),
            dict(objective="listnet"), dict(objective="listmle"), dict(objective="ranknet", pairs_per_document=4)]
    metrics = (ndcg, mean_average_precision, err, kendall_tau)
    # Warm up every code path on a small query first, so compilation and cache loading are not counted.
    for params in runs:
        LambdaMARTRanker(**small, **params).fit(X[:300], y[:300]).predict(X[:300])
    for metric in metrics:
        metric(y[:300], X[:300, 0])
    base = peak()
    growth = {}
    for params in runs:
        scores = LambdaMARTRanker(**small, **params).fit(X, y).predict(X)
        assert np.isfinite(scores).all()
        growth[repr(params)] = peak() - base
    for metric in metrics:
        metric(y, scores)
    growth["metrics"] = peak() - base
    print(json.dumps(growth))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in kilobytes on Linux only")
def test_one_query_of_20000_documents_needs_no_quadratic_memory():
    """A 20,000-document query: O(n²) memory would be 400 MB even at one byte per pair, 3.2 GB for float64. The
    peak resident memory of a fresh process grows by a few MB. (Work per query is O(n·truncation_level) by
    construction of the pair loop; tests never assert timings.)"""
    done = subprocess.run([sys.executable, "-c", _LARGE_QUERY], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    growth = json.loads(done.stdout)
    assert len(growth) == 7
    for run, grown in growth.items():
        assert grown < 100 * 2**20, (run, grown)


@pytest.mark.parametrize("ids", ["negative", "huge-int64", "huge-uint64", "float", "sparse-gaps"])
def test_negative_and_huge_integer_query_ids(data, model, ids):
    X, y, qid = data
    mapped = {
        "negative": qid.astype(np.int64) * 1000 - 10**6,
        "huge-int64": qid.astype(np.int64) * (2**58) - 2**62,
        "huge-uint64": qid.astype(np.uint64) * np.uint64(2**58) + np.uint64(2**63),
        "float": qid * 0.5 - 3.25,
        "sparse-gaps": qid.astype(np.int64) ** 3,
    }[ids]
    ranker = fit(X, y, mapped)  # the ids are increasing in qid, so the query order is the same
    assert_same_model(ranker, model)
    assert ndcg(y, X[:, 0], mapped, reduce=None).shape == (np.unique(qid).size,)
    np.testing.assert_array_equal(ndcg(y, X[:, 0], mapped, reduce=None), ndcg(y, X[:, 0], qid, reduce=None))


@pytest.mark.parametrize("group, message", [
    (lambda s: np.append(s, 1), r"group sizes sum to \d+ but there are \d+ rows"),
    (lambda s: s[:-1], r"group sizes sum to \d+ but there are \d+ rows"),
    (lambda s: np.append(s[:-1], [s[-1], 0]), r"group sizes must be positive"),
    (lambda s: s + 0.5, r"whole numbers"),
    (lambda s: [], r"non-empty"),
])
def test_group_sizes_that_do_not_describe_the_rows_raise(data, group, message):
    X, y, qid = data
    with pytest.raises(ValueError, match=message):
        LambdaMARTRanker(**FAST).fit(X, y, group=group(np.bincount(qid)))


# ================================================================ predict


@pytest.mark.parametrize("kind", ["array-fewer", "array-more", "sparse-fewer", "one-row-more", "1d"])
def test_predict_with_the_wrong_number_of_features_raises(data, model, kind):
    X, _, _ = data
    bad = {
        "array-fewer": X[:, :-1],
        "array-more": np.column_stack([X, X[:, 0]]),
        "sparse-fewer": sp.csr_matrix(X[:, :-1]),
        "one-row-more": np.append(X[0], 1.0)[None, :],
        "1d": X[0],
    }[kind]
    with pytest.raises(ValueError, match=r"features|2D array"):
        model.predict(bad)


@pytest.mark.parametrize("change, listed", [
    ("reordered", r"same order.*Columns at fit: \['a', 'b', 'c', 'd'\]\nColumns given: \['d', 'c', 'b', 'a'\]"),
    ("renamed", r"unseen at fit time:\n- z.*Columns given: \['z', 'b', 'c', 'd'\]"),
    ("missing", r"yet now missing:\n- d.*Columns given: \['a', 'b', 'c'\]"),
])
def test_predict_with_other_dataframe_columns_raises_naming_them(data, change, listed):
    X, y, qid = data
    df = pd.DataFrame(X, columns=list("abcd"))
    ranker = fit(df, y, qid)
    other = {"reordered": df[list("dcba")], "renamed": df.rename(columns={"a": "z"}), "missing": df[list("abc")]}
    with pytest.raises(ValueError, match=re.compile(listed, re.S)) as info:
        ranker.predict(other[change])
    assert "X[ranker.feature_names_in_]" in str(info.value)
    # The suggested fix works.
    if change == "reordered":
        np.testing.assert_array_equal(ranker.predict(other[change][ranker.feature_names_in_]), ranker.predict(df))


@pytest.mark.parametrize("kind", ["array", "dataframe", "csr", "float32"])
def test_predict_on_empty_input_returns_an_empty_array(data, kind):
    X, y, qid = data
    df = pd.DataFrame(X, columns=list("abcd"))
    ranker = fit(df if kind == "dataframe" else X, y, qid)
    empty = {"array": X[:0], "dataframe": df.iloc[:0], "csr": sp.csr_matrix(X[:0]), "float32": X[:0].astype(
        np.float32)}[kind]
    pred = ranker.predict(empty)
    assert pred.shape == (0,) and pred.dtype == np.float64


@pytest.mark.parametrize("call", ["predict", "score", "save_model", "feature_importances_"])
def test_using_an_unfitted_ranker_raises_not_fitted(tmp_path, data, call):
    X, y, qid = data
    ranker = LambdaMARTRanker()
    with pytest.raises(NotFittedError, match="not fitted yet"):
        {"predict": lambda: ranker.predict(X), "score": lambda: ranker.score(X, y, qid),
         "save_model": lambda: ranker.save_model(tmp_path / "m.json"),
         "feature_importances_": lambda: ranker.feature_importances_}[call]()
    assert not (tmp_path / "m.json").exists()


# ================================================================ parameters


@pytest.mark.parametrize("name, value", [
    ("learning_rate", 0.0), ("learning_rate", -0.1), ("learning_rate", np.nan), ("learning_rate", np.inf),
    ("learning_rate", "0.1"),
    ("max_leaf_nodes", 1), ("max_leaf_nodes", 0), ("max_leaf_nodes", 31.0),
    ("truncation_level", 0), ("truncation_level", -5),
    ("sigma", 0.0), ("sigma", -1.0), ("sigma", np.nan), ("sigma", np.inf),
    ("subsample", 0.0), ("subsample", -0.5), ("subsample", 1.0001), ("subsample", np.nan),
    ("objective", "lambdamart"), ("objective", "rank:ndcg"), ("objective", None),
    ("gain", "exp"), ("gain", "quadratic"), ("gain", None),
    ("relevance_threshold", np.nan), ("position_bias_norm", np.inf), ("l2_regularization", np.inf),
    ("min_sum_hessian", np.nan), ("tol", np.nan), ("max_features", np.nan), ("validation_fraction", 0.0),
    ("max_depth", 0), ("n_estimators", 0), ("n_estimators", 10.0), ("min_samples_leaf", 0), ("max_bins", 300),
    ("eval_at", 0), ("n_iter_no_change", 0), ("pairs_per_document", 0), ("importance_type", "cover"),
    ("query_normalization", "yes"),
])
def test_out_of_range_parameters_raise_at_fit_naming_the_parameter(data, name, value):
    X, y, qid = data
    ranker = LambdaMARTRanker(**{name: value})  # constructing never validates (scikit-learn's rule)
    with pytest.raises(ValueError, match=rf"'{name}' parameter of LambdaMARTRanker must be"):
        ranker.fit(X, y, qid)


@pytest.mark.parametrize("gain, message", [
    ([0.0, 1.0, np.nan], r"a gain table must hold finite, non-negative gains"),
    ([0.0, -1.0, 3.0], r"a gain table must hold finite, non-negative gains"),
    ([[0.0, 1.0, 3.0, 7.0]], r"a gain table must be a non-empty one-dimensional array"),
    ([0.0, 1.0], r"gain table of 2 entries, labels must be integers in \[0, 1\]; y holds 2"),
])
def test_bad_gain_tables_raise_at_fit(data, gain, message):
    X, y, qid = data
    with pytest.raises(ValueError, match=message):
        LambdaMARTRanker(**FAST, gain=gain).fit(X, y, qid)


@pytest.mark.parametrize("eval_set, message", [
    (lambda X, y, q: (X, y, q), r"eval_set must be a list of \(X, y\) or \(X, y, qid\) tuples.*wrap it in a list"),
    (lambda X, y, q: [X], r"eval_set\[0\] must be a tuple \(X, y\) or \(X, y, qid\), got ndarray"),
    (lambda X, y, q: [(X, y, q, q)], r"eval_set\[0\] must be a tuple .* of length 4"),
    (lambda X, y, q: [(X, y[:, None], q)], r"eval_set\[0\] y must be one-dimensional .*y.ravel\(\)"),
    (lambda X, y, q: [(X, y[:-1], q)], r"eval_set\[0\] y must be one label per row"),
    (lambda X, y, q: [(X[:, :2], y, q)], r"eval_set\[0\] X: X has 2 features"),
    (lambda X, y, q: 5, r"eval_set must be a list"),
])
def test_bad_eval_sets_raise(data, eval_set, message):
    X, y, qid = data
    with pytest.raises(ValueError, match=message):
        LambdaMARTRanker(**FAST).fit(X, y, qid, eval_set=eval_set(X, y, qid))


def test_eval_set_labels_get_the_same_conversion_as_fit_labels(data):
    X, y, qid = data
    X_v, y_v, q_v = make_data(9)
    reference = fit(X, y, qid, early_stopping=False, eval_set=[(X_v, y_v, q_v)])
    for labels in (y_v.astype(int).astype(object), pd.Series(y_v.astype(int), dtype="Int64"), list(y_v)):
        ranker = fit(X, y, qid, early_stopping=False, eval_set=[(X_v, labels, q_v)])
        np.testing.assert_array_equal(ranker.validation_score_, reference.validation_score_)
    with pytest.raises(TypeError, match=r"eval_set\[0\] y must hold numeric relevance labels.*row 0 holds 'a'"):
        fit(X, y, qid, eval_set=[(X_v, np.array(["a"] * y_v.size, dtype=object), q_v)])


# ================================================================ determinism


DETERMINISM_CASES = {
    "default": dict(),
    "sampled": dict(subsample=0.6, max_features=0.5),
    "held-out": dict(early_stopping=True, validation_fraction=0.25, n_iter_no_change=3),
    "listmle": dict(objective="listmle"),
    "ranknet-sampled-pairs": dict(objective="ranknet", pairs_per_document=3),
    "map-unnormalised": dict(objective="lambdarank_map", pair_normalization=False, query_normalization=False),
}


@pytest.fixture
def parallel_paths(monkeypatch):
    """Make small data take every large-data path: threaded fit and predict, and subsampled bin thresholds."""
    monkeypatch.setattr(lambdamart.ranker, "_SERIAL_FIT_CELLS", 0)
    monkeypatch.setattr(lambdamart.ranker, "_SERIAL_PREDICT_WORK", 0)
    monkeypatch.setattr(lambdamart.ranker, "_BINNING_SUBSAMPLE", 150)


@pytest.fixture(scope="module")
def tie_data():
    """Coarse features (so documents tie in score) with whole queries of equal labels mixed in."""
    X, y, qid = make_data(6, n_queries=24, decimals=1)
    y[qid % 7 == 0] = 1.0
    return X, y, qid


@pytest.mark.parametrize("case", list(DETERMINISM_CASES))
def test_same_data_and_random_state_give_bit_identical_models_across_runs_and_n_jobs(tie_data, parallel_paths,
                                                                                       case):
    X, y, qid = tie_data
    params = DETERMINISM_CASES[case] | dict(n_estimators=8, random_state=3)
    models = [fit(X, y, qid, **params, n_jobs=n_jobs) for n_jobs in (1, 2, -1, 1)]
    for other in models[1:]:
        assert_same_model(models[0], other)
        assert other.n_estimators_ == models[0].n_estimators_
        np.testing.assert_array_equal(other.predict(X), models[0].predict(X))


@pytest.mark.parametrize("order", ["shuffled-blocks", "interleaved"])
@pytest.mark.parametrize("case", list(DETERMINISM_CASES))
def test_row_orders_that_keep_each_query_in_order_give_the_same_model(tie_data, parallel_paths, case, order):
    X, y, qid = tie_data
    params = DETERMINISM_CASES[case] | dict(n_estimators=8, random_state=3, n_jobs=2)
    rows = shuffle_blocks(qid, 8) if order == "shuffled-blocks" else interleave(qid, 8)
    reference = fit(X, y, qid, **params)
    moved = fit(X[rows], y[rows], qid[rows], **params)
    assert_same_model(moved, reference)
    np.testing.assert_array_equal(moved.predict(X[rows]), reference.predict(X)[rows])
    np.testing.assert_array_equal(moved.train_score_, reference.train_score_)


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


# ================================================================ loader and command line


def test_loader_warns_when_a_value_overflows_the_requested_float_dtype(tmp_path):
    path = tmp_path / "rank.txt"
    path.write_text("1 qid:1 1:0.5 2:inf\n0 qid:1 1:1e39 2:1\n2 qid:2 1:-1e300 2:3\n")
    with pytest.warns(UserWarning, match=r"rank\.txt line 2: value 1e39 of feature 1 is beyond the range of "
                                         r"float32 .*dtype=np\.float64"):
        X, _, _ = load_letor(path)
    assert X[1, 0] == np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X64, _, _ = load_letor(path, dtype=np.float64)  # no overflow; an inf written in the file is not one
        load_letor(tmp_path / "rank.txt", n_features=2, dtype=np.float64)
    assert X64[1, 0] == 1e39 and X64[0, 1] == np.inf


def _cli(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err_text = capsys.readouterr()
    assert "Traceback" not in out + err_text
    return code, out, err_text


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    from sklearn.datasets import dump_svmlight_file

    folder = tmp_path_factory.mktemp("cli")
    X, y, qid = make_data(7, n_queries=10)
    X[:, 0] = np.abs(X[:, 0]) + 1  # column 0 never zero: the files are 1-based without doubt
    good = folder / "good.txt"
    dump_svmlight_file(X, y, str(good), query_id=qid, zero_based=False)
    model_path = folder / "model.json"
    assert cli.main(["train", "--train", str(good), "--model", str(model_path), "--param", "n_estimators=3",
                     "n_jobs=1", "min_samples_leaf=3"]) == 0
    files = {"good": good, "model": model_path}
    files["malformed"] = folder / "malformed.txt"
    files["malformed"].write_text("1 qid:1 1:0.5 2:0.3\n0 qid:1 1:0.2\n2 qid:2 1:0.4 2:0.3 2:0.1\n")
    files["no-query-file"] = folder / "noquery.txt"
    files["no-query-file"].write_text("1 1:0.5\n0 1:0.2\n2 1:0.4\n")
    files["bad-query-sizes"] = folder / "sizes.txt"
    files["bad-query-sizes"].write_text("1 1:0.5\n0 1:0.2\n2 1:0.4\n")
    (folder / "sizes.txt.query").write_text("2\n2\n")
    files["empty"] = folder / "empty.txt"
    files["empty"].write_text("")
    return files


CLI_DATA_ERRORS = {
    "malformed": r"malformed\.txt line 3: feature indices must be increasing and unique, but 2 follows 2",
    "no-query-file": r"noquery\.txt has no qid: fields, and no query file was found at .*noquery\.txt\.query",
    "bad-query-sizes": r"sizes\.txt\.query: the 2 query sizes sum to 4, but .*sizes\.txt has 3 rows",
    "empty": r"empty\.txt: no data rows",
}


# predict needs no query ids, so it reads neither qid: nor a .query file (see the next test).
@pytest.mark.parametrize("problem, command", [
    (problem, command) for problem in CLI_DATA_ERRORS for command in ("train", "train --valid", "predict", "evaluate")
    if not (command == "predict" and problem in ("no-query-file", "bad-query-sizes"))])
def test_cli_data_file_errors(cli_files, capsys, tmp_path, problem, command):
    bad = cli_files[problem]
    argv = {
        "train": ["train", "--train", bad, "--model", tmp_path / "m.json"],
        "train --valid": ["train", "--train", cli_files["good"], "--valid", bad, "--model", tmp_path / "m.json"],
        "predict": ["predict", "--model", cli_files["model"], "--data", bad],
        "evaluate": ["evaluate", "--model", cli_files["model"], "--data", bad],
    }[command]
    code, out, err_text = _cli(capsys, *argv)
    assert code == 1, err_text
    assert re.search(CLI_DATA_ERRORS[problem], err_text), err_text
    assert err_text.startswith(f"lambdamart {argv[0]}: error:")
    assert err_text.count("\n") == 1  # one line, no traceback
    assert not (tmp_path / "m.json").exists()
    if command != "train":
        assert out == ""


@pytest.mark.parametrize("problem", ["no-query-file", "bad-query-sizes"])
def test_cli_predict_needs_no_query_ids(cli_files, capsys, problem):
    code, out, err_text = _cli(capsys, "predict", "--model", cli_files["model"], "--data", cli_files[problem])
    assert code == 0, err_text
    assert len(out.split()) == 3


# ================================================================ model file


def _small_model_file(tmp_path, data):
    X, y, qid = data
    path = tmp_path / "model.json"
    fit(X, y, qid, n_estimators=2, max_leaf_nodes=4).save_model(path)
    return path


def _walk(trees, X):
    """Pure-Python predict that checks every index it follows."""
    out = np.zeros(X.shape[0])
    n_nodes = trees["feature"].shape[0]
    for i in range(X.shape[0]):
        for start in trees["tree_starts"]:
            node, steps = int(start), 0
            while trees["left"][node] != -1:
                x = X[i, trees["feature"][node]]
                go_left = trees["missing_left"][node] if np.isnan(x) else x <= trees["threshold"][node]
                node = trees["left"][node] if go_left else trees["right"][node]
                steps += 1
                assert 0 <= node < n_nodes and steps < n_nodes
            out[i] += trees["value"][node]
    return out


def test_bit_flipped_model_files_raise_value_error_or_load_checked_trees(tmp_path, data):
    """Single bit flips all over a small model file: each either raises ValueError or loads trees that a
    bounds-checking walk predicts exactly like the kernel. Nothing else (no crash, no other exception)."""
    X = data[0][:20]
    raw = _small_model_file(tmp_path, data).read_bytes()
    rng = np.random.default_rng(0)
    flipped = tmp_path / "flipped.json"
    outcomes = {"rejected": 0, "loaded": 0}
    for position in rng.choice(len(raw), size=min(400, len(raw)), replace=False):
        edited = bytearray(raw)
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
        np.testing.assert_array_equal(loaded.predict(X), _walk(loaded._trees, X))
    assert outcomes["rejected"] > 100, outcomes


@pytest.mark.parametrize("cut", [0, 1, 10, 0.5, -2])
def test_truncated_model_files_raise_value_error(tmp_path, data, cut):
    raw = _small_model_file(tmp_path, data).read_bytes()
    n = int(cut * len(raw)) if isinstance(cut, float) else (cut if cut >= 0 else len(raw) + cut)
    path = tmp_path / "truncated.json"
    path.write_bytes(raw[:n])
    with pytest.raises(ValueError, match=r"cannot load .*truncated\.json"):
        load_model(path)


@pytest.mark.parametrize("version, message", [(2, r"format version 2 .*Upgrade lambdamart"),
                                              (0, r"format version 0"), ("1", r"format_version"),
                                              (None, r"format_version")])
def test_wrong_version_model_files_raise_value_error(tmp_path, data, version, message):
    path = _small_model_file(tmp_path, data)
    doc = json.loads(path.read_text())
    doc["format_version"] = version
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=message):
        load_model(path)


@pytest.mark.parametrize("content", [b"", b"{}", b"null", b"[]", b"ranker", b"\x00" * 64, b"PK\x03\x04npz",
                                     b'{"format": "lambdamart-model"}', "caf\u00e9 \ufeff".encode()])
def test_non_model_files_raise_value_error(tmp_path, content):
    path = tmp_path / "other.bin"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"cannot load .*other\.bin"):
        load_model(path)


class _Marker:
    """Unpickling this creates a file: proof that a pickle was executed."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_loading_never_executes_code_from_the_file(tmp_path, data, monkeypatch):
    marker = tmp_path / "executed"
    payloads = {
        "pickle": pickle.dumps(_Marker(str(marker))),
        "pickle-protocol-0": pickle.dumps(_Marker(str(marker)), protocol=0),
    }
    doc = json.loads(_small_model_file(tmp_path, data).read_text())
    for name, value in {"gain": f"__import__('pathlib').Path({str(marker)!r}).touch()",
                        "objective": "eval", "random_state": {"py/reduce": [{"py/type": "os.system"}]}}.items():
        crafted = json.loads(json.dumps(doc))
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
