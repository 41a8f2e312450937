"""Listwise losses: ListNet's top-one cross entropy and ListMLE's Plackett-Luce likelihood."""

import numpy as np
from numba import prange

from .._jit import inner_kernel, kernel
from .base import Objective, apply_sample_weight


@inner_kernel
def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


@kernel(parallel=True)
def listnet_gradients(scores, gains, offsets, query_indices, sample_weight, grad, hess):
    """ListNet: cross entropy -Σ p·log q between the top-one probabilities p = softmax(gain) of the labels and
    q = softmax(scores). Gradient q - p, diagonal hessian q(1 - q)."""
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        p = _softmax(gains[start:stop])
        q = _softmax(scores[start:stop])
        for i in range(stop - start):
            grad[start + i] = q[i] - p[i]
            hess[start + i] = q[i] * (1.0 - q[i])
        apply_sample_weight(sample_weight, start, stop, grad, hess)


@kernel(parallel=True)
def listmle_gradients(scores, labels, offsets, query_indices, tie_break, sample_weight, grad, hess):
    """ListMLE: loss Σ_k [log Σ_{j≥k} exp(s_π(j)) - s_π(k)] for π the order of labels, highest first, with ties
    in labels ordered by ``tie_break`` (random numbers drawn per round). Queries whose labels are all equal have
    no order to learn and get zero λ and w.

    With Z_k the suffix sums of exp(s) and p_mk = exp(s_π(m)) / Z_k, document π(m) gets gradient Σ_{k≤m} p_mk - 1
    and diagonal hessian Σ_{k≤m} p_mk(1 - p_mk).
    """
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        n = stop - start
        if labels[start:stop].min() == labels[start:stop].max():
            # No order to learn (as for the pairwise objectives): a random tie-break per round would only make
            # the trees fit noise.
            grad[start:stop] = 0.0
            hess[start:stop] = 0.0
            continue
        # Order by label descending, then by tie_break: one sort on a combined key would lose precision.
        by_tie = np.argsort(tie_break[start:stop])
        order = by_tie[np.argsort(-labels[start:stop][by_tie], kind="mergesort")]
        s = scores[start:stop][order]
        # log Z_k, so that no suffix underflows to 0 when scores lie more than ~745 apart.
        log_z = np.empty(n)
        log_z[n - 1] = s[n - 1]
        for m in range(n - 2, -1, -1):
            high, low = max(s[m], log_z[m + 1]), min(s[m], log_z[m + 1])
            log_z[m] = high + np.log1p(np.exp(low - high))
        # Σ_{k≤m} Z_m/Z_k and Σ_{k≤m} (Z_m/Z_k)², kept relative to the smallest Z so far: terms stay ≤ 1.
        ratio_sum = 0.0
        ratio_sq_sum = 0.0
        for m in range(n):
            shrink = np.exp(log_z[m] - log_z[m - 1]) if m > 0 else 1.0
            ratio_sum = ratio_sum * shrink + 1.0
            ratio_sq_sum = ratio_sq_sum * shrink * shrink + 1.0
            p = np.exp(s[m] - log_z[m])
            row = start + order[m]
            grad[row] = p * ratio_sum - 1.0
            # Σ p(1 - p) = p·Σ(Z_m/Z_k) - p²·Σ(Z_m/Z_k)²; rounding must not make it negative.
            hess[row] = max(p * ratio_sum - p * p * ratio_sq_sum, 0.0)
        apply_sample_weight(sample_weight, start, stop, grad, hess)


class ListNet(Objective):
    """ListNet: cross entropy between the softmax of the label gains and the softmax of the scores."""

    name = "listnet"

    def gradients(self, scores, query_indices, grad, hess):
        q = self.queries
        listnet_gradients(scores, q.gains, q.offsets, query_indices, q.sample_weight, grad, hess)


class ListMLE(Objective):
    """ListMLE: Plackett-Luce likelihood of the label order, ties in labels ordered at random every round."""

    name = "listmle"

    def gradients(self, scores, query_indices, grad, hess):
        q = self.queries
        listmle_gradients(scores, q.labels, q.offsets, query_indices, self.rng.random_sample(scores.shape[0]),
                          q.sample_weight, grad, hess)
