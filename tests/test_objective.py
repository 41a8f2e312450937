"""Tests of the LambdaRank kernel (lambdamart.objective) against a plain-Python brute force of DESIGN §3.

The reference below is written from the formulas, not from the kernel: per query, a stable descending sort by
score, then a straightforward double loop over (position i < truncation level, position j > i) pairs.
"""

import math

import numpy as np
import pytest

from lambdamart._sort import descending_order
from lambdamart._objectives.lambdarank import (_general_pairs, _ndcg_pairs, discount_table, inverse_ideal_dcg,
                                              lambdarank_gradients)

TABLE = np.array([0.0, 1.0, 3.0, 7.5, 20.0])  # an arbitrary gain table for labels 0..4


# ---------------------------------------------------------------- reference

NO_POSITION = np.zeros(0, dtype=np.int64)
NO_BIAS = np.ones((2, 0))


def gain_of(label, gain):
    if isinstance(gain, str) and gain == "exponential":
        return 2.0 ** label - 1.0
    if isinstance(gain, str) and gain == "linear":
        return float(label)
    return float(gain[int(label)])


def discount(rank):
    """D(r) = 1 / log2(r + 1), rank r 1-based."""
    return 1.0 / math.log2(rank + 1)


def ref_ideal_dcg(labels, gain, truncation_level):
    ideal = sorted((gain_of(l, gain) for l in labels), reverse=True)
    return sum(g * discount(r + 1) for r, g in enumerate(ideal[:truncation_level]))


def ref_query(scores, labels, gain, truncation_level, sigma, pair_normalization, query_normalization):
    """λ and w of one query, by the book."""
    n = len(scores)
    lam = [0.0] * n
    w = [0.0] * n
    idcg = ref_ideal_dcg(labels, gain, truncation_level)
    if n < 2 or idcg == 0.0:
        return lam, w
    inv_idcg = 1.0 / idcg
    # Python's sort is stable: tied scores keep row order.
    ranked = sorted(range(n), key=lambda r: -scores[r])
    normalize = pair_normalization and max(scores) != min(scores)
    total = 0.0
    for i in range(min(n - 1, truncation_level)):
        for j in range(i + 1, n):
            a, b = ranked[i], ranked[j]
            if labels[a] == labels[b]:
                continue
            h, o = (a, b) if labels[a] > labels[b] else (b, a)
            ds = scores[h] - scores[o]
            dz = abs(gain_of(labels[h], gain) - gain_of(labels[o], gain)) * abs(discount(i + 1) - discount(j + 1))
            dz *= inv_idcg
            if normalize:
                dz /= 0.01 + abs(ds)
            try:
                rho = 1.0 / (1.0 + math.exp(sigma * ds))
            except OverflowError:
                rho = 0.0
            lam[h] -= sigma * rho * dz
            lam[o] += sigma * rho * dz
            w[h] += sigma * sigma * rho * (1.0 - rho) * dz
            w[o] += sigma * sigma * rho * (1.0 - rho) * dz
            total += 2.0 * sigma * rho * dz
    if query_normalization and total > 0.0:
        factor = math.log2(1.0 + total) / total
        lam = [v * factor for v in lam]
        w = [v * factor for v in w]
    return lam, w


def ref_all(scores, labels, offsets, query_indices, gain, truncation_level, sigma, pn, qn, sample_weight, grad, hess):
    grad = grad.copy()
    hess = hess.copy()
    for q in query_indices:
        s, e = offsets[q], offsets[q + 1]
        lam, w = ref_query(list(scores[s:e]), list(labels[s:e]), gain, truncation_level, sigma, pn, qn)
        for k in range(e - s):
            sw = sample_weight[s + k] if len(sample_weight) else 1.0
            grad[s + k] = lam[k] * sw
            hess[s + k] = w[k] * sw
    return grad, hess


# ---------------------------------------------------------------- helpers


def gains_array(labels, gain):
    return np.array([gain_of(l, gain) for l in labels], dtype=np.float64)


def run_kernel(scores, labels, offsets, gain, truncation_level, sigma, pn, qn, sample_weight=None,
               query_indices=None, grad=None, hess=None):
    n = scores.shape[0]
    offsets = np.asarray(offsets, dtype=np.int64)
    n_queries = offsets.shape[0] - 1
    if query_indices is None:
        query_indices = np.arange(n_queries, dtype=np.int64)
    gains = gains_array(labels, gain)
    discounts = discount_table(int(np.diff(offsets).max(initial=1)))
    inv_idcg = inverse_ideal_dcg(gains, offsets, discounts, truncation_level)
    sw = np.zeros(0) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    grad = np.zeros(n) if grad is None else grad.copy()
    hess = np.zeros(n) if hess is None else hess.copy()
    lambdarank_gradients(scores, gains, labels, offsets, np.asarray(query_indices, dtype=np.int64), discounts,
                         inv_idcg, truncation_level, float(sigma), bool(pn), bool(qn), False, NO_POSITION, NO_BIAS, sw,
                         grad, hess, NO_BIAS)
    return grad, hess


def make_queries(seed):
    """Queries that cover the corner cases: a single document, all-equal labels, no relevant document, all scores
    equal, ties in scores and in labels, short and long lists, and very different scores."""
    rng = np.random.default_rng(seed)
    parts = []  # (scores, labels)
    parts.append((np.array([0.3]), np.array([2.0])))  # single document
    parts.append((np.array([0.1, -0.4]), np.array([1.0, 0.0])))  # two documents
    parts.append((rng.normal(size=6), np.full(6, 2.0)))  # all labels equal (and positive)
    parts.append((rng.normal(size=5), np.zeros(5)))  # no relevant document: IDCG = 0
    parts.append((np.zeros(7), rng.integers(0, 5, 7).astype(float)))  # all scores equal
    # Ties in scores (few distinct values) and in labels.
    parts.append((np.round(rng.normal(size=12), 0) / 2, rng.integers(0, 3, 12).astype(float)))
    parts.append((rng.normal(size=40), rng.integers(0, 5, 40).astype(float)))  # longer than truncation 30
    parts.append((rng.normal(scale=3, size=9), rng.integers(0, 5, 9).astype(float)))
    parts.append((np.array([800.0, -800.0, 0.0, 3.0]), np.array([0.0, 4.0, 1.0, 1.0])))  # exp() overflows
    order = rng.permutation(len(parts))
    parts = [parts[i] for i in order]
    scores = np.concatenate([p[0] for p in parts]).astype(np.float64)
    labels = np.concatenate([p[1] for p in parts]).astype(np.float64)
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p[0]) for p in parts], out=offsets[1:])
    return scores, labels, offsets


GAINS = {"exponential": "exponential", "linear": "linear", "table": TABLE}


# ---------------------------------------------------------------- tests


def test_discount_table():
    d = discount_table(6)
    assert d.shape == (6,)
    np.testing.assert_allclose(d, [discount(r) for r in range(1, 7)], rtol=0, atol=1e-15)
    assert d[0] == 1.0


@pytest.mark.parametrize("truncation_level", [1, 3, 30, 1000])
@pytest.mark.parametrize("gain", list(GAINS))
def test_inverse_ideal_dcg(truncation_level, gain):
    scores, labels, offsets = make_queries(1)
    g = GAINS[gain]
    gains = gains_array(labels, g)
    inv = inverse_ideal_dcg(gains, offsets, discount_table(int(np.diff(offsets).max())), truncation_level)
    for q in range(len(offsets) - 1):
        idcg = ref_ideal_dcg(labels[offsets[q]:offsets[q + 1]], g, truncation_level)
        expected = 0.0 if idcg == 0.0 else 1.0 / idcg
        assert inv[q] == pytest.approx(expected, rel=1e-12, abs=0)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("pn, qn", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["no-norm", "pair-norm", "query-norm", "both-norm"])
@pytest.mark.parametrize("gain", list(GAINS))
@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("truncation_level", [1, 3, 30, 1000])
def test_kernel_matches_brute_force(truncation_level, sigma, gain, pn, qn, weighted):
    seed = truncation_level + int(10 * sigma) + 7 * pn + 13 * qn
    scores, labels, offsets = make_queries(seed)
    rng = np.random.default_rng(seed)
    sw = rng.uniform(0.2, 3.0, size=scores.shape[0]) if weighted else np.zeros(0)
    g = GAINS[gain]
    grad, hess = run_kernel(scores, labels, offsets, g, truncation_level, sigma, pn, qn,
                            sample_weight=sw if weighted else None)
    ref_grad, ref_hess = ref_all(scores, labels, offsets, range(len(offsets) - 1), g, truncation_level, sigma, pn,
                                 qn, sw, np.zeros_like(scores), np.zeros_like(scores))
    assert np.all(np.isfinite(grad)) and np.all(np.isfinite(hess))
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hess, ref_hess, rtol=1e-10, atol=1e-10)
    # Some pairs really contributed (the comparison is not vacuous).
    assert np.abs(grad).max() > 1e-3


@pytest.mark.parametrize("seed", range(6))
def test_random_queries_match_brute_force(seed):
    """Random sizes, labels, tied scores and parameters, including truncation levels between the others."""
    rng = np.random.default_rng(100 + seed)
    sizes = rng.integers(1, 25, size=12)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    n = int(offsets[-1])
    labels = rng.integers(0, 4, n).astype(np.float64)
    scores = rng.normal(size=n)
    scores[rng.random(n) < 0.3] = 0.25  # a block of tied scores across queries
    truncation_level = int(rng.integers(1, 30))
    sigma = float(rng.uniform(0.3, 3.0))
    pn, qn = bool(rng.integers(2)), bool(rng.integers(2))
    sw = rng.uniform(0.0, 2.0, n)
    grad, hess = run_kernel(scores, labels, offsets, "exponential", truncation_level, sigma, pn, qn, sample_weight=sw)
    ref_grad, ref_hess = ref_all(scores, labels, offsets, range(len(sizes)), "exponential", truncation_level, sigma,
                                 pn, qn, sw, np.zeros(n), np.zeros(n))
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hess, ref_hess, rtol=1e-10, atol=1e-10)


def test_non_integer_labels_with_linear_gain():
    rng = np.random.default_rng(5)
    labels = rng.choice([0.0, 0.5, 1.25, 3.0], size=15)
    scores = rng.normal(size=15)
    offsets = np.array([0, 6, 15])
    grad, hess = run_kernel(scores, labels, offsets, "linear", 30, 1.0, True, True)
    ref_grad, ref_hess = ref_all(scores, labels, offsets, [0, 1], "linear", 30, 1.0, True, True, [],
                                 np.zeros(15), np.zeros(15))
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hess, ref_hess, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("pn, qn", [(False, False), (True, True)])
@pytest.mark.parametrize("truncation_level", [1, 3, 30])
def test_lambdas_sum_to_zero_and_weights_nonnegative(truncation_level, pn, qn):
    scores, labels, offsets = make_queries(3)
    grad, hess = run_kernel(scores, labels, offsets, "exponential", truncation_level, 1.0, pn, qn)
    for q in range(len(offsets) - 1):
        s, e = offsets[q], offsets[q + 1]
        scale = max(1.0, np.abs(grad[s:e]).sum())
        assert abs(grad[s:e].sum()) <= 1e-12 * scale
    assert np.all(hess >= 0.0)


def test_higher_label_is_pushed_up():
    """λ is the gradient of the loss: the more relevant document of a lone pair gets λ < 0, the other λ > 0."""
    grad, hess = run_kernel(np.array([0.5, 0.2]), np.array([0.0, 3.0]), [0, 2], "exponential", 30, 1.0, True, True)
    assert grad[1] < 0 < grad[0]
    assert grad[0] == pytest.approx(-grad[1], rel=1e-15)
    assert hess[0] == hess[1] > 0


def test_degenerate_queries_are_zero():
    """Single document, all labels equal, no relevant document (IDCG = 0): λ = w = 0, even over stale buffers."""
    scores = np.array([0.3, 0.1, 0.5, 0.9, 0.2, 0.0, 0.4, 0.8])
    labels = np.array([3.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    offsets = [0, 1, 4, 8]
    stale = np.full(8, 7.0)
    grad, hess = run_kernel(scores, labels, offsets, "exponential", 30, 1.0, True, True, grad=stale, hess=stale)
    assert np.all(grad == 0.0) and np.all(hess == 0.0)


def test_all_scores_equal_first_round():
    """All scores equal (first round): ρ = 1/2, no score-difference normalisation even when it is switched on."""
    labels = np.array([0.0, 2.0, 1.0, 0.0, 3.0])
    scores = np.zeros(5)
    with_pn = run_kernel(scores, labels, [0, 5], "exponential", 30, 1.0, True, False)
    without_pn = run_kernel(scores, labels, [0, 5], "exponential", 30, 1.0, False, False)
    np.testing.assert_array_equal(with_pn[0], without_pn[0])
    np.testing.assert_array_equal(with_pn[1], without_pn[1])
    ref = ref_query(list(scores), list(labels), "exponential", 30, 1.0, False, False)
    np.testing.assert_allclose(with_pn[0], ref[0], rtol=1e-12, atol=1e-15)


def test_score_ties_keep_row_order():
    """Tied scores rank in row order (stable sort): swapping two tied rows changes which one sits higher."""
    labels = np.array([1.0, 0.0, 0.0])
    scores = np.zeros(3)
    # Truncation 1: only pairs with position 0. Row 0 is at position 0 and is the only relevant document.
    grad, _ = run_kernel(scores, labels, [0, 3], "exponential", 1, 1.0, False, False)
    assert grad[0] < 0 and grad[1] > 0 and grad[2] > 0
    # Relevant document last among ties: position 0 is row 0 (label 0), so the pair (0, 2) is the one counted
    # from position 0; the pair (1, 2) (positions 1 and 2) is beyond truncation 1.
    labels2 = np.array([0.0, 0.0, 1.0])
    grad2, _ = run_kernel(scores, labels2, [0, 3], "exponential", 1, 1.0, False, False)
    assert grad2[1] == 0.0 and grad2[0] > 0 and grad2[2] < 0
    ref = ref_query([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], "exponential", 1, 1.0, False, False)
    np.testing.assert_allclose(grad2, ref[0], rtol=1e-12)


def test_truncation_limits_pairs():
    """With truncation 1, only pairs involving the top-ranked document contribute."""
    scores = np.array([3.0, 2.0, 1.0, 0.0])
    labels = np.array([0.0, 0.0, 2.0, 1.0])
    grad, _ = run_kernel(scores, labels, [0, 4], "linear", 1, 1.0, False, False)
    # Top document (row 0, label 0) pairs with rows 2 and 3; row 1 (label 0, position 1) takes part in no pair.
    assert grad[1] == 0.0
    assert grad[0] > 0 and grad[2] < 0 and grad[3] < 0


def test_query_indices_subset_leaves_other_rows_untouched():
    scores, labels, offsets = make_queries(11)
    n = scores.shape[0]
    n_queries = len(offsets) - 1
    subset = np.array([1, 4, 6, 7], dtype=np.int64)
    rng = np.random.default_rng(0)
    sentinel_g = rng.normal(size=n)
    sentinel_h = rng.normal(size=n)
    sw = rng.uniform(0.5, 2.0, n)
    grad, hess = run_kernel(scores, labels, offsets, "exponential", 30, 1.0, True, True, sample_weight=sw,
                            query_indices=subset, grad=sentinel_g, hess=sentinel_h)
    ref_grad, ref_hess = ref_all(scores, labels, offsets, subset, "exponential", 30, 1.0, True, True, sw,
                                 sentinel_g, sentinel_h)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hess, ref_hess, rtol=1e-10, atol=1e-10)
    for q in set(range(n_queries)) - set(subset.tolist()):
        s, e = offsets[q], offsets[q + 1]
        np.testing.assert_array_equal(grad[s:e], sentinel_g[s:e])
        np.testing.assert_array_equal(hess[s:e], sentinel_h[s:e])
    # The same queries computed alone or with all the others give the same values.
    full_g, full_h = run_kernel(scores, labels, offsets, "exponential", 30, 1.0, True, True, sample_weight=sw)
    for q in subset:
        s, e = offsets[q], offsets[q + 1]
        np.testing.assert_array_equal(grad[s:e], full_g[s:e])
        np.testing.assert_array_equal(hess[s:e], full_h[s:e])


def test_sample_weight_scales_rows():
    scores, labels, offsets = make_queries(2)
    n = scores.shape[0]
    sw = np.random.default_rng(3).uniform(0.0, 4.0, n)
    g1, h1 = run_kernel(scores, labels, offsets, "exponential", 30, 1.0, True, True)
    g2, h2 = run_kernel(scores, labels, offsets, "exponential", 30, 1.0, True, True, sample_weight=sw)
    np.testing.assert_allclose(g2, g1 * sw, rtol=1e-14, atol=0)
    np.testing.assert_allclose(h2, h1 * sw, rtol=1e-14, atol=0)
    ones_g, ones_h = run_kernel(scores, labels, offsets, "exponential", 30, 1.0, True, True,
                                sample_weight=np.ones(n))
    np.testing.assert_array_equal(ones_g, g1)
    np.testing.assert_array_equal(ones_h, h1)


def test_kernel_does_not_depend_on_query_position():
    """A query's λ depends only on its own rows: the same query at another offset gives the same values."""
    scores, labels, offsets = make_queries(4)
    q = int(np.argmax(np.diff(offsets)))
    s, e = offsets[q], offsets[q + 1]
    alone_g, alone_h = run_kernel(scores[s:e].copy(), labels[s:e].copy(), [0, e - s], "exponential", 30, 1.0,
                                  True, True)
    full_g, full_h = run_kernel(scores, labels, offsets, "exponential", 30, 1.0, True, True)
    np.testing.assert_array_equal(alone_g, full_g[s:e])
    np.testing.assert_array_equal(alone_h, full_h[s:e])


@pytest.mark.parametrize("kind", ["distinct", "ties", "signed-zeros", "infinite", "sorted", "reversed"])
def test_descending_order_is_a_stable_descending_argsort(kind):
    """The kernel's sort matches numpy's stable argsort of -scores (tied scores in row order) at every size, around
    its 16-element blocks and its merges of equal and unequal runs."""
    rng = np.random.default_rng(len(kind))
    for n in list(range(0, 70)) + [100, 127, 128, 129, 257, 1000]:
        x = rng.normal(size=n)
        if kind == "ties":
            x = np.round(x * 2)
        elif kind == "signed-zeros":
            x = rng.choice([0.0, -0.0, 1.0, -1.0], size=n)
        elif kind == "infinite":
            x[rng.random(n) < 0.2] = np.inf
            x[rng.random(n) < 0.2] = -np.inf
        elif kind == "sorted":
            x = np.sort(np.round(x))[::-1].copy()
        elif kind == "reversed":
            x = np.sort(np.round(x)).copy()
        np.testing.assert_array_equal(descending_order(x), np.argsort(-x, kind="stable"))


def test_descending_order_puts_nan_last():
    x = np.array([0.5, np.nan, 2.0, 0.5, np.nan, -1.0])
    np.testing.assert_array_equal(descending_order(x), [2, 0, 3, 5, 1, 4])


@pytest.mark.parametrize("normalize_pairs", [False, True])
@pytest.mark.parametrize("truncation_level", [1, 5, 30, 1000])
def test_vectorised_pair_loop_gives_the_bits_of_the_plain_loop(truncation_level, normalize_pairs):
    """The common case's branch-free, padded loop (_ndcg_pairs) and the plain double loop (_general_pairs) add the
    same terms in the same order: equal to the last bit, for every length around the padding of 8."""
    rng = np.random.default_rng(truncation_level)
    for n in list(range(2, 42)) + [64, 100, 203]:
        n_pad = (n + 7) & -8
        label = np.ones(n_pad)  # the padding holds any finite value
        label[:n] = rng.integers(0, 5, n)
        gain = 2.0 ** label - 1.0
        s = np.ones(n_pad)
        s[:n] = np.sort(np.round(rng.normal(size=n), 1))[::-1]  # rank order, with ties
        e = np.ones(n_pad)
        e[:n] = np.exp(1.3 * (s[:n] - s[0]))
        discount = np.ones(n_pad)
        discount[:n] = discount_table(n)
        last_row = min(n - 1, truncation_level)
        sums = np.zeros(2 * n_pad)
        fast = _ndcg_pairs(n, s, label, gain, e, discount, 0.37, last_row, 1.3, normalize_pairs, sums,
                           np.empty(2 * n_pad))
        lam, w = np.zeros(n), np.zeros(n)
        plain = _general_pairs(s[:n], label[:n], gain[:n], e[:n], discount[:n], 0.37, last_row, 1.3, normalize_pairs,
                               False, np.zeros(0, dtype=np.int64), np.ones((2, 0)), lam, w, np.zeros((2, 0)))
        assert fast == plain
        np.testing.assert_array_equal(sums[0:2 * n:2], lam)
        np.testing.assert_array_equal(sums[1:2 * n:2], w)
