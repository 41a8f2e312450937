"""Why one document ranks above another: the difference of their TreeSHAP contributions.

A ranking depends only on differences of scores within a query, so the natural explanation of a ranking decision is
a difference too. :func:`explain_pair` takes one query's rows, and by default compares the top-ranked document with
the one ranked second: feature j lifted the upper document above the lower one by
``contributions[upper, j] - contributions[lower, j]``, and these differences add up to the score difference (the
expected score, the same for every row, cancels). See :meth:`LambdaMARTRanker.predict_contributions
<lambdamart.ranker.LambdaMARTRanker.predict_contributions>` for what the contributions are.
"""

from dataclasses import dataclass
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from .ranker import LambdaMARTRanker

__all__ = ["PairExplanation", "explain_pair"]


@dataclass(frozen=True, eq=False)
class PairExplanation:
    """How each feature moves one document of a query above (or below) another.

    Attributes
    ----------
    upper, lower : int
        Row indices, in the ``X`` given to :func:`explain_pair`, of the two documents compared.
    upper_score, lower_score : float
        Their predicted scores.
    score_difference : float
        ``upper_score - lower_score``.
    contribution_difference : ndarray of float64, shape (n_features,)
        Per feature, the upper document's contribution minus the lower one's (read-only). It sums to
        ``score_difference`` up to floating-point rounding; a positive entry is a feature that lifts the upper
        document above the lower one.
    feature_names : tuple of str
        One name per feature, in column order.
    """

    upper: int
    lower: int
    upper_score: float
    lower_score: float
    score_difference: float
    contribution_difference: np.ndarray
    feature_names: tuple

    def top_features(self, n=10):
        """The ``n`` features whose contribution differences are largest in absolute value, largest first.

        Parameters
        ----------
        n : int, default=10
            How many features to return (all of them when there are fewer).

        Returns
        -------
        list of (str, float)
            ``(feature name, contribution difference)`` pairs; ties in absolute value keep column order.
        """
        if not isinstance(n, Integral) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}.")
        order = np.argsort(-np.abs(self.contribution_difference), kind="stable")[:n]
        return [(self.feature_names[j], float(self.contribution_difference[j])) for j in order]


def explain_pair(ranker: LambdaMARTRanker, X: ArrayLike, upper: int | None = None, lower: int | None = None,
                 feature_names=None) -> PairExplanation:
    """Which features put document ``upper`` of one query above document ``lower``: their TreeSHAP differences.

    Parameters
    ----------
    ranker : LambdaMARTRanker
        A fitted ranker.
    X : {array-like, sparse matrix} of shape (n_documents, n_features)
        The rows of one query (at least two documents).
    upper : int, default=None
        Row index (0-based, in ``X``) of the document to explain. Default: the top-ranked document, or, when only
        ``lower`` is given, the document ranked right above ``lower``.
    lower : int, default=None
        Row index of the document it is compared with. Default: the document ranked right below ``upper`` (the
        second-ranked one when ``upper`` is not given either).
    feature_names : sequence of str, default=None
        Names of the features, in column order. Default: the ranker's ``feature_names_in_`` when it was fitted on a
        DataFrame, else ``"x0"``, ``"x1"``, ...

    Returns
    -------
    PairExplanation

    Notes
    -----
    Documents are ranked by descending :meth:`~lambdamart.ranker.LambdaMARTRanker.predict` score; equal scores keep
    input order, as in the training objective.
    """
    if not isinstance(ranker, LambdaMARTRanker):
        raise TypeError(f"explain_pair explains a LambdaMARTRanker, got {type(ranker).__name__}.")
    check_is_fitted(ranker, "_trees")
    n_rows = _n_rows(X)
    if n_rows < 2:
        raise ValueError(f"explain_pair compares two documents of one query, but X has {n_rows} row(s); pass all "
                         f"of the query's documents.")
    contributions = ranker.predict_contributions(X)
    scores = ranker.predict(X)
    ranking = np.argsort(-scores, kind="stable")  # best first; ties keep input order
    rank_of = np.empty(n_rows, dtype=np.int64)
    rank_of[ranking] = np.arange(n_rows)
    upper = _check_index(upper, "upper", n_rows)
    lower = _check_index(lower, "lower", n_rows)
    if upper is None and lower is None:
        upper, lower = int(ranking[0]), int(ranking[1])
    elif lower is None:
        if rank_of[upper] == n_rows - 1:
            raise ValueError(f"upper={upper} is the query's last-ranked document, so no document ranks right below "
                             f"it; pass lower= as well.")
        lower = int(ranking[rank_of[upper] + 1])
    elif upper is None:
        if rank_of[lower] == 0:
            raise ValueError(f"lower={lower} is the query's top-ranked document, so no document ranks right above "
                             f"it; pass upper= as well.")
        upper = int(ranking[rank_of[lower] - 1])
    if upper == lower:
        raise ValueError(f"upper and lower are both row {upper}; pass two different documents.")
    difference = contributions[upper, :-1] - contributions[lower, :-1]
    difference.setflags(write=False)
    return PairExplanation(upper=upper, lower=lower, upper_score=float(scores[upper]),
                           lower_score=float(scores[lower]), score_difference=float(scores[upper] - scores[lower]),
                           contribution_difference=difference,
                           feature_names=_feature_names(ranker, feature_names))


def _n_rows(X):
    """The number of rows of ``X`` (anything predict accepts), without converting it."""
    shape = getattr(X, "shape", None)
    if shape is None:
        shape = np.shape(X)
    if len(shape) != 2:
        raise ValueError(f"X must be 2-D (one row per document of the query), got shape {tuple(shape)}.")
    return int(shape[0])


def _check_index(index, name, n_rows):
    if index is None:
        return None
    if not isinstance(index, Integral) or isinstance(index, bool):
        raise ValueError(f"{name} must be a row index (an int), got {index!r}.")
    if not 0 <= index < n_rows:
        raise ValueError(f"{name}={index} is not a row of X: the query has {n_rows} documents, rows 0 to "
                         f"{n_rows - 1}.")
    return int(index)


def _feature_names(ranker, feature_names):
    n_features = ranker.n_features_in_
    if feature_names is None:
        names = getattr(ranker, "feature_names_in_", None)
        return tuple(str(n) for n in names) if names is not None else tuple(f"x{j}" for j in range(n_features))
    names = tuple(str(n) for n in feature_names)
    if len(names) != n_features:
        raise ValueError(f"feature_names has {len(names)} names but the ranker has {n_features} features.")
    return names
