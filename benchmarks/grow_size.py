"""Symmetric against leaf-wise trees as the training data grow, under both protocols of the factor study.

    python benchmarks/grow_size.py [--protocols fixed early_stopping] [--queries 6000 ...] [--seeds 3]
                                   [--output benchmarks/GROW_SIZE.md] [--threads 2]

``make_ranking_data`` (MSLR-shaped, 136 features, ~95 documents per query) at 6,000 to 31,500 queries, several data
seeds each; the first 80 % of the queries train, the rest test. At each size and seed ``LambdaMARTRanker`` fits
once with ``grow_policy="symmetric"`` and once with ``"leafwise"``, under the protocols of ``--letor-folds``:
fixed (the benchmark's 100 rounds at learning rate 0.1, 31 leaves, 20 rows per leaf, 255 bins, truncation 30) and
early stopping (learning rate 0.05, up to 1000 rounds, patience 50 on NDCG@10 of the training queries' last
fifth, which it does not train on). The report gives each one's NDCG@10 (LightGBM's convention) on the test
queries, their paired difference over queries with a t-test, and per size the difference over all seeds with its
standard error. Smaller data are in ``factors.py``'s study (``GROW_POLICY.md``). Quality only: no timing here
means anything.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from context import display_path, load_average, run_header
from factors import ndcg10_per_query
from folds import PROTOCOL_TITLES, PROTOCOLS, compare_with_baseline, settings_by_protocol
from libraries import LIBRARIES
from report import _header, _md_table

HERE = Path(__file__).resolve().parent
SIZES = ((6000, (0, 1, 2)), (9000, (0, 1)), (12500, (0, 1, 2)), (31500, (0, 1)))  # queries, data seeds
POLICIES = ("symmetric", "leafwise")


def main(argv=None):
    from lambdamart.datasets import make_ranking_data

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS))
    parser.add_argument("--queries", type=int, nargs="+", choices=[n for n, _ in SIZES], metavar="N",
                        help="only these sizes (queries of make_ranking_data)")
    parser.add_argument("--seeds", type=int, default=3, help="at most this many data seeds per size")
    parser.add_argument("--output", type=Path, default=HERE / "GROW_SIZE.md")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    command = "python benchmarks/grow_size.py"
    if tuple(args.protocols) != PROTOCOLS:
        command += " --protocols " + " ".join(args.protocols)
    if args.queries:
        command += " --queries " + " ".join(map(str, args.queries))
    if args.seeds != 3:
        command += f" --seeds {args.seeds}"
    if args.output != HERE / "GROW_SIZE.md":
        command += f" --output {display_path(args.output)}"
    meta = run_header(command)
    lib, settings = LIBRARIES["lambdamart"], settings_by_protocol(args.threads)
    runs = {}  # protocol -> [(queries, seed, training rows, {policy: per-query NDCG@10})]
    for n_queries, seeds in SIZES:
        if args.queries and n_queries not in args.queries:
            continue
        for seed in seeds[:args.seeds]:
            X, y, qid = make_ranking_data(n_queries, random_state=seed)
            X = X.astype(np.float32)  # as compare.py hands every library the data
            queries = np.unique(qid)
            test = qid >= queries[int(0.8 * n_queries)]
            valid = ~test & (qid >= queries[int(0.65 * n_queries)])
            for protocol in args.protocols:
                early = protocol == "early_stopping"
                train = ~test & ~valid if early else ~test
                extra = lib.early_stopping if early else {}
                scores = {}
                for policy in POLICIES:
                    print(f"[{protocol}] {n_queries} queries, seed {seed}: {policy} ...", file=sys.stderr, flush=True)
                    model = lib.make(settings[protocol], {"grow_policy": policy, **extra})
                    lib.fit(model, X[train], y[train], qid[train], (X[valid], y[valid], qid[valid]) if early else None)
                    scores[policy] = ndcg10_per_query(y[test], np.asarray(model.predict(X[test]), np.float64),
                                                      qid[test])
                runs.setdefault(protocol, []).append((n_queries, seed, int(train.sum()), scores))
    meta["load_after"] = load_average()
    report = render(meta, runs)
    args.output.write_text(report)
    print(report)
    return 0


def render(meta, runs):
    parts = [*_header("# Symmetric against leaf-wise trees as the data grow", meta), "",
             "NDCG@10 (LightGBM's convention) on the last 20 % of the queries of `make_ranking_data(queries, "
             "random_state=seed)`, trained on the rest; the module docstring of `benchmarks/grow_size.py` says more."]
    for protocol, fits in runs.items():
        rows, by_size = [], {}
        for n_queries, seed, n_rows, scores in fits:
            symmetric, leafwise = (scores[p] for p in POLICIES)
            cmp = compare_with_baseline(symmetric, leafwise)
            rows.append([f"{n_queries:,}", str(seed), f"{n_rows:,}", f"{symmetric.mean():.4f}",
                         f"{leafwise.mean():.4f}", f"{cmp.mean_difference:+.4f}", f"{cmp.t_test_p:.3f}"])
            by_size.setdefault(n_queries, []).append(symmetric - leafwise)
        summary = []
        for n_queries, differences in by_size.items():
            d = np.concatenate(differences)
            error = d.std(ddof=1) / np.sqrt(d.size)
            summary.append([f"{n_queries:,}", str(len(differences)), f"{d.mean():+.4f} ± {error:.4f}"])
        parts += ["", f"## {PROTOCOL_TITLES[protocol]}", "",
                  _md_table(["queries", "seed", "training rows", "symmetric", "leaf-wise", "symmetric − leaf-wise",
                             "paired t-test p"], rows), "",
                  _md_table(["queries", "seeds", "symmetric − leaf-wise over the seeds (± standard error)"], summary)]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(main())
