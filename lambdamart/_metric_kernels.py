"""Numba kernels of the ranking metrics (docs/design.md, Metrics): one small function per metric, per query.

Every per-query function has the signature ``f(x, aux, score, k, average) -> float``: ``x`` holds the per-document
values the metric needs (gains, 0/1 relevance, ERR stop probabilities or labels), ``aux`` a second per-document
array (only Kendall's tau uses it; the others receive ``x`` again), ``score`` the model scores, ``k`` the cut-off
(a huge number for "whole list") and ``average`` whether tied scores are averaged over all their orders
(``ties="average"``) or kept in input order (``ties="input"``). A query where the metric is undefined returns NaN;
the caller turns that into the user's ``empty`` value.

All metrics are written over *tie groups*: maximal runs of equal scores in the ranking. With ``ties="input"`` every
document is its own group, so the same closed forms give the plain metric of the stable sort.
"""

from typing import NamedTuple

import numpy as np
from numba.extending import overload

from ._jit import inner_kernel, kernel
from ._parallel import split_over_threads
from ._sort import descending_order

# Rows from which the metrics are computed on several threads (when there are several): below, a metric is a few
# milliseconds on one thread.
_THREADED_ROWS = 100_000


def per_query(metric, x, aux, score, offsets, k, average):
    """Value of ``metric`` (one of :data:`NDCG` ... :data:`KENDALL_GAIN`) for every query (rows
    ``offsets[q]:offsets[q + 1]``): NaN where it is undefined."""
    out = np.empty(offsets.shape[0] - 1)

    def queries(lo, hi):
        _per_query(metric, x, aux, score, offsets[lo:hi + 1], k, average, out[lo:hi])

    split_over_threads(queries, np.diff(offsets), _THREADED_ROWS)
    return out


@kernel(nogil=True)
def _per_query(metric, x, aux, score, offsets, k, average, out):
    # The metric called here directly: numba optimises a caller with its callees linked in, so each layer between
    # the loop and the metric re-optimises the metric's code (0.25 s per metric).
    for q in range(out.shape[0]):
        lo, hi = offsets[q], offsets[q + 1]
        out[q] = _query_value(metric, x[lo:hi], aux[lo:hi], score[lo:hi], k, average)


@inner_kernel
def tie_groups(score, average):
    """Rank one query.

    Returns ``order`` (document indices by score descending, ties in input order) and ``bounds``: tie group ``g``
    occupies ranking positions ``bounds[g]:bounds[g + 1]`` (0-based).
    """
    n = score.shape[0]
    order = descending_order(score)  # stable: ties keep input order
    bounds = np.empty(n + 1, np.int64)
    bounds[0] = 0
    g = 0
    for i in range(1, n):
        if not average or score[order[i]] != score[order[i - 1]]:
            g += 1
            bounds[g] = i
    bounds[g + 1] = n
    return order, bounds[: g + 2]


@inner_kernel
def _discount(pos):
    """D(r) = 1 / log2(r + 1) for the 0-based position ``pos`` (rank r = pos + 1)."""
    return 1.0 / np.log2(pos + 2.0)


@inner_kernel
def _group_sum(x, order, a, b):
    s = 0.0
    for i in range(a, b):
        s += x[order[i]]
    return s


# ---------------------------------------------------------------- gain metrics


@inner_kernel
def _dcg(gain, score, k, average):
    # By linearity, a tie group contributes its mean gain times the discounts of the positions it occupies.
    order, bounds = tie_groups(score, average)
    top = min(k, score.shape[0])
    total = 0.0
    for g in range(bounds.shape[0] - 1):
        a, b = bounds[g], bounds[g + 1]
        if a >= top:
            break
        disc = 0.0
        for pos in range(a, min(b, top)):
            disc += _discount(pos)
        total += _group_sum(gain, order, a, b) / (b - a) * disc
    return total


@inner_kernel
def dcg_query(gain, aux, score, k, average):
    return _dcg(gain, score, k, average)


@inner_kernel
def ndcg_query(gain, aux, score, k, average):
    ideal = gain[descending_order(gain)]  # not np.sort: one sort kernel compiled for all metrics, not two
    idcg = 0.0
    for pos in range(min(k, ideal.shape[0])):
        idcg += ideal[pos] * _discount(pos)
    if idcg == 0.0:
        return np.nan
    return _dcg(gain, score, k, average) / idcg


# ---------------------------------------------------------------- binary-relevance metrics


@inner_kernel
def _relevant_in_top(rel, score, k, average):
    """Expected number of relevant documents in the top k: a tie group's share per slot is its relevant fraction."""
    order, bounds = tie_groups(score, average)
    top = min(k, score.shape[0])
    total = 0.0
    for g in range(bounds.shape[0] - 1):
        a, b = bounds[g], bounds[g + 1]
        if a >= top:
            break
        total += _group_sum(rel, order, a, b) / (b - a) * (min(b, top) - a)
    return total


@inner_kernel
def precision_query(rel, aux, score, k, average):
    return _relevant_in_top(rel, score, k, average) / min(k, score.shape[0])


@inner_kernel
def recall_query(rel, aux, score, k, average):
    n_rel = rel.sum()
    if n_rel == 0.0:
        return np.nan
    return _relevant_in_top(rel, score, k, average) / n_rel


@inner_kernel
def hits_in_top_query(rel, aux, score, k, average):
    """Expected number of relevant documents in the top k (the F-measure's numerator, before normalising)."""
    return _relevant_in_top(rel, score, k, average)


@inner_kernel
def r_precision_query(rel, aux, score, k, average):
    # Precision at R, the query's number of relevant documents (k plays no part).
    n_rel = rel.sum()
    if n_rel == 0.0:
        return np.nan
    return _relevant_in_top(rel, score, np.int64(n_rel), average) / n_rel


@inner_kernel
def ap_query(rel, aux, score, k, average):
    # E[rel_r * hits_up_to_r] at the j-th slot (0-based) of a tie group holding c relevant of m, with `before`
    # relevant ranked above the group: P(slot relevant) * (before + 1) + j * P(two given slots both relevant).
    order, bounds = tie_groups(score, average)
    top = min(k, score.shape[0])
    total = 0.0
    before = 0.0
    for g in range(bounds.shape[0] - 1):
        a, b = bounds[g], bounds[g + 1]
        m = b - a
        c = _group_sum(rel, order, a, b)
        if c > 0.0 and a < top:
            p_one = c / m
            p_two = c * (c - 1.0) / (m * (m - 1.0)) if m > 1 else 0.0
            for j in range(min(b, top) - a):
                total += (p_one * (before + 1.0) + j * p_two) / (a + j + 1.0)
        before += c
    if before == 0.0:
        return np.nan
    return total / min(k, before)


@inner_kernel
def _first_relevant_group(rel, order, bounds):
    """Index of the first tie group holding a relevant document and its relevant count, or (-1, 0)."""
    for g in range(bounds.shape[0] - 1):
        c = _group_sum(rel, order, bounds[g], bounds[g + 1])
        if c > 0.0:
            return g, c
    return -1, 0.0


@inner_kernel
def rr_query(rel, aux, score, k, average):
    # The first relevant document lies in the first group holding one; within it, the first relevant slot j
    # follows the distribution of the first success when drawing without replacement.
    order, bounds = tie_groups(score, average)
    g, c = _first_relevant_group(rel, order, bounds)
    if g < 0:
        return np.nan
    a, m = bounds[g], bounds[g + 1] - bounds[g]
    total = 0.0
    miss = 1.0  # P(slots 0..j-1 of the group are all irrelevant)
    for j in range(min(m, max(k - a, 0))):
        total += miss * c / (m - j) / (a + j + 1.0)
        miss *= (m - c - j) / (m - j)
        if miss <= 0.0:
            break
    return total


@inner_kernel
def hits_query(rel, aux, score, k, average):
    # Hypergeometric: P(no relevant document in the group's slots that fall inside the top k).
    order, bounds = tie_groups(score, average)
    g, c = _first_relevant_group(rel, order, bounds)
    if g < 0 or bounds[g] >= k:
        return 0.0
    a, m = bounds[g], bounds[g + 1] - bounds[g]
    miss = 1.0
    for j in range(min(m, k - a)):
        miss *= (m - c - j) / (m - j)
    return 1.0 - miss


# ---------------------------------------------------------------- precision-recall curves


@kernel
def precision_recall_points(rel, score, offsets, k, average):
    """The points of every query's precision-recall curve within the top k.

    A point is the end of a tie group (every rank with ``average=False``; a group straddling k ends at k): its rank
    and its expected number of relevant documents at or above it. Returns ``(hits, ranks, point_offsets)``: query q
    owns points ``point_offsets[q]:point_offsets[q + 1]``.
    """
    n_queries = offsets.shape[0] - 1
    hits = np.empty(rel.shape[0])
    ranks = np.empty(rel.shape[0])
    point_offsets = np.zeros(n_queries + 1, np.int64)
    p = 0
    for q in range(n_queries):
        lo, hi = offsets[q], offsets[q + 1]
        order, bounds = tie_groups(score[lo:hi], average)
        top = min(k, hi - lo)
        seen = 0.0
        for g in range(bounds.shape[0] - 1):
            a, b = bounds[g], bounds[g + 1]
            if a >= top:
                break
            end = min(b, top)
            seen += _group_sum(rel[lo:hi], order, a, b) / (b - a) * (end - a)
            hits[p] = seen
            ranks[p] = end
            p += 1
        point_offsets[q + 1] = p
    return hits[:p], ranks[:p], point_offsets


@kernel
def interpolated_precision(hits, ranks, point_offsets, n_relevant, levels):
    """trec_eval's interpolated precision (``iprec_at_recall``) of every query at every recall level.

    Level L needs c = floor(L * R + 0.9) relevant documents (trec_eval's rule up to 9.0.7, and pytrec_eval's); its
    precision is the highest precision at any point holding at least c of them, 0 if none does. NaN for R = 0.
    """
    n_queries = point_offsets.shape[0] - 1
    out = np.zeros((n_queries, levels.shape[0]))
    for q in range(n_queries):
        r = n_relevant[q]
        if r == 0.0:
            out[q, :] = np.nan
            continue
        lo, hi = point_offsets[q], point_offsets[q + 1]
        best = np.zeros(hi - lo + 1)  # best[j]: highest precision at points j.. (suffix maximum)
        for j in range(hi - lo - 1, -1, -1):
            best[j] = max(best[j + 1], hits[lo + j] / ranks[lo + j])
        for i in range(levels.shape[0]):
            needed = np.floor(levels[i] * r + 0.9)
            j = 0
            while j < hi - lo and hits[lo + j] < needed - 1e-9:  # expected hits may be fractional sums
                j += 1
            out[q, i] = best[j]
    return out


# ---------------------------------------------------------------- expected reciprocal rank


@inner_kernel
def _err_tie_group(p, a, slots):
    """Expected sum over the group's first ``slots`` slots of p_j * prod_{i<j}(1 - p_i) / (a + j), over its orders.

    p_j * prod_{i<j} q_i = prod_{i<j} q_i - prod_{i<=j} q_i with q = 1 - p, and the first t slots of a random
    order are a random t-subset, so the sum is sum_j (e_{j-1} - e_j) / (a + j), where e_t is the *mean* over
    t-subsets of the product of q (means stay in [0, 1], unlike raw elementary symmetric polynomials). Documents
    with p = 0 (label 0, q = 1) enter in closed form, so the recursion runs only over the others, and only up to
    the subset size where the means fall below 2**-60 (they are at most max(q)**t): O(m * min(slots, that size)).
    """
    m = p.shape[0]
    if m == 1:
        return p[0] / (a + 1.0)
    n_active = 0
    q_max = 0.0
    for x in p:
        if x > 0.0:
            n_active += 1
            q_max = max(q_max, 1.0 - x)
    if n_active == 0:
        return 0.0
    n_idle = m - n_active
    top = min(n_active, slots)
    if q_max < 1.0:
        # Truncating the means at max(q)**t < 2**-60 changes the result by less than about 2**-60 * log(m).
        negligible = np.log(2.0**-60) / np.log(q_max) if q_max > 0.0 else 1.0
        top = min(top, int(np.ceil(negligible)) + 1)
    # Subset means over the p > 0 documents, one document at a time (a convex combination: stable).
    e = np.zeros(top + 1)
    e[0] = 1.0
    seen = 0
    for x in p:
        if x > 0.0:
            seen += 1
            for t in range(min(seen, top), 0, -1):
                e[t] = ((seen - t) * e[t] + t * (1.0 - x) * e[t - 1]) / seen
    # Over all documents, the mean over t-subsets mixes e over s = active documents among t drawn: a
    # hypergeometric law, updated one draw at a time (s > top never matters: t <= slots).
    h = np.zeros(top + 1)
    h[0] = 1.0
    prev = 1.0
    total = 0.0
    for t in range(1, slots + 1):
        left = m - t + 1.0
        for s in range(min(t, top), 0, -1):
            h[s] = (h[s] * (n_idle - (t - 1 - s)) + h[s - 1] * (n_active - s + 1.0)) / left
        h[0] *= (n_idle - t + 1.0) / left
        cur = 0.0
        for s in range(min(t, top) + 1):
            cur += h[s] * e[s]
        total += (prev - cur) / (a + t)
        prev = cur
    return total


@inner_kernel
def err_query(stop, aux, score, k, average):
    order, bounds = tie_groups(score, average)
    top = min(k, score.shape[0])
    total = 0.0
    reach = 1.0  # P(user reaches the group): the product of (1 - p) above it does not depend on the order
    for g in range(bounds.shape[0] - 1):
        a, b = bounds[g], bounds[g + 1]
        if a >= top or reach == 0.0:
            break
        p = stop[order[a:b]]
        total += reach * _err_tie_group(p, a, min(b, top) - a)
        for x in p:
            reach *= 1.0 - x
    return total


# ---------------------------------------------------------------- Kendall's tau


@inner_kernel
def _fenwick_add(tree, i, v):
    i += 1
    while i < tree.shape[0]:
        tree[i] += v
        i += i & -i


@inner_kernel
def _fenwick_prefix(tree, i):
    """Sum of entries 0..i-1."""
    s = 0.0
    while i > 0:
        s += tree[i]
        i -= i & -i
    return s


@inner_kernel
def _kendall(label, gain, score, average, weighted):
    """sum w_ij sign_ij / sum w_ij over pairs with different labels, in O(n log n).

    Documents are visited in ranking order, a tie group at a time; a Fenwick tree over label ranks holds the
    documents of the groups above (count and gain sum), so each document finds the documents ranked above it
    with a higher and a lower label. Pairs inside a tie group are never compared (sign 0). With weights the gain
    must be non-decreasing in the label (checked by the caller), so |G_i - G_j| is a signed difference.
    """
    n = label.shape[0]
    by_label = np.argsort(label, kind="mergesort")
    rank = np.empty(n, np.int64)
    r = 0
    run = 0  # documents so far with the current label
    cum = 0.0  # gain sum of documents so far
    den = 0.0
    for i in range(n):
        idx = by_label[i]
        if i > 0 and label[idx] != label[by_label[i - 1]]:
            r += 1
            run = 0
        rank[idx] = r
        if weighted:
            den += i * gain[idx] - cum
            cum += gain[idx]
        else:
            den += i - run
        run += 1
    if den <= 0.0:
        return np.nan
    counts = np.zeros(r + 2)
    sums = np.zeros(r + 2)
    total_count = 0.0
    total_sum = 0.0
    num = 0.0
    order, bounds = tie_groups(score, average)
    for g in range(bounds.shape[0] - 1):
        for i in range(bounds[g], bounds[g + 1]):
            idx = order[i]
            c_lower = _fenwick_prefix(counts, rank[idx])
            c_higher = total_count - _fenwick_prefix(counts, rank[idx] + 1)
            if weighted:
                gi = gain[idx]
                s_lower = _fenwick_prefix(sums, rank[idx])
                s_higher = total_sum - _fenwick_prefix(sums, rank[idx] + 1)
                num += (s_higher - gi * c_higher) - (gi * c_lower - s_lower)
            else:
                num += c_higher - c_lower
        for i in range(bounds[g], bounds[g + 1]):
            idx = order[i]
            _fenwick_add(counts, rank[idx], 1.0)
            total_count += 1.0
            if weighted:
                _fenwick_add(sums, rank[idx], gain[idx])
                total_sum += gain[idx]
    return num / den


@inner_kernel
def kendall_query(label, gain, score, k, average):
    return _kendall(label, gain, score, average, False)


@inner_kernel
def kendall_gain_query(label, gain, score, k, average):
    return _kendall(label, gain, score, average, True)


# Which metric per_query computes is a type, not a number: each metric is an empty named tuple of its own class,
# per_query is compiled per class, and _query_value's overload picks that metric's kernel while typing, so a call
# compiles only its own metric (all ten at once cost ~15 s on first use). Not a kernel passed as an argument: numba
# cannot reuse its disk cache for functions specialised on a dispatcher.
class _Ndcg(NamedTuple):
    pass


class _Dcg(NamedTuple):
    pass


class _Ap(NamedTuple):
    pass


class _Rr(NamedTuple):
    pass


class _Precision(NamedTuple):
    pass


class _Recall(NamedTuple):
    pass


class _Hits(NamedTuple):
    pass


class _HitsInTop(NamedTuple):
    pass


class _RPrecision(NamedTuple):
    pass


class _Err(NamedTuple):
    pass


class _Kendall(NamedTuple):
    pass


class _KendallGain(NamedTuple):
    pass


_QUERY_KERNELS = {_Ndcg: ndcg_query, _Dcg: dcg_query, _Ap: ap_query, _Rr: rr_query, _Precision: precision_query,
                  _Recall: recall_query, _Hits: hits_query, _Err: err_query, _Kendall: kendall_query,
                  _KendallGain: kendall_gain_query, _HitsInTop: hits_in_top_query, _RPrecision: r_precision_query}
(NDCG, DCG, AP, RR, PRECISION, RECALL, HITS, ERR, KENDALL, KENDALL_GAIN, HITS_IN_TOP,
 R_PRECISION) = (cls() for cls in _QUERY_KERNELS)


def _query_value(metric, x, aux, score, k, average):
    """The value of ``metric`` on one query (numba only: its overload below)."""
    raise NotImplementedError("_query_value runs inside numba kernels only")


@overload(_query_value)
def _query_value_overload(metric, x, aux, score, k, average):
    kernel = _QUERY_KERNELS[metric.instance_class]

    def value(metric, x, aux, score, k, average):
        return kernel(x, aux, score, k, average)
    return value
