"""Ranking metrics over queries: NDCG, DCG, MAP, MRR, precision, recall and hits at k, ERR and Kendall's tau.

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

import numpy as np
from numpy.typing import ArrayLike

from . import _metric_kernels as _kern
from ._gains import MAX_EXPONENTIAL_LABEL, check_labels, label_gains
from ._parallel import serialised_launches
from ._queries import group_queries

__all__ = [
    "ndcg",
    "dcg",
    "mean_average_precision",
    "mean_reciprocal_rank",
    "precision_at_k",
    "recall_at_k",
    "hits_at_k",
    "err",
    "kendall_tau",
]

# "No cut-off": larger than any query, and still exact as a float in min(k, n_relevant).
_WHOLE_LIST = 2**53

_Queries = namedtuple("_Queries", "labels score offsets k average weights")


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
        # Each query weighs the mean weight of its rows.
        weights = np.add.reduceat(groups.take(sw), groups.offsets[:-1]) / groups.sizes
    # Contiguous float64 inputs keep the kernels to one compiled (and cached) signature.
    labels = np.ascontiguousarray(groups.take(labels))
    score = np.ascontiguousarray(groups.take(score))
    return _Queries(labels, score, groups.offsets, k, ties == "average", weights)


def _evaluate(metric, x, queries, aux=None):
    """Per-query values of ``metric`` (a code of :mod:`._metric_kernels`) (NaN where the metric is undefined)."""
    aux = x if aux is None else aux
    with serialised_launches():  # the kernel is parallel over queries
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
        Non-negative row weights; each query is weighted by the mean weight of its rows in the mean.
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
