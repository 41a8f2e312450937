"""Comparing rankers query by query: paired significance tests, confidence intervals, multiple comparisons.

Two rankers are compared on the same queries through the per-query values of a metric (``reduce=None``): the
difference d_q = b_q - a_q of each query is the unit of evidence, and a test asks whether its mean could be 0.

- ``"t"``: paired t-test (``scipy.stats.ttest_rel``); interval: the t interval of the mean difference.
- ``"wilcoxon"``: Wilcoxon signed-rank test (``scipy.stats.wilcoxon``; queries with d = 0 are dropped, scipy's
  default ``zero_method="wilcox"``).
- ``"sign"``: sign test, the binomial test of wins against losses (``scipy.stats.binomtest``; ties dropped).
- ``"randomization"``: Fisher's paired randomization test (sign flips of the differences, statistic the mean
  difference; ``scipy.stats.permutation_test``), exact when ``2**n_queries <= n_resamples``, else Monte Carlo.
- ``"bootstrap"``: the percentile bootstrap of the mean difference (``scipy.stats.bootstrap``); its p-value is
  twice the smaller share of resampled means on either side of 0, so that p < 1 - confidence when the interval
  excludes 0 and not otherwise (up to how the interval's quantiles are interpolated); 0 when no resampled mean
  reaches 0: read it as p < 1 / n_resamples.

Every test is two-sided. Except for ``"bootstrap"``, the interval reported is the t interval of the mean
difference. The effect size is the standardised mean difference of paired data, d_z = mean(d) / sd(d) (Cohen).
Several systems against one baseline: :func:`compare_to_baseline`, whose p-values are corrected for the number of
comparisons (Holm's step-down method by default, or Bonferroni's); see :func:`correct_p_values`.

TREC runs: :func:`evaluate_run` gives a run's per-query metrics as trec_eval computes them (also where the run
misses relevant documents), ready for :func:`paired_test`; ``lambdamart compare`` is built on the two.
"""

from __future__ import annotations

import difflib
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from . import metrics
from ._values import int64_or_none

__all__ = ["Comparison", "TESTS", "paired_test", "compare", "compare_to_baseline", "correct_p_values",
           "parse_metric", "RunEvaluation", "evaluate_run"]

TESTS = ("t", "wilcoxon", "sign", "randomization", "bootstrap")
# The most resamples paired_test takes (the CLI checks --resamples against it), and the values (resamples x queries)
# it has scipy draw at a time.
MAX_RESAMPLES = 10_000_000
_BATCH_VALUES = 1_000_000


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing system B with system A on the same queries.

    Attributes
    ----------
    metric : str
        The metric compared.
    test : str
        The test: one of :data:`TESTS`.
    n_queries : int
        Queries compared (those where both values are defined).
    mean_a, mean_b : float
        Mean of the metric over those queries for A and for B.
    difference : float
        Mean of the per-query differences B - A (= ``mean_b - mean_a``).
    effect_size : float
        d_z = mean(B - A) / sd(B - A), the standardised paired difference; NaN when every difference is equal.
    statistic : float
        The test's statistic: t, Wilcoxon's W, the number of queries B wins (sign), or the mean difference
        (randomization, bootstrap).
    p_value : float
        Two-sided p-value, corrected for multiple comparisons when ``correction`` is set.
    interval : tuple of float
        Confidence interval of the mean difference (bootstrap percentile for ``"bootstrap"``, t otherwise).
    confidence : float
        The interval's confidence level.
    p_value_uncorrected : float
        The p-value before any correction.
    correction : str or None
        "holm" or "bonferroni" when the p-value was corrected, else None.
    """

    metric: str
    test: str
    n_queries: int
    mean_a: float
    mean_b: float
    difference: float
    effect_size: float
    statistic: float
    p_value: float
    interval: tuple
    confidence: float
    p_value_uncorrected: float
    correction: str | None = None

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the difference is significant at level ``alpha`` (``p_value < alpha``).

        Parameters
        ----------
        alpha : float, default=0.05
            Significance level.

        Returns
        -------
        bool
        """
        return bool(self.p_value < alpha)


# ------------------------------------------------------------------------------------------------ the tests


def _check_values(values_a, values_b):
    a = np.asarray(values_a, dtype=np.float64)
    b = np.asarray(values_b, dtype=np.float64)
    if a.ndim != 1 or b.shape != a.shape:
        raise ValueError(f"values_a and values_b must be one-dimensional and of the same length (one value per "
                         f"query); got shapes {a.shape} and {b.shape}.")
    both = ~(np.isnan(a) | np.isnan(b))  # a query skipped by either (empty="skip") is left out
    a, b = a[both], b[both]
    if np.isinf(a).any() or np.isinf(b).any():
        raise ValueError("values_a and values_b hold infinite values; a paired test compares finite per-query "
                         "metric values (NaN for a query to leave out).")
    if a.size < 2:
        raise ValueError(f"a paired test needs at least 2 queries with values for both systems; got {a.size}.")
    return a, b


def _t_interval(d, confidence):
    sd = d.std(ddof=1)
    if sd == 0:
        return (float(d.mean()), float(d.mean()))
    half = stats.t.ppf(0.5 + confidence / 2, d.size - 1) * sd / np.sqrt(d.size)
    return (float(d.mean() - half), float(d.mean() + half))


def _mean_difference(x, axis=-1):
    return np.mean(x, axis=axis)


def paired_test(values_a: ArrayLike, values_b: ArrayLike, *, test: str = "t", confidence: float = 0.95,
                n_resamples: int = 10_000, random_state: int | np.random.Generator | None = None,
                metric: str = "") -> Comparison:
    """Test whether B's per-query values differ from A's on average (two-sided).

    Parameters
    ----------
    values_a, values_b : array-like of shape (n_queries,)
        The metric of each query for system A and system B, queries in the same order (``reduce=None`` of a
        metric of :mod:`lambdamart.metrics`). Queries where either is NaN are left out.
    test : {"t", "wilcoxon", "sign", "randomization", "bootstrap"}, default="t"
        The test; see the module documentation.
    confidence : float in (0, 1), default=0.95
        Confidence level of the interval of the mean difference.
    n_resamples : int, default=10000
        Resamples of the randomization and bootstrap tests (the randomization test enumerates all 2**n sign
        flips instead when there are no more than this).
    random_state : int, numpy Generator or None, default=None
        Seed of the randomization and bootstrap resampling.
    metric : str, default=""
        The metric's name, recorded in the result.

    Returns
    -------
    Comparison
        Means, difference, effect size, statistic, p-value and interval.
    """
    if test not in TESTS:
        close = difflib.get_close_matches(str(test), TESTS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown test {test!r}.{hint} Tests: {', '.join(TESTS)}.")
    # numbers.Real takes numpy scalars too (a level read from an array); bool is an int but never a level.
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (e.g. 0.95); got {confidence!r}.")
    if (isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral)
            or not 1 <= n_resamples <= MAX_RESAMPLES):
        raise ValueError(f"n_resamples must be a positive integer up to {MAX_RESAMPLES:,} (the bootstrap keeps "
                         f"every resample's mean); got {n_resamples!r}.")
    a, b = _check_values(values_a, values_b)
    # Resamples drawn in batches of ~1M values: scipy's default draws all at once (n_resamples x queries floats).
    batch = max(1, _BATCH_VALUES // max(1, a.shape[0]))
    d = b - a
    sd = d.std(ddof=1)
    effect = float(d.mean() / sd) if sd > 0 else float("nan")
    interval = _t_interval(d, confidence)
    rng = np.random.default_rng(random_state)
    if not d.any():  # identical values: no test has anything to say, and some of scipy's would fail
        statistic, p = (0.0, 1.0)
    elif test == "t" and sd == 0:  # every difference equal and non-zero: t is infinite, the difference certain
        statistic, p = float(np.copysign(np.inf, d.mean())), 0.0
    elif test == "t":
        result = stats.ttest_rel(b, a)
        statistic, p = float(result.statistic), float(result.pvalue)
    elif test == "wilcoxon":
        result = stats.wilcoxon(d)
        statistic, p = float(result.statistic), float(result.pvalue)
    elif test == "sign":
        wins, losses = int((d > 0).sum()), int((d < 0).sum())
        statistic, p = float(wins), float(stats.binomtest(wins, wins + losses, 0.5).pvalue)
    elif test == "randomization":
        result = stats.permutation_test((d,), _mean_difference, permutation_type="samples", vectorized=True,
                                        n_resamples=n_resamples, batch=batch, random_state=rng)
        statistic, p = float(result.statistic), float(result.pvalue)
    else:
        result = stats.bootstrap((d,), _mean_difference, vectorized=True, n_resamples=n_resamples, batch=batch,
                                 confidence_level=confidence, method="percentile", random_state=rng)
        means = result.bootstrap_distribution
        statistic = float(d.mean())
        p = float(min(1.0, 2 * min(np.mean(means <= 0), np.mean(means >= 0))))
        interval = (float(result.confidence_interval.low), float(result.confidence_interval.high))
    return Comparison(metric, test, int(d.size), float(a.mean()), float(b.mean()), float(d.mean()), effect,
                      statistic, p, interval, float(confidence), p)


def correct_p_values(p_values: ArrayLike, method: str = "holm") -> np.ndarray:
    """Adjust p-values for multiple comparisons (family-wise error rate).

    Bonferroni multiplies each p-value by the number m of comparisons. Holm's step-down method multiplies the
    i-th smallest by m - i + 1 (i from 1) and makes the results non-decreasing in that order; it rejects
    everything Bonferroni rejects, and often more. Adjusted values are capped at 1.

    Parameters
    ----------
    p_values : array-like of shape (m,)
        The p-values of the m comparisons.
    method : {"holm", "bonferroni"}, default="holm"
        The correction.

    Returns
    -------
    ndarray of shape (m,)
        The adjusted p-values, in the input order.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p_values must be a one-dimensional array of p-values in [0, 1].")
    m = p.size
    if method == "bonferroni":
        return np.minimum(p * m, 1.0)
    if method != "holm":
        raise ValueError(f"method must be 'holm' or 'bonferroni'; got {method!r}.")
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(p[order] * (m - np.arange(m)), 1.0))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted


# ------------------------------------------------------------------------------------------------ metrics by name


_CHOICES = ("ndcg[@k], dcg[@k], map[@k], gmap[@k], mrr[@k], precision[@k] (or p@k), recall[@k], f[@k], rprec, "
            "hits[@k], err[@k], kendall; trec_eval's names P_k, recall_k, ndcg_cut_k, Rprec, gm_map, recip_rank, "
            "set_F, set_P, set_recall, success_k")

_OURS = {
    "ndcg": metrics.ndcg, "dcg": metrics.dcg, "map": metrics.mean_average_precision,
    "gmap": metrics.geometric_mean_average_precision, "mrr": metrics.mean_reciprocal_rank,
    "precision": metrics.precision_at_k, "p": metrics.precision_at_k, "recall": metrics.recall_at_k,
    "f": metrics.f_measure, "f1": metrics.f_measure, "rprec": metrics.r_precision, "hits": metrics.hits_at_k,
    "err": metrics.err, "kendall": metrics.kendall_tau,
}
_NO_CUTOFF = ("kendall", "rprec")

# trec_eval's names: (pattern, function, keyword arguments; a group in the pattern is the cut-off k).
_TREC = [
    (r"p_(\d+)", metrics.precision_at_k, {}),
    (r"recall_(\d+)", metrics.recall_at_k, {}),
    (r"ndcg_cut_(\d+)", metrics.ndcg, {"gain": "linear"}),  # trec_eval's gain is the label itself
    (r"success_(\d+)", metrics.hits_at_k, {}),
    (r"rprec", metrics.r_precision, {}),
    (r"gm_map", metrics.geometric_mean_average_precision, {}),
    (r"recip_rank", metrics.mean_reciprocal_rank, {}),
    (r"set_f", metrics.f_measure, {}),
    (r"set_p", metrics.precision_at_k, {}),
    (r"set_recall", metrics.recall_at_k, {}),
]


def parse_metric(name: str) -> tuple[Callable, dict]:
    """The metric function of :mod:`lambdamart.metrics` and its keyword arguments for a name like "ndcg@10".

    Names are case-insensitive: ours with an optional ``@k`` cut-off (``ndcg@10``, ``map``, ``p@5``, ``f@10``,
    ``gmap``, ``rprec``, ...) and trec_eval's (``P_10``, ``recall_100``, ``ndcg_cut_10`` with trec_eval's linear
    gain, ``Rprec``, ``gm_map``, ``recip_rank``, ``set_F``, ``success_10``).

    Parameters
    ----------
    name : str
        The metric's name.

    Returns
    -------
    tuple
        ``(function, kwargs)``: call ``function(y_true, y_score, qid, **kwargs)``.

    Raises
    ------
    ValueError
        For an unknown name (with the closest known one) or a bad cut-off.
    """
    key = name.strip().lower()
    for pattern, function, kwargs in _TREC:
        match = re.fullmatch(pattern, key)
        if match:
            kwargs = dict(kwargs)
            if match.groups():
                kwargs["k"] = int(match.group(1))
                if kwargs["k"] < 1:
                    raise ValueError(f"metric {name!r}: the cut-off must be a positive integer.")
            return function, kwargs
    base, at, k_text = key.partition("@")
    if base not in _OURS:
        close = difflib.get_close_matches(base, _OURS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown metric {key!r}.{hint} Metrics: {_CHOICES}.")
    kwargs = {}
    if at:
        if base in _NO_CUTOFF:
            raise ValueError(f"{base} takes no @k: it " + ("compares the whole ranking of each query."
                                                           if base == "kendall" else "cuts at R, not at k."))
        k = int64_or_none(k_text)
        if k is None or k < 1:
            raise ValueError(f"metric {key!r}: the cut-off after @ must be a positive integer, e.g. {base}@10.")
        kwargs["k"] = k
    return _OURS[base], kwargs


def _per_query(metric, y_true, scores, qid, metric_params):
    if isinstance(metric, str):
        function, kwargs = parse_metric(metric)
        name = metric
    elif callable(metric):
        function, kwargs, name = metric, {}, getattr(metric, "__name__", "metric")
    else:
        raise TypeError(f"metric must be a name like 'ndcg@10' or a function of lambdamart.metrics; got {metric!r}.")
    values = function(y_true, scores, qid, **kwargs, **(metric_params or {}), reduce=None)
    if function is metrics.geometric_mean_average_precision:
        values = np.log(values)  # gMAP is the mean of these: compare queries on the scale gMAP averages
    return name, values


# ------------------------------------------------------------------------------------------------ rankers


def compare(y_true: ArrayLike, scores_a: ArrayLike, scores_b: ArrayLike, qid: ArrayLike | None = None, *,
            metric: str | Callable = "ndcg@10", test: str = "t", metric_params: Mapping | None = None,
            confidence: float = 0.95, n_resamples: int = 10_000,
            random_state: int | np.random.Generator | None = None) -> Comparison:
    """Compare two rankers' scores on the same documents with a paired test over queries.

    Example: ``compare(y, baseline.predict(X), ranker.predict(X), qid, metric="map", test="randomization")``;
    ``result.p_value``, ``result.difference``, ``result.interval``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Relevance labels.
    scores_a : array-like of shape (n_samples,)
        Scores of system A (the baseline).
    scores_b : array-like of shape (n_samples,)
        Scores of system B; the difference is B - A.
    qid : array-like of shape (n_samples,), default=None
        Query id of each row; None: one query (a test then fails: it needs 2 queries or more).
    metric : str or callable, default="ndcg@10"
        A name (see :func:`parse_metric`), or a function ``f(y_true, y_score, qid, reduce=None, **params)`` of
        :mod:`lambdamart.metrics`. gMAP is compared through log(max(AP, floor)) per query, the values whose mean
        it exponentiates, so the means and the difference of its result are in log scale.
    test : {"t", "wilcoxon", "sign", "randomization", "bootstrap"}, default="t"
        The paired test; see :func:`paired_test`.
    metric_params : mapping, default=None
        More keyword arguments of the metric, e.g. ``{"ties": "input", "empty": 0.0}``.
    confidence : float, default=0.95
        Confidence level of the interval.
    n_resamples : int, default=10000
        Resamples of the randomization and bootstrap tests.
    random_state : int, numpy Generator or None, default=None
        Seed of the resampling.

    Returns
    -------
    Comparison
        The result; the difference is B - A.
    """
    name, values_a = _per_query(metric, y_true, scores_a, qid, metric_params)
    _, values_b = _per_query(metric, y_true, scores_b, qid, metric_params)
    return paired_test(values_a, values_b, test=test, confidence=confidence, n_resamples=n_resamples,
                       random_state=random_state, metric=name)


def compare_to_baseline(y_true: ArrayLike, baseline: ArrayLike, systems: Mapping[str, ArrayLike],
                        qid: ArrayLike | None = None, *, metric: str | Callable = "ndcg@10", test: str = "t",
                        correction: str | None = "holm", metric_params: Mapping | None = None,
                        confidence: float = 0.95, n_resamples: int = 10_000,
                        random_state: int | np.random.Generator | None = None) -> dict[str, Comparison]:
    """Compare several systems with one baseline, correcting the p-values for the number of comparisons.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Relevance labels.
    baseline : array-like of shape (n_samples,)
        Scores of the baseline (system A of every comparison).
    systems : mapping of str to array-like of shape (n_samples,)
        Each system's scores, by name.
    qid : array-like of shape (n_samples,), default=None
        Query id of each row.
    metric : str or callable, default="ndcg@10"
        As in :func:`compare`.
    test : {"t", "wilcoxon", "sign", "randomization", "bootstrap"}, default="t"
        The paired test.
    correction : {"holm", "bonferroni", None}, default="holm"
        Correction of the p-values over the ``len(systems)`` comparisons; None: none.
    metric_params : mapping, default=None
        More keyword arguments of the metric.
    confidence : float, default=0.95
        Confidence level of the intervals (not corrected).
    n_resamples : int, default=10000
        Resamples of the randomization and bootstrap tests.
    random_state : int, numpy Generator or None, default=None
        Seed of the resampling (one generator for all comparisons).

    Returns
    -------
    dict of str to Comparison
        One result per system, in the order of ``systems``, with the corrected p-value in ``p_value``.
    """
    if correction not in ("holm", "bonferroni", None):
        raise ValueError(f"correction must be 'holm', 'bonferroni' or None; got {correction!r}.")
    if not isinstance(systems, Mapping) or not systems:
        raise TypeError("systems must be a non-empty mapping of name to scores, e.g. {'lambdamart': scores}.")
    rng = np.random.default_rng(random_state)
    name, base_values = _per_query(metric, y_true, baseline, qid, metric_params)
    results = {}
    for system, scores in systems.items():
        _, values = _per_query(metric, y_true, scores, qid, metric_params)
        results[system] = paired_test(base_values, values, test=test, confidence=confidence,
                                      n_resamples=n_resamples, random_state=rng, metric=name)
    return _corrected(results, correction)


def _corrected(results, correction):
    if correction is None:
        return results
    adjusted = correct_p_values([r.p_value_uncorrected for r in results.values()], correction)
    return {system: replace(r, p_value=float(p), correction=correction)
            for (system, r), p in zip(results.items(), adjusted)}


# ------------------------------------------------------------------------------------------------ TREC runs


@dataclass(frozen=True)
class RunEvaluation:
    """Per-query metrics of a TREC run, as trec_eval computes them.

    Attributes
    ----------
    query_ids : ndarray of str, shape (n_queries,)
        The queries evaluated (in both the run and the qrels), sorted.
    values : dict of str to ndarray of shape (n_queries,)
        Each metric's value per query, by the name it was asked for. gMAP's are max(AP, floor), whose geometric
        mean it is.
    """

    query_ids: np.ndarray
    values: dict

    def mean(self, name: str) -> float:
        """The average over queries of metric ``name``: geometric for gMAP, arithmetic for the others.

        Parameters
        ----------
        name : str
            A name the run was evaluated with.

        Returns
        -------
        float
        """
        values = self.values[name]
        if parse_metric(name)[0] is metrics.geometric_mean_average_precision:
            return float(np.exp(np.log(values).mean()))
        return float(values.mean())


def evaluate_run(qrels, run, metric_names=("map", "P_10", "ndcg_cut_10", "Rprec")) -> RunEvaluation:
    """Evaluate a TREC run on qrels as trec_eval does, query by query.

    The run is joined with the qrels by :func:`lambdamart.trec.to_arrays` (trec_eval's order: score descending,
    ties by docno descending; only queries in both) and each metric is taken with ``ties="input"`` and
    ``empty=0.0``. Where trec_eval counts what the run did not retrieve, so does this: AP (and gMAP) and recall
    divide by every relevant document of the qrels, R-precision cuts at that number, F uses it as recall's
    denominator, NDCG's ideal ranking holds every judged document, and precision at k divides by k even for a
    query with fewer documents. So ``map``, ``gm_map``, ``map@k`` (trec_eval's ``map_cut_k``), ``P_k``,
    ``recall_k``, ``Rprec``, ``set_F``, ``ndcg_cut_k``, ``recip_rank`` and ``success_k`` equal trec_eval's on any
    run; the metrics trec_eval lacks (ERR, Kendall's tau) see the retrieved documents only.

    Parameters
    ----------
    qrels : lambdamart.trec.Qrels
        The judgements (:func:`lambdamart.trec.read_qrels`).
    run : lambdamart.trec.Run
        The run (:func:`lambdamart.trec.read_run`).
    metric_names : sequence of str, default=("map", "P_10", "ndcg_cut_10", "Rprec")
        Metric names (see :func:`parse_metric`).

    Returns
    -------
    RunEvaluation
        The query ids and each metric's per-query values.
    """
    import inspect

    from .trec import to_arrays

    a = to_arrays(qrels, run)
    if a.query_ids.size == 0:
        return RunEvaluation(a.query_ids, {name: np.empty(0) for name in metric_names})
    _, query, sizes = np.unique(a.qid, return_inverse=True, return_counts=True)
    found = np.bincount(query.reshape(-1), weights=a.y > 0, minlength=sizes.size)
    relevant = found + a.missing_relevant  # every relevant document of the qrels (rel >= 1)
    values = {}
    for name in metric_names:
        function, kwargs = parse_metric(name)
        accepted = inspect.signature(function).parameters
        kwargs = dict(kwargs, **{key: value for key, value in (("ties", "input"), ("empty", 0.0))
                                 if key in accepted})
        values[name] = _trec_value(function, kwargs, a, sizes, found, relevant, qrels)
    return RunEvaluation(a.query_ids, values)


def _ratio(numerator, denominator):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)


def _trec_value(function, kwargs, a, sizes, found, relevant, qrels):
    """One metric per query, with trec_eval's denominators (``found``: relevant retrieved; ``relevant``: all)."""
    k = kwargs.get("k")
    if function is metrics.geometric_mean_average_precision:
        ap_kwargs = {key: v for key, v in kwargs.items() if key != "floor"}
        ap = _trec_value(metrics.mean_average_precision, ap_kwargs, a, sizes, found, relevant, qrels)
        return np.maximum(ap, kwargs.get("floor", 1e-5))
    if function is metrics.r_precision:  # precision at R (all relevant), among the retrieved documents
        curve = metrics.precision_recall_curve(a.y, a.score, a.qid, ties="input", empty=0.0, reduce=None)
        cut = np.minimum(relevant, sizes).astype(np.int64)
        hits = np.array([p[c - 1] * c if c > 0 else 0.0 for p, c in zip(curve.query_precision, cut)])
        return _ratio(hits, relevant)
    if function is metrics.ndcg:  # the ideal ranking holds every judged document, retrieved or not
        dcg = metrics.dcg(a.y, a.score, a.qid, k=k, gain=kwargs.get("gain", "exponential"), ties="input",
                          reduce=None)
        judged = np.isin(qrels.qid, a.query_ids)
        labels = np.maximum(qrels.relevance[judged], 0).astype(np.float64)
        ideal = metrics.dcg(labels, labels, qrels.qid[judged], k=k, gain=kwargs.get("gain", "exponential"),
                            reduce=None)
        return _ratio(dcg, ideal)
    values = function(a.y, a.score, a.qid, reduce=None, **kwargs)
    top = sizes if k is None else np.minimum(k, sizes)
    if function is metrics.mean_average_precision:  # ours divides by min(k, found), trec_eval by all relevant
        return values * _ratio(np.minimum(top, found), relevant)
    if function is metrics.recall_at_k:
        return values * _ratio(found, relevant)
    if function is metrics.f_measure:  # (1 + b2) h / (b2 R + m): swap R = found for R = relevant
        b2 = kwargs.get("beta", 1.0) ** 2
        return values * (b2 * found + top) / (b2 * relevant + top)
    if function is metrics.precision_at_k and k is not None:  # trec_eval divides by k, the metric by min(k, n)
        return values * top / k
    return values
