"""Property tests (hypothesis) for the ranking metrics: ranges, the ideal order, invariance to row order and to the
order of tied documents, and per-query results that concatenate to the whole.

Data are small (up to 5 queries of up to 8 documents) with labels 0..4 and scores drawn from a few values so that
ties are common; ±inf scores are included. Examples are derandomised so the suite is reproducible.
"""

import itertools

import numpy as np
import pytest
from helpers import interleave
from hypothesis import given, settings
from hypothesis import strategies as st

from lambdamart.metrics import (
    dcg,
    err,
    hits_at_k,
    kendall_tau,
    mean_average_precision,
    mean_reciprocal_rank,
    ndcg,
    precision_at_k,
    recall_at_k,
)

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True, database=None)

# Metrics whose value lies in [0, 1].
UNIT_METRICS = {
    "ndcg": ndcg,
    "map": mean_average_precision,
    "mrr": mean_reciprocal_rank,
    "precision": precision_at_k,
    "recall": recall_at_k,
    "hits": hits_at_k,
    "err": err,
}
# Every metric, for the invariance properties; kendall_tau takes no k. ERR gets a fixed max_label so that a
# query's value does not depend on the other queries' labels (by default it uses the largest label overall).
ALL_METRICS = UNIT_METRICS | {"dcg": dcg, "kendall_tau": kendall_tau}
KS = [None, 1, 3, 10]


def call(name, y, s, qid, k=None, **kwargs):
    func = ALL_METRICS[name]
    if name == "kendall_tau":
        k = None
    if name == "err":
        kwargs.setdefault("max_label", 4)
    return func(y, s, qid, k=k, **kwargs)


SCORES = st.one_of(
    st.integers(-2, 2).map(float),  # few values: many ties
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from([np.inf, -np.inf]),
)


@st.composite
def ranking_data(draw, max_queries=5, max_docs=8, distinct_scores=False):
    """(labels, scores, qid) with queries interleaved in a random row order; ids are arbitrary distinct ints."""
    n_queries = draw(st.integers(1, max_queries))
    ids = draw(st.lists(st.integers(-10**6, 10**6), min_size=n_queries, max_size=n_queries, unique=True))
    sizes = draw(st.lists(st.integers(1, max_docs), min_size=n_queries, max_size=n_queries))
    qid = np.repeat(np.array(ids, dtype=np.int64), sizes)
    n = qid.size
    labels = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), dtype=np.float64)
    if distinct_scores:
        scores = np.array(draw(st.lists(st.integers(-10**6, 10**6), min_size=n, max_size=n, unique=True)),
                          dtype=np.float64)
    else:
        scores = np.array(draw(st.lists(SCORES, min_size=n, max_size=n)), dtype=np.float64)
    order = np.array(draw(st.permutations(range(n))), dtype=np.int64)
    return labels[order], scores[order], qid[order]


# ---------------------------------------------------------------- ranges


@PROPERTY
@given(data=ranking_data(), k=st.sampled_from(KS), ties=st.sampled_from(["average", "input"]),
       gain=st.sampled_from(["exponential", "linear"]), empty=st.sampled_from([0.0, 1.0]))
def test_ndcg_is_between_0_and_1(data, k, ties, gain, empty):
    y, s, qid = data
    values = ndcg(y, s, qid, k=k, ties=ties, gain=gain, empty=empty, reduce=None)
    assert np.all((values >= 0) & (values <= 1 + 1e-12)), values
    assert 0 <= ndcg(y, s, qid, k=k, ties=ties, gain=gain, empty=empty) <= 1 + 1e-12


@PROPERTY
@given(data=ranking_data(), k=st.sampled_from(KS), ties=st.sampled_from(["average", "input"]),
       name=st.sampled_from(sorted(UNIT_METRICS)))
def test_unit_metrics_are_between_0_and_1_and_kendall_between_minus_1_and_1(data, k, ties, name):
    y, s, qid = data
    values = call(name, y, s, qid, k=k, ties=ties, reduce=None)
    assert np.all((values >= -1e-12) & (values <= 1 + 1e-12)), (name, values)
    tau = kendall_tau(y, s, qid, ties=ties, reduce=None)
    assert np.all((tau >= -1 - 1e-12) & (tau <= 1 + 1e-12)), tau
    assert np.all(dcg(y, s, qid, k=k, ties=ties, reduce=None) >= 0)


@PROPERTY
@given(labels=st.lists(st.floats(0, 50, allow_nan=False), min_size=1, max_size=12), data=st.data())
def test_ndcg_with_fractional_labels_is_between_0_and_1(labels, data):
    y = np.array(labels)
    s = np.array(data.draw(st.lists(SCORES, min_size=y.size, max_size=y.size)))
    for gain in ("linear", "exponential"):
        assert 0 <= ndcg(y, s, gain=gain) <= 1 + 1e-12


# ---------------------------------------------------------------- the ideal order


@PROPERTY
@given(data=ranking_data(), k=st.sampled_from(KS), ties=st.sampled_from(["average", "input"]),
       gain=st.sampled_from(["exponential", "linear"]), transform=st.sampled_from(["identity", "affine", "exp"]))
def test_ndcg_of_the_ideal_order_is_1(data, k, ties, gain, transform):
    y, _, qid = data
    # Any strictly increasing function of the label ranks ideally; documents with equal labels tie, which is
    # harmless since they have equal gains.
    s = {"identity": y, "affine": 3 * y - 7, "exp": np.exp(y)}[transform]
    np.testing.assert_allclose(ndcg(y, s, qid, k=k, ties=ties, gain=gain, reduce=None), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(kendall_tau(y, s, qid, ties=ties, reduce=None), 1.0, rtol=0, atol=1e-12)
    # With binary relevance the ideal order puts every relevant document first.
    for func in (mean_average_precision, mean_reciprocal_rank):
        np.testing.assert_allclose(func(y, s, qid, ties=ties, reduce=None), 1.0, rtol=0, atol=1e-12)
    # and any other order does no better
    assert ndcg(y, -s, qid, k=k, ties=ties, gain=gain) <= ndcg(y, s, qid, k=k, ties=ties, gain=gain) + 1e-12


# ---------------------------------------------------------------- invariance to row order


@PROPERTY
@given(data=ranking_data(), k=st.sampled_from(KS), name=st.sampled_from(sorted(ALL_METRICS)),
       seed=st.integers(0, 2**32 - 1))
def test_average_ties_are_invariant_to_any_row_permutation_with_qid(data, k, name, seed):
    y, s, qid = data
    perm = np.random.default_rng(seed).permutation(y.size)
    before = call(name, y, s, qid, k=k, ties="average", reduce=None)
    after = call(name, y[perm], s[perm], qid[perm], k=k, ties="average", reduce=None)
    np.testing.assert_allclose(after, before, rtol=1e-12, atol=1e-12)


@PROPERTY
@given(data=ranking_data(), k=st.sampled_from(KS), name=st.sampled_from(sorted(ALL_METRICS)),
       seed=st.integers(0, 2**32 - 1))
def test_input_ties_are_invariant_to_permutations_that_keep_each_query_in_order(data, k, name, seed):
    y, s, qid = data
    perm = interleave(qid, seed)  # queries interleaved anew, each query's rows in their relative order
    before = call(name, y, s, qid, k=k, ties="input", reduce=None)
    after = call(name, y[perm], s[perm], qid[perm], k=k, ties="input", reduce=None)
    np.testing.assert_array_equal(after, before)  # the same documents in the same order: exactly the same


@PROPERTY
@given(data=ranking_data(distinct_scores=True), k=st.sampled_from(KS), name=st.sampled_from(sorted(ALL_METRICS)),
       seed=st.integers(0, 2**32 - 1))
def test_without_ties_any_row_permutation_gives_the_same_values_either_way(data, k, name, seed):
    y, s, qid = data
    perm = np.random.default_rng(seed).permutation(y.size)
    for ties in ("average", "input"):
        before = call(name, y, s, qid, k=k, ties=ties, reduce=None)
        after = call(name, y[perm], s[perm], qid[perm], k=k, ties=ties, reduce=None)
        np.testing.assert_allclose(after, before, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(call(name, y, s, qid, k=k, ties="average", reduce=None),
                               call(name, y, s, qid, k=k, ties="input", reduce=None), rtol=1e-12, atol=1e-12)


@PROPERTY
@given(data=ranking_data(), k=st.sampled_from(KS), name=st.sampled_from(sorted(ALL_METRICS)),
       seed=st.integers(0, 2**32 - 1))
def test_average_ties_are_invariant_to_reordering_only_the_tied_documents(data, k, name, seed):
    """Shuffle the rows inside each group of documents that share a query and a score, nothing else."""
    y, s, qid = data
    rng = np.random.default_rng(seed)
    perm = np.arange(y.size)
    for q, score in {(a, b) for a, b in zip(qid.tolist(), s.tolist())}:
        rows = np.flatnonzero((qid == q) & (s == score))
        perm[rows] = rng.permutation(rows)
    before = call(name, y, s, qid, k=k, ties="average", reduce=None)
    after = call(name, y[perm], s[perm], qid[perm], k=k, ties="average", reduce=None)
    np.testing.assert_allclose(after, before, rtol=1e-12, atol=1e-12)


@settings(PROPERTY, max_examples=25)
@given(data=ranking_data(max_queries=1, max_docs=5), k=st.sampled_from(KS),
       name=st.sampled_from(sorted(ALL_METRICS)))
def test_average_ties_are_the_mean_over_all_row_orders_of_input_ties(data, k, name):
    """The definition of ties="average": the expected value of ties="input" over the orders of tied documents
    (every row order of one query weighs each order of each tie group equally)."""
    y, s, _ = data
    orders = [list(p) for p in itertools.permutations(range(y.size))]
    expected = np.mean([call(name, y[p], s[p], None, k=k, ties="input") for p in orders])
    assert call(name, y, s, None, k=k, ties="average") == pytest.approx(expected, rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------- per-query results and the whole


@PROPERTY
@given(data=ranking_data(), k=st.sampled_from(KS), name=st.sampled_from(sorted(ALL_METRICS)),
       ties=st.sampled_from(["average", "input"]), split_seed=st.integers(0, 2**32 - 1))
def test_per_query_results_concatenate_to_the_whole(data, k, name, ties, split_seed):
    y, s, qid = data
    ids = np.unique(qid)
    whole = call(name, y, s, qid, k=k, ties=ties, reduce=None)
    assert whole.shape == (ids.size,)
    # Each entry is the metric of that query alone (entries follow the sorted ids).
    for i, q in enumerate(ids):
        rows = qid == q
        np.testing.assert_allclose(call(name, y[rows], s[rows], None, k=k, ties=ties, reduce=None), whole[i:i + 1],
                                   rtol=1e-12, atol=1e-12)
    # Any split of the queries into two parts gives the two parts of the per-query array.
    in_a = np.random.default_rng(split_seed).random(ids.size) < 0.5
    parts = np.empty(ids.size)
    for mask in (in_a, ~in_a):
        if mask.any():
            rows = np.isin(qid, ids[mask])
            parts[mask] = call(name, y[rows], s[rows], qid[rows], k=k, ties=ties, reduce=None)
    np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-12)
    # The mean is the mean of the per-query values.
    assert call(name, y, s, qid, k=k, ties=ties) == pytest.approx(np.mean(whole), rel=1e-12, abs=1e-12)


@PROPERTY
@given(data=ranking_data(), k=st.sampled_from(KS), name=st.sampled_from(["ndcg", "map", "mrr", "recall",
                                                                          "kendall_tau"]),
       weights=st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=40, max_size=40))
def test_weighted_mean_and_skipped_queries_reduce_the_per_query_values(data, k, name, weights):
    y, s, qid = data
    w = np.array(weights[:y.size])
    per_query = call(name, y, s, qid, k=k, empty="skip", reduce=None)
    ids = np.unique(qid)
    query_weight = np.array([w[qid == q].mean() for q in ids])
    kept = ~np.isnan(per_query)
    total = query_weight[kept].sum()
    if not w.any():  # no weight at all is an input error; none left after skipping queries is NaN
        with pytest.raises(ValueError, match="0 on every row"):
            call(name, y, s, qid, k=k, empty="skip", sample_weight=w)
        return
    got = call(name, y, s, qid, k=k, empty="skip", sample_weight=w)
    if total == 0:
        assert np.isnan(got)
    else:
        assert got == pytest.approx(np.dot(query_weight[kept], per_query[kept]) / total, rel=1e-9, abs=1e-12)
