"""FRank: the fidelity loss over pairs of documents with different labels."""

import numpy as np
from numba import prange

from .._jit import inner_kernel, kernel
from .base import Objective, apply_sample_weight, logistic_pair, scaled_exponentials, warn_if_all_pairs_are_many


@inner_kernel
def _fidelity_pair(e_high, e_low, delta):
    """λ and w of one pair, Δ = s_high - s_low: F = 1 - sqrt(p), p = 1 / (1 + exp(-Δ)), from the documents' scaled
    exponentials (:func:`logistic_pair`, σ = 1).

    dF/dΔ = -sqrt(p)(1 - p)/2. The fidelity is not convex (d²F/dΔ² = sqrt(p)(1 - p)(3p - 1)/4 < 0 for p < 1/3),
    so w is the larger of |d²F/dΔ²| and the Gauss-Newton weight p(1 - p)/4 (F is half the squared Hellinger
    distance of (p, 1 - p) to (1, 0), a sum of squares): never negative, and never zero where λ is not (|F''|
    vanishes at p = 1/3), which bounds a lone pair's Newton step |λ/w| by about 4.6.
    """
    q, p = logistic_pair(e_high, e_low, 1.0, delta)  # q = 1 - p without cancellation for well-ordered pairs
    root = np.sqrt(p)
    lam = 0.5 * root * q
    exact = 0.25 * root * q * (3.0 * p - 1.0)
    gauss_newton = 0.25 * p * q
    return lam, max(abs(exact), gauss_newton)


@kernel(parallel=True)
def frank_gradients(scores, labels, offsets, query_indices, sample_weight, grad, hess):
    """FRank: loss Σ [1 - sqrt(P_hl)] over pairs where h has the higher label, P_hl = 1 / (1 + exp(-(s_h - s_l))).

    All pairs with different labels, O(n²) per query; λ is the exact gradient, w the per-pair weight of
    :func:`_fidelity_pair` summed over the pairs of a document.
    """
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        grad[start:stop] = 0.0
        hess[start:stop] = 0.0
        e = scaled_exponentials(scores, start, stop, 1.0)
        for a in range(start, stop):
            # Row a's sums stay in registers; the inner loop writes only its partners' rows.
            grad_a = 0.0
            hess_a = 0.0
            for b in range(a + 1, stop):
                if labels[a] == labels[b]:
                    continue
                if labels[a] > labels[b]:
                    lam, w = _fidelity_pair(e[a - start], e[b - start], scores[a] - scores[b])
                else:
                    lam, w = _fidelity_pair(e[b - start], e[a - start], scores[b] - scores[a])
                    lam = -lam
                grad_a -= lam
                grad[b] += lam
                hess_a += w
                hess[b] += w
            grad[a] += grad_a
            hess[a] += hess_a
        apply_sample_weight(sample_weight, start, stop, grad, hess)


class FRank(Objective):
    """FRank: the fidelity loss over all pairs of documents with different labels.

    For a pair (i, j) of one query with y_i ≠ y_j, P_ij = 1 / (1 + exp(-(s_i - s_j))) and the target P*_ij is 1 if
    y_i > y_j and 0 otherwise; the loss is

        L = Σ_pairs F_ij,   F_ij = 1 - (sqrt(P*_ij P_ij) + sqrt((1 - P*_ij)(1 - P_ij))),

    that is 1 - sqrt(P_hl) with h the document of the higher label. λ is its exact gradient. The loss is bounded
    and not convex, so the second-order weight of a pair is max(|∂²F/∂Δ²|, p(1 - p)/4), the larger of the exact
    curvature's magnitude and the Gauss-Newton weight (F is half the squared Hellinger distance between (P, 1 - P)
    and (P*, 1 - P*)); a document's w sums those of its pairs. Pairs with equal labels do not count, and a query's
    cost is quadratic in its size, as for ``"ranknet"`` over all pairs.

    References
    ----------
    Tsai, Liu, Qin, Chen, Ma. "FRank: A Ranking Method with Fidelity Loss". SIGIR 2007.
    """

    name = "frank"

    @classmethod
    def warn_about_cost(cls, query_sizes, params):
        warn_if_all_pairs_are_many(query_sizes, cls.name, "Objectives linear in the query's size: 'lambdarank' (pairs "
                                   "with the top truncation_level documents), 'xendcg', or 'ranknet' with "
                                   "pairs_per_document.")

    def gradients(self, scores, query_indices, grad, hess):
        q = self.queries
        frank_gradients(scores, q.labels, q.offsets, query_indices, q.sample_weight, grad, hess)
