"""The ``lambdamart`` command line."""

import argparse
import sys
import time

import numpy as np


def build_parser():
    parser = argparse.ArgumentParser(prog="lambdamart", description="Gradient-boosted LambdaMART ranking.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="train on generated MSLR-shaped data and compare with a baseline")
    demo.add_argument("--queries", type=int, default=1500, help="number of generated queries (default 1500)")
    demo.add_argument("--rounds", type=int, default=300, help="maximum boosting rounds (default 300)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.set_defaults(run=run_demo)
    return parser


def run_demo(args):
    """Generate data, train with early stopping, and report test metrics beside a pointwise baseline."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from . import metrics
    from .datasets import make_ranking_data
    from .ranker import LambdaMARTRanker

    if args.queries < 10:
        raise SystemExit("lambdamart demo: --queries must be at least 10 (train, validation and test queries).")
    if args.rounds < 1:
        raise SystemExit("lambdamart demo: --rounds must be at least 1.")
    print(f"Generating {args.queries} MSLR-shaped queries ...", flush=True)
    X, y, qid = make_ranking_data(args.queries, random_state=args.seed)
    # Split by query, 60/20/20: a query's documents never straddle two sets.
    shuffled = np.random.RandomState(args.seed).permutation(args.queries)
    n_train, n_valid = int(0.6 * args.queries), int(0.2 * args.queries)
    part = np.empty(args.queries, dtype=int)
    part[shuffled[:n_train]], part[shuffled[n_train:n_train + n_valid]], part[shuffled[n_train + n_valid:]] = 0, 1, 2
    sets = [part[qid] == i for i in range(3)]
    (X_tr, y_tr, q_tr), (X_va, y_va, q_va), (X_te, y_te, q_te) = [(X[m], y[m], qid[m]) for m in sets]
    print(f"train {X_tr.shape[0]} rows / {n_train} queries, validation {X_va.shape[0]} rows, "
          f"test {X_te.shape[0]} rows, {X.shape[1]} features\n", flush=True)

    start = time.perf_counter()
    ranker = LambdaMARTRanker(n_estimators=args.rounds, learning_rate=0.1, n_iter_no_change=20,
                              random_state=args.seed, verbose=10)
    ranker.fit(X_tr, y_tr, q_tr, eval_set=[(X_va, y_va, q_va)])
    print(f"LambdaMART: {ranker.n_estimators_} trees in {time.perf_counter() - start:.1f}s\n", flush=True)

    baseline = HistGradientBoostingRegressor(max_iter=args.rounds, random_state=args.seed)
    baseline.fit(X_tr, y_tr)

    rows = [
        ("NDCG@1", lambda s: metrics.ndcg(y_te, s, q_te, k=1)),
        ("NDCG@5", lambda s: metrics.ndcg(y_te, s, q_te, k=5)),
        ("NDCG@10", lambda s: metrics.ndcg(y_te, s, q_te, k=10)),
        ("MAP", lambda s: metrics.mean_average_precision(y_te, s, q_te)),
        ("MRR", lambda s: metrics.mean_reciprocal_rank(y_te, s, q_te)),
    ]
    ours, theirs = ranker.predict(X_te), baseline.predict(X_te)
    print(f"{'test metric':<12}{'LambdaMART':>12}{'pointwise HGB':>16}")
    for name, metric in rows:
        print(f"{name:<12}{metric(ours):>12.4f}{metric(theirs):>16.4f}")
    top = np.argsort(-ranker.feature_importances_)[:5]
    print("\ntop features by gain: " + ", ".join(f"f{f} ({ranker.feature_importances_[f]:.3f})" for f in top))
    return 0


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
