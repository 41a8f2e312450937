"""LambdaMART gradients: per query, ΔNDCG-weighted pairwise lambdas and second-order weights (DESIGN §3).

Inputs are laid out query by query (see ``_queries``): ``offsets[q]:offsets[q + 1]`` are query ``q``'s rows. The
kernel is a pure function of the current scores, so the boosting loop may call it on any subset of queries.
"""

import numpy as np
from numba import njit, prange


def discount_table(max_query_size):
    """D(r) = 1 / log2(r + 1) for ranks r = 1..max_query_size, at index r - 1."""
    return 1.0 / np.log2(np.arange(2, max_query_size + 2, dtype=np.float64))


@njit(cache=True, parallel=True)
def inverse_ideal_dcg(gains, offsets, discounts, truncation_level):
    """1 / IDCG@truncation_level per query; 0 for a query whose ideal DCG is 0 (no pair can move NDCG)."""
    n_queries = offsets.shape[0] - 1
    out = np.zeros(n_queries)
    for q in prange(n_queries):
        start, stop = offsets[q], offsets[q + 1]
        ideal = -np.sort(-gains[start:stop])
        idcg = 0.0
        for r in range(min(stop - start, truncation_level)):
            idcg += ideal[r] * discounts[r]
        if idcg > 0.0:
            out[q] = 1.0 / idcg
    return out


@njit(cache=True)
def _query_lambdas(scores, gains, labels, discounts, inv_idcg, truncation_level, sigma, pair_normalization,
                   query_normalization, grad, hess):
    """λ and w of one query (views of the query's rows), written into ``grad`` and ``hess``."""
    n = scores.shape[0]
    grad[:] = 0.0
    hess[:] = 0.0
    if n < 2 or inv_idcg == 0.0:
        return
    # Stable descending sort: tied scores keep their row order, as LightGBM's std::stable_sort does. The pair loop
    # then reads everything in rank order, from contiguous arrays.
    ranked = np.argsort(-scores, kind="mergesort")
    s = scores[ranked]
    label = labels[ranked]
    gain = gains[ranked]
    # exp(σ·Δs) = e_h / e_o with e = exp(σ(s - max s)) in (0, 1]: one exp per document instead of one per pair.
    e = np.exp(sigma * (s - s[0]))
    lam_sum = np.zeros(n)
    w_sum = np.zeros(n)
    # Score-difference normalisation is meaningless while all scores are equal (the first round).
    normalize_pairs = pair_normalization and s[0] != s[n - 1]
    sum_lambdas = 0.0
    for i in range(min(n - 1, truncation_level)):
        for j in range(i + 1, n):
            if label[i] == label[j]:
                continue
            high, low = (i, j) if label[i] > label[j] else (j, i)
            delta_score = s[high] - s[low]
            delta_z = abs(gain[high] - gain[low]) * (discounts[i] - discounts[j]) * inv_idcg
            if normalize_pairs:
                delta_z /= 0.01 + abs(delta_score)
            denominator = e[low] + e[high]
            if denominator > 0.0:
                rho = e[low] / denominator
            else:  # both documents so far below the top that their e underflowed
                rho = 1.0 / (1.0 + np.exp(sigma * delta_score))
            lam = sigma * rho * delta_z
            w = sigma * sigma * rho * (1.0 - rho) * delta_z
            lam_sum[high] -= lam
            lam_sum[low] += lam
            w_sum[high] += w
            w_sum[low] += w
            sum_lambdas += 2.0 * lam
    factor = 1.0
    if query_normalization and sum_lambdas > 0.0:
        factor = np.log2(1.0 + sum_lambdas) / sum_lambdas
    for k in range(n):
        grad[ranked[k]] = lam_sum[k] * factor
        hess[ranked[k]] = w_sum[k] * factor


@njit(cache=True, parallel=True)
def lambdarank_gradients(scores, gains, labels, offsets, query_indices, discounts, inv_idcg, truncation_level,
                         sigma, pair_normalization, query_normalization, sample_weight, grad, hess):
    """Fill ``grad`` (λ) and ``hess`` (w) for the queries listed in ``query_indices``.

    Rows of other queries are left untouched. ``sample_weight`` (per row, possibly empty for none) multiplies both.
    """
    weighted = sample_weight.shape[0] > 0
    for k in prange(query_indices.shape[0]):
        q = query_indices[k]
        start, stop = offsets[q], offsets[q + 1]
        _query_lambdas(scores[start:stop], gains[start:stop], labels[start:stop], discounts, inv_idcg[q],
                       truncation_level, sigma, pair_normalization, query_normalization,
                       grad[start:stop], hess[start:stop])
        if weighted:
            for i in range(start, stop):
                grad[i] *= sample_weight[i]
                hess[i] *= sample_weight[i]
