"""XE-NDCG (lambdamart._objectives.xendcg) and FRank (lambdamart._objectives.fidelity).

Each kernel's λ is checked against its loss written here from the formulas (finite differences, XE-NDCG's random
draws held fixed), and w against the exact diagonal of the Hessian where it is one (XE-NDCG), or against its
per-pair formula and as an upper bound of the curvature's magnitude where it is not (FRank). Then the contract of
the objective layer: w >= 0 and finite, degenerate queries give zeros, rows of other queries are untouched, sample
weights scale rows, draws go through ``rng.random_sample``; and through the estimator, both learn to rank.
"""

import numpy as np
import pytest
from scipy import special

from lambdamart import LambdaMARTRanker
from lambdamart._objectives import OBJECTIVES, TrainingQueries, make_objective
from lambdamart._objectives.fidelity import frank_gradients
from lambdamart._objectives.xendcg import xendcg_gradients
from lambdamart.datasets import make_ranking_data
from lambdamart.metrics import ndcg

NAMES = ["xendcg", "frank"]


# ---------------------------------------------------------------- losses, from the formulas


def per_query(offsets):
    return [slice(offsets[q], offsets[q + 1]) for q in range(len(offsets) - 1)]


def xendcg_loss(s, gains, offsets, gamma):
    total = 0.0
    for q in per_query(offsets):
        if s[q].size < 2 or np.all(gains[q] == gains[q][0]):
            continue  # no order to learn: left out of the loss
        target = gains[q] + 1.0 - gamma[q]
        phi = target / target.sum()
        log_softmax = s[q] - s[q].max() - np.log(np.sum(np.exp(s[q] - s[q].max())))
        total -= np.sum(phi * log_softmax)
    return total


def fidelity(s_i, s_j, y_i, y_j):
    p = 1.0 / (1.0 + np.exp(-(s_i - s_j)))
    target = 1.0 if y_i > y_j else 0.0
    return 1.0 - (np.sqrt(target * p) + np.sqrt((1.0 - target) * (1.0 - p)))


def frank_loss(s, y, offsets):
    total = 0.0
    for q in per_query(offsets):
        sq, yq = s[q], y[q]
        for a in range(len(sq)):
            for b in range(a + 1, len(sq)):
                if yq[a] != yq[b]:
                    total += fidelity(sq[a], sq[b], yq[a], yq[b])
    return total


# ---------------------------------------------------------------- helpers


def queries(seed):
    """Queries with ties in labels and scores, a single document, all-equal labels and a spread of scores."""
    rng = np.random.default_rng(seed)
    sizes = [1, 2, 5, 7, 4, 9]
    labels = [rng.integers(0, 4, n).astype(float) for n in sizes]
    labels[3][:] = 2.0  # all equal
    scores = [np.round(rng.normal(size=n), 1) for n in sizes]  # rounding makes ties
    scores[5] = scores[5] * 4.0  # well and badly ordered pairs, on both sides of FRank's p = 1/3
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return np.concatenate(scores), np.concatenate(labels), offsets


def _run(kernel, n, offsets, sample_weight, query_indices, grad, hess, before, after=()):
    """``kernel(*before, offsets, query_indices, *after, sample_weight, grad, hess)`` on fresh or copied buffers."""
    grad = np.zeros(n) if grad is None else grad.copy()
    hess = np.zeros(n) if hess is None else hess.copy()
    if query_indices is None:
        query_indices = np.arange(len(offsets) - 1)
    sw = np.zeros(0) if sample_weight is None else sample_weight
    kernel(*before, offsets, np.asarray(query_indices, dtype=np.int64), *after, sw, grad, hess)
    return grad, hess


def xendcg_kernel(s, gains, offsets, gamma, sample_weight=None, query_indices=None, grad=None, hess=None):
    return _run(xendcg_gradients, len(s), offsets, sample_weight, query_indices, grad, hess, (s, gains), (gamma,))


def frank_kernel(s, y, offsets, sample_weight=None, query_indices=None, grad=None, hess=None):
    return _run(frank_gradients, len(s), offsets, sample_weight, query_indices, grad, hess, (s, y))


def kernel(name, s, y, offsets, gamma, **kwargs):
    """λ and w of objective ``name`` with exponential gains and the draws ``gamma`` (which FRank ignores)."""
    if name == "xendcg":
        return xendcg_kernel(s, 2.0**y - 1.0, offsets, gamma, **kwargs)
    return frank_kernel(s, y, offsets, **kwargs)


def loss(name, s, y, offsets, gamma):
    if name == "xendcg":
        return xendcg_loss(s, 2.0**y - 1.0, offsets, gamma)
    return frank_loss(s, y, offsets)


EPS = 1e-5


def finite_differences(f, s, i):
    up, down = s.copy(), s.copy()
    up[i] += EPS
    down[i] -= EPS
    return (f(up) - f(down)) / (2 * EPS)


# ---------------------------------------------------------------- XE-NDCG


@pytest.mark.parametrize("gain", ["exponential", "linear", "table"])
@pytest.mark.parametrize("seed", range(4))
def test_xendcg_gradient_and_hessian_match_finite_differences(seed, gain):
    s, y, offsets = queries(seed)
    gains = {"exponential": 2.0**y - 1.0, "linear": y, "table": np.array([0.0, 0.5, 4.0, 9.0])[y.astype(int)]}[gain]
    gamma = np.random.default_rng(seed + 100).random(len(s))
    grad, hess = xendcg_kernel(s, gains, offsets, gamma)
    for i in range(len(s)):
        fd_grad = finite_differences(lambda x: xendcg_loss(x, gains, offsets, gamma), s, i)
        assert grad[i] == pytest.approx(fd_grad, abs=1e-6)
        # w = ρ(1 - ρ) is the exact diagonal of the Hessian.
        fd_hess = finite_differences(lambda x: xendcg_kernel(x, gains, offsets, gamma)[0], s, i)[i]
        assert hess[i] == pytest.approx(fd_hess, abs=1e-6)
    assert np.abs(grad).max() > 1e-2  # not vacuous


def test_xendcg_gradient_is_softmax_minus_target():
    s = np.array([0.5, -1.0, 2.0])
    y = np.array([0.0, 2.0, 1.0])
    gamma = np.array([0.25, 0.5, 0.75])
    grad, hess = xendcg_kernel(s, 2.0**y - 1.0, np.array([0, 3]), gamma)
    rho = np.exp(s) / np.exp(s).sum()
    phi = np.array([1.0 - 0.25, 4.0 - 0.5, 2.0 - 0.75]) / (0.75 + 3.5 + 1.25)  # 2^y - γ, normalised
    np.testing.assert_allclose(grad, rho - phi, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(hess, rho * (1.0 - rho), rtol=1e-14)
    assert abs(grad.sum()) < 1e-15  # a query's gradients sum to zero: both distributions sum to one


def test_xendcg_queries_with_equal_gains_have_nothing_to_learn():
    """Different labels with the same gain (a table) are as good as equal labels: φ would be the draws alone."""
    s = np.array([0.3, -0.2, 1.0])
    y = np.array([1.0, 2.0, 0.0])
    gains = np.array([3.0, 3.0, 3.0])
    grad, hess = xendcg_kernel(s, gains, np.array([0, 3]), np.array([0.1, 0.9, 0.5]), grad=np.ones(3),
                               hess=np.ones(3))
    np.testing.assert_array_equal(grad, 0.0)
    np.testing.assert_array_equal(hess, 0.0)
    assert y.min() != y.max()


def test_xendcg_is_stable_for_extreme_scores():
    s = np.array([800.0, -800.0, 0.0, 3.0])
    y = np.array([0.0, 4.0, 1.0, 1.0])
    grad, hess = xendcg_kernel(s, 2.0**y - 1.0, np.array([0, 4]), np.full(4, 0.5))
    assert np.all(np.isfinite(grad)) and np.all(np.isfinite(hess)) and np.all(hess >= 0)
    assert grad[0] == pytest.approx(1.0 - 0.5 / (0.5 + 15.5 + 1.5 + 1.5))
    assert grad[1] < 0


# ---------------------------------------------------------------- FRank


@pytest.mark.parametrize("seed", range(4))
def test_frank_gradient_matches_finite_differences(seed):
    s, y, offsets = queries(seed)
    grad, hess = frank_kernel(s, y, offsets)
    for i in range(len(s)):
        fd_grad = finite_differences(lambda x: frank_loss(x, y, offsets), s, i)
        assert grad[i] == pytest.approx(fd_grad, abs=1e-6)
        # w bounds the magnitude of the curvature from above (it sums max(|F''|, Gauss-Newton) over pairs).
        fd_hess = finite_differences(lambda x: frank_kernel(x, y, offsets)[0], s, i)[i]
        assert hess[i] >= abs(fd_hess) - 1e-6
    assert np.abs(grad).max() > 1e-2


def pair_weight(delta):
    """max(|d²F/dΔ²|, p(1 - p)/4) for F = 1 - sqrt(p), p = σ(Δ), the second derivative by finite differences."""
    f = lambda d: fidelity(d, 0.0, 1.0, 0.0)  # noqa: E731
    second = (f(delta + 1e-3) - 2.0 * f(delta) + f(delta - 1e-3)) / 1e-6
    p = 1.0 / (1.0 + np.exp(-delta))
    return max(abs(second), 0.25 * p * (1.0 - p)), second


@pytest.mark.parametrize("delta", [-6.0, -2.0, -0.7, -0.5, 0.0, 0.4, 1.0, 3.0, 8.0])
def test_frank_weight_of_a_pair(delta):
    """A lone pair: λ is the derivative of its loss, w the larger of the curvature's magnitude and the Gauss-Newton
    weight; the exact second derivative wherever that is the larger and positive (well-ordered pairs)."""
    s = np.array([delta, 0.0])
    grad, hess = frank_kernel(s, np.array([1.0, 0.0]), np.array([0, 2]))
    slope = finite_differences(lambda x: fidelity(x[0], x[1], 1.0, 0.0), s, 0)
    np.testing.assert_allclose(grad, [slope, -slope], rtol=1e-7, atol=1e-10)
    expected, second = pair_weight(delta)
    np.testing.assert_allclose(hess, [expected, expected], rtol=1e-5, atol=1e-10)
    if delta >= 1.0:
        assert hess[0] == pytest.approx(second, rel=1e-5)
    assert abs(grad[0] / hess[0]) <= 4.61  # a pair's Newton step stays bounded, even at the inflection p = 1/3


def test_frank_is_symmetric_in_the_order_of_rows_and_ignores_equal_labels():
    s = np.array([0.2, 1.5, -0.3])
    y = np.array([2.0, 0.0, 2.0])
    grad, hess = frank_kernel(s, y, np.array([0, 3]))
    flipped_g, flipped_h = frank_kernel(s[::-1].copy(), y[::-1].copy(), np.array([0, 3]))
    np.testing.assert_allclose(flipped_g[::-1], grad, rtol=1e-15)
    np.testing.assert_allclose(flipped_h[::-1], hess, rtol=1e-15)
    assert abs(grad.sum()) < 1e-15
    assert grad[0] < 0 and grad[2] < 0 < grad[1]


def test_frank_is_stable_for_extreme_scores():
    s = np.array([800.0, -800.0, 0.0, 3.0])
    y = np.array([0.0, 4.0, 1.0, 1.0])
    grad, hess = frank_kernel(s, y, np.array([0, 4]))
    assert np.all(np.isfinite(grad)) and np.all(np.isfinite(hess)) and np.all(hess >= 0)


def test_frank_is_exact_for_scores_far_below_the_top():
    """Each pair's p from exp(s - max s) per document, or from the score gap where both underflowed to 0."""
    s = np.array([0.0, -1000.0, -1002.0, -999.5, 2.0])
    y = np.array([1.0, 2.0, 0.0, 1.0, 0.0])
    grad, hess = frank_kernel(s, y, np.array([0, 5]))
    expected_grad, expected_hess = np.zeros(5), np.zeros(5)
    for high in range(5):
        for low in range(5):
            if y[high] > y[low]:
                delta = s[high] - s[low]
                p, q = special.expit(delta), special.expit(-delta)
                lam = 0.5 * np.sqrt(p) * q
                expected_grad[[high, low]] += [-lam, lam]
                expected_hess[[high, low]] += max(abs(0.25 * np.sqrt(p) * q * (3 * p - 1)), 0.25 * p * q)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(hess, expected_hess, rtol=1e-12, atol=1e-300)
    assert hess[1] > 0 and hess[2] > 0  # the pair (1, 2) of the two underflowed documents counts


# ---------------------------------------------------------------- the contract, for both


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", range(5))
def test_weights_are_finite_and_non_negative(name, seed):
    """Random queries with ties in scores (also across whole queries) and in labels."""
    rng = np.random.default_rng(200 + seed)
    sizes = rng.integers(1, 30, size=15)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    n = int(offsets[-1])
    y = rng.integers(0, 5, n).astype(float)
    s = np.round(rng.normal(scale=2.0, size=n), 1)
    s[rng.random(n) < 0.3] = 0.25
    s[offsets[2]:offsets[3]] = -1.0  # a query whose scores are all tied
    grad, hess = kernel(name, s, y, offsets, rng.random(n))
    assert np.all(np.isfinite(grad)) and np.all(np.isfinite(hess))
    assert np.all(hess >= 0.0)
    for q in per_query(offsets):
        assert abs(grad[q].sum()) <= 1e-12 * max(1.0, np.abs(grad[q]).sum())


@pytest.mark.parametrize("name", NAMES)
def test_degenerate_queries_give_zeros(name):
    s = np.array([0.3, -1.0, 0.5, 2.0, -0.4])
    y = np.array([2.0, 1.0, 1.0, 1.0, 0.0])
    offsets = np.array([0, 1, 4, 5], dtype=np.int64)  # one document, all labels equal, one document
    grad, hess = kernel(name, s, y, offsets, np.full(5, 0.5), grad=np.full(5, 9.0), hess=np.full(5, 9.0))
    np.testing.assert_array_equal(grad, 0.0)
    np.testing.assert_array_equal(hess, 0.0)


@pytest.mark.parametrize("name", NAMES)
def test_rows_of_other_queries_are_untouched(name):
    s, y, offsets = queries(7)
    n = len(s)
    gamma = np.random.default_rng(7).random(n)
    sentinel_g, sentinel_h = np.full(n, 7.0), np.full(n, -3.0)
    asked = np.array([4, 1, 5], dtype=np.int64)
    grad, hess = kernel(name, s, y, offsets, gamma, query_indices=asked, grad=sentinel_g, hess=sentinel_h)
    full_g, full_h = kernel(name, s, y, offsets, gamma)
    for q, rows in enumerate(per_query(offsets)):
        if q in asked:
            np.testing.assert_array_equal(grad[rows], full_g[rows])
            np.testing.assert_array_equal(hess[rows], full_h[rows])
        else:
            np.testing.assert_array_equal(grad[rows], sentinel_g[rows])
            np.testing.assert_array_equal(hess[rows], sentinel_h[rows])


@pytest.mark.parametrize("name", NAMES)
def test_sample_weight_scales_rows(name):
    s, y, offsets = queries(8)
    n = len(s)
    gamma = np.random.default_rng(8).random(n)
    sw = np.random.default_rng(9).uniform(0.0, 4.0, n)
    g1, h1 = kernel(name, s, y, offsets, gamma)
    g2, h2 = kernel(name, s, y, offsets, gamma, sample_weight=sw)
    np.testing.assert_allclose(g2, g1 * sw, rtol=1e-14, atol=0)
    np.testing.assert_allclose(h2, h1 * sw, rtol=1e-14, atol=0)
    g3, h3 = kernel(name, s, y, offsets, gamma, sample_weight=np.ones(n))
    np.testing.assert_array_equal(g3, g1)
    np.testing.assert_array_equal(h3, h1)


class _RecordingRandomState:
    """Stands in for the fit's random state the way the distributed trainer does: only ``random_sample``."""

    def __init__(self):
        self.calls = []
        self._rng = np.random.RandomState(0)

    def random_sample(self, size):
        self.calls.append(size)
        return self._rng.random_sample(size)


@pytest.mark.parametrize("name", NAMES)
def test_objective_classes_are_registered_and_draw_one_number_per_row(name):
    cls = OBJECTIVES[name]
    assert cls.name == name and not cls.supports_position
    s, y, offsets = queries(3)
    queries_ = TrainingQueries(labels=y, gains=2.0**y - 1.0, offsets=offsets, sample_weight=np.zeros(0),
                               position=np.zeros(0, dtype=np.int64))
    rng = _RecordingRandomState()
    objective = make_objective(name, queries_, LambdaMARTRanker().get_params(), rng)
    grad, hess = np.zeros(len(s)), np.zeros(len(s))
    objective.gradients(s, np.arange(len(offsets) - 1, dtype=np.int64), grad, hess)
    assert rng.calls == ([len(s)] if name == "xendcg" else [])
    if name == "xendcg":
        rng2 = np.random.RandomState(0)
        expected, _ = xendcg_kernel(s, 2.0**y - 1.0, offsets, rng2.random_sample(len(s)))
    else:
        expected, _ = frank_kernel(s, y, offsets)
    np.testing.assert_array_equal(grad, expected)


# ---------------------------------------------------------------- through the estimator


@pytest.fixture(scope="module")
def data():
    """make_ranking_data(60, random_state=0): 45 queries to train on, 15 held out (replaces conftest's data)."""
    X, y, qid = make_ranking_data(60, random_state=0)
    train = qid < 45
    return X[train], y[train], qid[train], X[~train], y[~train], qid[~train]


@pytest.fixture(scope="module")
def lambdarank_ndcg(data):
    X, y, qid, X_test, y_test, qid_test = data
    ranker = LambdaMARTRanker(objective="lambdarank", n_estimators=30, random_state=0).fit(X, y, qid)
    return ndcg(y_test, ranker.predict(X_test), qid_test, k=10)


@pytest.mark.parametrize("name", NAMES)
def test_learns_to_rank_like_lambdarank(data, lambdarank_ndcg, name):
    X, y, qid, X_test, y_test, qid_test = data
    ranker = LambdaMARTRanker(objective=name, n_estimators=30, random_state=0).fit(X, y, qid)
    score = ndcg(y_test, ranker.predict(X_test), qid_test, k=10)
    random = ndcg(y_test, np.random.default_rng(1).normal(size=y_test.size), qid_test, k=10)
    # About 0.50 and 0.55 against lambdarank's 0.51 and random's 0.14 (n_estimators=30).
    assert score > random + 0.2
    assert score > lambdarank_ndcg - 0.05
