"""The LambdaLoss (NDCG-Loss2++) and YetiRank objectives (lambdamart._objectives.lambdaloss, .yetirank).

Each kernel's λ is checked against finite differences of its loss, written here in plain Python from the formulas
(module docstrings) and not from the kernels: LambdaLoss at scores without near-ties, where the ranks (and so the
weights ρ, δ) are locally constant; YetiRank with its uniform draws held fixed, where the neighbour pairs of the
perturbed rankings are locally constant. The Hessian diagonal w is checked against differences of the kernel's own
λ. Then through the objective classes: w >= 0 and finite, degenerate queries, untouched rows, sample weights,
determinism, and through the estimator: both learn to rank about as well as LambdaRank.
"""

import math

import numpy as np
import pytest

from lambdamart import LambdaMARTRanker
from lambdamart._objectives import OBJECTIVES, TrainingQueries, make_objective
from lambdamart._objectives.lambdaloss import LambdaLoss, lambdaloss_gradients
from lambdamart._objectives.lambdarank import discount_table, inverse_ideal_dcg, lambdarank_gradients
from lambdamart._objectives.yetirank import YetiRank, yetirank_gradients
from lambdamart.datasets import make_ranking_data
from lambdamart.metrics import ndcg

NAMES = ["lambdaloss", "yetirank"]


def per_query(offsets):
    return [slice(offsets[q], offsets[q + 1]) for q in range(len(offsets) - 1)]


def separated_queries(seed, sizes=(1, 2, 5, 9, 6, 14)):
    """Queries whose scores are at least 0.05 apart (no near-ties) with ties in labels and one all-equal query."""
    rng = np.random.default_rng(seed)
    scores, labels = [], []
    for n in sizes:
        scores.append(rng.permutation(n) * 0.4 + rng.uniform(-0.15, 0.15, n))
        labels.append(rng.integers(0, 4, n).astype(float))
    labels[4][:] = 2.0  # all equal
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return np.concatenate(scores), np.concatenate(labels), offsets


def tied_queries(seed):
    """Random sizes, scores with many ties (and a few huge ones), labels with ties."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 30, 10)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    n = int(offsets[-1])
    scores = np.round(rng.normal(size=n), 0) / 2
    scores[rng.random(n) < 0.05] = 800.0
    scores[rng.random(n) < 0.05] = -800.0
    labels = rng.integers(0, 5, n).astype(np.float64)
    return scores, labels, offsets


def training_queries(labels, offsets, sample_weight=None):
    return TrainingQueries(labels=labels, gains=2.0 ** labels - 1.0, offsets=np.asarray(offsets, dtype=np.int64),
                           sample_weight=np.zeros(0) if sample_weight is None else sample_weight,
                           position=np.zeros(0, dtype=np.int64))


def params(**extra):
    return LambdaMARTRanker().get_params() | extra


def finite_difference_check(loss, kernel, s, eps=1e-6, atol=1e-6):
    """λ against central differences of ``loss``; w against central differences of the kernel's own λ."""
    grad, hess = kernel(s)
    for i in range(len(s)):
        up, down = s.copy(), s.copy()
        up[i] += eps
        down[i] -= eps
        assert grad[i] == pytest.approx((loss(up) - loss(down)) / (2 * eps), abs=atol)
        assert hess[i] == pytest.approx((kernel(up)[0][i] - kernel(down)[0][i]) / (2 * eps), abs=atol)
    assert np.all(hess >= 0.0)
    return grad, hess


# ---------------------------------------------------------------- LambdaLoss


def lambdaloss_loss(s, y, offsets, truncation_level, sigma, mu):
    """Σ over pairs h, o (l_h > l_o, one of them in the top T) of -(ρ + μδ)|G_h - G_o| log2 σ(sigma(s_h - s_o))."""
    total = 0.0
    for q in per_query(offsets):
        sq, yq = list(s[q]), list(y[q])
        n = len(sq)
        ideal = sorted((2.0**label - 1.0 for label in yq), reverse=True)
        idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal[:truncation_level]))
        if n < 2 or idcg == 0.0:
            continue
        ranked = sorted(range(n), key=lambda i: -sq[i])  # stable: ties in row order
        rank = {doc: r + 1 for r, doc in enumerate(ranked)}
        inv_d = lambda r: 1.0 / math.log2(1.0 + r)  # noqa: E731
        for h in range(n):
            for o in range(n):
                if yq[h] <= yq[o] or min(rank[h], rank[o]) > truncation_level:
                    continue
                rho = abs(inv_d(rank[h]) - inv_d(rank[o]))
                d = abs(rank[h] - rank[o])
                delta = abs(inv_d(d) - inv_d(d + 1))
                gain_diff = abs(2.0 ** yq[h] - 2.0 ** yq[o]) / idcg
                log_sigmoid = -math.log1p(math.exp(-sigma * (sq[h] - sq[o])))
                total -= (rho + mu * delta) * gain_diff * log_sigmoid / math.log(2.0)
    return total


def lambdaloss_kernel(s, y, offsets, truncation_level, sigma, mu, sample_weight=None):
    gains = 2.0**y - 1.0
    discounts = discount_table(int(np.diff(offsets).max()))
    inv_idcg = inverse_ideal_dcg(gains, offsets, discounts, truncation_level)
    grad, hess = np.zeros(len(s)), np.zeros(len(s))
    sw = np.zeros(0) if sample_weight is None else sample_weight
    lambdaloss_gradients(s, y, gains, offsets, np.arange(len(offsets) - 1, dtype=np.int64), discounts, inv_idcg,
                         truncation_level, sigma, mu, sw, grad, hess)
    return grad, hess


@pytest.mark.parametrize("truncation_level", [1, 3, 1000])
@pytest.mark.parametrize("sigma, mu", [(1.0, 5.0), (1.0, 0.0), (0.6, 10.0), (2.0, 1.5)])
@pytest.mark.parametrize("seed", range(3))
def test_lambdaloss_gradient_and_hessian_match_finite_differences(seed, sigma, mu, truncation_level):
    s, y, offsets = separated_queries(seed)
    grad, _ = finite_difference_check(lambda v: lambdaloss_loss(v, y, offsets, truncation_level, sigma, mu),
                                      lambda v: lambdaloss_kernel(v, y, offsets, truncation_level, sigma, mu), s)
    assert np.abs(grad).max() > 1e-3  # not vacuous


def test_lambdaloss_with_mu_zero_is_unnormalised_lambdarank_in_bits_of_log2():
    """μ = 0 leaves ρ·|ΔG|, LambdaRank's |ΔNDCG|: λ and w are LambdaRank's (no normalisations) divided by ln 2."""
    s, y, offsets = tied_queries(4)
    truncation_level, sigma = 5, 1.3
    grad, hess = lambdaloss_kernel(s, y, offsets, truncation_level, sigma, 0.0)
    gains = 2.0**y - 1.0
    discounts = discount_table(int(np.diff(offsets).max()))
    inv_idcg = inverse_ideal_dcg(gains, offsets, discounts, truncation_level)
    ref_grad, ref_hess = np.zeros(len(s)), np.zeros(len(s))
    lambdarank_gradients(s, gains, y, offsets, np.arange(len(offsets) - 1, dtype=np.int64), discounts, inv_idcg,
                         truncation_level, sigma, False, False, False, np.zeros(0, dtype=np.int64), np.ones((2, 0)),
                         np.zeros(0), ref_grad, ref_hess, np.ones((2, 0)))
    np.testing.assert_allclose(grad * math.log(2.0), ref_grad, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hess * math.log(2.0), ref_hess, rtol=1e-10, atol=1e-12)
    assert np.abs(grad).max() > 1e-3


def test_lambdaloss_delta_term_reaches_pairs_far_apart():
    """δ depends on the rank distance only: a relevant document at the bottom of a long list still gets a push of
    at least μ·δ|ΔG|·sigma·p / ln 2 from its pair with the top document."""
    n = 40
    s = np.linspace(1.0, 0.0, n)
    y = np.zeros(n)
    y[-1] = 1.0
    offsets = np.array([0, n], dtype=np.int64)
    with_delta, _ = lambdaloss_kernel(s, y, offsets, 1000, 1.0, 5.0)
    without, _ = lambdaloss_kernel(s, y, offsets, 1000, 1.0, 0.0)
    assert with_delta[-1] < without[-1] < 0.0
    # Truncation 1 keeps only the pairs with the top document.
    truncated, _ = lambdaloss_kernel(s, y, offsets, 1, 1.0, 5.0)
    assert np.all(truncated[1:-1] == 0.0) and truncated[0] > 0.0 > truncated[-1]


# ---------------------------------------------------------------- YetiRank


def yetirank_loss(s, y, offsets, uniforms, decay):
    """Σ over permutations m and neighbours k, k+1 of the ranking by s + logit(u[:, m]) with different labels of
    decay^k (l_h - l_o) / N · log(1 + exp(-(s_h - s_o)))."""
    n_permutations = uniforms.shape[1]
    total = 0.0
    for q in per_query(offsets):
        sq, yq, uq = s[q], y[q], uniforms[q]
        for m in range(n_permutations):
            noisy = sq + np.log(uq[:, m] / (1.0 - uq[:, m]))
            order = np.argsort(-noisy, kind="stable")
            for k in range(len(order) - 1):
                a, b = order[k], order[k + 1]
                if yq[a] == yq[b]:
                    continue
                h, o = (a, b) if yq[a] > yq[b] else (b, a)
                total += decay**k * (yq[h] - yq[o]) / n_permutations * np.log1p(np.exp(-(sq[h] - sq[o])))
    return total


def yetirank_kernel(s, y, offsets, uniforms, decay, sample_weight=None, query_indices=None, grad=None, hess=None):
    grad = np.zeros(len(s)) if grad is None else grad.copy()
    hess = np.zeros(len(s)) if hess is None else hess.copy()
    if query_indices is None:
        query_indices = np.arange(len(offsets) - 1, dtype=np.int64)
    sw = np.zeros(0) if sample_weight is None else sample_weight
    yetirank_gradients(s, y, offsets, query_indices, uniforms, decay, sw, grad, hess)
    return grad, hess


@pytest.mark.parametrize("n_permutations, decay", [(1, 0.85), (10, 0.85), (4, 0.5), (7, 1.0)])
@pytest.mark.parametrize("seed", range(4))
def test_yetirank_gradient_and_hessian_match_finite_differences(seed, n_permutations, decay):
    s, y, offsets = separated_queries(seed)
    uniforms = np.random.RandomState(seed).random_sample((len(s), n_permutations))
    grad, _ = finite_difference_check(lambda v: yetirank_loss(v, y, offsets, uniforms, decay),
                                      lambda v: yetirank_kernel(v, y, offsets, uniforms, decay), s)
    assert np.abs(grad).max() > 1e-3


def test_yetirank_weights_neighbours_by_position_and_label_difference():
    """Without noise (u = 1/2) and one permutation: the pairs are the neighbours of the ranking by score, weighted
    decay^k · (l_h - l_o)."""
    s = np.array([3.0, 2.0, 1.0, 0.0])
    y = np.array([0.0, 2.0, 1.0, 1.0])  # neighbours: (0,1) at k=0, (1,2) at k=1, (2,3) equal labels
    offsets = np.array([0, 4], dtype=np.int64)
    grad, hess = yetirank_kernel(s, y, offsets, np.full((4, 1), 0.5), 0.85)
    p01 = 1.0 / (1.0 + math.exp(2.0 - 3.0))  # pair h=1, o=0
    p12 = 1.0 / (1.0 + math.exp(2.0 - 1.0))  # pair h=1, o=2
    np.testing.assert_allclose(grad, [2.0 * p01, -2.0 * p01 - 0.85 * p12, 0.85 * p12, 0.0], rtol=1e-14)
    w01, w12 = 2.0 * p01 * (1 - p01), 0.85 * p12 * (1 - p12)
    np.testing.assert_allclose(hess, [w01, w01 + w12, w12, 0.0], rtol=1e-14)


def test_yetirank_perturbs_scores_by_the_logit_of_the_draws():
    """u = 0.99 lifts a document by logit(0.99) = 4.6 over two others with u = 1/2 (no noise): the bottom document
    goes to the top of the perturbed ranking, and the neighbour pairs follow that order."""
    s = np.array([2.0, 1.0, 0.0])
    y = np.array([2.0, 1.0, 0.0])
    offsets = np.array([0, 3], dtype=np.int64)
    grad, _ = yetirank_kernel(s, y, offsets, np.array([[0.5], [0.5], [0.99]]), 0.85)
    # Perturbed order 2, 0, 1: pairs (h=0, o=2) at k=0 with weight 2 and (h=0, o=1) at k=1 with weight 0.85.
    p02 = 1.0 / (1.0 + math.exp(2.0))
    p01 = 1.0 / (1.0 + math.exp(1.0))
    np.testing.assert_allclose(grad, [-2.0 * p02 - 0.85 * p01, 0.85 * p01, 2.0 * p02], rtol=1e-14)


# ---------------------------------------------------------------- through the objective classes


@pytest.mark.parametrize("name", NAMES)
def test_registered(name):
    assert OBJECTIVES[name] is {"lambdaloss": LambdaLoss, "yetirank": YetiRank}[name]
    assert not OBJECTIVES[name].supports_position


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", range(4))
def test_weights_nonnegative_and_finite_with_ties(name, seed):
    s, y, offsets = tied_queries(seed)
    objective = make_objective(name, training_queries(y, offsets), params(), np.random.RandomState(seed))
    grad, hess = np.full(len(s), 7.0), np.full(len(s), 7.0)
    objective.gradients(s, np.arange(len(offsets) - 1, dtype=np.int64), grad, hess)
    assert np.all(np.isfinite(grad)) and np.all(np.isfinite(hess)) and np.all(hess >= 0.0)
    for q in per_query(offsets):  # pairwise: every push up has its push down
        assert abs(grad[q].sum()) <= 1e-12 * max(1.0, np.abs(grad[q]).sum())
    assert np.abs(grad).max() > 1e-3


@pytest.mark.parametrize("name", NAMES)
def test_degenerate_queries_are_zero(name):
    """One document, all labels equal, no relevant document: λ = w = 0, even over stale buffers."""
    s = np.array([0.3, 0.1, 0.5, 0.9, 0.2, 0.0, 0.4, 0.8])
    y = np.array([3.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    offsets = np.array([0, 1, 4, 8], dtype=np.int64)
    objective = make_objective(name, training_queries(y, offsets), params(), np.random.RandomState(0))
    grad, hess = np.full(8, 7.0), np.full(8, 7.0)
    objective.gradients(s, np.arange(3, dtype=np.int64), grad, hess)
    assert np.all(grad == 0.0) and np.all(hess == 0.0)


@pytest.mark.parametrize("name", NAMES)
def test_rows_of_queries_not_asked_for_are_untouched(name):
    s, y, offsets = tied_queries(7)
    objective = make_objective(name, training_queries(y, offsets), params(), np.random.RandomState(0))
    asked = np.array([1, 4, 5, 8], dtype=np.int64)
    grad, hess = np.full(len(s), 7.0), np.full(len(s), 7.0)
    objective.gradients(s, asked, grad, hess)
    others = np.concatenate([np.arange(offsets[q], offsets[q + 1]) for q in range(len(offsets) - 1)
                             if q not in asked])
    assert np.all(grad[others] == 7.0) and np.all(hess[others] == 7.0)
    # The queries asked for get what they get when all queries are asked for (same draws: same seed).
    full = make_objective(name, training_queries(y, offsets), params(), np.random.RandomState(0))
    all_grad, all_hess = np.zeros(len(s)), np.zeros(len(s))
    full.gradients(s, np.arange(len(offsets) - 1, dtype=np.int64), all_grad, all_hess)
    mine = np.setdiff1d(np.arange(len(s)), others)
    np.testing.assert_array_equal(grad[mine], all_grad[mine])
    np.testing.assert_array_equal(hess[mine], all_hess[mine])


@pytest.mark.parametrize("name", NAMES)
def test_sample_weight_scales_lambda_and_w(name):
    s, y, offsets = tied_queries(2)
    sw = np.random.default_rng(3).uniform(0.0, 3.0, len(s))
    result = []
    for weights in (None, sw):
        objective = make_objective(name, training_queries(y, offsets, weights), params(), np.random.RandomState(5))
        grad, hess = np.zeros(len(s)), np.zeros(len(s))
        objective.gradients(s, np.arange(len(offsets) - 1, dtype=np.int64), grad, hess)
        result.append((grad, hess))
    (grad, hess), (w_grad, w_hess) = result
    np.testing.assert_array_equal(w_grad, grad * sw)
    np.testing.assert_array_equal(w_hess, hess * sw)


@pytest.mark.parametrize("name", NAMES)
def test_same_random_state_gives_the_same_lambdas(name):
    s, y, offsets = tied_queries(9)
    queries = np.arange(len(offsets) - 1, dtype=np.int64)

    def run(seed, rounds=2):
        objective = make_objective(name, training_queries(y, offsets), params(), np.random.RandomState(seed))
        out = []
        for _ in range(rounds):
            grad, hess = np.zeros(len(s)), np.zeros(len(s))
            objective.gradients(s, queries, grad, hess)
            out.append(grad)
        return out

    first, second = run(0), run(0)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    if name == "yetirank":  # fresh draws every round and per seed
        assert not np.array_equal(first[0], first[1])
        assert not np.array_equal(run(1)[0], first[0])
    else:
        np.testing.assert_array_equal(first[0], first[1])


def test_yetirank_draws_one_uniform_per_row_and_permutation():
    """The only draw is ``rng.random_sample((n_rows, N))`` (what the distributed trainer's stand-in supports)."""

    class Recorder:
        def __init__(self):
            self.calls = []
            self.rng = np.random.RandomState(0)

        def random_sample(self, size):
            self.calls.append(size)
            return self.rng.random_sample(size)

    s, y, offsets = tied_queries(1)
    recorder = Recorder()
    objective = make_objective("yetirank", training_queries(y, offsets), params(yetirank_permutations=3), recorder)
    grad, hess = np.zeros(len(s)), np.zeros(len(s))
    objective.gradients(s, np.array([0, 2], dtype=np.int64), grad, hess)
    assert recorder.calls == [(len(s), 3)]
    # And the kernel with those draws gives the same answer.
    uniforms = np.random.RandomState(0).random_sample((len(s), 3))
    ref_grad, ref_hess = yetirank_kernel(s, y, offsets, uniforms, 0.85, query_indices=np.array([0, 2]))
    np.testing.assert_array_equal(grad, ref_grad)
    np.testing.assert_array_equal(hess, ref_hess)


@pytest.mark.parametrize("name, bad", [("lambdaloss", dict(lambdaloss_mu=-1.0)),
                                       ("yetirank", dict(yetirank_permutations=0)),
                                       ("yetirank", dict(yetirank_decay=-0.5))])
def test_bad_objective_settings(name, bad):
    y = np.array([1.0, 0.0])
    with pytest.raises(ValueError, match=next(iter(bad))):
        make_objective(name, training_queries(y, [0, 2]), params(**bad), np.random.RandomState(0))


def test_objective_settings_are_read_from_params():
    s, y, offsets = separated_queries(0)
    q = np.arange(len(offsets) - 1, dtype=np.int64)
    objective = make_objective("lambdaloss", training_queries(y, offsets), params(lambdaloss_mu=2.5, sigma=0.7,
                                                                                   truncation_level=4), None)
    grad, hess = np.zeros(len(s)), np.zeros(len(s))
    objective.gradients(s, q, grad, hess)
    ref = lambdaloss_kernel(s, y, offsets, 4, 0.7, 2.5)
    np.testing.assert_array_equal(grad, ref[0])
    objective = make_objective("yetirank", training_queries(y, offsets),
                               params(yetirank_permutations=3, yetirank_decay=0.5), np.random.RandomState(4))
    objective.gradients(s, q, grad, hess)
    uniforms = np.random.RandomState(4).random_sample((len(s), 3))
    np.testing.assert_array_equal(grad, yetirank_kernel(s, y, offsets, uniforms, 0.5)[0])


# ---------------------------------------------------------------- through the estimator


@pytest.fixture(scope="module")
def mslr_like():
    """make_ranking_data(60): the first 45 queries to train on, the last 15 held out."""
    X, y, qid = make_ranking_data(60, random_state=0)
    return X, y, qid, qid < 45


@pytest.fixture(scope="module")
def lambdarank_ndcg(mslr_like):
    X, y, qid, train = mslr_like
    model = LambdaMARTRanker(objective="lambdarank", n_estimators=30, random_state=0)
    model.fit(X[train], y[train], qid[train])
    return ndcg(y[~train], model.predict(X[~train]), qid[~train], k=10)


@pytest.mark.parametrize("name", NAMES)
def test_learns_to_rank_about_as_well_as_lambdarank(mslr_like, lambdarank_ndcg, name):
    X, y, qid, train = mslr_like
    model = LambdaMARTRanker(objective=name, n_estimators=30, random_state=0).fit(X[train], y[train], qid[train])
    score = ndcg(y[~train], model.predict(X[~train]), qid[~train], k=10)
    random = ndcg(y[~train], np.random.default_rng(1).normal(size=(~train).sum()), qid[~train], k=10)
    assert score > random + 0.2
    assert score > lambdarank_ndcg - 0.05
