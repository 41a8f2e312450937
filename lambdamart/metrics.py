"""Ranking metrics over queries: NDCG, DCG, (g)MAP, MRR, P/R/F/hits@k, R-precision, PR curves, ERR, Kendall's tau.

Conventions (docs/design.md, Metrics): documents are ranked by score, highest first; rank r is 1-based and the
DCG discount is 1 / log2(r + 1). Binary metrics call a document relevant when its label exceeds ``threshold`` (0 by
default).
Ties in scores are averaged by default (``ties="average"``): the metric is the exact expected value over all
orders of the tied documents, so it does not depend on row order; ``ties="input"`` breaks ties by input row order
(as LightGBM and XGBoost do). Each function returns the mean over queries, weighted by the per-query mean of
``sample_weight`` if given, or with ``reduce=None`` one value per query in the order of the sorted unique query
ids. A query where the metric is undefined (no relevant document, or no pair of documents with different labels
for Kendall's tau) gets the ``empty`` value: 1.0 by default, 0.0, or "skip" to leave it out of the mean (NaN in
the per-query array).

Validation, grouping and reduction live here; the per-query work is done by the numba kernels in
:mod:`lambdamart._metric_kernels`.
"""

from __future__ import annotations

import numbers
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from . import _metric_kernels as _kern
from ._gains import MAX_EXPONENTIAL_LABEL, check_labels, label_gains
from ._queries import group_queries

__all__ = [
    "ndcg",
    "dcg",
    "mean_average_precision",
    "mean_reciprocal_rank",
    "precision_at_k",
    "recall_at_k",
    "hits_at_k",
    "f_measure",
    "r_precision",
    "geometric_mean_average_precision",
    "precision_recall_curve",
    "err",
    "kendall_tau",
]

# "No cut-off": larger than any query, and still exact as a float in min(k, n_relevant).
_WHOLE_LIST = 2**53

_Queries = namedtuple("_Queries", "labels score offsets k average weights ids")


# ---------------------------------------------------------------- validation, grouping, reduction


def _check_choice(name, value, choices):
    if not any(value is c or (isinstance(value, str) and value == c) for c in choices):
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}.")


def _check_empty(empty):
    ok = empty == "skip" if isinstance(empty, str) else (
        isinstance(empty, numbers.Real) and not isinstance(empty, bool) and empty in (0, 1)
    )
    if not ok:
        raise ValueError(
            f"empty must be 1.0, 0.0 or 'skip' (the value of a query where the metric is undefined); got {empty!r}."
        )


def _check_k(k):
    if k is None:
        return _WHOLE_LIST
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise TypeError(f"k must be an integer >= 1 or None (the whole list); got {k!r} of type {type(k).__name__}.")
    if k < 1:
        raise ValueError(f"k must be >= 1 (the number of top positions that count) or None; got {k}.")
    # A cut-off beyond any query is the whole list (and must fit the kernels' int64).
    return int(min(k, _WHOLE_LIST))


def _as_1d(a, name):
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (one value per row), got shape {a.shape}. For several queries pass "
            "flat arrays and give each row its query id with qid=."
        )
    return a


def _check_real(value, name):
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number; got {value!r}.")
    return float(value)


def _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty=1.0):
    """Validate the common arguments and lay the rows out query by query (shared by every metric)."""
    _check_choice("ties", ties, ("average", "input"))
    _check_choice("reduce", reduce, ("mean", None))
    _check_empty(empty)
    k = _check_k(k)
    y_true = _as_1d(y_true, "y_true")
    y_score = _as_1d(y_score, "y_score")
    n = y_true.shape[0]
    if y_score.shape[0] != n:
        raise ValueError(f"y_true has {n} rows but y_score has {y_score.shape[0]}; give one score per row.")
    if n == 0:
        raise ValueError("y_true and y_score are empty; metrics need at least one document.")
    labels = check_labels(y_true, "y_true")
    if y_score.dtype == object:
        try:
            y_score = y_score.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError("y_score must hold numeric scores, got an object array with entries that are not "
                            "numbers.") from None
    if y_score.dtype.kind not in "biuf":
        raise TypeError(f"y_score must hold numeric scores, got dtype {y_score.dtype}.")
    score = y_score.astype(np.float64, copy=False)
    if np.isnan(score).any():
        raise ValueError("y_score contains NaN; every document needs a score to be ranked (+-inf is allowed).")
    groups = group_queries(qid, n)
    weights = None
    if sample_weight is not None:
        sw = _as_1d(sample_weight, "sample_weight")
        if sw.shape[0] != n:
            raise ValueError(f"sample_weight has {sw.shape[0]} entries but there are {n} rows; give one per row.")
        if sw.dtype.kind not in "biuf":
            raise TypeError(f"sample_weight must be numeric, got dtype {sw.dtype}.")
        sw = sw.astype(np.float64, copy=False)
        if not np.isfinite(sw).all() or (sw < 0).any():
            raise ValueError("sample_weight must hold finite, non-negative weights.")
        if reduce is not None and not sw.any():
            # scikit-learn's weighted means raise here too: a mean with no weight is not a number to report.
            raise ValueError("sample_weight is 0 on every row, so the weighted mean is undefined; give some query "
                             "a positive weight, or pass reduce=None for the per-query values.")
        if sw.size and sw.max() > 0:
            # Scaled by a power of two (exact) to a largest weight in [0.5, 1): a weighted mean is then the same to
            # the bit, and neither sums of weights near the float64 maximum overflow nor subnormal ones underflow.
            sw = np.ldexp(sw, -np.frexp(sw.max())[1])
        # Each query weighs the mean weight of its rows.
        weights = np.add.reduceat(groups.take(sw), groups.offsets[:-1]) / groups.sizes
    # Contiguous float64 inputs keep the kernels to one compiled (and cached) signature.
    labels = np.ascontiguousarray(groups.take(labels))
    score = np.ascontiguousarray(groups.take(score))
    return _Queries(labels, score, groups.offsets, k, ties == "average", weights, groups.ids)


def _evaluate(metric, x, queries, aux=None):
    """Per-query values of ``metric`` (a code of :mod:`._metric_kernels`) (NaN where the metric is undefined)."""
    aux = x if aux is None else aux
    return _kern.per_query(metric, x, aux, queries.score, queries.offsets, queries.k, queries.average)


def _reduce(values, queries, reduce, empty=None):
    """Apply ``empty`` to undefined queries, then the query-weighted mean (or the per-query array)."""
    if empty is not None and empty != "skip":
        values[np.isnan(values)] = float(empty)
    if reduce is None:
        return values
    kept = ~np.isnan(values)
    weights = np.ones(values.shape[0]) if queries.weights is None else queries.weights
    total = weights[kept].sum()
    if total == 0:
        return float("nan")  # every query skipped, or zero weight on all that remain
    return float(np.dot(weights[kept], values[kept]) / total)


def _relevance(labels, threshold):
    return (labels > _check_real(threshold, "threshold")).astype(np.float64)


def _doc(func):
    func.__doc__ = func.__doc__.format(**_DOC)
    return func


_DOC = {
    "data": """y_true : array-like of shape (n_samples,)
        Relevance labels: finite, non-negative numbers (graded 0, 1, 2, ... or binary).
    y_score : array-like of shape (n_samples,)
        Model scores; each query's documents are ranked by score, highest first. +-inf is allowed, NaN is not.
    qid : array-like of shape (n_samples,), default=None
        Query id of each row (integers or strings), rows in any order. None: all rows form one query.""",
    "k": """k : int >= 1 or None, default=None
        Cut-off: only ranks 1..k count. A query with fewer than k documents uses all of them (no padding).
        None: the whole list.""",
    "threshold": """threshold : float, default=0.0
        A document is relevant when its label is greater than ``threshold``.""",
    "gain": """gain : {"exponential", "linear"} or array-like, default="exponential"
        Gain of a label l: 2**l - 1, l, or ``gain[l]`` for integer labels. Labels too large for exact exponential
        gain (above 53) raise; use ``gain="linear"`` for them.""",
    "ties": """ties : {"average", "input"}, default="average"
        "average": the expected value over all orders of the documents tied in score, so the result does not
        depend on row order. "input": tied documents keep their input row order (stable sort).""",
    "empty": """empty : {1.0, 0.0, "skip"}, default=1.0
        Value of a query where the metric is undefined. "skip" leaves such queries out of the mean (NaN with
        ``reduce=None``); if every query is skipped the mean is NaN.""",
    "rest": """sample_weight : array-like of shape (n_samples,), default=None
        Non-negative row weights, not all 0; each query is weighted by the mean weight of its rows in the mean.
    reduce : {"mean", None}, default="mean"
        "mean": the (query-weighted) mean over queries. None: one value per query, in the order of the sorted
        unique query ids.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or the per-query values with ``reduce=None``.""",
}


# ---------------------------------------------------------------- gain metrics


@_doc
def ndcg(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    gain: str | ArrayLike = "exponential", ties: str = "average", empty: float | str = 1.0,
    sample_weight: ArrayLike | None = None, reduce: str | None = "mean",
) -> float | np.ndarray:
    """Normalized discounted cumulative gain, NDCG@k = DCG@k / IDCG@k, averaged over queries.

    DCG@k = sum over ranks r <= k of G(label_r) / log2(r + 1); IDCG@k is the DCG@k of the ideal (label-sorted)
    order. A query with IDCG = 0 (no document with positive gain) gets ``empty``: 1.0 as in LightGBM and XGBoost;
    with ``empty=0.0``, ``gain="linear"`` and ``ties="average"`` the result equals
    ``sklearn.metrics.ndcg_score`` query by query.

    Parameters
    ----------
    {data}
    {k}
    {gain}
    {ties}
    {empty}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty)
    gains = label_gains(queries.labels, gain, "y_true")
    return _reduce(_evaluate(_kern.NDCG, gains, queries), queries, reduce, empty)


@_doc
def dcg(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    gain: str | ArrayLike = "exponential", ties: str = "average", sample_weight: ArrayLike | None = None,
    reduce: str | None = "mean",
) -> float | np.ndarray:
    """Discounted cumulative gain, DCG@k = sum over ranks r <= k of G(label_r) / log2(r + 1), averaged over queries.

    Parameters
    ----------
    {data}
    {k}
    {gain}
    {ties}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce)
    gains = label_gains(queries.labels, gain, "y_true")
    return _reduce(_evaluate(_kern.DCG, gains, queries), queries, reduce)


# ---------------------------------------------------------------- binary-relevance metrics


@_doc
def mean_average_precision(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    threshold: float = 0.0, ties: str = "average", empty: float | str = 1.0, sample_weight: ArrayLike | None = None,
    reduce: str | None = "mean",
) -> float | np.ndarray:
    """Mean average precision (MAP@k).

    AP = sum over ranks r of P@r * rel_r / R, where rel_r says whether the document at rank r is relevant and R
    is the number of relevant documents in the query. AP@k sums ranks r <= k and divides by min(k, R). A query
    with no relevant document gets ``empty``. With ``ties="average"`` each tie group uses the closed form of the
    expected value (McSherry & Najork, 2008).

    Parameters
    ----------
    {data}
    {k}
    {threshold}
    {ties}
    {empty}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty)
    rel = _relevance(queries.labels, threshold)
    return _reduce(_evaluate(_kern.AP, rel, queries), queries, reduce, empty)


@_doc
def mean_reciprocal_rank(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    threshold: float = 0.0, ties: str = "average", empty: float | str = 1.0, sample_weight: ArrayLike | None = None,
    reduce: str | None = "mean",
) -> float | np.ndarray:
    """Mean reciprocal rank: 1 / rank of the first relevant document, 0 if it is ranked below k.

    A query with no relevant document gets ``empty``.

    Parameters
    ----------
    {data}
    {k}
    {threshold}
    {ties}
    {empty}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty)
    rel = _relevance(queries.labels, threshold)
    return _reduce(_evaluate(_kern.RR, rel, queries), queries, reduce, empty)


@_doc
def precision_at_k(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    threshold: float = 0.0, ties: str = "average", sample_weight: ArrayLike | None = None,
    reduce: str | None = "mean",
) -> float | np.ndarray:
    """Precision at k: relevant documents in the top k divided by min(k, n_documents).

    A query shorter than k is not padded; with ``k=None`` this is the fraction of relevant documents.

    Parameters
    ----------
    {data}
    {k}
    {threshold}
    {ties}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce)
    rel = _relevance(queries.labels, threshold)
    return _reduce(_evaluate(_kern.PRECISION, rel, queries), queries, reduce)


@_doc
def recall_at_k(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    threshold: float = 0.0, ties: str = "average", empty: float | str = 1.0, sample_weight: ArrayLike | None = None,
    reduce: str | None = "mean",
) -> float | np.ndarray:
    """Recall at k: relevant documents in the top k divided by the query's relevant documents R.

    A query with no relevant document (R = 0) gets ``empty``.

    Parameters
    ----------
    {data}
    {k}
    {threshold}
    {ties}
    {empty}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty)
    rel = _relevance(queries.labels, threshold)
    return _reduce(_evaluate(_kern.RECALL, rel, queries), queries, reduce, empty)


@_doc
def hits_at_k(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    threshold: float = 0.0, ties: str = "average", sample_weight: ArrayLike | None = None,
    reduce: str | None = "mean",
) -> float | np.ndarray:
    """Hits at k: 1 if any relevant document is in the top k, else 0 (a query with none scores 0).

    With ``ties="average"`` a tie group straddling rank k contributes the hypergeometric probability that one of
    its relevant documents lands above the cut.

    Parameters
    ----------
    {data}
    {k}
    {threshold}
    {ties}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce)
    rel = _relevance(queries.labels, threshold)
    return _reduce(_evaluate(_kern.HITS, rel, queries), queries, reduce)


# ---------------------------------------------------------------- set-based and recall-oriented metrics


def _relevant_counts(rel, queries):
    return np.add.reduceat(rel, queries.offsets[:-1])


@_doc
def f_measure(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    beta: float = 1.0, threshold: float = 0.0, ties: str = "average", empty: float | str = 1.0,
    sample_weight: ArrayLike | None = None, reduce: str | None = "mean",
) -> float | np.ndarray:
    """F-measure at k: the weighted harmonic mean of precision and recall of the top k documents.

    F_beta = (1 + beta**2) * P * R / (beta**2 * P + R) with P = h / min(k, n) and R = h / n_relevant, where h is
    the number of relevant documents in the top k; that is (1 + beta**2) * h / (beta**2 * n_relevant + min(k, n)),
    0 when h = 0. beta > 1 weighs recall more. With ``k=None`` the top k is the whole list: trec_eval's ``set_F``
    (the retrieved set), whose parameter x is beta**2 (``set_F.0.25`` is ``beta=0.5``). The formula is linear in
    h, so with ``ties="average"`` the value is exact. A query with no relevant document gets ``empty``
    (trec_eval: 0, i.e. ``empty=0.0``).

    Parameters
    ----------
    {data}
    {k}
    beta : float > 0, default=1.0
        Weight of recall against precision: recall counts beta times as much.
    {threshold}
    {ties}
    {empty}
    {rest}
    """
    beta = _check_real(beta, "beta")
    if not 0 < beta <= 1e100:  # beta**2 of a larger one overflows to inf, and the score to NaN
        raise ValueError(f"beta must be > 0 and at most 1e100 (the weight of recall against precision); got "
                         f"{beta}.")
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty)
    rel = _relevance(queries.labels, threshold)
    hits = _evaluate(_kern.HITS_IN_TOP, rel, queries)
    n_relevant = _relevant_counts(rel, queries)
    b2 = beta * beta
    with np.errstate(invalid="ignore", divide="ignore"):
        values = (1.0 + b2) * hits / (b2 * n_relevant + np.minimum(queries.k, np.diff(queries.offsets)))
    values[n_relevant == 0] = np.nan
    return _reduce(values, queries, reduce, empty)


@_doc
def r_precision(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, threshold: float = 0.0,
    ties: str = "average", empty: float | str = 1.0, sample_weight: ArrayLike | None = None,
    reduce: str | None = "mean",
) -> float | np.ndarray:
    """R-precision: precision at rank R, the query's number of relevant documents (trec_eval's ``Rprec``).

    Precision and recall are equal there. A query with fewer than R documents is not padded with non-relevant
    ones: its relevant documents are all in its list, so its R-precision is 1. A query with no relevant document
    gets ``empty`` (trec_eval: 0).

    Parameters
    ----------
    {data}
    {threshold}
    {ties}
    {empty}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, None, ties, sample_weight, reduce, empty)
    rel = _relevance(queries.labels, threshold)
    return _reduce(_evaluate(_kern.R_PRECISION, rel, queries), queries, reduce, empty)


@_doc
def geometric_mean_average_precision(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    threshold: float = 0.0, floor: float = 1e-5, ties: str = "average", empty: float | str = 1.0,
    sample_weight: ArrayLike | None = None, reduce: str | None = "mean",
) -> float | np.ndarray:
    """Geometric mean average precision (gMAP): exp of the mean over queries of log(max(AP, floor)).

    The geometric mean rewards improving the hard queries (Robertson, 2006). AP as in
    :func:`mean_average_precision`; an AP of 0 would make the mean 0 whatever the other queries do, so each AP is
    raised to at least ``floor`` first: trec_eval's ``gm_map`` with its floor 1e-5. The mean of the logs is
    weighted by ``sample_weight`` like every mean here.

    Parameters
    ----------
    {data}
    {k}
    {threshold}
    floor : float >= 0, default=1e-5
        The least AP a query counts with (trec_eval's 1e-5). 0 keeps zeros, and one AP of 0 makes gMAP 0.
    {ties}
    {empty}
        Applied to AP before the floor.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative row weights; each query is weighted by the mean weight of its rows in the mean of logs.
    reduce : {{"mean", None}}, default="mean"
        "mean": the geometric mean over queries. None: each query's max(AP, floor), in the order of the sorted
        unique query ids (their geometric mean is gMAP).

    Returns
    -------
    float or ndarray of shape (n_queries,)
        gMAP, or the floored per-query AP with ``reduce=None``.
    """
    floor = _check_real(floor, "floor")
    if not 0 <= floor <= 1:
        raise ValueError(f"floor must be between 0 and 1 (the least AP a query counts with); got {floor}.")
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty)
    rel = _relevance(queries.labels, threshold)
    ap = _reduce(_evaluate(_kern.AP, rel, queries), queries, None, empty)
    floored = np.fmax(ap, floor)  # fmax keeps a skipped query's NaN only where AP itself is NaN
    floored[np.isnan(ap)] = np.nan
    if reduce is None:
        return floored
    with np.errstate(divide="ignore"):  # log(0) = -inf when floor=0: the geometric mean is then 0
        log_mean = _reduce(np.log(floored), queries, "mean")
    return float(np.exp(log_mean))


# Recall levels of trec_eval's iprec_at_recall and of the standard 11-point precision-recall graph.
STANDARD_RECALL_LEVELS = np.round(np.linspace(0.0, 1.0, 11), 2)


@dataclass(frozen=True)
class PrecisionRecallCurve:
    """Precision-recall curves of a set of queries, raw (per query) and interpolated at fixed recall levels.

    Attributes
    ----------
    recall_levels : ndarray of shape (n_levels,)
        The recall levels of the interpolated curve (by default 0.0, 0.1, ..., 1.0).
    precision : ndarray of shape (n_levels,) or (n_queries, n_levels)
        Interpolated precision at each level: the (query-weighted) mean over queries, trec_eval's
        ``iprec_at_recall_*``, or with ``reduce=None`` one row per query in the order of the sorted unique query
        ids (NaN rows for skipped queries).
    query_ids : ndarray of shape (n_queries,)
        The sorted unique query ids: the rows of the per-query arrays.
    query_recall : list of ndarray
        Raw curve of each query: the recall at each point (each rank, or each tie group's end with
        ``ties="average"``). NaN for a query without relevant documents.
    query_precision : list of ndarray
        Raw curve of each query: the precision at the same points.
    """

    recall_levels: np.ndarray
    precision: np.ndarray
    query_ids: np.ndarray
    query_recall: list
    query_precision: list


@_doc
def precision_recall_curve(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    recall_levels: ArrayLike | None = None, threshold: float = 0.0, ties: str = "average",
    empty: float | str = 1.0, sample_weight: ArrayLike | None = None, reduce: str | None = "mean",
) -> PrecisionRecallCurve:
    """Precision-recall curve of each query, and their interpolated average at the 11 standard recall levels.

    The raw curve of a query has a point per rank r <= k: recall h_r / R and precision h_r / r, where h_r is the
    number of relevant documents in the top r and R the query's number of relevant documents. With
    ``ties="average"`` a tie group enters as a whole, as scikit-learn's ``precision_recall_curve`` does with a
    threshold: a point at each group's end (at k for a group straddling the cut-off). The interpolated precision
    at recall level L is the highest precision at any point whose recall reaches L, 0 if none does; "reaches"
    follows trec_eval's ``iprec_at_recall`` (up to trec_eval 9.0.7 and in pytrec_eval): h_r >= floor(L * R + 0.9).
    A query with no relevant document gets ``empty`` at every level (trec_eval: 0).

    Parameters
    ----------
    {data}
    {k}
    recall_levels : array-like of float in [0, 1], default=None
        The recall levels of the interpolated curve. None: 0.0, 0.1, ..., 1.0.
    {threshold}
    {ties}
    {empty}
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative row weights, not all 0; each query is weighted by the mean weight of its rows in the mean.
    reduce : {{"mean", None}}, default="mean"
        "mean": the interpolated precision is averaged over queries (shape (n_levels,)). None: one row per query.

    Returns
    -------
    PrecisionRecallCurve
        The recall levels, the interpolated precision, and each query's raw curve.
    """
    if recall_levels is None:
        levels = STANDARD_RECALL_LEVELS.copy()
    else:
        levels = _as_1d(recall_levels, "recall_levels")
        if levels.dtype.kind not in "biuf" or levels.size == 0 or not np.all((levels >= 0) & (levels <= 1)):
            raise ValueError("recall_levels must be a non-empty list of numbers between 0 and 1.")
        levels = levels.astype(np.float64)
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty)
    rel = _relevance(queries.labels, threshold)
    n_relevant = _relevant_counts(rel, queries)
    hits, ranks, point_offsets = _kern.precision_recall_points(rel, queries.score, queries.offsets, queries.k,
                                                               queries.average)
    interpolated = _kern.interpolated_precision(hits, ranks, point_offsets, n_relevant, levels)
    if empty != "skip":
        interpolated[np.isnan(interpolated)] = float(empty)
    if reduce is not None:
        interpolated = np.array([_reduce(column, queries, "mean") for column in interpolated.T])
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = [hits[a:b] / n for a, b, n in zip(point_offsets[:-1], point_offsets[1:], n_relevant)]
        precision = [hits[a:b] / ranks[a:b] for a, b in zip(point_offsets[:-1], point_offsets[1:])]
    for r, n in zip(recall, n_relevant):
        if n == 0:
            r[:] = np.nan
    return PrecisionRecallCurve(levels, interpolated, queries.ids, recall, precision)


# ---------------------------------------------------------------- cascade and correlation metrics


@_doc
def err(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    max_label: float | None = None, ties: str = "average", sample_weight: ArrayLike | None = None,
    reduce: str | None = "mean",
) -> float | np.ndarray:
    """Expected reciprocal rank (Chapelle et al., 2009).

    ERR@k = sum over ranks r <= k of (1 / r) * R_r * prod over i < r of (1 - R_i), with stop probability
    R = (2**label - 1) / 2**max_label. With ``ties="average"`` each tie group uses the exact expected value over
    its orders (means of elementary symmetric polynomials of 1 - R).

    Parameters
    ----------
    {data}
    {k}
    max_label : float or None, default=None
        Top grade of the label scale, l_max in R. None: the largest label in ``y_true`` over all queries, so every
        query uses one scale. Must be at least that label and at most 53.
    {ties}
    {rest}
    """
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce)
    top = queries.labels.max()
    if top > MAX_EXPONENTIAL_LABEL:
        raise ValueError(f"y_true has label {top:g}, but ERR's stop probability (2**label - 1) / 2**max_label is "
                         f"exact only for labels up to {MAX_EXPONENTIAL_LABEL}; rescale the labels to a graded scale "
                         f"(e.g. 0..4).")
    gains = label_gains(queries.labels, "exponential", "y_true")
    if max_label is None:
        max_label = top
    else:
        max_label = _check_real(max_label, "max_label")
        if max_label < top:
            raise ValueError(f"max_label={max_label:g} is below the largest label in y_true ({top:g}).")
        if max_label > MAX_EXPONENTIAL_LABEL:
            raise ValueError(f"max_label must be at most {MAX_EXPONENTIAL_LABEL} (2**max_label must be exact).")
    stop = gains / np.exp2(max_label)
    return _reduce(_evaluate(_kern.ERR, stop, queries), queries, reduce)


@_doc
def kendall_tau(
    y_true: ArrayLike, y_score: ArrayLike, qid: ArrayLike | None = None, *, k: int | None = None,
    pair_weight: str | None = None, gain: str | ArrayLike = "exponential", ties: str = "average",
    empty: float | str = 1.0, sample_weight: ArrayLike | None = None, reduce: str | None = "mean",
) -> float | np.ndarray:
    """Kendall rank correlation between the score order and the label order of each query.

    tau = sum w_ij * sign_ij / sum w_ij over the pairs of documents with different labels, where sign_ij is +1
    when the higher-labelled document is ranked above the other and -1 when below. With ``ties="average"`` pairs
    tied in score count 0 (their expected sign); with ``ties="input"`` input order decides. A query with no pair
    of different labels (or zero total weight) gets ``empty``. Runs in O(n log n) per query.

    Parameters
    ----------
    {data}
    k : None
        Must be None: Kendall's tau is computed over the whole list.
    pair_weight : {{None, "gain"}}, default=None
        None: every pair weighs 1. "gain": a pair weighs |G(l_i) - G(l_j)| (the gain must not decrease as the
        label grows).
    {gain}
        Only used with ``pair_weight="gain"``.
    {ties}
    {empty}
    {rest}
    """
    if k is not None:
        raise ValueError("kendall_tau takes no k: it is computed over the whole list of each query; pass k=None.")
    _check_choice("pair_weight", pair_weight, (None, "gain"))
    queries = _prepare(y_true, y_score, qid, k, ties, sample_weight, reduce, empty)
    if pair_weight is None:
        return _reduce(_evaluate(_kern.KENDALL, queries.labels, queries), queries, reduce, empty)
    gains = label_gains(queries.labels, gain, "y_true")
    _, first = np.unique(queries.labels, return_index=True)
    if np.any(np.diff(gains[first]) < 0):
        raise ValueError("pair_weight='gain' needs a gain that does not decrease as the label grows.")
    return _reduce(_evaluate(_kern.KENDALL_GAIN, queries.labels, queries, gains), queries, reduce, empty)
