"""TreeSHAP throughput: ``LambdaMARTRanker.predict_contributions`` against shap's TreeExplainer and LightGBM's
``pred_contrib``, on the same trees.

Two models of 100 trees with 31 leaves, trained on MSLR-shaped generated data (``make_ranking_data``, 136
features):

- ours, explained by ``predict_contributions`` and by ``shap.TreeExplainer`` on the same trees (read from the
  LightGBM file ``export_model`` writes);
- LightGBM's ``LGBMRanker``, explained by its ``pred_contrib``, by ``predict_contributions`` of the model imported
  (``lambdamart.import_model``) and by shap on those trees.

All explain the same held-out rows (10,000 by default); each figure is the fastest of ``--repeat`` timed runs after
one untimed run (compilation excluded), in rows per second of wall time, with the CPU time of the same run (all
threads): a single-threaded run whose wall time is well above its CPU time shared its core with other work. Every
library also runs on one thread, since shap's TreeExplainer is single-threaded. The largest difference between the
libraries' values is printed too: they compute the same numbers.

Usage::

    python benchmarks/contributions.py [--rows 10000] [--repeat 3] [--threads N] [--output FILE]

The figures are times on this machine; the load average before and after is printed with them.
"""

import argparse
import datetime
import os
import time

import numpy as np
from context import git_revision, load_average, machine_info, versions

N_TREES = 100
N_LEAVES = 31


def _best_time(function, repeat):
    """Wall and CPU seconds (all threads) of the fastest of ``repeat`` runs, after an untimed one."""
    function()  # compiles, warms caches and thread pools
    best = (np.inf, np.inf)
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def _as_lightgbm(model):
    """Our model as a lightgbm.Booster, through the LightGBM text file of export_model."""
    import tempfile

    import lightgbm

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.txt")
        model.export_model(path, format="lightgbm")
        return lightgbm.Booster(model_file=path)


def _depths(trees):
    from lambdamart._engine.predict import walk_layout

    depth = walk_layout(trees).depth
    return f"depth mean {depth.mean():.1f}, max {depth.max()}"


def run(n_rows, repeat, threads, train_queries=250, n_trees=N_TREES):
    import lightgbm
    import shap

    from lambdamart import LambdaMARTRanker, import_model
    from lambdamart.datasets import make_ranking_data

    X_train, y_train, qid_train = make_ranking_data(train_queries, random_state=0)
    X_test, _, _ = make_ranking_data(int(n_rows / 100) + 10, random_state=1)
    X_test = np.ascontiguousarray(X_test[:n_rows])
    ours = LambdaMARTRanker(n_estimators=n_trees, max_leaf_nodes=N_LEAVES, random_state=0, n_jobs=threads)
    ours.fit(X_train, y_train, qid_train)
    booster = lightgbm.LGBMRanker(n_estimators=n_trees, num_leaves=N_LEAVES, random_state=0, verbose=-1,
                                  n_jobs=threads).fit(X_train, y_train, group=np.unique(qid_train,
                                                                                        return_counts=True)[1])
    booster = booster.booster_
    imported = import_model(booster)
    imported.set_params(n_jobs=threads)

    lines = []
    values = {}
    for model_name, model in (("lambdamart", ours), ("lightgbm", imported)):
        # shap reads our trees from the LightGBM file export_model writes (the same splits, leaves and counts).
        explained = booster if model is imported else _as_lightgbm(model)
        explainer = shap.TreeExplainer(explained, feature_perturbation="tree_path_dependent")
        rows = [(f"{model_name}'s model ({_depths(model._trees)})", None, None)]
        for n_jobs in (1, threads):
            model.set_params(n_jobs=n_jobs)
            seconds = _best_time(lambda m=model: m.predict_contributions(X_test), repeat)
            rows.append((f"lambdamart predict_contributions, {n_jobs} thread(s)", seconds, None))
        values["ours"] = model.predict_contributions(X_test)
        seconds = _best_time(lambda e=explainer: e.shap_values(X_test), repeat)
        values["shap"] = explainer.shap_values(X_test)
        rows.append(("shap TreeExplainer(tree_path_dependent).shap_values, 1 thread", seconds,
                     np.abs(values["shap"] - values["ours"][:, :-1]).max()))
        if model_name == "lightgbm":
            for n_jobs in (1, threads):
                seconds = _best_time(lambda n=n_jobs: booster.predict(X_test, pred_contrib=True, num_threads=n),
                                     repeat)
                contrib = booster.predict(X_test, pred_contrib=True)
                rows.append((f"lightgbm predict(pred_contrib=True), {n_jobs} thread(s)", seconds,
                             np.abs(contrib - values["ours"]).max()))
        lines.extend(rows)
        sums = np.abs(values["ours"].sum(axis=1) - model.predict(X_test)).max()
        lines.append((f"  (rows of predict_contributions minus predict: largest absolute difference {sums:.1e})",
                      None, None))
    return lines


def render(lines, args, load_before, load_after, seconds):
    found = versions()
    out = [
        f"# TreeSHAP throughput ({datetime.date.today().isoformat()})",
        "",
        f"- Machine: {machine_info()}; load average (1 min) {load_before} before, {load_after} after. The machine "
        f"may be shared: other work inflates the times, most of all with several threads.",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in found.items()) + f", shap {_version('shap')}; "
        f"checkout {git_revision()}.",
        f"- Data: make_ranking_data({args.train_queries}, random_state=0) to train ({args.trees} trees, {N_LEAVES} "
        f"leaves), {args.rows:,} rows of make_ranking_data(..., random_state=1) explained (136 features); fastest "
        f"of {args.repeat} runs after one untimed run; threads: 1 and {args.threads}. Total {seconds:.0f} s.",
        "",
        "| what | wall s | CPU s | rows/s (wall) | max abs difference to lambdamart |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, times, diff in lines:
        if times is None:
            out.append(f"| **{name}** | | | | |" if not name.startswith("  ") else f"| {name.strip()} | | | | |")
        else:
            wall, cpu = times
            out.append(f"| {name} | {wall:.3f} | {cpu:.3f} | {args.rows / wall:,.0f} | "
                       f"{'' if diff is None else f'{diff:.1e}'} |")
    return "\n".join(out) + "\n"


def _version(dist):
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000, help="rows to explain (default 10000)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per figure, fastest kept (default 3)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for the threaded runs")
    parser.add_argument("--train-queries", type=int, default=250, help="generated training queries (default 250)")
    parser.add_argument("--trees", type=int, default=N_TREES, help=f"trees per model (default {N_TREES})")
    parser.add_argument("--output", help="also write the report to this file")
    args = parser.parse_args(argv)
    load_before = load_average()
    start = time.perf_counter()
    lines = run(args.rows, args.repeat, args.threads, args.train_queries, args.trees)
    report = render(lines, args, load_before, load_average(), time.perf_counter() - start)
    print(report, end="")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(report)


if __name__ == "__main__":
    main()
