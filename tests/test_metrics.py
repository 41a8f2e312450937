"""lambdamart.metrics: worked examples, scikit-learn's ndcg_score, brute force over tie orders, grouping, weights,
empty queries, large tie groups, bad input. Properties over random data (hypothesis) are in test_properties.py."""

import itertools
import math
import re

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from lambdamart import metrics as M
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

ALL = [ndcg, dcg, mean_average_precision, mean_reciprocal_rank, precision_at_k, recall_at_k, hits_at_k, err,
       kendall_tau]
WITH_EMPTY = [ndcg, mean_average_precision, mean_reciprocal_rank, recall_at_k, kendall_tau]
DESC = [6, 5, 4, 3, 2, 1]  # scores that rank documents in the given order


# ---------------------------------------------------------------- worked examples


def test_dcg_ndcg_worked_examples():
    y = [2, 1, 0, 3, 0, 1]
    assert dcg(y, DESC, k=6, gain="linear") == pytest.approx(4.28, abs=5e-3)
    assert dcg(sorted(y, reverse=True), DESC, k=6, gain="linear") == pytest.approx(5.19, abs=5e-3)  # IDCG@6
    assert ndcg(y, DESC, k=6, gain="linear") == pytest.approx(0.82, abs=5e-3)
    # [3, 0, 1, 2] in that order: 3 + 0 + 1/log2(4) + 2/log2(5) = 4.36 with the discount 1/log2(r + 1) of
    # docs/design.md, "Metrics" (the 3.86 sometimes quoted for this example drops the 1/log2(4) term); IDCG@6 of
    # [3, 2, 1, 0] = 4.76.
    y2 = [3, 0, 1, 2]
    assert dcg(y2, DESC[:4], k=6, gain="linear") == pytest.approx(3 + 0.5 + 2 / math.log2(5))
    assert dcg(y2, DESC[:4], k=6, gain="linear") == pytest.approx(4.36, abs=5e-3)
    assert dcg([3, 2, 1, 0], DESC[:4], k=6, gain="linear") == pytest.approx(4.76, abs=5e-3)
    assert ndcg(y2, DESC[:4], k=6, gain="linear") == pytest.approx(0.92, abs=5e-3)
    both = ndcg(y + y2, DESC + DESC[:4], [0] * 6 + [1] * 4, k=6, gain="linear", reduce=None)
    np.testing.assert_allclose(both, [4.2792 / 5.1929, 4.3614 / 4.7619], atol=1e-4)


def test_binary_worked_examples():
    a, b = [1, 1, 0, 1, 0, 1], [1, 0, 1, 1]
    ap = mean_average_precision(a + b, DESC + DESC[:4], [0] * 6 + [1] * 4, reduce=None)
    np.testing.assert_allclose(ap, [(1 + 1 + 3 / 4 + 4 / 6) / 4, (1 + 2 / 3 + 3 / 4) / 3])
    assert mean_average_precision(a + b, DESC + DESC[:4], [0] * 6 + [1] * 4) == pytest.approx(0.83, abs=5e-3)
    assert mean_average_precision([1, 0, 1, 0, 1], DESC[:5]) == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)
    assert mean_reciprocal_rank([0, 0, 1, 0], DESC[:4]) == pytest.approx(1 / 3)
    assert hits_at_k([0, 0, 1, 1, 0], DESC[:5], k=3) == 1.0
    assert hits_at_k([0, 0, 1, 1, 0], DESC[:5], k=2) == 0.0
    assert precision_at_k([0, 0, 1, 1, 0], DESC[:5], k=3) == pytest.approx(1 / 3)
    assert recall_at_k([0, 0, 1, 1, 0], DESC[:5], k=3) == pytest.approx(1 / 2)


def test_err_worked_example():
    # max_label 2: R = 3/4, 1/4, 0; ERR = 3/4 + (1/2)(1/4)(1/4) + 0
    assert err([2, 1, 0], [3, 2, 1]) == pytest.approx(0.75 + 0.5 * 0.25 * 0.25)
    assert err([2, 1, 0], [3, 2, 1], max_label=3) == pytest.approx(3 / 8 + 0.5 * (1 / 8) * (5 / 8))


def test_ties_average_worked_examples():
    # One relevant among three tied documents: every rank 1..3 equally likely.
    assert mean_reciprocal_rank([0, 1, 0], [1, 1, 1]) == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert mean_reciprocal_rank([0, 1, 0], [1, 1, 1], ties="input") == pytest.approx(1 / 2)
    assert hits_at_k([0, 1, 0], [1, 1, 1], k=1) == pytest.approx(1 / 3)
    assert kendall_tau([0, 1, 2], [1, 1, 1]) == 0.0
    assert kendall_tau([0, 1, 2], [1, 1, 1], ties="input") == -1.0
    assert kendall_tau([0, 1, 2], [1, 2, 3]) == 1.0


# ---------------------------------------------------------------- scikit-learn


@pytest.mark.parametrize("k", [None, 1, 3, 5])
def test_ndcg_matches_sklearn(k):
    rng = np.random.default_rng(7)
    n_queries, size = 60, 8
    y = rng.integers(0, 4, (n_queries, size)) * (rng.random((n_queries, size)) < 0.6)
    y[:3] = 0  # queries with no relevant document: sklearn scores them 0
    s = rng.integers(0, 3, (n_queries, size)).astype(float)  # many ties
    s[5] = 1.0  # a query tied throughout
    ours = ndcg(y.ravel(), s.ravel(), np.repeat(np.arange(n_queries), size), k=k, gain="linear", empty=0.0,
                reduce=None)
    theirs = [ndcg_score(y[q : q + 1], s[q : q + 1], k=k) for q in range(n_queries)]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- brute force


def _gain(label):
    return 2.0**label - 1.0


def _ref_dcg(ranked, k):
    return sum(_gain(label) / math.log2(r + 2) for r, label in enumerate(ranked[:k]))


def _ref_ndcg(ranked, k):
    ideal = _ref_dcg(sorted(ranked, reverse=True), k)
    return None if ideal == 0 else _ref_dcg(ranked, k) / ideal


def _ref_ap(ranked, k):
    rel = [label > 0 for label in ranked]
    n_rel = sum(rel)
    if n_rel == 0:
        return None
    total = sum(sum(rel[: r + 1]) / (r + 1) for r in range(min(k, len(rel))) if rel[r])
    return total / min(k, n_rel)


def _ref_rr(ranked, k):
    rel = [label > 0 for label in ranked]
    if not any(rel):
        return None
    first = rel.index(True) + 1
    return 1 / first if first <= k else 0.0


def _ref_precision(ranked, k):
    return sum(label > 0 for label in ranked[:k]) / min(k, len(ranked))


def _ref_recall(ranked, k):
    n_rel = sum(label > 0 for label in ranked)
    return None if n_rel == 0 else sum(label > 0 for label in ranked[:k]) / n_rel


def _ref_hits(ranked, k):
    return float(any(label > 0 for label in ranked[:k]))


def _ref_err(ranked, k, max_label):
    total, reach = 0.0, 1.0
    for r, label in enumerate(ranked[:k]):
        stop = _gain(label) / 2.0**max_label
        total += reach * stop / (r + 1)
        reach *= 1 - stop
    return total


def _ref_kendall(ranked, weighted):
    num = den = 0.0
    for i in range(len(ranked)):
        for j in range(i + 1, len(ranked)):
            if ranked[i] != ranked[j]:
                w = abs(_gain(ranked[i]) - _gain(ranked[j])) if weighted else 1.0
                num += w if ranked[i] > ranked[j] else -w
                den += w
    return None if den == 0 else num / den


def _orders(scores, average):
    """All rankings of one query: the stable sort, or every order of the documents tied in score."""
    base = sorted(range(len(scores)), key=lambda i: -scores[i])
    if not average:
        return [base]
    groups = [list(g) for _, g in itertools.groupby(base, key=lambda i: scores[i])]
    return [[i for part in combo for i in part] for combo in itertools.product(*map(itertools.permutations, groups))]


def _reference(ref, labels, scores, average):
    values = [ref([labels[i] for i in order]) for order in _orders(scores, average)]
    return np.nan if values[0] is None else float(np.mean(values))


def _random_queries(seed, n_queries=80, max_size=7):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_size + 1, n_queries)
    ids = rng.choice(10_000, n_queries, replace=False)  # not in sorted order
    qid = np.repeat(ids, sizes)
    y = rng.integers(0, 4, qid.size) * (rng.random(qid.size) < 0.6)
    s = rng.integers(0, 3, qid.size).astype(float)
    s[rng.random(qid.size) < 0.2] = np.inf  # ties at +inf
    return y, s, qid


CASES = {
    "ndcg": (ndcg, _ref_ndcg),
    "dcg": (dcg, _ref_dcg),
    "map": (mean_average_precision, _ref_ap),
    "mrr": (mean_reciprocal_rank, _ref_rr),
    "precision": (precision_at_k, _ref_precision),
    "recall": (recall_at_k, _ref_recall),
    "hits": (hits_at_k, _ref_hits),
    "err": (err, None),
    "kendall": (kendall_tau, None),
    "kendall_gain": (kendall_tau, None),
}


@pytest.mark.parametrize("ties", ["average", "input"])
@pytest.mark.parametrize("name", list(CASES))
def test_brute_force(name, ties):
    func, ref = CASES[name]
    y, s, qid = _random_queries(seed=len(name) * 31 + len(ties))
    ids = np.unique(qid)
    ks = [None] if name.startswith("kendall") else [None, 1, 2, 3, 5, 10]
    for k in ks:
        kw = {"k": k}
        if name == "err":
            max_label = [None, 5][k is not None and k % 2]  # the default (largest label, 3) and a larger scale
            kw["max_label"] = max_label
            top = y.max() if max_label is None else max_label
            ref = lambda ranked, k_, top=top: _ref_err(ranked, k_, top)  # noqa: E731
        elif name.startswith("kendall"):
            kw = {"pair_weight": "gain"} if name == "kendall_gain" else {}
            weighted = name == "kendall_gain"
            ref = lambda ranked, k_, weighted=weighted: _ref_kendall(ranked, weighted)  # noqa: E731
        if func in WITH_EMPTY:
            kw["empty"] = "skip"
        got = func(y, s, qid, ties=ties, reduce=None, **kw)
        cut = 10**9 if k is None else k
        want = [
            _reference(lambda ranked, ref=ref, cut=cut: ref(ranked, cut), list(y[qid == q]), list(s[qid == q]),
                       ties == "average")
            for q in ids
        ]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{name} k={k} ties={ties}")


def test_err_large_tie_groups_against_brute_force():
    # Tie groups mixing R = 0, 0 < R < 1 and R = 1 documents exercise every branch of the tie-group formula.
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(2, 8))
        y = list(rng.integers(0, 4, n))
        s = list(rng.integers(0, 2, n).astype(float))
        top = max(y)
        for k in (None, 2, 4):
            cut = 10**9 if k is None else k
            want = _reference(lambda r, cut=cut, top=top: _ref_err(r, cut, top), y, s, True)
            assert err(y, s, k=k) == pytest.approx(want, rel=1e-12, abs=1e-15)


# ---------------------------------------------------------------- grouping, weights, empty


@pytest.mark.parametrize("ties", ["average", "input"])
def test_interleaved_qid_gives_same_per_query_values(ties):
    y, s, qid = _random_queries(seed=11)
    rng = np.random.default_rng(12)
    # Interleave the queries while keeping each query's own row order (which ties="input" depends on).
    shuffled_qid = rng.permutation(qid)
    place = np.argsort(shuffled_qid, kind="stable")
    order = np.argsort(qid, kind="stable")
    y2, s2 = np.empty_like(y), np.empty_like(s)
    y2[place], s2[place] = y[order], s[order]
    for func in ALL:
        a = func(y, s, qid, ties=ties, reduce=None)
        b = func(y2, s2, shuffled_qid, ties=ties, reduce=None)
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15, err_msg=func.__name__)
        assert func(y, s, qid.astype(str), ties=ties, reduce="mean") == pytest.approx(func(y, s, qid, ties=ties))


def test_ties_average_ignores_row_order_within_queries():
    y, s, qid = _random_queries(seed=13)
    perm = np.random.default_rng(14).permutation(len(y))
    for func in ALL:
        np.testing.assert_allclose(
            func(y, s, qid, reduce=None), func(y[perm], s[perm], qid[perm], reduce=None), rtol=1e-12, atol=1e-15
        )


def test_sample_weight_weights_queries_by_mean_row_weight():
    y, s, qid = _random_queries(seed=15)
    w = np.random.default_rng(16).random(len(y))
    ids = np.unique(qid)
    qw = np.array([w[qid == q].mean() for q in ids])
    for func in ALL:
        per_query = func(y, s, qid, reduce=None)
        assert func(y, s, qid, sample_weight=w) == pytest.approx(np.average(per_query, weights=qw), rel=1e-12)
        assert func(y, s, qid, sample_weight=np.full(len(y), 3.0)) == pytest.approx(per_query.mean(), rel=1e-12)
    skip = ndcg(y, s, qid, empty="skip", reduce=None)
    kept = ~np.isnan(skip)
    assert np.isnan(skip).any()
    assert ndcg(y, s, qid, empty="skip", sample_weight=w) == pytest.approx(np.average(skip[kept], weights=qw[kept]))


def test_sample_weights_at_the_ends_of_float64_weigh_as_their_ratios():
    """Weights near the float64 maximum (whose sums overflow) or subnormal (whose products underflow) give the
    weighted mean of their ratios, bit for bit the same as weights scaled by a power of two."""
    y, s, qid = _random_queries(seed=15)
    w = np.random.default_rng(16).random(len(y)) + 0.5
    for func in ALL:
        expected = func(y, s, qid, sample_weight=w)
        assert func(y, s, qid, sample_weight=w * 2.0**1020) == expected
        tiny = w * 2.0**-1060  # subnormal: rounded to fewer digits than w, so compared with its own rescaling
        assert func(y, s, qid, sample_weight=tiny) == func(y, s, qid, sample_weight=np.ldexp(tiny, 1060))
        assert func(y, s, qid, sample_weight=np.full(len(y), 1e308)) == pytest.approx(func(y, s, qid), rel=1e-12)


@pytest.mark.parametrize("func", WITH_EMPTY)
def test_empty(func):
    y = [0, 0, 0, 1, 2, 0]
    s = [3, 2, 1, 1, 2, 3]
    qid = [5, 5, 5, 9, 9, 9]  # query 5 has no relevant document (and no pair of different labels)
    defined = func(y, s, qid, reduce=None)[1]
    np.testing.assert_allclose(func(y, s, qid, reduce=None), [1.0, defined])
    np.testing.assert_allclose(func(y, s, qid, empty=0.0, reduce=None), [0.0, defined])
    np.testing.assert_allclose(func(y, s, qid, empty="skip", reduce=None), [np.nan, defined])
    assert func(y, s, qid) == pytest.approx((1 + defined) / 2)
    assert func(y, s, qid, empty=0) == pytest.approx(defined / 2)
    assert func(y, s, qid, empty="skip") == pytest.approx(defined)
    assert np.isnan(func([0, 0], [1, 2], empty="skip"))


def test_always_defined_metrics_on_queries_without_relevant_documents():
    y, s = [0, 0, 0], [1, 2, 3]
    assert dcg(y, s) == 0.0
    assert precision_at_k(y, s, k=2) == 0.0
    assert hits_at_k(y, s) == 0.0
    assert err(y, s) == 0.0


def test_threshold_and_short_lists():
    y, s = [1, 2, 0, 2], [4, 3, 2, 1]
    assert precision_at_k(y, s, k=10) == 0.75  # a list shorter than k is not padded
    assert precision_at_k(y, s, k=2, threshold=1) == 0.5
    assert mean_reciprocal_rank(y, s, threshold=1) == 0.5
    assert mean_reciprocal_rank(y, s, threshold=1, k=1) == 0.0
    assert recall_at_k(y, s, k=2, threshold=1) == 0.5
    assert mean_average_precision(y, s, k=2, threshold=1) == pytest.approx(0.5 / 2)  # P@2 / min(k=2, R=2)
    assert mean_average_precision(y, s, k=1) == pytest.approx(1.0)  # P@1 / min(k=1, R=3)
    assert ndcg(y, s, k=100) == ndcg(y, s)


def test_gain_table_and_linear_gain():
    y, s = [0, 1, 2, 2], [1, 2, 3, 0]
    assert ndcg(y, s, gain=[0.0, 1.0, 2.0]) == pytest.approx(ndcg(y, s, gain="linear"))
    assert ndcg([60, 0], [1, 2], gain="linear") == pytest.approx(1 / math.log2(3))
    assert kendall_tau(y, s, pair_weight="gain", gain=[0, 1, 2]) == pytest.approx(
        _ref_kendall_weighted([2, 1, 0, 2], [0, 1, 2])
    )


def _ref_kendall_weighted(ranked, table):
    num = den = 0.0
    for i in range(len(ranked)):
        for j in range(i + 1, len(ranked)):
            w = abs(table[ranked[i]] - table[ranked[j]])
            num += w * np.sign(ranked[i] - ranked[j])
            den += w
    return num / den


def test_kendall_tau_large_query_is_fast_enough_to_finish():
    # O(n log n): one query of a million documents must not hang (an O(n^2) pair loop would).
    rng = np.random.default_rng(0)
    n = 1_000_000
    y = rng.integers(0, 5, n)
    s = y + rng.normal(size=n)
    tau = kendall_tau(y, s)
    assert 0.3 < tau < 0.9
    assert kendall_tau(y, np.zeros(n)) == 0.0
    assert -1 <= kendall_tau(y, s, pair_weight="gain", ties="input") <= 1


def test_large_tie_groups():
    # Closed forms keep big tie groups linear in their size (ERR: linear times the relevant documents).
    n, n_rel = 200_000, 200
    y = np.zeros(n)
    y[:: n // n_rel] = 1
    s = np.zeros(n)
    p = n_rel / n
    assert mean_reciprocal_rank(y, s) == pytest.approx(p / (1 - p) * -math.log(p), rel=0.01)  # ~geometric
    assert mean_average_precision(y, s) == pytest.approx(
        sum((p + j * p * (n_rel - 1) / (n - 1)) / (j + 1) for j in range(n)) / n_rel
    )
    assert hits_at_k(y, s, k=10) == pytest.approx(1 - math.comb(n - n_rel, 10) / math.comb(n, 10))
    assert 0 < err(y, s) < mean_reciprocal_rank(y, s)


def test_err_big_tie_group_with_graded_labels():
    # Exact expectation for one all-tied query by the plain O(m^2) subset-mean recursion over every document
    # (no closed form for label 0, no truncation): ERR = sum_t (e_{t-1} - e_t) / t.
    rng = np.random.default_rng(5)
    m = 1500
    y = rng.integers(0, 5, m)
    q = 1 - (2.0**y - 1) / 2.0**4
    e = np.zeros(m + 1)
    e[0] = 1.0
    for seen, qi in enumerate(q, start=1):
        t = np.arange(seen, 0, -1)
        e[t] = ((seen - t) * e[t] + t * qi * e[t - 1]) / seen
    t = np.arange(1, m + 1)
    assert err(y, np.zeros(m)) == pytest.approx(np.sum((e[:-1] - e[1:]) / t), rel=1e-12)
    assert err(y, np.zeros(m), k=700) == pytest.approx(np.sum((e[:700] - e[1:701]) / t[:700]), rel=1e-12)
    big = np.random.default_rng(6).integers(0, 5, 1_000_000)
    assert 0 < err(big, np.zeros(big.size)) < 1  # one tie group of a million documents finishes


def test_err_tie_group_against_hypergeometric():
    # All documents tied, c of them with label 1 (R = 1/2): the first t ranks hold S ~ Hypergeometric(m, c, t)
    # of them, E[prod (1 - R)] = E[2**-S], and ERR = sum_t (e_{t-1} - e_t) / t.
    from scipy.stats import hypergeom

    m, c = 2000, 20
    y = np.zeros(m)
    y[:c] = 1
    t = np.arange(m + 1)
    e = np.array([np.dot(hypergeom.pmf(np.arange(c + 1), m, c, tt), 0.5 ** np.arange(c + 1)) for tt in t])
    want = np.sum((e[:-1] - e[1:]) / t[1:])
    assert err(y, np.zeros(m)) == pytest.approx(want, rel=1e-10)
    assert err(y, np.zeros(m), k=50) == pytest.approx(np.sum((e[:50] - e[1:51]) / t[1:51]), rel=1e-10)


# ---------------------------------------------------------------- bad input

Y, S = [0, 1, 2], [0.5, 0.1, 0.3]


def _kw(func, **kw):
    return {key: v for key, v in kw.items() if key != "k" or func is not kendall_tau}


BAD_COMMON = [
    ("length", lambda f: f([0, 1], [0.1, 0.2, 0.3]), ValueError, "rows"),
    ("qid length", lambda f: f(Y, S, [1, 1]), ValueError, "qid"),
    ("weight length", lambda f: f(Y, S, sample_weight=[1, 2]), ValueError, "sample_weight"),
    ("negative weight", lambda f: f(Y, S, sample_weight=[1, -2, 1]), ValueError, "sample_weight"),
    ("zero weights", lambda f: f(Y, S, sample_weight=[0, 0, 0]), ValueError, "0 on every row"),
    ("empty", lambda f: f([], []), ValueError, "empty"),
    ("nan score", lambda f: f(Y, [0.1, np.nan, 0.2]), ValueError, "NaN"),
    ("string score", lambda f: f(Y, ["a", "b", "c"]), TypeError, "numeric"),
    ("nan label", lambda f: f([0, np.nan, 1], S), ValueError, "NaN"),
    ("negative label", lambda f: f([0, -1, 1], S), ValueError, "negative"),
    ("2-D label", lambda f: f([[0, 1, 2]], [[0.5, 0.1, 0.3]]), ValueError, "one-dimensional"),
    ("2-D score", lambda f: f(Y, np.array(S)[:, None]), ValueError, "one-dimensional"),
    ("ties", lambda f: f(Y, S, ties="random"), ValueError, "ties"),
    ("reduce", lambda f: f(Y, S, reduce="sum"), ValueError, "reduce"),
]
BAD_K = [
    ("k zero", 0, ValueError),
    ("k negative", -2, ValueError),
    ("k float", 2.5, TypeError),
    ("k string", "3", TypeError),
    ("k bool", True, TypeError),
]


@pytest.mark.parametrize("func", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("case", BAD_COMMON, ids=lambda c: c[0])
def test_bad_input(func, case):
    _, call, exc, match = case
    with pytest.raises(exc, match=match):
        call(func)


@pytest.mark.parametrize("func", [f for f in ALL if f is not kendall_tau], ids=lambda f: f.__name__)
@pytest.mark.parametrize("case", BAD_K, ids=lambda c: c[0])
def test_bad_k(func, case):
    _, k, exc = case
    with pytest.raises(exc, match="k must"):
        func(Y, S, k=k)


def test_kendall_tau_rejects_k():
    with pytest.raises(ValueError, match="whole list"):
        kendall_tau(Y, S, k=3)
    with pytest.raises(ValueError, match="pair_weight"):
        kendall_tau(Y, S, pair_weight="rank")
    with pytest.raises(ValueError, match="does not decrease"):
        kendall_tau(Y, S, pair_weight="gain", gain=[0.0, 2.0, 1.0])


@pytest.mark.parametrize("func", WITH_EMPTY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("empty", [0.5, "zero", None, True, np.nan])
def test_bad_empty(func, empty):
    with pytest.raises(ValueError, match="empty"):
        func(Y, S, empty=empty)


@pytest.mark.parametrize("func", [ndcg, dcg], ids=lambda f: f.__name__)
def test_bad_gain(func):
    with pytest.raises(ValueError, match="gain"):
        func(Y, S, gain="log")
    with pytest.raises(ValueError, match="gain='linear'"):
        func([0, 60, 1], S)
    with pytest.raises(ValueError, match="gain table"):
        func([0, 5, 1], S, gain=[0, 1, 2])


def test_err_bad_labels_and_scale():
    # ERR has no gain option, so the message asks for a graded scale instead of suggesting gain='linear'.
    with pytest.raises(ValueError, match="label 60.*rescale the labels"):
        err([0, 60, 1], S)
    with pytest.raises(ValueError, match="below the largest label"):
        err(Y, S, max_label=1)
    with pytest.raises(ValueError, match="at most 53"):
        err(Y, S, max_label=60)
    with pytest.raises(ValueError, match="max_label"):
        err(Y, S, max_label=float("nan"))


def test_bad_threshold():
    with pytest.raises(ValueError, match="threshold"):
        precision_at_k(Y, S, threshold=float("nan"))


def test_public_names_and_docstrings():
    for name in M.__all__:
        doc = getattr(M, name).__doc__
        assert "Parameters" in doc and "Returns" in doc and "ties :" in doc
        assert not re.search(r"\{[a-z_]+\}", doc)  # every shared section was filled in


@pytest.mark.parametrize("name", ["ndcg", "dcg", "mean_average_precision", "mean_reciprocal_rank", "precision_at_k",
                                  "recall_at_k", "hits_at_k", "err", "kendall_tau"])
def test_threaded_and_single_threaded_drivers_give_the_same_values(name, monkeypatch):
    """Metrics run on several threads from _THREADED_ROWS rows on: the same per-query values either way."""
    from lambdamart import _metric_kernels

    rng = np.random.default_rng(3)
    qid = np.repeat(np.arange(60), rng.integers(1, 30, 60))
    y = rng.integers(0, 4, qid.shape[0]).astype(float)
    s = np.round(rng.normal(size=qid.shape[0]), 1)  # with ties
    metric = getattr(M, name)
    values = {}
    for rows in (10**9, 0):
        monkeypatch.setattr(_metric_kernels, "_THREADED_ROWS", rows)
        values[rows] = metric(y, s, qid, reduce=None)
    np.testing.assert_array_equal(values[0], values[10**9])
