"""``--letor-folds DIR``: ranking quality on the five standard folds of a LETOR 4.0 dataset.

Every library (every objective of ours) trains on each fold's training part under two protocols: fixed settings
(the benchmark's 100 rounds, learning rate 0.1, 31 leaves, 20 rows per leaf, 255 bins) and early stopping (learning
rate 0.05, up to 1000 rounds, stopped on the fold's validation part by NDCG@10 with patience 50, best round kept).
Each library runs in a fresh worker process (``worker.work_folds``); the parent scores every test part with
``lambdamart.metrics`` in two conventions and compares every system with our default, query by query.

The two conventions (MQ2008's README in ``../shared`` explains why they give such different numbers):

- LightGBM's (also XGBoost's and CatBoost's benchmarks): a query without a relevant document scores 1, and NDCG@k
  of a query with fewer than k documents uses all of them;
- the official LETOR 4.0 evaluation script's: a query without a relevant document scores 0, and so does NDCG@k of
  a query with fewer than k documents.

Both use gain 2^label − 1, discount 1 / log2(1 + rank), tied scores averaged over their orders, and MAP over all
documents with label > 0 relevant.
"""

from dataclasses import dataclass

import numpy as np
from data import letor_folds
from libraries import (
    EARLY_STOPPING_LEARNING_RATE,
    EARLY_STOPPING_PATIENCE,
    EARLY_STOPPING_ROUNDS,
    LIBRARIES,
    benchmark_settings,
)

PROTOCOLS = ("fixed", "early_stopping")
# The section titles of the studies that run both protocols (factors.py, noise.py, grow_size.py).
PROTOCOL_TITLES = {"fixed": "Fixed: 100 rounds, learning rate 0.1",
                   "early_stopping": f"Early stopping: learning rate {EARLY_STOPPING_LEARNING_RATE}, patience "
                                     f"{EARLY_STOPPING_PATIENCE} on validation queries"}
CUTOFFS = (1, 5, 10)
CONVENTIONS = ("lightgbm", "letor")
BASELINE = "lambdamart"  # the default LambdaMARTRanker (objective "lambdarank"), against which all are tested
SIGNIFICANCE = 0.05


@dataclass
class Comparison:
    """A paired comparison of one system with the baseline over the test queries of all folds."""

    mean_difference: float
    t_test_p: float
    wilcoxon_p: float
    wins: int
    losses: int


def settings_by_protocol(threads):
    return {"fixed": benchmark_settings(rounds=100, threads=threads),
            "early_stopping": benchmark_settings(rounds=EARLY_STOPPING_ROUNDS, threads=threads,
                                                 learning_rate=EARLY_STOPPING_LEARNING_RATE)}


def variants(library, objectives):
    """The systems one library's worker fits: ours once per objective (the default objective under its plain
    name, the baseline), the others once."""
    if library != "lambdamart":
        return {library: {}}
    return {(BASELINE if objective == "lambdarank" else f"lambdamart:{objective}"): {"objective": objective}
            for objective in objectives}


def run_letor_folds(directory, libraries, objectives, threads, workdir, attempt):
    """Fit every system on every fold and protocol; returns the data description, the scores and the errors."""
    folds = letor_folds(directory)
    data_path = workdir / "folds.npz"
    np.savez(data_path, **{f"{fold['name']}/{array}_{split}": values for fold in folds
                           for split in ("train", "valid", "test")
                           for array, values in zip(("X", "y", "qid"), fold[split])})
    settings = settings_by_protocol(threads)
    runs, systems = [], {}
    for name in libraries:
        scores_path = workdir / f"folds-{name}-scores.npz"
        result = attempt(f"{name}: {len(folds)} folds × {len(PROTOCOLS)} protocols",
                         {"mode": "folds", "library": name, "data": str(data_path), "scores": str(scores_path),
                          "folds": [fold["name"] for fold in folds], "settings": settings,
                          "variants": variants(name, objectives)})
        if result is None:
            continue
        runs += result["runs"]
        with np.load(scores_path) as saved:
            for key in saved.files:
                fold, protocol, system = key.split("/")
                systems.setdefault(protocol, {}).setdefault(system, {})[fold] = saved[key]
    return {"folds": [_describe(fold) for fold in folds], "settings": settings,
            "metrics": score_systems(folds, systems), "runs": runs,
            "params": {name: LIBRARIES[name].params(settings["fixed"]) for name in libraries},
            "early_stopping_params": {name: LIBRARIES[name].early_stopping for name in libraries}}


def _describe(fold):
    def queries(split):
        return int(np.unique(fold[split][2]).shape[0])

    return {"name": fold["name"], "parts": fold["parts"], "train_rows": fold["train"][0].shape[0],
            "features": fold["train"][0].shape[1], "train_queries": queries("train"),
            "valid_queries": queries("valid"), "test_queries": queries("test"), "test_rows": fold["test"][0].shape[0]}


def per_query_metrics(y, scores, qid):
    """Every metric of the report, per test query (in the order of sorted query ids), in both conventions."""
    from lambdamart.metrics import mean_average_precision, ndcg

    _, sizes = np.unique(qid, return_counts=True)
    out = {}
    for convention, empty in (("lightgbm", 1.0), ("letor", 0.0)):
        for k in CUTOFFS:
            values = ndcg(y, scores, qid, k=k, gain="exponential", ties="average", empty=empty, reduce=None)
            if convention == "letor":
                values = np.where(sizes < k, 0.0, values)
            out[(convention, f"NDCG@{k}")] = values
        out[(convention, "MAP")] = mean_average_precision(y, scores, qid, ties="average", empty=empty, reduce=None)
    return out


def score_systems(folds, systems):
    """Per protocol and system: per-query metrics over all test queries (folds in order) and per-fold NDCG@10."""
    scored = {}
    for protocol, by_system in systems.items():
        for system, by_fold in by_system.items():
            if len(by_fold) != len(folds):
                continue  # a worker that failed part-way; its error is in the report
            per_fold = [per_query_metrics(fold["test"][1], by_fold[fold["name"]], fold["test"][2]) for fold in folds]
            queries = {metric: np.concatenate([f[metric] for f in per_fold]) for metric in per_fold[0]}
            scored.setdefault(protocol, {})[system] = {
                "queries": queries,
                "mean": {metric: float(values.mean()) for metric, values in queries.items()},
                "fold_ndcg10": [float(f[("lightgbm", "NDCG@10")].mean()) for f in per_fold]}
    return scored


def compare_with_baseline(queries, baseline_queries):
    """Paired t-test and Wilcoxon signed-rank test of per-query differences (scipy's), with wins and losses."""
    from scipy import stats

    difference = queries - baseline_queries
    if not np.any(difference):
        return Comparison(0.0, 1.0, 1.0, 0, 0)
    return Comparison(mean_difference=float(difference.mean()),
                      t_test_p=float(stats.ttest_rel(queries, baseline_queries).pvalue),
                      wilcoxon_p=float(stats.wilcoxon(queries, baseline_queries).pvalue),
                      wins=int(np.sum(difference > 0)), losses=int(np.sum(difference < 0)))
