"""The objective family: each kernel's gradient is the derivative of its loss, second-order weights are >= 0."""

import numpy as np
import pytest

from lambdamart import LambdaMARTRanker
from lambdamart.metrics import mean_average_precision, ndcg
from lambdamart._objectives.lambdarank import discount_table, lambdarank_gradients
from lambdamart._objectives.listwise import listmle_gradients, listnet_gradients
from lambdamart._objectives.pairwise import ranknet_gradients
from lambdamart._objectives.pointwise import pointwise_gradients

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


@pytest.fixture(scope="module")
def data():
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


def test_listmle_tie_breaking_follows_random_state(data):
    X, y, qid = data
    a = LambdaMARTRanker("listmle", n_estimators=5, random_state=3).fit(X, y, qid).predict(X)
    b = LambdaMARTRanker("listmle", n_estimators=5, random_state=3).fit(X, y, qid).predict(X)
    np.testing.assert_array_equal(a, b)


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
    [(np.zeros(20), ">= 1"), (np.full(20, 1.5), "whole"), (np.ones(19), "one displayed rank per row")],
)
def test_bad_positions(position, match):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=match):
        LambdaMARTRanker(n_estimators=2).fit(X, np.arange(20) % 3, np.repeat([0, 1], 10), position=position)


def test_position_needs_a_lambdarank_objective():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="lambdarank"):
        LambdaMARTRanker("listnet", n_estimators=2).fit(X, np.arange(20) % 3, position=np.arange(1, 21))
