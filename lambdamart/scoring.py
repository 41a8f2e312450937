"""scikit-learn scorers for ranking metrics, requesting ``qid`` through metadata routing.

A ranking metric is meaningless without the query ids of the scored rows, so every scorer here asks scikit-learn
to route ``qid`` to it (the equivalent of ``scorer.set_score_request(qid=True)``, set at construction time so it
also works when routing is enabled later) and refuses to score without one.
"""

from collections.abc import Callable

import sklearn
from sklearn.metrics import make_scorer

from . import metrics
from ._compat import QidScorer

_ROUTING_HELP = (
    "Ranking scorers need the query id of every row. Enable metadata routing and pass qid to fit:\n"
    "    sklearn.set_config(enable_metadata_routing=True)\n"
    "    GridSearchCV(ranker, grid, scoring=ndcg_scorer(10), cv=GroupKFold(5).set_split_request(groups='qid'))"
    ".fit(X, y, qid=qid)"
)


class _QidRequired:
    """Call a ranking metric, refusing to treat a whole validation fold as a single query."""

    def __init__(self, metric):
        self.metric = metric
        self.__name__ = metric.__name__

    def __call__(self, y_true, y_pred, qid=None, **kwargs):
        if qid is None:
            if sklearn.get_config()["enable_metadata_routing"]:
                raise ValueError(
                    f"{self.__name__} scorer received no qid, though metadata routing is on: the caller did not "
                    "route qid to it. Pass qid where the data go in (GridSearchCV.fit(X, y, qid=qid), "
                    "cross_validate(..., params={'qid': qid})) and keep qid=True if you call the scorer's "
                    "set_score_request. Tools that route no metadata (permutation_importance) cannot score per "
                    "query.")
            raise ValueError(f"{self.__name__} scorer received no qid. {_ROUTING_HELP}")
        return self.metric(y_true, y_pred, qid, **kwargs)


def make_ranking_scorer(metric: Callable, greater_is_better: bool = True, **kwargs) -> Callable:
    """Make a scikit-learn scorer from a ranking metric.

    Parameters
    ----------
    metric : callable
        ``metric(y_true, y_score, qid, **kwargs) -> float``, such as :func:`lambdamart.metrics.ndcg`.
    greater_is_better : bool, default=True
        Whether higher metric values are better (scikit-learn negates the score otherwise).
    **kwargs
        Fixed keyword arguments for the metric, e.g. ``k=10``.

    Returns
    -------
    scorer : callable
        A scorer ``scorer(estimator, X, y, qid=...)`` that requests ``qid`` through metadata routing and raises a
        ``ValueError`` explaining how to enable routing when called without one.
    """
    if "qid" in kwargs:
        raise ValueError("qid is routed per call as metadata; do not fix it in make_ranking_scorer.")
    scorer = make_scorer(_QidRequired(metric), greater_is_better=greater_is_better, **kwargs)
    scorer.__class__ = QidScorer  # so that set_score_request(sample_weight=True) keeps qid requested
    # set_score_request() refuses to run while routing is disabled; enabling it for this one call records the
    # request on the scorer, where it takes effect whenever the user enables routing.
    with sklearn.config_context(enable_metadata_routing=True):
        return scorer.set_score_request(qid=True)


def ndcg_scorer(k: int | None = 10, **metric_kwargs) -> Callable:
    """Scorer for NDCG@k that requests ``qid`` through metadata routing.

    Parameters
    ----------
    k : int or None, default=10
        Cut-off; None for the whole ranking.
    **metric_kwargs
        Further arguments of :func:`lambdamart.metrics.ndcg` (``gain``, ``ties``, ``empty``).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, qid=...)``, see :func:`make_ranking_scorer`.
    """
    return make_ranking_scorer(metrics.ndcg, k=k, **metric_kwargs)


def map_scorer(k: int | None = None, **metric_kwargs) -> Callable:
    """Scorer for mean average precision (@k) that requests ``qid`` through metadata routing.

    Parameters
    ----------
    k : int or None, default=None
        Cut-off; None for the whole ranking.
    **metric_kwargs
        Further arguments of :func:`lambdamart.metrics.mean_average_precision` (``threshold``, ``ties``,
        ``empty``).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, qid=...)``, see :func:`make_ranking_scorer`.
    """
    return make_ranking_scorer(metrics.mean_average_precision, k=k, **metric_kwargs)
