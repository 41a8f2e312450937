"""Bad input gets a clear error that names what is wrong and where: features X, labels y, query ids and group sizes,
predict's input, parameters, gain tables and eval sets. The same checks hold for an eval_set and, where they apply,
for the metrics and score().

Bad files are tested with their readers: test_datasets.py (LETOR files), test_persistence.py (model files),
test_cli.py (the command line).
"""

import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from helpers import FAST, fit
from sklearn.exceptions import NotFittedError

from lambdamart import LambdaMARTRanker
from lambdamart.metrics import dcg, err, kendall_tau, mean_average_precision, ndcg

# ---------------------------------------------------------------- X


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


@pytest.mark.parametrize("container", ["object-array", "str-array", "list"])
def test_array_with_text_names_the_column_and_row(data, container):
    X, y, qid = data
    X_obj = X.astype(object)
    X_obj[5, 2] = "high"
    X_bad = {"object-array": X_obj, "str-array": X_obj.astype(str), "list": X_obj.tolist()}[container]
    with pytest.raises(ValueError, match=r"X column 2 holds a value that is not a float64 number \('high' at row 5\)"):
        LambdaMARTRanker(**FAST).fit(X_bad, y, qid)


def test_pandas_na_in_object_columns_and_arrays_is_missing(data):
    """pd.NA in an object column (or object array) means missing, as NaN does, at fit and at predict; float
    conversion alone raises on it. The caller's frame keeps its pd.NA."""
    X, y, qid = data
    with_nan = X.copy()
    with_nan[::3, 1] = np.nan
    reference = LambdaMARTRanker(**FAST).fit(with_nan, y, qid).predict(with_nan)
    frame = pd.DataFrame(X).astype({1: object})
    frame.iloc[::3, 1] = pd.NA
    np.testing.assert_array_equal(LambdaMARTRanker(**FAST).fit(frame, y, qid).predict(frame), reference)
    assert frame.iloc[0, 1] is pd.NA
    array = X.astype(object)
    array[::3, 1] = pd.NA
    np.testing.assert_array_equal(LambdaMARTRanker(**FAST).fit(array, y, qid).predict(array), reference)


@pytest.mark.parametrize("container", ["dataframe", "object-array"])
def test_numbers_beyond_float64_name_the_column_and_row(data, container):
    X, y, qid = data
    X_obj = X.astype(object)
    X_obj[4, 3] = 10**400
    X_bad = pd.DataFrame(X_obj) if container == "dataframe" else X_obj
    with pytest.raises(ValueError, match=r"X column 3 holds a value that is not a float64 number \(1000.*\.\.\. at "
                                         r"row 4\)"):
        LambdaMARTRanker(**FAST).fit(X_bad, y, qid)


# ---------------------------------------------------------------- y


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
    # Every label negative: one of them is named.
    with pytest.raises(ValueError, match=r"y contains a negative label \(-\d+ at row \d+\)"):
        LambdaMARTRanker(**FAST).fit(X, -y - 1, qid)


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
    if where == "fit":
        with pytest.raises(ValueError, match=rf"y has label 60, .*{fix}"):
            LambdaMARTRanker(**FAST).fit(X, np.where(y > 2, 60.0, y), qid)


def test_labels_of_another_length_raise(data):
    X, y, qid = data
    with pytest.raises(ValueError, match=r"y must be one label per row: X has \d+ rows, y has shape"):
        LambdaMARTRanker(**FAST).fit(X, y[:-1], qid)


# ---------------------------------------------------------------- qid and group


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


@pytest.mark.parametrize("group, message", [
    (lambda s: np.append(s, 1), r"group sizes sum to \d+ but there are \d+ rows"),
    (lambda s: s[:-1], r"group sizes sum to \d+ but there are \d+ rows"),
    (lambda s: [s.sum() - 1], r"group sizes sum to \d+ but there are \d+ rows"),
    (lambda s: np.append(s[:-1], [s[-1], 0]), r"group sizes must be positive"),
    (lambda s: s + 0.5, r"whole numbers"),
    (lambda s: [], r"non-empty"),
    # Sizes whose int64 sum would wrap around to the row count.
    (lambda s: np.array([2**62, 2**62, 2**62, 2**62 + s.sum()]), r"a query of \d+ rows but there are \d+ rows"),
    (lambda s: np.append(s.astype(np.uint64), np.uint64(2**64 - 1)), r"a query of 18446744073709551615 rows"),
])
def test_group_sizes_that_do_not_describe_the_rows_raise(data, group, message):
    X, y, qid = data
    with pytest.raises(ValueError, match=message):
        LambdaMARTRanker(**FAST).fit(X, y, group=group(np.bincount(qid)))


def test_group_sizes_as_python_integers_in_an_object_array(data):
    X, y, qid = data
    sizes = np.bincount(qid)
    np.testing.assert_array_equal(LambdaMARTRanker(**FAST).fit(X, y, group=sizes.astype(object)).predict(X),
                                  LambdaMARTRanker(**FAST).fit(X, y, group=sizes).predict(X))


def test_qid_and_group_together_raise(data):
    X, y, qid = data
    with pytest.raises(ValueError, match=r"pass either qid .* or group .*, not both"):
        LambdaMARTRanker(**FAST).fit(X, y, qid, group=np.bincount(qid))


# ---------------------------------------------------------------- predict


@pytest.mark.parametrize("kind, message", [
    ("array-fewer", r"X has 3 features, but LambdaMARTRanker is expecting 4 features"),
    ("array-more", r"X has 5 features, but LambdaMARTRanker is expecting 4 features"),
    ("sparse-fewer", r"X has 3 features, but LambdaMARTRanker is expecting 4 features"),
    ("one-row-more", r"X has 5 features, but LambdaMARTRanker is expecting 4 features"),
    ("1d", r"2D array"),
])
def test_predict_with_the_wrong_number_of_features_raises(data, model, kind, message):
    X, _, _ = data
    bad = {
        "array-fewer": X[:, :-1],
        "array-more": np.column_stack([X, X[:, 0]]),
        "sparse-fewer": sp.csr_matrix(X[:, :-1]),
        "one-row-more": np.append(X[0], 1.0)[None, :],
        "1d": X[0],
    }[kind]
    with pytest.raises(ValueError, match=message):
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


@pytest.mark.parametrize("call", ["predict", "score", "save_model", "feature_importances_"])
def test_using_an_unfitted_ranker_raises_not_fitted(tmp_path, data, call):
    X, y, qid = data
    ranker = LambdaMARTRanker()
    with pytest.raises(NotFittedError, match="not fitted yet"):
        {"predict": lambda: ranker.predict(X), "score": lambda: ranker.score(X, y, qid),
         "save_model": lambda: ranker.save_model(tmp_path / "m.json"),
         "feature_importances_": lambda: ranker.feature_importances_}[call]()
    assert not (tmp_path / "m.json").exists()


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize("name, value", [
    ("objective", "lambdamart"), ("objective", "rank:ndcg"), ("objective", "pairwise"), ("objective", None),
    ("n_estimators", 0), ("n_estimators", 10.0),
    ("learning_rate", 0.0), ("learning_rate", -0.1), ("learning_rate", np.nan), ("learning_rate", np.inf),
    ("learning_rate", "0.1"),
    ("max_leaf_nodes", 1), ("max_leaf_nodes", 0), ("max_leaf_nodes", 31.0),
    ("max_depth", 0), ("min_samples_leaf", 0),
    ("min_sum_hessian", -1.0), ("min_sum_hessian", np.nan),
    ("l2_regularization", -1.0), ("l2_regularization", np.inf),
    ("max_bins", 1), ("max_bins", 256), ("max_bins", 300),
    ("truncation_level", 0), ("truncation_level", -5),
    ("sigma", 0.0), ("sigma", -1.0), ("sigma", np.nan), ("sigma", np.inf),
    ("gain", "exp"), ("gain", "quadratic"), ("gain", None),
    ("pair_normalization", "yes"), ("query_normalization", "yes"),
    ("relevance_threshold", np.nan), ("position_bias_norm", np.inf),
    ("subsample", 0.0), ("subsample", -0.5), ("subsample", 1.0001), ("subsample", 1.5), ("subsample", np.nan),
    ("max_features", 0.0), ("max_features", 2.0), ("max_features", np.nan),
    ("early_stopping", "sometimes"), ("validation_fraction", 0.0), ("validation_fraction", 1.0),
    ("n_iter_no_change", 0), ("tol", -1e-3), ("tol", np.nan), ("eval_at", 0), ("pairs_per_document", 0),
    ("importance_type", "cover"), ("n_jobs", 1.5), ("random_state", "seed"), ("verbose", -1),
])
def test_out_of_range_parameters_raise_at_fit_naming_the_parameter(data, name, value):
    X, y, qid = data
    ranker = LambdaMARTRanker(**{name: value})  # constructing never validates (scikit-learn's rule)
    with pytest.raises(ValueError, match=rf"'{name}' parameter of LambdaMARTRanker must be"):
        ranker.fit(X, y, qid)


def test_ranknet_partners_that_would_not_fit_in_memory_raise(data):
    """pairs_per_document partners are drawn for every row each round: 10**9 of them per row is refused up front
    rather than failing to allocate terabytes."""
    X, y, qid = data
    with pytest.raises(ValueError, match=r"pairs_per_document=1000000000 on \d+ training rows .*GiB.*lower"):
        LambdaMARTRanker(objective="ranknet", pairs_per_document=10**9).fit(X, y, qid)


@pytest.mark.parametrize("objective", ["pointwise", "lambdarank"])
def test_a_learning_rate_that_overflows_the_leaf_values_raises_naming_the_round(data, objective):
    """Any finite learning_rate passes the parameter check; one whose leaves overflow float64 must stop the fit
    rather than leave NaN or infinite scores and a model its own file reader would refuse."""
    X, y, qid = data
    ranker = LambdaMARTRanker(objective, **{**FAST, "learning_rate": 1e308})
    with pytest.raises(ValueError, match=r"Round \d grew a leaf whose value is not finite.*smaller learning_rate"):
        ranker.fit(X, y, qid)


@pytest.mark.parametrize("grow_policy", ["leafwise", "symmetric"])
def test_max_leaf_nodes_beyond_what_the_rows_can_fill_allocates_only_what_they_can(data, grow_policy):
    """Leaves hold min_samples_leaf rows each, so no tree grows more than n_rows // min_samples_leaf of them: a
    larger max_leaf_nodes is that many (the grower once allocated a histogram per leaf asked for: terabytes).
    Symmetric trees take their depth from max_leaf_nodes (30 levels for both here), so they compare at 2**30."""
    X, y, qid = data
    params = {**FAST, "grow_policy": grow_policy}
    huge = LambdaMARTRanker(**{**params, "max_leaf_nodes": 10**9}).fit(X, y, qid)
    enough = LambdaMARTRanker(**{**params, "max_leaf_nodes": X.shape[0] if grow_policy == "leafwise" else 2**30})
    np.testing.assert_array_equal(huge.predict(X), enough.fit(X, y, qid).predict(X))


def test_zero_threads_raise_at_fit(data):
    X, y, qid = data
    with pytest.raises(ValueError, match=r"n_jobs == 0 has no meaning"):
        LambdaMARTRanker(n_jobs=0).fit(X, y, qid)


@pytest.mark.parametrize("gain, message", [
    ([0.0, 1.0, np.nan], r"a gain table must hold finite, non-negative gains"),
    ([0.0, -1.0, 3.0], r"a gain table must hold finite, non-negative gains"),
    ([0.0, -1.0, 3.0, 7.0], r"a gain table must hold finite, non-negative gains"),
    ([[0.0, 1.0, 3.0, 7.0]], r"a gain table must be a non-empty one-dimensional array"),
    ([0.0, 1.0], r"gain table of 2 entries, labels must be integers in \[0, 1\]; y holds 2"),
    # Gains whose DCG sums overflow (NDCG then came out as inf / inf, taken for a query without relevant documents).
    ([0.0, 1.0, 1e308, 1.0], r"non-negative gains up to 1e\+100"),
])
def test_bad_gain_tables_raise_at_fit(data, gain, message):
    X, y, qid = data
    with pytest.raises(ValueError, match=message):
        LambdaMARTRanker(**FAST, gain=gain).fit(X, y, qid)
    with pytest.raises(ValueError, match=message.replace("y holds", "y_true holds")):
        ndcg(y, X[:, 0], qid, gain=gain)


def test_linear_gains_of_labels_whose_dcg_would_overflow_raise(data):
    X, y, qid = data
    with pytest.raises(ValueError, match=r"label 1e\+200, above the largest gain 1e\+100"):
        ndcg(np.where(np.arange(y.size) == 3, 1e200, y), X[:, 0], qid, gain="linear")


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


def test_an_eval_set_that_cannot_tell_rounds_apart_warns(data):
    """A validation set whose queries all have one label scores NDCG 1 after every round: early stopping would keep
    the first tree without a word. One without qid is scored as a single query, as score() warns."""
    X, y, qid = data
    ranker = LambdaMARTRanker(**{**FAST, "n_estimators": 20}, n_iter_no_change=3)
    with pytest.warns(UserWarning, match=r"every query has all labels equal .*n_iter_no_change=3 rounds"):
        ranker.fit(X, y, qid, eval_set=[(X, np.zeros_like(y), qid)])
    assert ranker.n_estimators_ == 1
    with pytest.warns(UserWarning, match=r"eval_set\[0\] has no qid, so all its rows are scored as one query"):
        LambdaMARTRanker(**FAST).fit(X, y, qid, eval_set=[(X, y)])
