"""LambdaLoss's NDCG-Loss2++ (Wang et al., CIKM 2018): LambdaRank's pairs with a weight that makes it a real loss.

Per query, with r the current rank of a document by score (1-based, ties in row order as ``_sort.descending_order``
breaks them), D(r) = log2(1 + r) and G = gain / IDCG@T (T = ``truncation_level``, IDCG as LambdaRank's), every pair
h, o with l_h > l_o and at least one of the two in the top T adds

    L_ho = -(ρ_ho + μ·δ_ho) · |G_h - G_o| · log2(σ(sigma·(s_h - s_o))),
    ρ_ho = |1/D(r_h) - 1/D(r_o)|,    δ_ho = 1/D(|r_h - r_o|) - 1/D(|r_h - r_o| + 1),

σ the logistic function. ρ and δ are constant between score ties, so, with them held fixed as LambdaRank holds its
|ΔNDCG|, λ is the exact gradient of the loss and w its exact Hessian diagonal (also the Gauss-Newton one):
λ_h -= c·sigma·p, λ_o += c·sigma·p, w_h, w_o += c·sigma²·p(1-p), with c the pair's weight / ln 2 and
p = 1 - σ(sigma·(s_h - s_o)). No pair or query normalisation: λ stays the gradient of the loss.
"""

import numpy as np
from numba import prange

from .._jit import inner_kernel, kernel
from .._sort import descending_order
from .base import Objective, add_pair, apply_sample_weight
from .lambdarank import discount_table, inverse_ideal_dcg

#: Weight of δ (NDCG-Loss2's term) against ρ (LambdaRank's), read from ``params["lambdaloss_mu"]``.
DEFAULT_MU = 5.0

_INV_LN2 = 1.0 / np.log(2.0)


@inner_kernel(error_model="numpy")
def _query_lambdaloss(scores, labels, gains, discounts, inv_idcg, truncation_level, sigma, mu, grad, hess):
    """λ and w of one query (views of its rows) into ``grad`` and ``hess``; ``discounts[r - 1]`` is 1/D(r)."""
    n = scores.shape[0]
    grad[:] = 0.0
    hess[:] = 0.0
    if n < 2 or inv_idcg == 0.0:
        return
    ranked = descending_order(scores)
    # Pairs (a, b) of 0-based positions, a < b and a in the top T: O(n·T) per query.
    for a in range(min(n - 1, truncation_level)):
        for b in range(a + 1, n):
            i, j = ranked[a], ranked[b]
            if labels[i] == labels[j]:
                continue
            high, low = (i, j) if labels[i] > labels[j] else (j, i)
            # Both differences are >= 0: the discounts fall with the rank and a < b.
            rho = discounts[a] - discounts[b]
            delta = discounts[b - a - 1] - discounts[b - a]
            c = (rho + mu * delta) * abs(gains[high] - gains[low]) * inv_idcg * _INV_LN2
            # exp overflows to inf for a pair far in the right order: p = 0, as its limit.
            p = 1.0 / (1.0 + np.exp(sigma * (scores[high] - scores[low])))
            lam = c * sigma * p
            w = c * sigma * sigma * p * (1.0 - p)
            add_pair(grad, hess, high, low, lam, w)


@kernel(parallel=True)
def lambdaloss_gradients(scores, labels, gains, offsets, query_indices, discounts, inv_idcg, truncation_level, sigma,
                         mu, sample_weight, grad, hess):
    """NDCG-Loss2++ λ and w for the queries in ``query_indices`` (``inv_idcg``: 1/IDCG@truncation_level per query,
    0 for none; ``discounts``: 1/log2(r + 1) for r = 1..max query size)."""
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        _query_lambdaloss(scores[start:stop], labels[start:stop], gains[start:stop], discounts,
                          inv_idcg[query_indices[k]], truncation_level, sigma, mu, grad[start:stop],
                          hess[start:stop])
        apply_sample_weight(sample_weight, start, stop, grad, hess)


class LambdaLoss(Objective):
    """LambdaLoss's NDCG-Loss2++: a pairwise logistic loss weighted by LambdaRank's and NDCG-Loss2's rank terms.

    For the documents h, o of a query with labels l_h > l_o, current ranks r_h, r_o by score (1-based, ties in row
    order), D(r) = log2(1 + r) and G = gain / IDCG@``truncation_level``, the loss is

        Σ -(ρ_ho + μ·δ_ho) · |G_h - G_o| · log2(σ(sigma·(s_h - s_o))),

    with ρ_ho = |1/D(r_h) - 1/D(r_o)| (LambdaRank's weight), δ_ho = |1/D(|r_h - r_o|) - 1/D(|r_h - r_o| + 1)|
    (NDCG-Loss2's, the paper's bound on NDCG) and σ the logistic function. As in LambdaRank, only pairs with at
    least one document among the top ``truncation_level`` count (O(n·truncation_level) per query) and ρ, δ are
    held fixed in the derivative: they are piecewise constant in the scores, so λ is the exact gradient wherever
    no two scores swap. w is the Hessian diagonal Σ c·sigma²·p(1 - p) over the document's pairs, p = 1 -
    σ(sigma·(s_h - s_o)), c the pair's weight / ln 2 (exact here, and the Gauss-Newton diagonal).

    μ is ``params["lambdaloss_mu"]`` (default 5.0); ``sigma`` is the estimator's, 1 by default.

    Parameters
    ----------
    queries : TrainingQueries
        The training rows, query by query.
    params : dict
        The estimator's parameters; reads ``truncation_level``, ``sigma`` and the optional ``lambdaloss_mu``.
    rng : numpy.random.RandomState
        Unused: the loss draws nothing.

    References
    ----------
    X. Wang, C. Li, N. Golbandi, M. Bendersky, M. Najork. The LambdaLoss Framework for Ranking Metric
    Optimization. CIKM 2018, 1313-1322 (NDCG-Loss2++).
    """

    name = "lambdaloss"

    def __init__(self, queries, params, rng):
        super().__init__(queries, params, rng)
        self.mu = float(params.get("lambdaloss_mu", DEFAULT_MU))
        if not self.mu >= 0.0:
            raise ValueError(f"lambdaloss_mu must be >= 0 (a negative weight can make w negative), got {self.mu}.")
        self._discounts = discount_table(int(np.diff(queries.offsets).max(initial=1)))
        self._inv_idcg = inverse_ideal_dcg(queries.gains, queries.offsets, self._discounts,
                                           params["truncation_level"])

    def gradients(self, scores, query_indices, grad, hess):
        q, p = self.queries, self.params
        lambdaloss_gradients(scores, q.labels, q.gains, q.offsets, query_indices, self._discounts, self._inv_idcg,
                             p["truncation_level"], float(p["sigma"]), self.mu, q.sample_weight, grad, hess)
