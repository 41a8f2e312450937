"""XE-NDCG: the softmax cross entropy against a randomised, gain-weighted target distribution."""

import numpy as np
from numba import prange

from .._jit import kernel
from .base import Objective, apply_sample_weight


@kernel(parallel=True)
def xendcg_gradients(scores, gains, offsets, query_indices, gamma, sample_weight, grad, hess):
    """XE-NDCG: loss -Σ φ·log ρ per query, ρ = softmax(scores), φ_i = (g_i + 1 - γ_i) / Σ_j (g_j + 1 - γ_j) for
    the label gains g and ``gamma`` drawn from U(0, 1) per row and round. Gradient ρ - φ, hessian ρ(1 - ρ) (the
    exact diagonal, since Σφ = 1). Queries of one document or with all gains equal get zero λ and w.
    """
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        n = stop - start
        if n < 2 or gains[start:stop].min() == gains[start:stop].max():
            # No order to learn: φ would be the random draws alone, and the trees would fit noise.
            grad[start:stop] = 0.0
            hess[start:stop] = 0.0
            continue
        s = scores[start:stop]
        e = np.exp(s - s.max())
        rho = e / e.sum()
        # Gains are >= 0 and γ < 1, so every target weight is positive: the target is a proper distribution.
        target = gains[start:stop] + 1.0 - gamma[start:stop]
        phi = target / target.sum()
        for i in range(n):
            grad[start + i] = rho[i] - phi[i]
            hess[start + i] = rho[i] * (1.0 - rho[i])
        apply_sample_weight(sample_weight, start, stop, grad, hess)


class XENDCG(Objective):
    """XE-NDCG, the cross-entropy surrogate of NDCG (LightGBM's ``rank_xendcg``).

    Per query and round, every document i draws γ_i ~ U(0, 1); the loss is the cross entropy

        L = -Σ_i φ_i log ρ_i,   ρ = softmax(s),   φ_i = (g_i + 1 - γ_i) / Σ_j (g_j + 1 - γ_j),

    with gradient λ_i = ρ_i - φ_i and second-order weight w_i = ρ_i(1 - ρ_i), the exact diagonal of the Hessian.
    The paper's target weight is 2^y - γ; here ``g + 1`` takes the place of 2^y, with g the label gain: the same for
    the default exponential gain (2^y - 1), while ``gain="linear"`` or a gain table choose another target. Queries of
    one document, or whose documents all have the same gain, have no order to learn and get zero λ and w.

    References
    ----------
    Bruch, Wang, Bendersky, Najork. "An Analysis of the Softmax Cross Entropy Loss for Learning-to-Rank with Binary
    Relevance". ICTIR 2019.
    """

    name = "xendcg"

    def gradients(self, scores, query_indices, grad, hess):
        q = self.queries
        xendcg_gradients(scores, q.gains, q.offsets, query_indices, self.rng.random_sample(scores.shape[0]),
                         q.sample_weight, grad, hess)
