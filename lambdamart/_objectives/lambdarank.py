"""LambdaMART: pairs of documents weighted by the change in NDCG (or AP) that swapping them would cause.

The λ and w formulas, the truncation, the two normalisations (by |Δscore| per pair, by log2(1 + Σ|λ|) / Σ|λ| per
query) and Unbiased LambdaMART's position biases are written out in ``docs/design.md`` ("Objectives").
"""

import numba
import numpy as np
from numba import prange

from .._jit import inner_kernel, kernel
from .._sort import descending_order, descending_order_from
from .base import Objective, apply_sample_weight, logistic_pair


def discount_table(max_query_size):
    """D(r) = 1 / log2(r + 1) for ranks r = 1..max_query_size, at index r - 1."""
    return 1.0 / np.log2(np.arange(2, max_query_size + 2, dtype=np.float64))


def inverse_ideal_dcg(gains, offsets, discounts, truncation_level):
    """1 / IDCG@truncation_level per query; 0 for a query whose ideal DCG is 0 (no pair can move NDCG).

    Once per fit, so numpy rather than a kernel (which cost three seconds of compilation on first use). The
    discounted gains of each query are summed in rank order, as a loop over the ideal ranking would.
    """
    n_queries = offsets.shape[0] - 1
    sizes = np.diff(offsets)
    query = np.repeat(np.arange(n_queries), sizes)
    ideal_gains = gains[np.lexsort((-gains, query))]  # queries stay contiguous, gains descend within each
    rank = positions_in_query(offsets)
    kept = rank < truncation_level
    idcg = np.bincount(query[kept], weights=ideal_gains[kept] * discounts[rank[kept]], minlength=n_queries)
    return np.divide(1.0, idcg, out=np.zeros(n_queries), where=idcg > 0.0)


def positions_in_query(offsets):
    """Each row's position within its query, 0, 1, ... (int64): the row order of every query, as a ranking."""
    return np.arange(offsets[-1]) - np.repeat(offsets[:-1], np.diff(offsets))


@inner_kernel
def _delta_ap(relevant_count, inverse_rank_sum, i, j, high_first):
    """|ΔAP|·R of swapping the documents at 0-based positions i < j, one relevant and one not.

    ``relevant_count[r]`` counts relevant documents in positions 0..r and ``inverse_rank_sum[r]`` sums 1/rank over
    them. Moving the relevant one from i down to j costs it precision and every relevant document in between one
    hit; moving it up from j to i gains the mirror image.
    """
    between = inverse_rank_sum[j - 1] - inverse_rank_sum[i]
    if high_first:  # relevant at i moves down to j
        return abs(relevant_count[j] / (j + 1.0) - relevant_count[i] / (i + 1.0) - between)
    before_i = relevant_count[i - 1] if i > 0 else 0.0
    return abs((before_i + 1.0) / (i + 1.0) - relevant_count[j] / (j + 1.0) + between)


@inner_kernel(inline="always")
def _discount_rows(pair_discounts):
    """The rows of :func:`_pair_discounts`'s output by name: lower, upper, within, block_end, scale."""
    return pair_discounts[0], pair_discounts[1], pair_discounts[2], pair_discounts[3], pair_discounts[4]


@inner_kernel(inline="always")
def _halves(sums):
    """A query's per-document sums by name: Σλ (the first half of ``sums``) and Σw (the second)."""
    half = sums.shape[0] // 2
    return sums[:half], sums[half:]


# error_model="numpy" on the pair kernels: their divisions never divide by zero, and numba's check for it (raising
# ZeroDivisionError) would give the pair loop an exit, which stops LLVM from vectorising it.
@inner_kernel(error_model="numpy")
def _pair_lambda(delta_z, delta_score, rho, sigma, normalize_pairs):
    """λ = σρΔZ and w = σ²ρ(1-ρ)ΔZ of one pair, ΔZ first divided by 0.01 + |Δs| with ``normalize_pairs``."""
    if normalize_pairs:
        delta_z /= 0.01 + abs(delta_score)
    return sigma * rho * delta_z, sigma * sigma * rho * (1.0 - rho) * delta_z


# fastmath "reassoc" lets LLVM vectorise a row's own sums (Σλ, Σw and Σ|λ| over its pairs) in the loop that updates
# its partners: a running sum per vector lane, added up at the end, so the order of additions (and the last bits of a
# sum) differ from the plain loop's and follow the CPU's vector width (docs/design.md, on determinism). With a strict
# order, the row's terms went through a scratch array and a second loop: at 131k rows a round's gradients took 17 %
# longer, their pair loops 27 %.
@inner_kernel(error_model="numpy", fastmath={"reassoc"})
def _ndcg_pairs(n, s, label, gain, e, pair_discounts, last_row, sigma, normalize_pairs, sums):
    """Σλ and Σw of every document over its |ΔNDCG|-weighted pairs, given all e > 0; returns the sum of all 2λ.

    The common case, vectorised. ``pair_discounts`` are the rows of :func:`_pair_discounts`: a pair (i, j > i) is
    weighted by |Δgain|·(upper[i] - lower[j])·scale[i], or |Δgain|·within[i]·scale[i] while j is tied with i
    (j < block_end[i]). Arrays are in rank order and padded to a multiple of 8; ``sums`` holds Σλ in its first half
    and Σw in its second. (Interleaved, a document's Σλ and Σw side by side, they cost the vector loop a dozen
    shuffles per four pairs: 15-17 % slower on queries of 115 and 300 documents, 13 % faster on 20, where run-time
    overlap checks weigh more.) The same terms as the plain double loop of ``_general_pairs``, added in a different
    order, so the two agree to rounding.
    """
    sum_lambdas = 0.0
    n_docs = np.uint64(n)
    lower, upper, within, block_end, scale = _discount_rows(pair_discounts)
    lam_sums, w_sums = _halves(sums)
    for i in range(last_row):
        row = np.uint64(i)
        s_i, label_i, gain_i, e_i = s[i], label[i], gain[i], e[i]
        upper_i, within_i, scale_i, tied_until = upper[i], within[i], scale[i], np.uint64(block_end[i])
        lam_i, w_i, lam_total = 0.0, 0.0, 0.0
        # The pairs (i, j > i), added to j's sums (distinct j: vectorisable) and to i's. The loop is branch-free:
        # the higher-labelled side is a ±1 sign, a pair with equal labels a masked 0. j is unsigned (numba's
        # wraparound of negative indices would hide the addresses from LLVM) and runs from a multiple of 8 to the
        # padded length, so no scalar remainder loop runs: j <= i are masked too (adding a masked 0 leaves a sum
        # unchanged, also i's own, which is updated after the loop), and the padding's sums are never read.
        for j in range(np.uint64((i + 1) & -8), np.uint64(s.shape[0])):
            i_high = label_i > label[j]
            sign = 1.0 if i_high else -1.0
            delta_z = abs(gain_i - gain[j]) * (within_i if j < tied_until else upper_i - lower[j]) * scale_i
            # e_low + e_high = e_i + e_j exactly; |Δs| needs no sign.
            rho = (e[j] if i_high else e_i) / (e_i + e[j])
            lam, w = _pair_lambda(delta_z, s_i - s[j], rho, sigma, normalize_pairs)
            if j <= row or j >= n_docs or label_i == label[j]:
                lam = 0.0
                w = 0.0
            lam_sums[j] += sign * lam
            w_sums[j] += w
            lam_i -= sign * lam
            w_i += w
            lam_total += lam  # λ >= 0
        lam_sums[i] += lam_i
        w_sums[i] += w_i
        sum_lambdas += 2.0 * lam_total
    return sum_lambdas


@kernel
def _general_pairs(s, label, gain, e, pair_discounts, inv_idcg, last_row, sigma, normalize_pairs, average_precision,
                   shown, position_bias, lam_sum, w_sum, cost_sum):
    """Σλ and Σw of every document over its pairs, in rank order, for all cases; returns the sum of all 2λ.

    Handles what ``_ndcg_pairs`` leaves out: |ΔAP| weights (times ``inv_idcg``; ``pair_discounts`` then unread),
    position debiasing (``shown`` non-empty: displayed positions, 0-based, in rank order; ``cost_sum`` receives
    the pair losses) and an e that underflowed to 0.
    """
    n = s.shape[0]
    debias = shown.shape[0] > 0
    if average_precision:
        relevant_count = np.cumsum(gain)
        inverse_rank_sum = np.cumsum(gain / np.arange(1.0, n + 1.0))
    lower, upper, within, block_end, scale = _discount_rows(pair_discounts)
    sum_lambdas = 0.0
    for i in range(last_row):
        for j in range(i + 1, n):
            if label[i] == label[j]:
                continue
            high, low = (i, j) if label[i] > label[j] else (j, i)
            delta_score = s[high] - s[low]
            if average_precision:
                delta_z = _delta_ap(relevant_count, inverse_rank_sum, i, j, high == i) * inv_idcg
            else:
                tied = j < block_end[i]
                delta_z = abs(gain[high] - gain[low]) * (within[i] if tied else upper[i] - lower[j]) * scale[i]
            rho, _ = logistic_pair(e[high], e[low], sigma, delta_score)  # also where both e underflowed
            lam, w = _pair_lambda(delta_z, delta_score, rho, sigma, normalize_pairs)
            if debias:
                click_bias = position_bias[0, shown[high]]
                skip_bias = position_bias[1, shown[low]]
                lam /= click_bias * skip_bias
                w /= click_bias * skip_bias
                # The pair's loss ΔZ·log(1 + exp(-σΔs)), computed without overflow, and without the score-
                # difference normalisation, whose 1/|Δs| would let near-ties swamp the estimate.
                x = -sigma * delta_score
                loss = delta_z * (max(x, 0.0) + np.log1p(np.exp(-abs(x))))
                cost_sum[0, high] += loss / skip_bias
                cost_sum[1, low] += loss / click_bias
            lam_sum[high] -= lam
            lam_sum[low] += lam
            w_sum[high] += w
            w_sum[low] += w
            sum_lambdas += 2.0 * lam
    return sum_lambdas


_LOG2_E = 1.4426950408889634
_LN2_HIGH = 0.6931471803691238  # ln 2 in two parts, the first with few bits: k·ln 2 is exact for |k| < 2**20
_LN2_LOW = 1.9082149292705877e-10
_EXP_SMALLEST = -708.0  # exp of it is above the smallest normal double (2**-1022), so 2**k has exponent bits


@inner_kernel(error_model="numpy")
def _exp_below_top(s, n, sigma, e, scratch):
    """e[k] = exp(σ(s[k] - s[0])) for k < n, 0 below exp(``_EXP_SMALLEST``) (and for NaN); returns whether any is 0.

    np.exp is a call to the C library per document, which LLVM cannot vectorise (5 ns a document, a sixth of a
    round's per-document cost on 570k generated rows); this vectorises: x = k·ln 2 + r with |r| <= ln(2)/2, the
    Taylor series of exp(r) to r**13 (truncated at < 1e-17 relative; results within 1 ulp of np.exp), times 2**k
    made from its exponent bits in ``scratch`` (an int64 view of a free work row).
    """
    underflow = False
    for k in range(n):
        x = sigma * (s[k] - s[0])
        in_range = x >= _EXP_SMALLEST  # False for NaN too
        underflow |= not in_range
        kept = x if in_range else _EXP_SMALLEST  # finite exponent bits for any x
        whole = np.floor(kept * _LOG2_E + 0.5)
        r = (kept - whole * _LN2_HIGH) - whole * _LN2_LOW
        p = 1.0 / 6227020800.0
        for m in (479001600.0, 39916800.0, 3628800.0, 362880.0, 40320.0, 5040.0, 720.0, 120.0, 24.0, 6.0, 2.0,
                  1.0, 1.0):
            p = p * r + 1.0 / m
        e[k] = p if in_range else 0.0
        scratch[k] = (np.int64(whole) + 1023) << 52
    scale = scratch.view(np.float64)
    for k in range(n):
        e[k] *= scale[k]
    return underflow


@inner_kernel
def _ranked_query(scores, order, gains, labels, sigma):
    """One query's documents in rank order: the row order (``order``, the last round's, re-sorted in place), and
    (s, label, gain, e) as the first rows of a (9, n padded to a multiple of 8) array whose other five rows
    :func:`_pair_discounts` fills, with e = exp(σ(s - max s)) in [0, 1] (one exp per document instead of one
    exp(σ·Δs) = e_h / e_o per pair). Also whether any e is 0 (see :func:`_exp_below_top`)."""
    n = scores.shape[0]
    # Stable descending sort: tied scores keep their row order, as LightGBM's std::stable_sort does. The pair loops
    # then read everything in rank order, from contiguous arrays.
    work = np.empty((9, (n + 7) & -8))
    s, label, gain, e = work[0], work[1], work[2], work[3]
    ranked = descending_order_from(scores, order, s)
    for k in range(n):
        label[k] = labels[ranked[k]]
        gain[k] = gains[ranked[k]]
    underflow = _exp_below_top(s, n, sigma, e, work[4].view(np.int64))
    work[:, n:] = 1.0  # any finite value: the padding's pairs are computed but never read
    return ranked, work, underflow


@inner_kernel
def _pair_discounts(s, n, discounts, inv_idcg, truncation_level, average_ties, out):
    """The discount terms of |ΔNDCG| for the documents of one query in rank order; returns the pair loops' last row.

    Rows of ``out``: lower, upper, within, block_end, scale. A pair (i, j > i) in different tie blocks weighs
    (upper[i] - lower[j])·scale[i]; a pair in the same block (j < block_end[i]) within[i]·scale[i]. Without
    ``average_ties`` every document is its own block: upper = lower = D(rank), scale = 1/IDCG, and pairs count
    while i < truncation_level (LightGBM's weights, ties in row order).

    With ``average_ties`` the weights are their mean over every order of the tied documents, so the gradients do
    not depend on the row order (which decides the ranks of ties, e.g. of all documents in the first round). For
    a block of m tied documents at ranks [a, b), of which ranks [a, top) are above the truncation: lower = the
    mean D over the block, upper = the mean D over [a, top), scale = (top - a) / m / IDCG (the chance that a
    document of the block is above the truncation), and within·scale = the mean over ordered rank pairs p < q in
    the block of (D(p) - D(q)) counted when p < top. A block that straddles the truncation extends the last row
    to its end.
    """
    lower, upper, within, block_end, scale = _discount_rows(out)
    last_row = min(n - 1, truncation_level)
    # Every document its own block first, in one branch-free loop (a query without tied scores needs nothing
    # else: 2.5 ns a document less than finding its blocks of one in the loop below).
    tied = False
    for a in range(n):
        lower[a] = upper[a] = discounts[a]
        within[a] = 0.0
        block_end[a] = a + 1
        scale[a] = inv_idcg
        tied |= average_ties & (a > 0) & (s[a] == s[a - 1])  # s[-1] when a = 0: read, not used
    if not tied:
        return last_row
    a = 0
    while a < n:
        b = a + 1
        while b < n and s[b] == s[a]:
            b += 1
        if b - a == 1:  # filled above
            a = b
            continue
        m = b - a
        top = max(min(b, truncation_level), a)
        block_sum = 0.0
        head_sum = 0.0
        pair_sum = 0.0  # Σ over p < q in the block, p < top, of D(p) - D(q)
        for p in range(b - 1, a - 1, -1):  # from the bottom, so block_sum holds the D below p
            if p < top:
                pair_sum += (b - 1 - p) * discounts[p] - block_sum
                head_sum += discounts[p]
            block_sum += discounts[p]
        fraction = (top - a) / m
        for k in range(a, b):
            lower[k] = block_sum / m
            upper[k] = head_sum / (top - a) if top > a else 0.0
            within[k] = 2.0 * pair_sum / (m * (m - 1.0)) / fraction if top > a else 0.0
            block_end[k] = b
            scale[k] = inv_idcg * fraction
        if a < truncation_level < b:
            last_row = min(n - 1, b)
        a = b
    return last_row


@inner_kernel
def _label_values(label, lo, hi, gain):
    """The distinct label values of the documents ``lo:hi``, numbered from the highest down: each document's number
    (relative to ``lo``), and per value its count, gain and label.

    With the sort the pair loops already use (np.unique and np.searchsorted would add two seconds of compilation to
    every first fit).
    """
    n = hi - lo
    by_label = descending_order(label[lo:hi])
    value_of = np.empty(n, dtype=np.int64)
    counts = np.zeros(n)
    value_gain = np.zeros(n)
    value_label = np.zeros(n)
    n_values = 0
    for r in range(n):
        k = by_label[r]
        if r == 0 or label[lo + k] != label[lo + by_label[r - 1]]:
            n_values += 1
        value_of[k] = n_values - 1
        counts[n_values - 1] += 1.0
        value_gain[n_values - 1] = gain[lo + k]
        value_label[n_values - 1] = label[lo + k]
    return value_of, counts[:n_values], value_gain[:n_values], value_label[:n_values]


@inner_kernel(error_model="numpy")
def _tied_value_sums(counts, value_gain, lam_unit, w_unit, lam_sum, w_sum):
    """Add to ``lam_sum[u]`` and ``w_sum[u]`` the sums of one document of label value ``u`` over its pairs with the
    other documents of a tie block (``counts`` of each value), each weighing |Δgain| times ``lam_unit`` /
    ``w_unit``; returns the block's sum of 2λ over its pairs."""
    n_values = counts.shape[0]
    sum_lambdas = 0.0
    for u in range(n_values):
        for v in range(n_values):
            if v != u:
                term = abs(value_gain[u] - value_gain[v]) * counts[v]
                lam_sum[u] += lam_unit * (term if v < u else -term)  # pushed up by higher labels, down by lower
                w_sum[u] += w_unit * term
                sum_lambdas += lam_unit * term * counts[u]
    return sum_lambdas


@inner_kernel
def _all_tied_pairs(n, label, gain, pair_discounts, sigma, sums):
    """Σλ and Σw (``sums``' first and second half, as :func:`_ndcg_pairs` lays them out) when all n documents of
    a query tie and ties are averaged (the first round); returns the sum of all 2λ.

    Every pair with different labels then weighs |Δgain|·within·scale (one block: the same for every document, from
    :func:`_pair_discounts`) with ρ = 1/2 and no score-difference normalisation, so each document's sums follow
    from the count of every label value: O(n + K²) for K distinct labels instead of the n²/2 pairs a query-wide tie
    block would take in the pair loops.
    """
    value_of, counts, value_gain, _ = _label_values(label, np.int64(0), n, gain)  # not a literal: one compilation
    _, _, within, _, scale = _discount_rows(pair_discounts)
    weight = within[0] * scale[0]
    # Documents with the same label have the same sums: one per label value, O(K²), then one write per document.
    lam_sum, w_sum = np.zeros(counts.shape[0]), np.zeros(counts.shape[0])
    sum_lambdas = _tied_value_sums(counts, value_gain, 0.5 * sigma * weight, 0.25 * sigma * sigma * weight,
                                   lam_sum, w_sum)
    lam_sums, w_sums = _halves(sums)
    for k in range(n):
        lam_sums[k] = lam_sum[value_of[k]]
        w_sums[k] = w_sum[value_of[k]]
    return sum_lambdas


# Rows of a tie block past the truncation level up to which they stay in the pair loops (a few times the query's
# length in pairs, like the truncation level's own rows); beyond, _tail_pairs takes them per label value.
_TAIL_ROWS = 16


@inner_kernel(error_model="numpy")
def _tail_pairs(n, s, label, gain, e, pair_discounts, first, stop, sigma, normalize_pairs, sums):
    """Add the pairs (i, j > i) of the rows ``first:stop`` to ``sums``: the rows of a tie block that straddles the
    truncation level, below it. Returns their sum of 2λ.

    Those rows share their score, e and discount terms, so a row's pairs depend on it only through its label: the
    sums are computed once per label value, over the block's other rows (counted per value) and over each row
    after the block. O(K² + K·(n - stop)) for K label values, where a pair loop took the block's length times n
    (4000 tied documents made the gradients of a round 13x slower than with ties in row order).
    """
    lower, upper, within, _, scale = _discount_rows(pair_discounts)
    lam_sums, w_sums = _halves(sums)
    value_of, counts, value_gain, value_label = _label_values(label, first, stop, gain)
    n_values = counts.shape[0]
    s_t, e_t, upper_t, scale_t = s[first], e[first], upper[first], scale[first]
    lam_sum, w_sum = np.zeros(n_values), np.zeros(n_values)
    # Within the block: equal scores, so ρ = 1/2 and |Δs| = 0; λ and w are linear in |Δgain|.
    lam_unit, w_unit = _pair_lambda(within[first] * scale_t, 0.0, 0.5, sigma, normalize_pairs)
    sum_lambdas = _tied_value_sums(counts, value_gain, lam_unit, w_unit, lam_sum, w_sum)
    # With every row after the block, as the pair loops weigh them.
    for j in range(stop, n):
        for u in range(n_values):
            if value_label[u] == label[j]:
                continue
            u_high = value_label[u] > label[j]
            rho = (e[j] if u_high else e_t) / (e_t + e[j])
            delta_z = abs(value_gain[u] - gain[j]) * (upper_t - lower[j]) * scale_t
            lam, w = _pair_lambda(delta_z, s_t - s[j], rho, sigma, normalize_pairs)
            sign = 1.0 if u_high else -1.0
            lam_sums[j] += sign * lam * counts[u]
            w_sums[j] += w * counts[u]
            lam_sum[u] -= sign * lam
            w_sum[u] += w
            sum_lambdas += 2.0 * lam * counts[u]
    for r in range(stop - first):
        lam_sums[first + r] += lam_sum[value_of[r]]
        w_sums[first + r] += w_sum[value_of[r]]
    return sum_lambdas


@inner_kernel
def _scatter_query(ranked, sums, sum_lambdas, query_normalization, grad, hess):
    """Write the rank-ordered Σλ and Σw (``sums``' two halves) back to row order, normalised by log2(1 + Σ|λ|) / Σ|λ|
    with ``query_normalization``."""
    factor = 1.0
    if query_normalization and sum_lambdas > 0.0:
        factor = np.log2(1.0 + sum_lambdas) / sum_lambdas
    lam_sums, w_sums = _halves(sums)
    for k in range(ranked.shape[0]):
        grad[ranked[k]] = lam_sums[k] * factor
        hess[ranked[k]] = w_sums[k] * factor


@inner_kernel
def _query_lambdas(k, scores, gains, labels, offsets, query_indices, order, discounts, inv_idcg, truncation_level,
                   sigma, pair_normalization, query_normalization, average_ties, sample_weight, grad, hess, done):
    """λ and w weighted by |ΔNDCG| of query ``query_indices[k]``, written into its rows of ``grad`` and ``hess``.

    Sets ``done[k]`` False, writing nothing, when a document's e underflowed: :func:`_general_query_lambdas`
    handles that query (and every query of |ΔAP| weights or position debiasing), so its code is compiled only when
    needed.
    """
    q = query_indices[k]
    start, stop = offsets[q], offsets[q + 1]
    n = stop - start
    done[k] = True
    if n < 2 or inv_idcg[q] == 0.0:
        grad[start:stop] = 0.0
        hess[start:stop] = 0.0
        return
    ranked, work, underflow = _ranked_query(scores[start:stop], order[start:stop], gains[start:stop],
                                            labels[start:stop], sigma)
    if underflow:
        done[k] = False
        return
    s = work[0]
    last_row = _pair_discounts(s, n, discounts, inv_idcg[q], truncation_level, average_ties, work[4:])
    # Score-difference normalisation is meaningless while all scores are equal (the first round).
    normalize_pairs = pair_normalization and s[0] != s[n - 1]
    sums = np.zeros(2 * work.shape[1])  # Σλ, then Σw
    if average_ties and s[0] == s[n - 1]:
        sum_lambdas = _all_tied_pairs(n, work[1], work[2], work[4:], sigma, sums)
    else:
        # A tie block straddling the truncation level extends the pair rows to its end (last_row); when it reaches
        # far past the level, _tail_pairs takes its rows below the level per label value instead.
        top = min(n - 1, truncation_level)
        long_tail = last_row > top + _TAIL_ROWS
        sum_lambdas = _ndcg_pairs(n, s, work[1], work[2], work[3], work[4:], top if long_tail else last_row, sigma,
                                  normalize_pairs, sums)
        if long_tail:
            sum_lambdas += _tail_pairs(n, s, work[1], work[2], work[3], work[4:], top,
                                       np.int64(_discount_rows(work[4:])[3][top]), sigma, normalize_pairs, sums)
    _scatter_query(ranked, sums, sum_lambdas, query_normalization, grad[start:stop], hess[start:stop])
    apply_sample_weight(sample_weight, start, stop, grad, hess)


@inner_kernel
def _general_query_lambdas(scores, order, gains, labels, discounts, inv_idcg, truncation_level, sigma,
                           pair_normalization, query_normalization, average_ties, average_precision, position,
                           position_bias, grad, hess, bias_cost):
    """As :func:`_query_lambdas`, for every case (with :func:`_general_pairs`).

    ``average_precision`` swaps |ΔNDCG| for |ΔAP|: ``gains`` then hold 0/1 relevance and ``inv_idcg`` is 1/R.
    With ``position`` (displayed ranks, 1-based; empty for none), each pair is divided by the position biases
    ``position_bias[0, p_high - 1] * position_bias[1, p_low - 1]`` (Unbiased LambdaMART), and ``bias_cost``
    receives each row's share of the pair losses from which the next biases are estimated.
    """
    n = scores.shape[0]
    bias_cost[:, :] = 0.0
    if n < 2 or inv_idcg == 0.0:
        grad[:] = 0.0
        hess[:] = 0.0
        return
    ranked, work, _ = _ranked_query(scores, order, gains, labels, sigma)
    s = work[0]
    last_row = _pair_discounts(s, n, discounts, inv_idcg, truncation_level, average_ties and not average_precision,
                               work[4:])
    normalize_pairs = pair_normalization and s[0] != s[n - 1]
    debias = position.shape[0] > 0
    shown = position[ranked] - 1 if debias else position
    cost_sum = np.zeros((2, n if debias else 0))
    sums = np.zeros(2 * n)
    if average_ties and not (average_precision or debias) and s[0] == s[n - 1]:
        sum_lambdas = _all_tied_pairs(n, work[1], work[2], work[4:], sigma, sums)
    else:
        sum_lambdas = _general_pairs(s[:n], work[1, :n], work[2, :n], work[3, :n], work[4:, :n], inv_idcg, last_row,
                                     sigma, normalize_pairs, average_precision, shown, position_bias,
                                     *_halves(sums), cost_sum)
    for k in range(cost_sum.shape[1]):
        bias_cost[0, ranked[k]] = cost_sum[0, k]
        bias_cost[1, ranked[k]] = cost_sum[1, k]
    _scatter_query(ranked, sums, sum_lambdas, query_normalization, grad, hess)


@inner_kernel
def _unfinished(done):
    """How many queries the common kernel left to the general one."""
    left = 0
    for k in range(done.shape[0]):
        left += not done[k]
    return left


# The same loop twice, on the calling thread and on numba's threads: a single-threaded fit (all small ones) then
# never compiles the parallel version, which costs seconds on first use.
@kernel
def _ndcg_gradients_serial(scores, gains, labels, offsets, query_indices, *args):
    for k in range(query_indices.shape[0]):
        _query_lambdas(k, scores, gains, labels, offsets, query_indices, *args)
    return _unfinished(args[-1])


@kernel(parallel=True)
def _ndcg_gradients_parallel(scores, gains, labels, offsets, query_indices, order, discounts, inv_idcg,
                             truncation_level, sigma, pair_normalization, query_normalization, average_ties,
                             sample_weight, grad, hess, done):
    for k in prange(query_indices.shape[0]):
        _query_lambdas(np.int64(k), scores, gains, labels, offsets, query_indices, order, discounts, inv_idcg,
                       truncation_level, sigma, pair_normalization, query_normalization, average_ties, sample_weight,
                       grad, hess, done)
    return _unfinished(done)


@kernel(parallel=True)
def _general_gradients(scores, gains, labels, offsets, query_indices, order, discounts, inv_idcg, truncation_level,
                       sigma, pair_normalization, query_normalization, average_ties, average_precision, position,
                       position_bias, sample_weight, grad, hess, bias_cost):
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        _general_query_lambdas(scores[start:stop], order[start:stop], gains[start:stop], labels[start:stop], discounts,
                               inv_idcg[query_indices[k]], truncation_level, sigma, pair_normalization,
                               query_normalization, average_ties, average_precision, position[start:stop],
                               position_bias, grad[start:stop], hess[start:stop], bias_cost[:, start:stop])
        apply_sample_weight(sample_weight, start, stop, grad, hess)


def lambdarank_gradients(scores, gains, labels, offsets, query_indices, discounts, inv_idcg, truncation_level,
                         sigma, pair_normalization, query_normalization, average_precision, position, position_bias,
                         sample_weight, grad, hess, bias_cost, average_ties=False, threaded=None, order=None):
    """LambdaMART λ and w for the queries in ``query_indices``, on numba's threads when ``threaded`` (None: when
    numba has more than one).

    With ``average_precision``, pairs are weighted by |ΔAP| instead of |ΔNDCG|: ``gains`` must hold 0/1 relevance
    and ``inv_idcg`` 1/R per query (0 for a query without a relevant document). ``position`` (empty for none),
    ``position_bias`` (2, n_positions) and ``bias_cost`` (2, n_samples) serve Unbiased LambdaMART, see
    :func:`update_position_bias`; without positions they may be empty (the slices of empty arrays stay empty).
    With ``average_ties`` the |ΔNDCG| of pairs among tied scores is averaged over their orders (see
    :func:`_pair_discounts`); |ΔAP| weights always take ties in row order. ``order`` (int64, one per row) holds
    each query's ranking from the last call, as positions within the query, and is updated; the rankings come out
    the same from any start (None: row order), but one close to the new one is found much faster.

    The common case (|ΔNDCG|, no positions) runs a kernel of its own; the general one, about as large again to
    compile, runs only for the other cases and for queries whose scores are so far apart that an e underflowed.
    """
    if order is None:
        order = positions_in_query(offsets)
    if not (average_precision or position.shape[0] > 0):
        done = np.empty(query_indices.shape[0], dtype=np.bool_)
        if threaded is None:
            threaded = numba.get_num_threads() > 1
        # The count of unfinished queries comes back from the kernel: every call from Python between two trees
        # runs with cold caches (~15 µs for a done.all()), and on small data there is one per round.
        kernel = _ndcg_gradients_parallel if threaded else _ndcg_gradients_serial
        if kernel(scores, gains, labels, offsets, query_indices, order, discounts, inv_idcg, truncation_level, sigma,
                  pair_normalization, query_normalization, average_ties, sample_weight, grad, hess, done) == 0:
            return
        query_indices = query_indices[~done]
    _general_gradients(scores, gains, labels, offsets, query_indices, order, discounts, inv_idcg, truncation_level,
                       sigma, pair_normalization, query_normalization, average_ties, average_precision, position,
                       position_bias, sample_weight, grad, hess, bias_cost)


def position_loss_totals(position, bias_cost, n_positions):
    """The summed pair losses of the rows shown at each position, ``(2, n_positions)``: clicked, unclicked side.

    Sums over rows, so the totals of rows split over several machines add up to those of all rows.
    """
    return np.vstack([np.bincount(position - 1, weights=bias_cost[side], minlength=n_positions) for side in (0, 1)])


def update_position_bias(loss_totals, position_bias, norm):
    """Unbiased LambdaMART's estimate of the click and non-click biases per displayed position (Hu et al., 2019).

    The bias of position p is the (1 / (1 + norm))-th power of the summed pair losses of the rows shown there
    (``loss_totals``, each loss already divided by the other side's bias), relative to position 1. Positions
    without any pair keep their previous bias.
    """
    updated = position_bias.copy()
    for side in range(2):
        totals = loss_totals[side]
        if totals[0] <= 0.0:
            continue  # nothing anchors the scale this round
        ratios = (totals / totals[0]) ** (1.0 / (1.0 + norm))
        updated[side] = np.where(totals > 0.0, ratios, position_bias[side])
    return updated


class LambdaRank(Objective):
    """LambdaMART: pairs weighted by |ΔNDCG@truncation_level| (LightGBM's ``lambdarank``).

    With ``position`` in the training queries it is Unbiased LambdaMART: click and non-click biases per displayed
    position start at 1, divide every pair's λ and w, and are re-estimated from each round's pair losses; the
    final ones are handed back as the estimator's ``position_bias_``. When the rows are spread over machines, each
    holder sets ``update_biases = False``, hands its :attr:`loss_totals` to whoever sums them and receives the new
    :attr:`position_bias`.
    """

    name = "lambdarank"
    supports_position = True

    def __init__(self, queries, params, rng):
        super().__init__(queries, params, rng)
        self._discounts = discount_table(int(np.diff(queries.offsets).max(initial=1)))
        self._labels, self._gains, self._normalizer = self._pair_weights(queries)
        self._debias = queries.position.shape[0] > 0
        n_positions = int(queries.position.max()) if self._debias else 0
        self.position_bias = np.ones((2, n_positions))
        self._bias_cost = np.zeros((2, queries.position.shape[0]))
        self.update_biases = True
        self.loss_totals = None
        self._threaded = None  # whether numba has threads, asked at the first call (inside the fit's region)
        # Each query's ranking by score in the last round (positions within the query), where the next sort starts.
        self._order = positions_in_query(queries.offsets)

    def _pair_weights(self, queries):
        """Labels and gains that weigh the pairs, and the per-query normaliser (1 / IDCG)."""
        truncation = self.params["truncation_level"]
        return queries.labels, queries.gains, inverse_ideal_dcg(queries.gains, queries.offsets, self._discounts,
                                                                truncation)

    def gradients(self, scores, query_indices, grad, hess):
        q, p = self.queries, self.params
        if self._debias:
            self._bias_cost[:] = 0.0
        if self._threaded is None:
            self._threaded = numba.get_num_threads() > 1
        lambdarank_gradients(scores, self._gains, self._labels, q.offsets, query_indices, self._discounts,
                             self._normalizer, p["truncation_level"], float(p["sigma"]),
                             bool(p["pair_normalization"]), bool(p["query_normalization"]),
                             self.name == "lambdarank_map", q.position, self.position_bias, q.sample_weight, grad,
                             hess, self._bias_cost, p["ties"] == "average", self._threaded, self._order)
        if self._debias:
            self.loss_totals = position_loss_totals(q.position, self._bias_cost, self.position_bias.shape[1])
            if self.update_biases:
                self.position_bias = update_position_bias(self.loss_totals, self.position_bias,
                                                          float(p["position_bias_norm"]))

    def state(self):
        return {"position_bias": self.position_bias.copy()} if self._debias else {}

    def restore(self, state):
        if self._debias:
            self.position_bias = state["position_bias"].copy()


class LambdaRankMAP(LambdaRank):
    """LambdaMART for average precision: pairs of a relevant and a non-relevant document weighted by |ΔAP|.

    A document is relevant when its label exceeds ``relevance_threshold``; binary relevance then stands in for both
    the labels and the gains, and the per-query normaliser is 1/R (R relevant documents).
    """

    name = "lambdarank_map"

    def _pair_weights(self, queries):
        relevant = (queries.labels > self.params["relevance_threshold"]).astype(np.float64)
        n_relevant = np.add.reduceat(relevant, queries.offsets[:-1]) if queries.n_queries else np.zeros(0)
        normalizer = np.divide(1.0, n_relevant, out=np.zeros_like(n_relevant), where=n_relevant > 0)
        return relevant, relevant, normalizer
