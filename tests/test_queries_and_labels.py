"""Query ids, group sizes and relevance labels: the grouping and gain helpers shared by the metrics and the ranker
(lambdamart._queries, lambdamart._gains), every form of qid, group and y the ranker accepts, and labels that leave
little or nothing to learn.

Bad query ids and labels (the error messages) are in test_input_validation.py; row orders that do not change the
model are in test_determinism.py.
"""

import json
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest
from helpers import FAST, assert_same_model, fit, make_data

from lambdamart import LambdaMARTRanker
from lambdamart._gains import MAX_EXPONENTIAL_LABEL, check_labels, label_gains
from lambdamart._queries import group_from_sizes, group_queries
from lambdamart.metrics import mean_reciprocal_rank, ndcg

OBJECTIVES = ["lambdarank", "lambdarank_map", "ranknet", "listnet", "listmle", "pointwise"]

# ---------------------------------------------------------------- grouping rows into queries (lambdamart._queries)


def test_group_queries_is_stable_and_sorted_by_id():
    qid = np.array([7, 3, 7, 3, 5, 7])
    g = group_queries(qid, 6)
    assert list(g.ids) == [3, 5, 7]
    assert list(g.offsets) == [0, 2, 3, 6]
    assert list(g.order) == [1, 3, 4, 0, 2, 5]  # rows keep their relative order inside a query
    values = np.arange(6.0)
    assert np.array_equal(g.restore(g.take(values)), values)


def test_sorted_input_needs_no_permutation():
    g = group_queries(np.array([1, 1, 2, 2, 2]), 5)
    assert g.order is None
    assert list(g.sizes) == [2, 3]


@pytest.mark.parametrize("qid", [np.array([1, 1, 2, 2, 2, 9]), np.array([-2.5, -2.5, 0.0, 0.5, 0.5]),
                                 np.array([3, 3, 200], dtype=np.uint8), np.array([False, True, True]),
                                 np.array([4]), np.repeat(np.arange(50), 7)])
def test_sorted_ids_group_as_unique_does(qid):
    """Sorted numeric ids take a shortcut (block boundaries, no sort): the same groups as np.unique's."""
    ids, inverse = np.unique(qid, return_inverse=True)
    g = group_queries(qid, qid.shape[0])
    assert g.order is None
    np.testing.assert_array_equal(g.ids, ids)
    assert g.ids.dtype == ids.dtype
    np.testing.assert_array_equal(g.offsets, np.concatenate(([0], np.cumsum(np.bincount(inverse)))))


def test_no_qid_is_one_query():
    g = group_queries(None, 4)
    assert g.n_queries == 1 and list(g.offsets) == [0, 4]


def test_string_ids():
    g = group_queries(np.array(["b", "a", "b"]), 3)
    assert list(g.ids) == ["a", "b"] and list(g.order) == [1, 0, 2]


@pytest.mark.parametrize(
    "qid, match",
    [
        (np.zeros(3), "3 entries but there are 4 rows"),
        (np.zeros((4, 1)), "one-dimensional"),
        (np.array([0.0, np.nan, 1.0, 1.0]), "NaN"),
        (np.array([1, "a", 2, "b"], dtype=object), "mixes types"),
    ],
)
def test_bad_qid(qid, match):
    with pytest.raises(ValueError, match=match):
        group_queries(qid, 4)


def test_group_sizes():
    g = group_from_sizes([2, 3], 5)
    assert list(g.offsets) == [0, 2, 5] and g.order is None


@pytest.mark.parametrize(
    "group, match", [([2, 2], "sum to 4 but there are 5"), ([5, 0], "positive"), ([2.5, 2.5], "whole numbers"),
                     ([], "non-empty")]
)
def test_bad_group_sizes(group, match):
    with pytest.raises(ValueError, match=match):
        group_from_sizes(group, 5)


# ---------------------------------------------------------------- the forms of qid and group the ranker takes


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


def test_unpadded_string_qid_sorts_as_strings(data):
    """Unpadded strings sort differently ("q10" < "q2"): the same model as integer ids in that sorted order."""
    X, y, qid = data
    plain = np.array([f"q{q}" for q in qid], dtype=object)
    ranks = np.unique(plain.astype(str), return_inverse=True)[1]
    assert not np.array_equal(ranks, qid)
    assert_same_model(fit(X, y, plain), fit(X, y, ranks))


@pytest.mark.parametrize("ids", ["negative", "huge-int64", "huge-uint64", "float", "sparse-gaps",
                                 "list-beyond-int64-and-uint64"])
def test_negative_and_huge_integer_query_ids(data, model, ids):
    X, y, qid = data
    mapped = {
        "negative": qid.astype(np.int64) * 1000 - 10**6,
        "huge-int64": qid.astype(np.int64) * (2**58) - 2**62,
        "huge-uint64": qid.astype(np.uint64) * np.uint64(2**58) + np.uint64(2**63),
        "float": qid * 0.5 - 3.25,
        "sparse-gaps": qid.astype(np.int64) ** 3,
        # numpy makes this list float64, in which ids 1 apart beyond 2**53 are equal: they must stay apart.
        "list-beyond-int64-and-uint64": [-1 if q == qid.min() else 2**63 + int(q) for q in qid],
    }[ids]
    ranker = fit(X, y, mapped)  # the ids are increasing in qid, so the query order is the same
    assert_same_model(ranker, model)
    assert ndcg(y, X[:, 0], mapped, reduce=None).shape == (np.unique(qid).size,)
    np.testing.assert_array_equal(ndcg(y, X[:, 0], mapped, reduce=None), ndcg(y, X[:, 0], qid, reduce=None))


def test_group_sizes_give_the_model_of_qid(data, model):
    X, y, qid = data
    assert_same_model(model, fit(X, y, group=np.bincount(qid)))


def test_one_query(data):
    """No qid, a constant qid and a single group size all mean one query."""
    X, y, _ = data
    one = fit(X, y, np.full(X.shape[0], 42))
    assert_same_model(one, fit(X, y, None))
    assert_same_model(one, fit(X, y, np.zeros(X.shape[0])))
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


# ---------------------------------------------------------------- label gains (lambdamart._gains)


def test_gains():
    y = np.array([0.0, 1.0, 3.0])
    assert list(label_gains(y, "exponential")) == [0.0, 1.0, 7.0]
    assert list(label_gains(y, "linear")) == [0.0, 1.0, 3.0]
    assert list(label_gains(y, [0.0, 10.0, 20.0, 30.0])) == [0.0, 10.0, 30.0]


def test_exponential_gain_is_exact_up_to_its_limit_and_refuses_beyond():
    top = np.array([float(MAX_EXPONENTIAL_LABEL)])
    assert label_gains(top)[0] == 2.0**MAX_EXPONENTIAL_LABEL - 1
    with pytest.raises(ValueError, match="gain='linear'"):
        label_gains(top + 1)


@pytest.mark.parametrize(
    "y, gain, match",
    [
        ([0.0, 1.5], [0.0, 1.0, 2.0], "integers"),
        ([0.0, 3.0], [0.0, 1.0, 2.0], "integers in \\[0, 2\\]"),
        ([0.0], "cubic", "gain must be"),
        ([0.0], [np.inf], "finite"),
    ],
)
def test_bad_gains(y, gain, match):
    with pytest.raises(ValueError, match=match):
        label_gains(np.array(y), gain)


@pytest.mark.parametrize("y, match", [([0.0, np.nan], "NaN"), ([0.0, -1.0], "negative"), ([0, np.inf], "infinite")])
def test_bad_labels(y, match):
    with pytest.raises(ValueError, match=match):
        check_labels(np.array(y))


def test_labels_must_be_numeric():
    with pytest.raises(TypeError, match="numeric"):
        check_labels(np.array(["a", "b"]))


# ---------------------------------------------------------------- the labels the ranker takes


def test_numeric_labels_in_any_container_give_the_same_model_in_fit_and_eval_set(data):
    X, y, qid = data
    X_v, y_v, q_v = make_data(9)
    reference = fit(X, y, qid, early_stopping=False, eval_set=[(X_v, y_v, q_v)])
    for convert in (lambda labels: labels.astype(int).astype(object),
                    lambda labels: pd.Series(labels.astype(int), dtype="Int64"), list):
        ranker = fit(X, convert(y), qid, early_stopping=False, eval_set=[(X_v, convert(y_v), q_v)])
        np.testing.assert_array_equal(ranker.predict(X), reference.predict(X))
        np.testing.assert_array_equal(ranker.validation_score_, reference.validation_score_)
    text = np.array(["a"] * y.size, dtype=object)
    with pytest.raises(TypeError, match="numeric relevance labels"):
        fit(X, text, qid)
    with pytest.raises(TypeError, match=r"eval_set\[0\] y must hold numeric relevance labels.*row 0 holds 'a'"):
        fit(X, y, qid, eval_set=[(X_v, np.array(["a"] * y_v.size, dtype=object), q_v)])
    with pytest.raises(ValueError, match="requires y"):
        fit(X, None, qid)


def test_a_gain_table_trains_a_model(data):
    X, y, qid = data
    ranker = fit(X, y, qid, n_estimators=3, gain=[0.0, 1.0, 3.0, 7.0])
    assert np.all(np.isfinite(ranker.predict(X)))


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


# ---------------------------------------------------------------- labels that leave little or nothing to learn


# All labels equal: λ and w are 0 for every document (ListMLE skips such queries; pointwise gradients are all
# equal and the grower refuses gains within rounding error), so every tree is a single leaf (leaf value 0, not
# 0/0) and the model predicts a constant.
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


def test_subsample_of_queries_without_pairs():
    """A tree whose sampled queries have no pair (all w = 0) gets leaf value 0, not 0/0."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    qid = np.repeat(np.arange(20), 10)
    y = np.zeros(200)
    y[:2] = [0.0, 2.0]  # only query 0 has a pair
    ranker = LambdaMARTRanker(n_estimators=20, subsample=0.1, random_state=0).fit(X, y, qid)
    assert np.all(np.isfinite(ranker.predict(X)))


def test_min_sum_hessian_zero_with_zero_weight_rows():
    """With min_sum_hessian=0 a split may leave a side with Σw = 0 (rows of queries whose labels are all equal):
    its gain term counts 0 instead of dividing 0 by 0."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    qid = np.repeat(np.arange(20), 10)
    y = rng.integers(0, 3, 200).astype(float)
    y[:100] = 1.0  # the first ten queries have no pair: w = 0 on their rows
    X[:100, 0] = -5.0  # ... and feature 0 separates them from the rest
    ranker = LambdaMARTRanker(n_estimators=3, min_sum_hessian=0.0, min_samples_leaf=1).fit(X, y, qid)
    assert np.all(np.isfinite(ranker.predict(X)))
