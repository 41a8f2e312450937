"""Symmetric against leaf-wise trees as the training data grow: where ``grow_policy="auto"`` changes tree kind.

    python benchmarks/grow_size.py [--output benchmarks/GROW_SIZE.md] [--threads 2]

``make_ranking_data`` (MSLR-shaped, 136 features, ~95 documents per query) at 6,000 to 31,500 queries, several data
seeds each; the first 80 % of the queries train, the rest test. At each size and seed ``LambdaMARTRanker`` fits
with the benchmark's settings (``compare.py``: 100 rounds, learning rate 0.1, 31 leaves, 20 rows per leaf, 255
bins, truncation 30) once with ``grow_policy="symmetric"`` and once with ``"leafwise"``; the report gives each
one's NDCG@10 (LightGBM's convention) on the test queries, their paired difference over queries with a t-test, and
per size the difference over all seeds with its standard error. Smaller data are in ``factors.py``'s study
(``GROW_POLICY.md``). Quality only: no timing here means anything.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from context import display_path, load_average, run_header
from factors import ndcg10_per_query
from folds import compare_with_baseline
from libraries import LIBRARIES, benchmark_settings
from report import _header, _md_table

HERE = Path(__file__).resolve().parent
SIZES = ((6000, (0, 1, 2)), (9000, (0, 1)), (12500, (0, 1, 2)), (31500, (0, 1)))  # queries, data seeds
POLICIES = ("symmetric", "leafwise")


def main(argv=None):
    from lambdamart.datasets import make_ranking_data

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=HERE / "GROW_SIZE.md")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    command = "python benchmarks/grow_size.py" + (f" --output {display_path(args.output)}"
                                                  if args.output != HERE / "GROW_SIZE.md" else "")
    meta = run_header(command)
    lib, settings = LIBRARIES["lambdamart"], benchmark_settings(rounds=100, threads=args.threads)
    runs = []  # (queries, seed, training rows, {policy: per-query NDCG@10})
    for n_queries, seeds in SIZES:
        for seed in seeds:
            X, y, qid = make_ranking_data(n_queries, random_state=seed)
            X = X.astype(np.float32)  # as compare.py hands every library the data
            train = qid < np.unique(qid)[int(0.8 * n_queries)]
            scores = {}
            for policy in POLICIES:
                print(f"{n_queries} queries, seed {seed}: {policy} ...", file=sys.stderr, flush=True)
                model = lib.make(settings, {"grow_policy": policy})
                lib.fit(model, X[train], y[train], qid[train])
                scores[policy] = ndcg10_per_query(y[~train], np.asarray(model.predict(X[~train]), np.float64),
                                                  qid[~train])
            runs.append((n_queries, seed, int(train.sum()), scores))
    meta["load_after"] = load_average()
    report = render(meta, runs)
    args.output.write_text(report)
    print(report)
    return 0


def render(meta, runs):
    rows, by_size = [], {}
    for n_queries, seed, n_rows, scores in runs:
        symmetric, leafwise = (scores[p] for p in POLICIES)
        cmp = compare_with_baseline(symmetric, leafwise)
        rows.append([f"{n_queries:,}", str(seed), f"{n_rows:,}", f"{symmetric.mean():.4f}", f"{leafwise.mean():.4f}",
                     f"{cmp.mean_difference:+.4f}", f"{cmp.t_test_p:.3f}"])
        by_size.setdefault(n_queries, []).append(symmetric - leafwise)
    summary = []
    for n_queries, differences in by_size.items():
        d = np.concatenate(differences)
        error = d.std(ddof=1) / np.sqrt(d.size)
        summary.append([f"{n_queries:,}", str(len(differences)), f"{d.mean():+.4f} ± {error:.4f}"])
    return "\n".join([
        *_header("# Symmetric against leaf-wise trees as the data grow", meta), "",
        "NDCG@10 (LightGBM's convention) on the last 20 % of the queries of `make_ranking_data(queries, "
        "random_state=seed)`, trained on the rest at the benchmark's settings; the module docstring of "
        "`benchmarks/grow_size.py` says more.", "",
        "## Each fit", "",
        _md_table(["queries", "seed", "training rows", "symmetric", "leaf-wise", "symmetric − leaf-wise",
                   "paired t-test p"], rows), "",
        "## Per size, over its seeds", "",
        _md_table(["queries", "seeds", "symmetric − leaf-wise (± standard error over test queries)"], summary),
    ]) + "\n"


if __name__ == "__main__":
    sys.exit(main())
