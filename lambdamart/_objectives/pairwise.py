"""RankNet: the pairwise logistic loss over pairs of documents with different labels."""

import numpy as np
from numba import prange

from .._jit import inner_kernel, kernel
from .base import Objective, apply_sample_weight, logistic_pair, scaled_exponentials, warn_if_all_pairs_are_many


@inner_kernel
def _pair_terms(sigma, e_high, e_low, delta_score):
    """RankNet's λ and w of one pair: σρ and σ²ρ(1-ρ) with ρ = 1 / (1 + exp(σΔs)), Δs = s_high - s_low, from the
    documents' scaled exponentials (:func:`logistic_pair`)."""
    rho, rest = logistic_pair(e_high, e_low, sigma, delta_score)
    return sigma * rho, sigma * sigma * rho * rest


@kernel(parallel=True)
def ranknet_gradients(scores, labels, offsets, query_indices, sigma, partners, sample_weight, grad, hess):
    """RankNet: loss Σ log(1 + exp(-σ(s_h - s_o))) over pairs where h has the higher label.

    ``partners`` is empty for all pairs with different labels (O(n²) per query), or a (n_samples, k) array of
    random integers: row i is then paired with the documents ``(i + 1 + partners[i, m] % (n - 1)) % n`` of its
    query (O(n·k)); pairs with equal labels are skipped.
    """
    sampled = partners.shape[0] > 0
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        n = stop - start
        grad[start:stop] = 0.0
        hess[start:stop] = 0.0
        e = scaled_exponentials(scores, start, stop, sigma)
        for a in range(n):
            if sampled:
                n_partners = partners.shape[1] if n > 1 else 0
            else:
                n_partners = n - a - 1
            # Row a's sums stay in registers; the inner loop writes only its partners' rows.
            grad_a = 0.0
            hess_a = 0.0
            for m in range(n_partners):
                if sampled:
                    b = (a + 1 + partners[start + a, m] % (n - 1)) % n
                else:
                    b = a + 1 + m
                la, lb = labels[start + a], labels[start + b]
                if la == lb:
                    continue
                delta = scores[start + a] - scores[start + b]
                if la > lb:
                    lam, w = _pair_terms(sigma, e[a], e[b], delta)
                else:
                    lam, w = _pair_terms(sigma, e[b], e[a], -delta)
                    lam = -lam
                grad_a -= lam
                grad[start + b] += lam
                hess_a += w
                hess[start + b] += w
            grad[start + a] += grad_a
            hess[start + a] += hess_a
        apply_sample_weight(sample_weight, start, stop, grad, hess)


# The most partner indices (rows x pairs_per_document) a round draws: 1 GiB of int64.
_MAX_PARTNER_DRAWS = 1 << 27


class RankNet(Objective):
    """RankNet over all pairs with different labels, or ``pairs_per_document`` random partners per document."""

    name = "ranknet"

    def __init__(self, queries, params, rng):
        super().__init__(queries, params, rng)
        k, n_rows = params["pairs_per_document"], int(queries.offsets[-1])
        # Every round draws k partner indices per row at once (int64): refuse what would not fit in memory.
        if k is not None and n_rows * k > _MAX_PARTNER_DRAWS:
            raise ValueError(f"pairs_per_document={k} on {n_rows} training rows draws {n_rows * k:,} partners per "
                             f"round ({n_rows * k * 8 / 2**30:.1f} GiB); at most {_MAX_PARTNER_DRAWS:,} are drawn: "
                             f"lower pairs_per_document (a partner is one of the other documents of the query, "
                             f"drawn with replacement), or use None for every pair.")

    @classmethod
    def warn_about_cost(cls, query_sizes, params):
        if params["pairs_per_document"] is None:
            warn_if_all_pairs_are_many(query_sizes, cls.name, "Pass pairs_per_document (e.g. 20) to sample that many "
                                       "partners per document, linear in the query's size.")

    def gradients(self, scores, query_indices, grad, hess):
        k = self.params["pairs_per_document"]
        q = self.queries
        if k is None:
            partners = np.zeros((0, 0), dtype=np.int64)
        else:
            partners = self.rng.randint(0, 2**31, (scores.shape[0], k)).astype(np.int64)
        ranknet_gradients(scores, q.labels, q.offsets, query_indices, float(self.params["sigma"]), partners,
                          q.sample_weight, grad, hess)
