"""Which settings make a ranking difference, across data: the factor study behind the defaults (issue 15).

    python benchmarks/factors.py [--output benchmarks/FACTORS.md] [--threads 2] [--rows N ...] [--data TEXT ...]

Each variant of ``LambdaMARTRanker`` (one factor taken in or out of the defaults), and LightGBM, XGBoost and
CatBoost, trains on every dataset under both protocols of ``--letor-folds`` (fixed 100 rounds at learning rate
0.1; learning rate 0.05 with early stopping on validation queries, patience 50) and is scored by NDCG@10 in
LightGBM's convention on held-out queries:

- MQ2008's five folds as ``../shared`` holds them, and again with the rows of every training query shuffled (two
  shuffles): with ``ties="input"`` (LightGBM's and XGBoost's way) tied scores, all of them in the first round, rank
  in row order, and MQ2008 is small enough for that to show;
- LightGBM's lambdarank example (fixed: all of ``rank.train``; early stopping: its last 20 % of queries validate),
  and all its 251 queries in 5-fold cross-validation, three times (``_cross_validation``);
- ``make_ranking_data`` with 26 training queries (the size sweep's smallest, about 2,600 rows; ten data seeds),
  and with 150 and with 1000 (two seeds each); a third as many queries validate, 1000 test queries per seed.

Differences from the default are tested query by query (paired t-test and Wilcoxon, as in ``LETOR.md``) on each
group of datasets. Two *perturbation* rows (255 bins cut to 254 and 250, which only moves some thresholds of the
features with more distinct values than that) change nothing a user would call the model: how far they move a
column is the noise floor against which that column's other differences are read. Quality only, in this one
process: no timing here means anything. A variant that halves the Newton step (XGBoost's doubled second-order
weights) halves the early-stopping learning rate too.
"""

import argparse
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
from context import display_path, load_average, run_header
from data import SHARED_EXAMPLE, letor_folds
from folds import PROTOCOL_TITLES, SIGNIFICANCE, compare_with_baseline, settings_by_protocol
from libraries import LIBRARIES, installed
from report import _header, _md_table

HERE = Path(__file__).resolve().parent
MQ2008 = HERE.parent.parent / "shared" / "data" / "mq2008"
SHUFFLES = (1, 2)
# training queries, data seeds: one seed of 26 queries moves NDCG@10 by as much as the variants differ (draws.py)
SYNTHETIC = ((26, tuple(range(10))), (150, (0, 1)), (1000, (0, 1)))
SYNTHETIC_TEST_QUERIES = 1000

# name: (library, constructor arguments on top of the protocol's settings, early-stopping learning rate or None)
VARIANTS = {
    "default": ("lambdamart", {}, None),
    "grow_policy=leafwise (LightGBM's and XGBoost's trees)": ("lambdamart", {"grow_policy": "leafwise"}, None),
    "LightGBM-compatible: grow_policy=leafwise, ties=input": ("lambdamart", {"grow_policy": "leafwise",
                                                                             "ties": "input"}, None),
    "ties=input (tied scores in row order, as LightGBM and XGBoost)": ("lambdamart", {"ties": "input"}, None),
    "half Newton step (XGBoost's doubled w)": ("lambdamart", {"learning_rate": 0.05}, 0.025),
    "half step + min_samples_leaf=1": ("lambdamart", {"learning_rate": 0.05, "min_samples_leaf": 1}, 0.025),
    "XGBoost-like: half step + min_samples_leaf=1 + ties=input": ("lambdamart", {"learning_rate": 0.05,
                                                                                 "min_samples_leaf": 1,
                                                                                 "ties": "input"}, 0.025),
    "min_samples_leaf=1": ("lambdamart", {"min_samples_leaf": 1}, None),
    "min_samples_leaf=40": ("lambdamart", {"min_samples_leaf": 40}, None),
    "l2_regularization=1 (XGBoost's reg_lambda)": ("lambdamart", {"l2_regularization": 1.0}, None),
    "min_sum_hessian=0.1": ("lambdamart", {"min_sum_hessian": 0.1}, None),
    "query_normalization=False": ("lambdamart", {"query_normalization": False}, None),
    "pair_normalization=False": ("lambdamart", {"pair_normalization": False}, None),
    "truncation_level=1000 (every pair)": ("lambdamart", {"truncation_level": 1000}, None),
    "sigma=2 (sharper sigmoid, half the Newton step)": ("lambdamart", {"sigma": 2.0}, None),
    "subsample=0.8 (queries per tree)": ("lambdamart", {"subsample": 0.8}, None),
    "max_features=0.8 (features per tree)": ("lambdamart", {"max_features": 0.8}, None),
    "max_bins=63 (coarser thresholds)": ("lambdamart", {"max_bins": 63}, None),
    # Not factors: perturbations that give each column's noise floor (module docstring).
    "perturbation: max_bins=254": ("lambdamart", {"max_bins": 254}, None),
    "perturbation: max_bins=250": ("lambdamart", {"max_bins": 250}, None),
    "LightGBM lambdarank": ("lightgbm", {}, None),
    "XGBoost rank:ndcg (benchmark settings)": ("xgboost", {}, None),
    "XGBoost rank:ndcg, reg_lambda=1, min_child_weight=1 (its defaults)": (
        "xgboost", {"reg_lambda": 1.0, "min_child_weight": 1.0}, None),
    # Steps between the half step and the default's: whether a smaller step gains on MQ2008 at 100 rounds without
    # losing on the generated data (benchmarks/STEP_SIZE.md).
    "0.85 of the Newton step": ("lambdamart", {"learning_rate": 0.085}, 0.0425),
    "0.7 of the Newton step": ("lambdamart", {"learning_rate": 0.07}, 0.035),
    # Last, so that the row numbers of the reports made with --rows above stay as their commands say.
    "CatBoost YetiRank": ("catboost", {}, None),
    # Truncation across libraries: YetiRank has no truncation level, and CatBoost's LambdaMart takes NDCG over the
    # whole list unless told a top (benchmarks/FACTORS_TRUNCATION.md).
    "truncation_level=100": ("lambdamart", {"truncation_level": 100}, None),
    "LightGBM lambdarank, lambdarank_truncation_level=1000 (every pair)": (
        "lightgbm", {"lambdarank_truncation_level": 1000}, None),
    "CatBoost LambdaMart (NDCG of the whole list)": ("catboost", {"loss_function": "LambdaMart"}, None),
    "CatBoost LambdaMart:top=30 (the benchmark's truncation)": ("catboost", {"loss_function": "LambdaMart:top=30"},
                                                                None),
}
BASELINE = "default"


def datasets(texts=None):
    """Dataset group -> its train/test sets, each a dict of ``fixed`` and ``early`` (the training rows of each
    protocol), ``valid`` and ``test`` (X, y, qid). With ``texts``, only the groups whose name contains one of them
    are built (``--data``: the others would be loaded or generated for nothing)."""
    from lambdamart.datasets import load_letor, make_ranking_data

    def wanted(*names):
        return texts is None or any(text in name for name in names for text in texts)

    out = {}
    mq2008 = ("MQ2008", "MQ2008, rows shuffled")
    if MQ2008.is_dir() and wanted(*mq2008):
        folds = letor_folds(MQ2008)
        out[mq2008[0]] = [_sets(f["train"], f["train"], f["valid"], f["test"]) for f in folds]
        out[mq2008[1]] = [_sets(train, train, f["valid"], f["test"]) for seed in SHUFFLES
                          for f in folds for train in [_shuffled(f["train"], seed)]]
    example = ("LightGBM's example", "LightGBM's example, 5-fold CV x3")
    if SHARED_EXAMPLE.is_dir() and wanted(*example):
        train = load_letor(SHARED_EXAMPLE / "rank.train")
        test = load_letor(SHARED_EXAMPLE / "rank.test", n_features=train[0].shape[1])
        fit, valid = _split_queries(train, 0.8)
        out[example[0]] = [_sets(train, fit, valid, test)]
        out[example[1]] = _cross_validation(train, test)
    for n_queries, seeds in SYNTHETIC:
        name = f"make_ranking_data, {n_queries} queries"
        if not wanted(name):
            continue
        sets = []
        for seed in seeds:
            X, y, qid = make_ranking_data(n_queries + n_queries // 3 + SYNTHETIC_TEST_QUERIES, random_state=seed)
            train, rest = _split_queries((X, y, qid), n_queries)
            valid, test = _split_queries(rest, n_queries // 3)
            sets.append(_sets(train, train, valid, test))
        out[name] = sets
    return {name: sets for name, sets in out.items() if wanted(name)}


def _cross_validation(train, test, seeds=(0, 1, 2), k=5):
    """All queries of ``train`` and ``test`` (ids made distinct), cut into k folds in three random orders: each fold
    tests once; the fixed protocol trains on the rest, early stopping on 80 % of the rest and validates on 20 %.
    Its 50 test queries are too few to tell apart differences of 0.01; this tests on every query three times."""
    X = np.vstack([train[0], test[0]])
    y = np.concatenate([train[1], test[1]])
    qid = np.concatenate([train[2], test[2] + train[2].max() + 1])
    queries = np.unique(qid)
    sets = []
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(queries)
        for fold in range(k):
            tested = order[fold::k]
            rest = order[~np.isin(order, tested)]
            validating = rest[: rest.shape[0] // 5]
            rows = {name: np.isin(qid, ids) for name, ids in
                    (("test", tested), ("valid", validating), ("early", rest[rest.shape[0] // 5:]), ("fixed", rest))}
            sets.append({name: (X[m], y[m], qid[m]) for name, m in rows.items()})
    return sets


def _sets(fixed, early, valid, test):
    return {"fixed": fixed, "early": early, "valid": valid, "test": test}


def _split_queries(data, first):
    """The first ``first`` queries (a share when a float) and the rest."""
    X, y, qid = data
    queries = np.unique(qid)
    n = int(first * queries.shape[0]) if isinstance(first, float) else first
    head = np.isin(qid, queries[:n])
    return (X[head], y[head], qid[head]), (X[~head], y[~head], qid[~head])


def _shuffled(split, seed):
    """The rows of every query in a random order; the queries stay where they are."""
    X, y, qid = split
    order = np.lexsort((np.random.default_rng(seed).random(qid.shape[0]), qid))
    return X[order], y[order], qid[order]


def ndcg10_per_query(y, scores, qid):
    from lambdamart.metrics import ndcg

    return ndcg(y, scores, qid, k=10, gain="exponential", ties="average", empty=1.0, reduce=None)


def evaluate(variant, protocol, sets, threads, bins=None):
    """Per-query NDCG@10 of ``variant`` (a ``VARIANTS`` value) over the test queries of ``sets``; ``bins`` overrides
    the benchmark's histogram bin count (``noise.py``)."""
    library, params, early_learning_rate = variant
    lib = LIBRARIES[library]
    settings = settings_by_protocol(threads)[protocol]
    if bins is not None:
        settings = {**settings, "bins": bins}
    early = protocol == "early_stopping"
    if early:
        params = {**params, **lib.early_stopping}
        if early_learning_rate is not None:
            params["learning_rate"] = early_learning_rate
    per_query = []
    for data in sets:
        model = lib.make(settings, params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. LightGBM's notes about its own parameters
            lib.fit(model, *data["early" if early else "fixed"], data["valid"] if early else None)
        X, y, qid = data["test"]
        per_query.append(ndcg10_per_query(y, np.asarray(model.predict(X), np.float64), qid))
    return np.concatenate(per_query)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=HERE / "FACTORS.md")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, nargs="+", metavar="N",
                        help="only these rows of the table (1 is the default, numbered as in VARIANTS)")
    parser.add_argument("--data", nargs="+", metavar="TEXT",
                        help="only the dataset groups whose name contains one of these texts (e.g. '26 queries')")
    args = parser.parse_args(argv)
    present, _ = installed(list(LIBRARIES))
    variants = [v for v, (library, _, _) in VARIANTS.items() if library in present]
    if args.rows:
        names = list(VARIANTS)
        variants = [v for v in variants if names.index(v) + 1 in args.rows or v == BASELINE]
    command = "python benchmarks/factors.py" + (f" --output {display_path(args.output)}"
                                                if args.output != HERE / "FACTORS.md" else "")
    if args.rows:
        command += " --rows " + " ".join(map(str, args.rows))
    if args.data:
        command += " --data " + " ".join(map(shlex.quote, args.data))
    meta = run_header(command)
    data = datasets(args.data)
    if not data:
        raise SystemExit("factors.py: no dataset (is ../shared/data there, lambdamart installed, and does --data "
                         "name a group?)")
    sections = []
    for protocol in ("fixed", "early_stopping"):
        scores = {}
        for variant in variants:
            print(f"[{protocol}] {variant} ...", file=sys.stderr, flush=True)
            scores[variant] = {name: evaluate(VARIANTS[variant], protocol, sets, args.threads)
                               for name, sets in data.items()}
        sections.append((protocol, scores))
    meta["load_after"] = load_average()
    report = render(meta, sections, list(data))
    args.output.write_text(report)
    print(report)
    return 0


def render(meta, sections, names):
    parts = [*_header("# Factor study: what moves NDCG@10, across data", meta), "",
             "Mean NDCG@10 (LightGBM's convention) on the held-out queries of each dataset group (see the module "
             "docstring of `benchmarks/factors.py` for the data and protocols), and the difference from the default; "
             f"**bold** when a paired t-test and a Wilcoxon test over those queries both give p < {SIGNIFICANCE}."]
    for protocol, scores in sections:
        baseline = scores[BASELINE]
        rows = []
        for variant, by_data in scores.items():
            cells = []
            for name in names:
                mean = by_data[name].mean()
                if variant == BASELINE:
                    cells.append(f"{mean:.4f}")
                    continue
                cmp = compare_with_baseline(by_data[name], baseline[name])
                cell = f"{mean:.4f} ({cmp.mean_difference:+.4f})"
                cells.append(f"**{cell}**" if max(cmp.t_test_p, cmp.wilcoxon_p) < SIGNIFICANCE else cell)
            rows.append([variant, *cells])
        parts += ["", f"## {PROTOCOL_TITLES[protocol]}", "", _md_table(["variant", *names], rows)]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(main())
