"""YetiRank (Gulin, Kuralenok, Pavlov, 2011; CatBoost's ``YetiRank``): a pairwise logistic loss over the pairs that
end up next to each other when the scores are shaken by random noise.

Every round, per query and for each of N permutations m: every document gets the perturbed score
s_i + log(u_im / (1 - u_im)), u_im uniform in [0, 1) (standard logistic noise: CatBoost multiplies exp(s_i) by
u / (1 - u)); the documents are sorted by it, highest first; and every two neighbours at 0-based positions k, k + 1
whose labels differ add decay^k · |l_h - l_o| / N to the weight W_ho of their pair (h the higher-labelled). The loss
is then Σ W_ho · log(1 + exp(-(s_h - s_o))) over the accumulated pairs: with the draws held fixed, the weights are
constant between ties of perturbed scores, so λ_h -= W·p, λ_o += W·p and w_h, w_o += W·p(1 - p),
p = 1 / (1 + exp(s_h - s_o)), are its exact gradient and Hessian diagonal. Since λ and w are linear in W, each
neighbour pair's share is added to them at once instead of being stored: O(N·n log n) time and O(n) memory per query.
"""

import numpy as np
from numba import prange

from .._jit import inner_kernel, kernel
from .._sort import descending_order
from .base import Objective, add_pair, apply_sample_weight

#: CatBoost's defaults: permutations per round, and the decay of a pair's weight with its position.
DEFAULT_PERMUTATIONS = 10
DEFAULT_DECAY = 0.85


@inner_kernel(error_model="numpy")
def _query_yetirank(scores, labels, uniforms, decay, grad, hess):
    """λ and w of one query (views of its rows) into ``grad`` and ``hess``; ``uniforms`` (n, N): its rows' draws."""
    n = scores.shape[0]
    grad[:] = 0.0
    hess[:] = 0.0
    if n < 2 or labels.min() == labels.max():
        return
    n_permutations = uniforms.shape[1]
    noisy = np.empty(n)
    for m in range(n_permutations):
        for i in range(n):
            # The logit of a uniform draw: standard logistic noise (u = 0 gives -inf, the bottom place).
            u = uniforms[i, m]
            noisy[i] = scores[i] + (np.log(u) - np.log1p(-u))
        order = descending_order(noisy)
        share = 1.0 / n_permutations  # decay^k / N for the pair at positions k, k + 1
        for k in range(n - 1):
            a, b = order[k], order[k + 1]
            if labels[a] != labels[b]:
                high, low = (a, b) if labels[a] > labels[b] else (b, a)
                weight = share * (labels[high] - labels[low])
                # exp overflows to inf for a pair far in the right order: p = 0, as its limit.
                p = 1.0 / (1.0 + np.exp(scores[high] - scores[low]))
                add_pair(grad, hess, high, low, weight * p, weight * p * (1.0 - p))
            share *= decay


@kernel(parallel=True)
def yetirank_gradients(scores, labels, offsets, query_indices, uniforms, decay, sample_weight, grad, hess):
    """YetiRank λ and w for the queries in ``query_indices``, from the uniform draws ``uniforms`` (n_samples, N),
    column m perturbing the scores of permutation m. With the draws fixed, λ is the gradient of the loss."""
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        _query_yetirank(scores[start:stop], labels[start:stop], uniforms[start:stop], decay, grad[start:stop],
                        hess[start:stop])
        apply_sample_weight(sample_weight, start, stop, grad, hess)


class YetiRank(Objective):
    """YetiRank: logistic loss over the pairs that neighbour each other in randomly perturbed rankings.

    Each round, for each of N = ``params["yetirank_permutations"]`` (default 10) permutations, the scores of a query
    are perturbed by standard logistic noise (the logit of a fresh uniform draw per row and permutation) and sorted;
    every two neighbours at 0-based positions k, k + 1 with labels l_h > l_o add
    decay^k · (l_h - l_o) / N (decay = ``params["yetirank_decay"]``, default 0.85) to the weight W_ho of their pair.
    The round's loss is

        Σ W_ho · log(1 + exp(-(s_h - s_o)))

    over the pairs so weighted, and λ, w are its gradient and Hessian diagonal Σ W·p(1 - p),
    p = 1 / (1 + exp(s_h - s_o)) (exact, as W is constant in the scores for fixed draws; also the Gauss-Newton
    diagonal). Queries with one document or with all labels equal get λ = w = 0.

    Parameters
    ----------
    queries : TrainingQueries
        The training rows, query by query.
    params : dict
        The estimator's parameters; reads the optional ``yetirank_permutations`` and ``yetirank_decay``.
    rng : numpy.random.RandomState
        Draws the uniforms, ``rng.random_sample((n_rows, N))`` every round.

    References
    ----------
    A. Gulin, I. Kuralenok, D. Pavlov. Winning the Transfer Learning Track of Yahoo!'s Learning to Rank Challenge
    with YetiRank. JMLR Workshop and Conference Proceedings 14 (2011), 63-76. The defaults (N, decay, the label
    difference and the logistic noise) are CatBoost's ``YetiRank``.
    """

    name = "yetirank"

    def __init__(self, queries, params, rng):
        super().__init__(queries, params, rng)
        self.n_permutations = int(params.get("yetirank_permutations", DEFAULT_PERMUTATIONS))
        self.decay = float(params.get("yetirank_decay", DEFAULT_DECAY))
        if self.n_permutations < 1:
            raise ValueError(f"yetirank_permutations must be >= 1, got {self.n_permutations}.")
        if not self.decay >= 0.0:
            raise ValueError(f"yetirank_decay must be >= 0, got {self.decay}.")

    def gradients(self, scores, query_indices, grad, hess):
        q = self.queries
        uniforms = self.rng.random_sample((scores.shape[0], self.n_permutations))
        yetirank_gradients(scores, q.labels, q.offsets, query_indices, uniforms, self.decay, q.sample_weight, grad,
                           hess)
