"""The training objectives (lambdamart._objectives), and the stable sort they share with the metrics
(lambdamart._sort).

The LambdaRank kernel is tested against a plain-Python brute force of its formulas (docs/design.md, "Objectives",
LambdaRank), written from the formulas and not from the kernel: per query, a stable descending sort by score, then
a straightforward double loop over (position i < truncation level, position j > i) pairs. Every other kernel's
gradient is the derivative of its loss (finite differences), its second-order weights are >= 0; the MAP variant
weighs pairs by the change in average precision. Through the estimator: every objective learns to rank, and
position debiasing (unbiased LambdaMART) beats the biased model on click logs. The determinism of the random parts
(ListMLE's tie breaking, RankNet's sampled pairs) is in test_determinism.py.
"""

import itertools
import math

import numpy as np
import pytest
from helpers import called_from_a_kernel
from scipy import special

from lambdamart import LambdaMARTRanker, _sort
from lambdamart._objectives import OBJECTIVES, TrainingQueries, lambdarank, make_objective
from lambdamart._objectives.lambdarank import (
    _general_pairs,
    discount_table,
    inverse_ideal_dcg,
    lambdarank_gradients,
)
from lambdamart._objectives.listwise import listmle_gradients, listnet_gradients
from lambdamart._objectives.pairwise import ranknet_gradients
from lambdamart._objectives.pointwise import pointwise_gradients
from lambdamart._parallel import parallel_region
from lambdamart.metrics import mean_average_precision, ndcg

# Kernels that only other kernels call in the package (no Python entry point), called here through a jitted caller.
(_all_tied_pairs, _ndcg_pairs, _pair_discounts, _tail_pairs, _exp_below_top, descending_order,
 descending_order_from) = map(called_from_a_kernel, (lambdarank._all_tied_pairs, lambdarank._ndcg_pairs,
                                                     lambdarank._pair_discounts, lambdarank._tail_pairs,
                                                     lambdarank._exp_below_top, _sort.descending_order,
                                                     _sort.descending_order_from))

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
    ideal = sorted((gain_of(label, gain) for label in labels), reverse=True)
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
    return np.array([gain_of(label, gain) for label in labels], dtype=np.float64)


def run_kernel(scores, labels, offsets, gain, truncation_level, sigma, pn, qn, sample_weight=None,
               query_indices=None, grad=None, hess=None, average_ties=False):
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
                         grad, hess, NO_BIAS, average_ties)
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


# ---------------------------------------------------------------- LambdaRank against the brute force


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


def test_queries_whose_score_gaps_underflow_exp_take_the_general_kernel():
    """exp(σ(s - max s)) underflows to 0 for scores ~1000 below a query's top: those queries fall back to the
    general pair loop (its own kernel), the others stay on the fast one, and all match the reference."""
    rng = np.random.default_rng(7)
    sizes = np.array([6, 9, 5, 12])
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    n = int(offsets[-1])
    labels = rng.integers(0, 3, n).astype(np.float64)
    labels[offsets[:-1]] = 2.0
    scores = rng.normal(size=n)
    scores[offsets[1] + 2] = -2000.0  # query 1: one document far below the rest
    scores[offsets[3]:offsets[3] + 3] = 1500.0  # query 3: three far above the rest
    sw = rng.uniform(0.5, 2.0, n)
    for pn, qn in ((False, False), (True, True)):
        grad, hess = run_kernel(scores, labels, offsets, "exponential", 30, 1.0, pn, qn, sample_weight=sw)
        ref_grad, ref_hess = ref_all(scores, labels, offsets, range(len(sizes)), "exponential", 30, 1.0, pn, qn, sw,
                                     np.zeros(n), np.zeros(n))
        np.testing.assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(hess, ref_hess, rtol=1e-10, atol=1e-12)
        assert np.abs(grad[offsets[1]:offsets[2]]).max() > 1e-3 and np.abs(grad[offsets[3]:]).max() > 1e-3


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


@pytest.mark.parametrize("average_ties", [False, True])
@pytest.mark.parametrize("normalize_pairs", [False, True])
@pytest.mark.parametrize("truncation_level", [1, 5, 30, 1000])
def test_vectorised_pair_loop_equals_the_plain_loop(truncation_level, normalize_pairs, average_ties):
    """The common case's branch-free, padded loop (_ndcg_pairs) and the plain double loop (_general_pairs) add the
    same terms (a row's own in vectorised running sums there): equal to rounding, for every length around the
    padding of 8 (a padded document's terms would show far above rounding), with ties in row order or averaged."""
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
        pair_discounts = np.ones((5, n_pad))
        last_row = _pair_discounts(s, n, discount_table(n), 0.37, truncation_level, average_ties, pair_discounts)
        sums = np.zeros(2 * n_pad)  # Σλ, then Σw
        fast = _ndcg_pairs(n, s, label, gain, e, pair_discounts, last_row, 1.3, normalize_pairs, sums)
        lam, w = np.zeros(n), np.zeros(n)
        plain = _general_pairs(s[:n], label[:n], gain[:n], e[:n], pair_discounts[:, :n], 0.37, last_row, 1.3,
                               normalize_pairs, False, np.zeros(0, dtype=np.int64), np.ones((2, 0)), lam, w,
                               np.zeros((2, 0)))
        assert fast == pytest.approx(plain, rel=1e-13)
        np.testing.assert_allclose(sums[:n], lam, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(sums[n_pad:n_pad + n], w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("truncation_level", [1, 2, 3, 5, 30])
def test_averaged_ties_are_the_mean_over_every_order_of_the_tied_documents(truncation_level):
    """ties="average": each document's λ and w equal their mean over all orders of the tied documents with ties in
    row order (exact: the pair weights are linear in |ΔNDCG|, and tied pairs have the same ρ and |Δs| in every
    order). Blocks above, across and below the truncation; without the query normalisation, which is not linear."""
    rng = np.random.default_rng(truncation_level)
    for trial in range(12):
        n = 6
        scores = np.round(rng.normal(size=n), 0) / 4  # a few distinct values: tie blocks of every size
        if trial == 0:
            scores[:] = 0.0  # the first round: one block, summed per label
        labels = rng.integers(0, 3, n).astype(float)
        offsets = np.array([0, n])
        expected_g, expected_h = np.zeros(n), np.zeros(n)
        orders = list(itertools.permutations(range(n)))
        for order in orders:  # every row order; ties then rank in that order
            order = np.array(order)
            g, h = run_kernel(scores[order], labels[order], offsets, "exponential", truncation_level, SIGMA, True,
                              False)
            expected_g[order] += g
            expected_h[order] += h
        averaged_g, averaged_h = run_kernel(scores, labels, offsets, "exponential", truncation_level, SIGMA, True,
                                            False, average_ties=True)
        np.testing.assert_allclose(averaged_g, expected_g / len(orders), rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(averaged_h, expected_h / len(orders), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("normalize_pairs", [False, True])
@pytest.mark.parametrize("block", [2, 3, 40, 500])
def test_a_tie_block_across_the_truncation_is_summed_per_label_as_the_pair_loop_sums_it(block, normalize_pairs):
    """Later rounds with ties averaged: the rows of a tie block below the truncation level are taken per label value
    (_tail_pairs) rather than pair by pair, with the same sums as the plain loop over every row of the block."""
    rng = np.random.default_rng(block)
    n_labels, truncation_level = 5, 10
    n = 9 + block + 50  # distinct scores, the block from rank 9 on (across the level), distinct scores again
    n_pad = (n + 7) & -8
    s = np.ones(n_pad)
    s[:n] = np.r_[np.linspace(3.0, 2.0, 9), np.full(block, 1.5), np.linspace(1.0, -2.0, 50)]
    label = np.ones(n_pad)
    label[:n] = rng.integers(0, n_labels, n)
    gain = np.ones(n_pad)
    gain[:n] = rng.permutation(np.arange(n_labels) * 1.7)[label[:n].astype(int)]  # any gain per label value
    e = np.ones(n_pad)
    e[:n] = np.exp(SIGMA * (s[:n] - s[0]))
    pair_discounts = np.ones((5, n_pad))
    last_row = _pair_discounts(s, n, discount_table(n), 0.37, truncation_level, True, pair_discounts)
    assert last_row == min(n - 1, 9 + block) > truncation_level  # the block reaches past the level
    sums = np.zeros(2 * n_pad)  # Σλ, then Σw
    fast = _ndcg_pairs(n, s, label, gain, e, pair_discounts, truncation_level, SIGMA, normalize_pairs, sums)
    fast += _tail_pairs(n, s, label, gain, e, pair_discounts, truncation_level, 9 + block, SIGMA, normalize_pairs,
                        sums)
    lam, w = np.zeros(n), np.zeros(n)
    plain = _general_pairs(s[:n], label[:n], gain[:n], e[:n], pair_discounts[:, :n], 0.37, last_row, SIGMA,
                           normalize_pairs, False, np.zeros(0, dtype=np.int64), np.ones((2, 0)), lam, w,
                           np.zeros((2, 0)))
    assert fast == pytest.approx(plain, rel=1e-11)
    np.testing.assert_allclose(sums[:n], lam, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(sums[n_pad:n_pad + n], w, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_queries_with_a_long_tie_block_across_the_truncation_get_the_plain_loops_gradients(n_jobs):
    """Through lambdarank_gradients: queries whose tie block reaches far past the truncation level (taken apart, per
    label value) among ordinary ones, with sample weights and both normalisations, give what the plain pair loops
    of the general kernel give."""
    from lambdamart._objectives.lambdarank import _TAIL_ROWS, _general_gradients, positions_in_query

    rng = np.random.default_rng(3)
    parts = []
    for block in (0, 300, 5, 2 + _TAIL_ROWS + 1, 120):  # none, long ones, short ones (left in the pair loops)
        scores = np.r_[rng.normal(2.0, 0.3, 8), np.full(block, 1.0), rng.normal(0.0, 0.5, 30)]  # block from rank 8
        parts.append((scores, rng.integers(0, 5, scores.shape[0]).astype(float)))
    scores = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    offsets = np.r_[0, np.cumsum([p[0].shape[0] for p in parts])].astype(np.int64)
    weights = rng.uniform(0.5, 2.0, scores.shape[0])
    gains = gains_array(labels, "exponential")
    discounts = discount_table(int(np.diff(offsets).max()))
    inv_idcg = inverse_ideal_dcg(gains, offsets, discounts, 10)
    queries = np.arange(offsets.shape[0] - 1, dtype=np.int64)
    expected_g, expected_h = np.zeros(scores.shape[0]), np.zeros(scores.shape[0])
    _general_gradients(scores, gains, labels, offsets, queries, positions_in_query(offsets), discounts, inv_idcg, 10,
                       SIGMA, True, True, True, False, NO_POSITION, NO_BIAS, weights, expected_g, expected_h, NO_BIAS)
    with parallel_region(n_jobs):
        g, h = run_kernel(scores, labels, offsets, "exponential", 10, SIGMA, True, True, sample_weight=weights,
                          average_ties=True)
    np.testing.assert_allclose(g, expected_g, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h, expected_h, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("truncation_level", [1, 5, 30, 1000])
def test_an_all_tied_query_is_summed_per_label_as_the_pair_loop_sums_it(truncation_level):
    """The first round (every score equal) with ties averaged takes per-label counts instead of the n²/2 pairs of
    one query-wide tie block: the same sums as the plain pair loop, for few and for all-distinct labels and for
    gains that do not grow with the label."""
    rng = np.random.default_rng(truncation_level)
    for n, n_labels in ((2, 2), (7, 3), (40, 5), (64, 64), (203, 4)):
        label = rng.integers(0, n_labels, n).astype(float)
        gain = rng.permutation(np.arange(n_labels) * 1.7)[label.astype(int)]  # any gain per label value
        s = np.zeros(n)
        pair_discounts = np.ones((5, n))
        last_row = _pair_discounts(s, n, discount_table(n), 0.37, truncation_level, True, pair_discounts)
        expected = np.zeros(2 * n)  # Σλ, then Σw
        plain = _general_pairs(s, label, gain, np.ones(n), pair_discounts, 0.37, last_row, SIGMA, False, False,
                               np.zeros(0, dtype=np.int64), np.ones((2, 0)), expected[:n], expected[n:],
                               np.zeros((2, 0)))
        sums = np.zeros(2 * n)
        grouped = _all_tied_pairs(n, label, gain, pair_discounts, SIGMA, sums)
        assert grouped == pytest.approx(plain, rel=1e-12)
        np.testing.assert_allclose(sums, expected, rtol=1e-11, atol=1e-14)


def test_averaged_ties_change_nothing_without_ties():
    """Distinct scores: ties="average" gives LightGBM's λ and w bit for bit."""
    rng = np.random.default_rng(3)
    scores = rng.normal(size=60)
    labels = rng.integers(0, 5, 60).astype(float)
    offsets = np.array([0, 25, 60])
    for truncation_level in (5, 30):
        plain = run_kernel(scores, labels, offsets, "exponential", truncation_level, SIGMA, True, True)
        averaged = run_kernel(scores, labels, offsets, "exponential", truncation_level, SIGMA, True, True,
                              average_ties=True)
        np.testing.assert_array_equal(plain[0], averaged[0])
        np.testing.assert_array_equal(plain[1], averaged[1])


# ---------------------------------------------------------------- RankNet, ListNet, ListMLE, pointwise, MAP

SIGMA = 1.3


def queries(seed):
    """Small queries with ties in labels and scores, a single document and all-equal labels."""
    rng = np.random.default_rng(seed)
    sizes = [1, 2, 5, 7, 4]
    labels = [rng.integers(0, 4, n).astype(float) for n in sizes]
    labels[3][:] = 2.0  # all equal
    scores = [np.round(rng.normal(size=n), 1) for n in sizes]  # rounding makes ties
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return np.concatenate(scores), np.concatenate(labels), offsets


def per_query(offsets):
    return [slice(offsets[q], offsets[q + 1]) for q in range(len(offsets) - 1)]


def ranknet_loss(s, y, offsets):
    total = 0.0
    for q in per_query(offsets):
        sq, yq = s[q], y[q]
        for a in range(len(sq)):
            for b in range(len(sq)):
                if yq[a] > yq[b]:
                    total += np.log1p(np.exp(-SIGMA * (sq[a] - sq[b])))
    return total


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def listnet_loss(s, y, offsets):
    return sum(-np.sum(softmax(2.0 ** y[q] - 1) * np.log(softmax(s[q]))) for q in per_query(offsets))


def listmle_loss(s, y, offsets, tie_break):
    total = 0.0
    for q in per_query(offsets):
        if np.all(y[q] == y[q][0]):
            continue  # no order to learn: such queries are left out of the loss
        order = np.lexsort((tie_break[q], -y[q]))
        sq = s[q][order]
        for k in range(len(sq)):
            total += np.log(np.sum(np.exp(sq[k:]))) - sq[k]
    return total


def pointwise_loss(s, y, offsets):
    return 0.5 * np.sum((s - y) ** 2)


def kernel(name, s, y, offsets, tie_break):
    n = len(s)
    g, h = np.zeros(n), np.zeros(n)
    q = np.arange(len(offsets) - 1, dtype=np.int64)
    w = np.zeros(0)
    if name == "ranknet":
        ranknet_gradients(s, y, offsets, q, SIGMA, np.zeros((0, 0), dtype=np.int64), w, g, h)
    elif name == "listnet":
        listnet_gradients(s, 2.0**y - 1, offsets, q, w, g, h)
    elif name == "listmle":
        listmle_gradients(s, y, offsets, q, tie_break, w, g, h)
    else:
        pointwise_gradients(s, y, offsets, q, w, g, h)
    return g, h


LOSSES = {
    "ranknet": lambda s, y, o, t: ranknet_loss(s, y, o),
    "listnet": lambda s, y, o, t: listnet_loss(s, y, o),
    "listmle": listmle_loss,
    "pointwise": lambda s, y, o, t: pointwise_loss(s, y, o),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("seed", range(4))
def test_gradient_and_hessian_match_finite_differences(name, seed):
    s, y, offsets = queries(seed)
    tie_break = np.random.default_rng(seed + 100).random(len(s))
    loss = LOSSES[name]
    grad, hess = kernel(name, s, y, offsets, tie_break)
    eps = 1e-5
    for i in range(len(s)):
        up, down = s.copy(), s.copy()
        up[i] += eps
        down[i] -= eps
        fd_grad = (loss(up, y, offsets, tie_break) - loss(down, y, offsets, tie_break)) / (2 * eps)
        assert grad[i] == pytest.approx(fd_grad, abs=1e-6)
        # The diagonal of the Hessian, from differences of the kernel's own gradient.
        fd_hess = (kernel(name, up, y, offsets, tie_break)[0][i] - kernel(name, down, y, offsets, tie_break)[0][i])
        assert hess[i] == pytest.approx(fd_hess / (2 * eps), abs=1e-6)
    assert np.all(hess >= 0)


@pytest.mark.parametrize("name", ["listnet", "listmle"])
def test_listwise_gradients_stay_finite_for_scores_far_apart(name):
    """Scores ~1000 apart underflow exp(s - max) to 0: the λ and w must still be finite and exact (ListMLE once
    divided by a suffix sum that had underflowed to 0)."""
    s = np.array([0.0, 1000.0, -1000.0, 3.0, -999.0])
    y = np.array([2.0, 1.0, 0.0, 0.0, 1.0])
    offsets = np.array([0, 5], dtype=np.int64)
    tie_break = np.arange(5.0)
    grad, hess = kernel(name, s, y, offsets, tie_break)
    assert np.isfinite(grad).all() and np.isfinite(hess).all() and (hess >= 0).all()
    if name == "listmle":
        # The loss's gradient in log-sum-exp form: Σ over the suffixes holding a document of its softmax share.
        order = np.lexsort((tie_break, -y))
        expected = np.zeros(5)
        for m in range(5):
            rest = s[order[m:]]
            z = rest.max() + np.log(np.sum(np.exp(rest - rest.max())))
            for i in range(m, 5):
                expected[order[i]] += np.exp(s[order[i]] - z)
            expected[order[m]] -= 1.0
        np.testing.assert_allclose(grad, expected, atol=1e-12)


def test_ranknet_is_exact_for_scores_far_below_the_top():
    """The kernel takes each pair's logistic terms from exp(σ(s - max s)) per document; those underflow to 0 for
    scores ~1000 below the query's top, where a pair with both documents there is computed from its score gap."""
    s = np.array([0.0, -1000.0, -1002.0, -999.5, 2.0])
    y = np.array([1.0, 2.0, 0.0, 1.0, 0.0])
    grad, hess = kernel("ranknet", s, y, np.array([0, 5], dtype=np.int64), np.zeros(5))
    expected_grad, expected_hess = np.zeros(5), np.zeros(5)
    for high in range(5):
        for low in range(5):
            if y[high] > y[low]:
                rho = special.expit(-SIGMA * (s[high] - s[low]))
                expected_grad[[high, low]] += [-SIGMA * rho, SIGMA * rho]
                expected_hess[[high, low]] += SIGMA**2 * rho * (1 - rho)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(hess, expected_hess, rtol=1e-12, atol=1e-300)
    assert hess[1] > 0 and hess[2] > 0  # the pair (1, 2) of the two underflowed documents counts


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_single_document_queries_have_no_pairwise_or_listwise_gradient(name):
    s = np.array([0.3, -1.0])
    y = np.array([2.0, 0.0])
    offsets = np.array([0, 1, 2], dtype=np.int64)
    grad, hess = kernel(name, s, y, offsets, np.zeros(2))
    if name == "pointwise":
        np.testing.assert_allclose(grad, s - y)
    else:
        np.testing.assert_allclose(grad, 0.0, atol=1e-15)
        np.testing.assert_allclose(hess, 0.0, atol=1e-15)


def average_precision(rel_in_rank_order):
    hits = np.cumsum(rel_in_rank_order)
    ranks = np.arange(1, len(rel_in_rank_order) + 1)
    return np.sum(rel_in_rank_order * hits / ranks) / max(rel_in_rank_order.sum(), 1)


@pytest.mark.parametrize("seed", range(6))
def test_map_lambdas_weigh_pairs_by_the_change_in_average_precision(seed):
    rng = np.random.default_rng(seed)
    n = 9
    s = rng.normal(size=n)
    rel = (rng.random(n) < 0.4).astype(float)
    rel[0] = 1.0
    offsets = np.array([0, n], dtype=np.int64)
    grad, hess = np.zeros(n), np.zeros(n)
    norm = np.array([1.0 / rel.sum()])
    lambdarank_gradients(s, rel, rel, offsets, np.zeros(1, dtype=np.int64), discount_table(n), norm, n, 1.0, False,
                         False, True, np.zeros(0, dtype=np.int64), np.ones((2, 0)), np.zeros(0), grad, hess,
                         np.ones((2, 0)))
    # Reference: every pair of a relevant and a non-relevant document, |ΔAP| from swapping them in the ranking.
    order = np.argsort(-s, kind="stable")
    expected = np.zeros(n)
    base = average_precision(rel[order])
    for i in range(n):
        for j in range(i + 1, n):
            a, b = order[i], order[j]
            if rel[a] == rel[b]:
                continue
            swapped = order.copy()
            swapped[i], swapped[j] = b, a
            delta = abs(average_precision(rel[swapped]) - base)
            high, low = (a, b) if rel[a] > rel[b] else (b, a)
            rho = 1.0 / (1.0 + np.exp(s[high] - s[low]))
            expected[high] -= rho * delta
            expected[low] += rho * delta
    np.testing.assert_allclose(grad, expected, atol=1e-12)


def test_sampled_ranknet_pairs_only_use_partners_with_other_labels():
    s = np.zeros(4)
    y = np.array([1.0, 1.0, 0.0, 0.0])
    offsets = np.array([0, 4], dtype=np.int64)
    g, h = np.zeros(4), np.zeros(4)
    partners = np.zeros((4, 1), dtype=np.int64)  # each document pairs with the next one (cyclically)
    ranknet_gradients(s, y, offsets, np.zeros(1, dtype=np.int64), 1.0, partners, np.zeros(0), g, h)
    # Pairs (0,1) and (2,3) have equal labels; (1,2) and (3,0) count, each with rho = 1/2.
    np.testing.assert_allclose(g, [-0.5, -0.5, 0.5, 0.5])
    np.testing.assert_allclose(h, [0.25, 0.25, 0.25, 0.25])


# ---------------------------------------------------------------- through the estimator


@pytest.fixture(scope="module")
def data():
    """80 queries of 15 documents, labels 0..4 (replaces conftest's data in this file)."""
    rng = np.random.default_rng(0)
    qid = np.repeat(np.arange(80), 15)
    X = rng.normal(size=(qid.size, 5))
    y = np.clip(np.round(1.5 * X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(scale=0.5, size=qid.size)), 0, 4)
    return X, y, qid


@pytest.mark.parametrize("objective", ["lambdarank", "lambdarank_map", "ranknet", "listnet", "listmle", "pointwise"])
def test_every_objective_learns_to_rank(data, objective):
    X, y, qid = data
    train, test = qid < 60, qid >= 60
    kwargs = dict(pairs_per_document=5) if objective == "ranknet" else {}
    ranker = LambdaMARTRanker(objective, n_estimators=30, min_samples_leaf=5, random_state=0, **kwargs)
    ranker.fit(X[train], y[train], qid[train])
    scores = ranker.predict(X[test])
    random = np.random.default_rng(1).normal(size=scores.size)
    assert ndcg(y[test], scores, qid[test], k=10) > ndcg(y[test], random, qid[test], k=10) + 0.1
    if objective == "lambdarank_map":
        assert mean_average_precision(y[test], scores, qid[test]) > mean_average_precision(y[test], random, qid[test])


def click_logs(seed, n_queries, n=10):
    """Clicks with a known position bias: a document is clicked when relevant (feature 0 > 0) and examined, with
    examination probability 1 / position**1.5, and positions come from a logging ranker that sorts by feature 1,
    which has nothing to do with relevance."""
    rng = np.random.default_rng(seed)
    qid = np.repeat(np.arange(n_queries), n)
    X = rng.normal(size=(qid.size, 4))
    relevance = (X[:, 0] + 0.3 * rng.normal(size=qid.size) > 0.0).astype(float)
    position = np.empty(qid.size, dtype=np.int64)
    for q in range(n_queries):
        rows = np.flatnonzero(qid == q)
        position[rows[np.argsort(-X[rows, 1])]] = np.arange(1, n + 1)
    clicks = relevance * (rng.random(qid.size) < 1.0 / position**1.5)
    return X, clicks, relevance, qid, position


def test_unbiased_lambdamart_ranks_true_relevance_better_than_the_biased_model():
    X, clicks, _, qid, position = click_logs(0, 1500)
    X_test, _, relevance_test, qid_test, _ = click_logs(1, 300)
    params = dict(n_estimators=50, min_samples_leaf=10, random_state=0)
    biased = LambdaMARTRanker(**params).fit(X, clicks, qid)
    unbiased = LambdaMARTRanker(**params).fit(X, clicks, qid, position=position)
    score = lambda model: ndcg(relevance_test, model.predict(X_test), qid_test, k=5)  # noqa: E731
    assert score(unbiased) > score(biased) + 0.005
    bias = unbiased.position_bias_
    assert bias.shape == (2, 10)
    np.testing.assert_array_equal(bias[:, 0], [1.0, 1.0])
    # Clicks deep in the page are rarer for the same relevance: the learned click bias falls with position.
    assert bias[0, -1] < bias[0, 1] < 1.0
    assert not hasattr(biased, "position_bias_")


@pytest.mark.parametrize(
    "position, match",
    [(np.zeros(20), ">= 1"), (np.full(20, 1.5), "whole"), (np.ones(19), "one displayed rank per row"),
     # Ranks that would wrap around in a cast to int64 (and then index out of bounds), or that would size the bias
     # table by themselves.
     (np.r_[1e19, np.ones(19)], "ranks up to 1e\\+19.*np.minimum"),
     (np.r_[np.uint64(2**64 - 1), np.ones(19, dtype=np.uint64)], "ranks up to 18446744073709551615"),
     (np.r_[10**9, np.ones(19, dtype=np.int64)], "takes ranks up to 10000")],
)
def test_bad_positions(position, match):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=match):
        LambdaMARTRanker(n_estimators=2).fit(X, np.arange(20) % 3, np.repeat([0, 1], 10), position=position)


def test_position_needs_a_lambdarank_objective():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="lambdarank"):
        LambdaMARTRanker("listnet", n_estimators=2).fit(X, np.arange(20) % 3, position=np.arange(1, 21))


# ---------------------------------------------------------------- the stable sort (lambdamart._sort)


SORT_CASES = ["distinct", "ties", "signed-zeros", "infinite", "nan", "sorted", "reversed"]


def _scores_to_sort(kind):
    """Scores of every size around the sort's 16-element blocks and its merges of equal and unequal runs."""
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
        elif kind == "nan":  # last, in row order, below -inf
            x[rng.random(n) < 0.2] = -np.inf
            x[rng.random(n) < 0.2] = np.nan
        elif kind == "sorted":
            x = np.sort(np.round(x))[::-1].copy()
        elif kind == "reversed":
            x = np.sort(np.round(x)).copy()
        yield rng, x


@pytest.mark.parametrize("kind", SORT_CASES)
def test_descending_order_is_a_stable_descending_argsort(kind):
    """The kernel's sort matches numpy's stable argsort of -scores (tied scores in row order)."""
    for _, x in _scores_to_sort(kind):
        np.testing.assert_array_equal(descending_order(x), np.argsort(-x, kind="stable"))


@pytest.mark.parametrize("kind", SORT_CASES)
def test_sorting_from_a_previous_order_gives_the_same_order_from_any_start(kind):
    """The objective's sort from the last round's ranking: the stable argsort whatever it starts from: row order,
    the answer itself, the answer with a few neighbours swapped (the usual case: insertion moves), a random
    permutation and the reversed answer (far from sorted: the merge sort takes over)."""
    for rng, x in _scores_to_sort(kind):
        expected = np.argsort(-x, kind="stable")
        near = expected.copy()
        for i in rng.integers(0, max(x.shape[0] - 1, 1), x.shape[0] // 10):
            near[i], near[i + 1] = near[i + 1], near[i]
        for start in (np.arange(x.shape[0]), expected, near, rng.permutation(x.shape[0]), expected[::-1]):
            order = start.astype(np.int64)  # a copy: sorted in place
            ranked_scores = np.full(x.shape[0] + 3, -7.0)  # longer than needed, as the objective's work rows
            np.testing.assert_array_equal(descending_order_from(x, order, ranked_scores), expected)
            np.testing.assert_array_equal(order, expected)
            np.testing.assert_array_equal(ranked_scores[:x.shape[0]], x[expected])
            assert (ranked_scores[x.shape[0]:] == -7.0).all()


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_the_objectives_exponentials_are_numpys_to_an_ulp(sigma):
    """exp(σ(s - s[0])) of the vectorised kernel: within 1 ulp of np.exp over the whole range down to exp(-708),
    0 below it and for NaN, and the flag set exactly when one is 0."""
    rng = np.random.default_rng(int(10 * sigma))
    below_top = np.minimum(np.abs(rng.normal(size=4000)) * rng.choice([1e-3, 1.0, 30.0, 300.0], 4000), 700.0)
    s = np.concatenate([[3.0], 3.0 - below_top / sigma, [3.0 - 708.0 / sigma]])
    assert (below_top > 650).any() and (below_top < 1e-3).any()  # both ends of the range are tried
    for scores, flagged in ((s, False), (np.append(s, 3.0 - 709.0 / sigma), True), (np.append(s, np.nan), True)):
        e, scratch = np.empty(scores.shape[0]), np.empty(scores.shape[0], dtype=np.int64)
        assert _exp_below_top(scores, scores.shape[0], sigma, e, scratch) == flagged
        x = sigma * (scores - scores[0])
        kept = x >= -708.0
        assert (np.abs(e[kept] - np.exp(x[kept])) <= np.spacing(np.exp(x[kept]))).all()
        assert (e[~kept] == 0.0).all()


def test_descending_order_puts_nan_last():
    x = np.array([0.5, np.nan, 2.0, 0.5, np.nan, -1.0])
    np.testing.assert_array_equal(descending_order(x), [2, 0, 3, 5, 1, 4])


@pytest.mark.parametrize("name, with_position", [(name, False) for name in sorted(OBJECTIVES)]
                         + [(name, True) for name in sorted(OBJECTIVES) if OBJECTIVES[name].supports_position])
def test_gradients_on_threads_equal_one_thread(name, with_position):
    """Objectives share their queries among numba's threads: the same λ and w, bit for bit, as on one thread, for
    all queries and for a subset."""
    import numba

    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 40, 200)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    n = int(offsets[-1])
    labels = rng.integers(0, 4, n).astype(np.float64)
    scores = np.round(rng.normal(size=n), 1)  # with ties
    scores[rng.random(n) < 0.01] = 900.0  # far apart: LambdaRank's general kernel takes these queries
    position = (np.concatenate([np.arange(1, k + 1) for k in sizes]) if with_position
                else np.zeros(0, dtype=np.int64))
    queries = TrainingQueries(labels=labels, gains=2.0**labels - 1.0, offsets=offsets,
                              sample_weight=rng.uniform(0.5, 2.0, n), position=position)
    params = LambdaMARTRanker().get_params()
    subset = np.sort(rng.choice(200, 120, replace=False)).astype(np.int64)
    results = {}
    previous = numba.get_num_threads()
    try:
        for threads in (1, 2):
            numba.set_num_threads(threads)
            for label, indices in (("all", np.arange(200, dtype=np.int64)), ("subset", subset)):
                objective = make_objective(name, queries, params, np.random.RandomState(0))
                grad, hess = np.full(n, 7.0), np.full(n, 7.0)
                objective.gradients(scores, indices, grad, hess)
                results[threads, label] = grad, hess, objective.state()
    finally:
        numba.set_num_threads(previous)
    for label in ("all", "subset"):
        (g1, h1, s1), (g2, h2, s2) = results[1, label], results[2, label]
        np.testing.assert_array_equal(g1, g2)
        np.testing.assert_array_equal(h1, h2)
        assert s1.keys() == s2.keys()
        for key in s1:
            np.testing.assert_array_equal(s1[key], s2[key])
    untouched = np.setdiff1d(np.arange(200), subset)
    rows = np.concatenate([np.arange(offsets[q], offsets[q + 1]) for q in untouched])
    assert (results[2, "subset"][0][rows] == 7.0).all()  # rows of other queries are left as they are
