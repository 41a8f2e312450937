"""The ``lambdamart`` command line: a demo, and train / predict / evaluate on LETOR files.

::

    lambdamart demo [--queries N] [--rounds R] [--seed S] [--jobs T]
    lambdamart train --train FILE [--valid FILE] --model OUT [--param key=value ...]
    lambdamart predict --model MODEL --data FILE [--output scores.txt] [--format trec --run-name NAME]
    lambdamart evaluate --model MODEL --data FILE [--metrics ndcg@10,map,mrr]
    lambdamart evaluate --qrels QRELS --run RUN [--metrics map,P_10,ndcg_cut_10]
    lambdamart compare --qrels QRELS RUN_A RUN_B ... [--metrics ...] [--test t] [--correction holm]
    lambdamart export --model MODEL --format lightgbm|xgboost|xgboost-dump|onnx --output FILE
    lambdamart import --input LIGHTGBM_OR_XGBOOST_MODEL --model OUT

Data files are LETOR/SVMlight text (``label qid:<id> <index>:<value> ...``, as MSLR, Yahoo! LTR and Istella ship
them), or the same without ``qid:`` plus a ``FILE.query`` file of query sizes (LightGBM's layout). Models are the
safe JSON files of :meth:`LambdaMARTRanker.save_model`. Qrels and run files are TREC's 4- and 6-column text files
(:mod:`lambdamart.trec`); with them, metrics follow trec_eval (ties by docno, queries without relevant documents
count 0).

Results go to stdout and everything else (progress of ``predict``/``evaluate``, notes, errors) to stderr. Exit
codes: 0 success; 1 a file is missing, unreadable or malformed, or the data cannot be trained on; 2 the command
line is wrong (unknown option, parameter or metric, or an invalid parameter value); 130 interrupted; 141 stdout
was closed by its reader before the output was all written (``lambdamart predict ... | head``): the command stops
quietly, with the code a shell reports for a tool that SIGPIPE ended (128 + 13), as 130 is 128 + SIGINT.
"""

import argparse
import ast
import difflib
import os
import select
import sys
import time
import warnings
from contextlib import contextmanager

import numpy as np

from . import __version__
from ._files import names_a_directory, write_atomically
from ._values import int64_or_none

EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 0, 1, 2, 130, 141

_DEFAULT_METRICS = "ndcg@1,ndcg@5,ndcg@10,map,mrr"
_DEFAULT_TREC_METRICS = "map,P_10,ndcg_cut_10,Rprec"

# LambdaMARTRanker.export_model's formats (listed here so that --help does not import the engine).
_EXPORT_FORMATS = ("lightgbm", "xgboost", "xgboost-dump", "onnx")

_FORMATS = """\
Data files are LETOR/SVMlight text, one document per line: "<label> qid:<query id> <index>:<value> ...", or
the same without qid: when FILE.query holds the number of consecutive rows of each query (LightGBM's layout).
Feature indices are 1-based (LETOR's numbering) unless index 0 occurs in the file, or as --index-base says;
train reads --train and --valid with one numbering. .gz and .bz2 files are read too.

Exit codes: 0 success, 1 missing/unreadable/malformed file or untrainable data, 2 bad command line, 130
interrupted, 141 stdout closed early by its reader (e.g. "| head"; output stops quietly)."""

# Other libraries' names for LambdaMARTRanker parameters, to turn "unknown parameter" into a pointer.
_ALIASES = {
    # LightGBM / XGBoost
    "num_iterations": "n_estimators", "num_iteration": "n_estimators", "num_trees": "n_estimators",
    "num_round": "n_estimators", "num_boost_round": "n_estimators", "n_iter": "n_estimators",
    "max_iter": "n_estimators", "eta": "learning_rate", "shrinkage_rate": "learning_rate",
    "num_leaves": "max_leaf_nodes", "max_leaves": "max_leaf_nodes", "num_leaf": "max_leaf_nodes",
    "min_data_in_leaf": "min_samples_leaf", "min_child_samples": "min_samples_leaf",
    "min_sum_hessian_in_leaf": "min_sum_hessian", "min_child_weight": "min_sum_hessian",
    "lambda_l2": "l2_regularization", "reg_lambda": "l2_regularization", "lambda": "l2_regularization",
    "max_bin": "max_bins", "lambdarank_truncation_level": "truncation_level",
    "bagging_fraction": "subsample", "feature_fraction": "max_features", "colsample_bytree": "max_features",
    "early_stopping_rounds": "n_iter_no_change", "early_stopping_round": "n_iter_no_change",
    "num_threads": "n_jobs", "nthread": "n_jobs", "seed": "random_state", "verbosity": "verbose",
    "label_gain": "gain", "lambdarank_norm": "query_normalization", "ndcg_eval_at": "eval_at",
    # RankLib
    "tree": "n_estimators", "leaf": "max_leaf_nodes", "shrinkage": "learning_rate", "mls": "min_samples_leaf",
    "tc": "max_bins", "estop": "n_iter_no_change", "metric2t": "eval_at",
}


class CommandError(Exception):
    """A user error: printed as one line on stderr, then the command exits with ``code`` (no traceback)."""

    def __init__(self, message, code=EXIT_DATA):
        super().__init__(message)
        self.code = code


def usage_error(message):
    """A :class:`CommandError` for a wrong command line: exit code 2, and the usage is printed before it.

    Parameters
    ----------
    message : str
        The error, one line.

    Returns
    -------
    CommandError
        To raise.
    """
    return CommandError(message, EXIT_USAGE)


# ------------------------------------------------------------------------------------------------ argument parser


def build_parser():
    """The argument parser of the ``lambdamart`` command and its subcommands.

    Returns
    -------
    argparse.ArgumentParser
    """
    parser = argparse.ArgumentParser(
        prog="lambdamart",
        description="Gradient-boosted LambdaMART learning to rank. Start with 'lambdamart demo'.",
        epilog=_FORMATS, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lambdamart {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def index_base_option(sub):
        sub.add_argument("--index-base", choices=("auto", "0", "1"), default="auto",
                         help="how feature indices map to columns: 1, index 1 is the first column (LETOR's "
                              "numbering); 0, index 0 is (scikit-learn's dump_svmlight_file writes so); auto "
                              "(default), 0 when index 0 occurs in the file(s), else 1. Give the numbering the "
                              "training data was read with: a file that happens to lack feature 0 reads as 1-based")

    def command(name, summary, description, run):
        sub = commands.add_parser(name, help=summary, description=description, epilog=_FORMATS,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.set_defaults(run=run, parser=sub)
        return sub

    demo = command("demo", "train on generated MSLR-shaped data and compare with a pointwise baseline",
                   "Generate MSLR-shaped data (make_ranking_data), split it 60/20/20 by query, train LambdaMART "
                   "with early stopping on the validation queries, and compare test NDCG@1/5/10, MAP and MRR with "
                   "a pointwise HistGradientBoostingRegressor trained on the labels.", run_demo)
    demo.add_argument("--queries", type=int, default=1500, metavar="N",
                      help="number of generated queries, about 120 documents each (default 1500)")
    demo.add_argument("--rounds", type=int, default=300, metavar="R",
                      help="maximum boosting rounds; early stopping usually ends sooner (default 300)")
    demo.add_argument("--seed", type=int, default=0, help="random seed for the data and the models (default 0)")
    demo.add_argument("--jobs", type=int, default=None, metavar="T", help="threads (default: all cores)")

    train = command("train", "train a ranker on a LETOR file and save it",
                    "Train a LambdaMARTRanker on a LETOR file and save it as a JSON model file. With --valid, "
                    "training stops early when NDCG@eval_at on the validation queries stops improving and keeps "
                    "the best round.", run_train)
    train.add_argument("--train", required=True, nargs="+", metavar="FILE",
                       help="training data: one file, or with --scheduler/--dask-workers several files or glob "
                            "patterns (\"data/*.txt\"), read in parallel on the cluster")
    train.add_argument("--valid", nargs="+", metavar="FILE", help="validation data for early stopping (optional)")
    index_base_option(train)
    cluster = train.add_mutually_exclusive_group()
    cluster.add_argument("--scheduler", metavar="ADDRESS",
                         help="train on the Dask cluster of this scheduler (e.g. tcp://10.0.0.1:8786): the workers "
                              "read the files (same paths on every machine) and train data-parallel; the model is "
                              "the one a single-machine fit would write. Needs pip install 'lambdamart[dask]'.")
    cluster.add_argument("--dask-workers", type=int, metavar="N",
                         help="train on a Dask cluster of N worker processes started on this machine")
    train.add_argument("--model", required=True, metavar="OUT", help="where to write the model (JSON)")
    train.add_argument("--position", metavar="FILE",
                       help="Unbiased LambdaMART on click labels: a file with the displayed rank (1 = top) of each "
                            "row of --train, one integer per line, in the file's order")
    train.add_argument("--init-model", metavar="MODEL",
                       help="a model file to continue boosting from: its trees give the starting scores and stay "
                            "first in the new model (LightGBM's init_model)")
    train.add_argument("--checkpoint-dir", metavar="DIR",
                       help="save the training state in DIR every --checkpoint-every rounds, so that --resume can "
                            "continue after a crash")
    train.add_argument("--checkpoint-every", type=int, default=10, metavar="N",
                       help="rounds between checkpoints (default 10)")
    train.add_argument("--resume", action="store_true",
                       help="continue from the newest checkpoint in --checkpoint-dir (same data and parameters); "
                            "the model is the one an uninterrupted run writes. Without a checkpoint, start afresh")
    train.add_argument("--param", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                       help="a LambdaMARTRanker parameter, e.g. --param learning_rate=0.05 max_leaf_nodes=63 "
                            "(values are Python literals: 0.05, 63, None, true, [0,1,3,7,15]; anything else is a "
                            "string). Repeatable; the last value of a key wins. Progress is printed every 10 "
                            "rounds unless you set verbose.")

    predict = command("predict", "score the documents of a LETOR file with a saved model",
                      "Write one score per line, in the order of the data file's lines; rank each query's "
                      "documents by descending score. Query ids are not needed.", run_predict)
    predict.add_argument("--model", required=True, metavar="MODEL", help="a model file written by train")
    predict.add_argument("--data", required=True, metavar="FILE", help="LETOR/SVMlight data to score")
    predict.add_argument("--output", metavar="FILE", help="write scores here instead of stdout")
    index_base_option(predict)
    predict.add_argument("--format", choices=("scores", "trec"), default="scores",
                         help="scores: one score per data line (default). trec: a TREC run file, 'qid Q0 docno rank "
                              "score run_name', ranked per query; docno is the data line's number (1-based), the "
                              "data needs qid: or FILE.query")
    predict.add_argument("--run-name", default="lambdamart", metavar="NAME",
                         help="the run name column of --format trec (default lambdamart)")

    evaluate = command("evaluate", "compute ranking metrics of a saved model on a LETOR file, or of a TREC run",
                       "Score FILE with the model and print one line per metric: name and value, averaged over "
                       "queries. NDCG uses the model's gain (2^label - 1 by default); tied scores are averaged "
                       "over their orders; queries without a relevant document count 1 for NDCG, MAP and MRR.\n\n"
                       "Or, with --qrels and --run, evaluate a TREC run file as trec_eval does: documents ranked by "
                       "score, ties by docno (descending); only queries in both files; unjudged documents are not "
                       "relevant; relevant documents the run missed count (recall, MAP, R-precision, F, NDCG); "
                       "P@k divides by k; a query without a relevant document counts 0.", run_evaluate)
    evaluate.add_argument("--model", metavar="MODEL", help="a model file written by train (with --data)")
    evaluate.add_argument("--data", metavar="FILE", help="LETOR data with qid: or FILE.query (with --model)")
    index_base_option(evaluate)
    evaluate.add_argument("--qrels", metavar="QRELS", help="TREC relevance judgements, 'qid iter docno rel' (with "
                                                           "--run)")
    evaluate.add_argument("--run", dest="run_file", metavar="RUN",
                          help="a TREC run file, 'qid Q0 docno rank score run_name' (with --qrels)")
    evaluate.add_argument("--metrics", default=None, metavar="LIST",
                          help="comma-separated metrics: ndcg[@k], dcg[@k], map[@k], gmap[@k], mrr[@k], "
                               "precision@k (p@k), recall@k, f[@k], rprec, hits@k, err[@k], kendall, or "
                               "trec_eval's P_k, recall_k, ndcg_cut_k, Rprec, gm_map, recip_rank, set_F (default: "
                               f"{_DEFAULT_METRICS} with --model, {_DEFAULT_TREC_METRICS} with --run)")

    compare = command("compare", "compare TREC runs with significance tests against the first",
                      "Evaluate each run on the qrels as trec_eval does (see 'evaluate') and print a table: one row "
                      "per run, one column per metric, averaged over the queries of the qrels that any run "
                      "retrieved (a run that misses a query counts 0 for it, as trec_eval -c). A '*' marks a "
                      "difference from the first run (the baseline) significant at --alpha after the paired test "
                      "over queries, with the p-values of each metric corrected for the number of runs compared.",
                      run_compare)
    compare.add_argument("--qrels", required=True, metavar="QRELS", help="TREC relevance judgements")
    compare.add_argument("runs", nargs="+", metavar="RUN", help="TREC run files; the first is the baseline")
    compare.add_argument("--metrics", default=_DEFAULT_TREC_METRICS, metavar="LIST",
                         help=f"comma-separated metrics, as for evaluate (default: {_DEFAULT_TREC_METRICS})")
    compare.add_argument("--test", default="t", choices=("t", "wilcoxon", "sign", "randomization", "bootstrap"),
                         help="paired test over queries: t (paired t-test, default), wilcoxon (signed-rank), sign, "
                              "randomization (permutation), bootstrap (percentile interval of the mean difference)")
    compare.add_argument("--correction", default="holm", choices=("holm", "bonferroni", "none"),
                         help="correction of each metric's p-values for the number of runs compared (default holm)")
    compare.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    compare.add_argument("--resamples", type=int, default=10_000, metavar="N",
                         help="resamples of the randomization and bootstrap tests (default 10000)")
    compare.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")

    export = command("export", "write a saved model in LightGBM's, XGBoost's or ONNX's format",
                     "Write a model file of 'train' (or save_model) for serving elsewhere, with the same split "
                     "rule: lightgbm (LightGBM's text model), xgboost (XGBoost's JSON model), xgboost-dump (the JSON "
                     "tree dump the Elasticsearch and OpenSearch learning-to-rank plugins read) or onnx (one "
                     "TreeEnsemble node, float64 input X; needs pip install 'lambdamart[onnx]').", run_export)
    export.add_argument("--model", required=True, metavar="MODEL", help="a model file written by train")
    export.add_argument("--format", required=True, choices=_EXPORT_FORMATS, help="the target format")
    export.add_argument("--output", required=True, metavar="FILE", help="the file to write (replaced atomically)")

    imported = command("import", "turn a LightGBM or XGBoost model into a lambdamart model file",
                       "Read a LightGBM text model or an XGBoost JSON model (told apart by content) and write it "
                       "as a lambdamart model file that predict and evaluate use: the same scores as the other "
                       "library's predict. Categorical splits, linear trees and multiclass models are refused.",
                       run_import)
    imported.add_argument("--input", required=True, metavar="FILE",
                          help="LightGBM Booster.save_model('model.txt') or XGBoost save_model('model.json')")
    imported.add_argument("--model", required=True, metavar="OUT", help="the lambdamart model file to write")
    return parser


def main(argv=None):
    """Run the command line.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit code, which the console script passes to ``sys.exit``: 0 success, 1 file or data error, 2 usage
        error, 130 interrupted, 141 stdout closed by its reader before the output was all written.
    """
    try:
        code = _dispatch(argv)
    except BrokenPipeError:  # e.g. `lambdamart predict ... | head -1`: the reader left; stop quietly, like cat
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    # Flush here, not at interpreter exit, so that a reader who left is seen: Python would otherwise print
    # "Exception ignored ... BrokenPipeError" and end with another code than the one returned.
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE if code == EXIT_OK else code  # a failure already reported stays the exit code
    return code


def _dispatch(argv):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version (0) or a usage error argparse has already printed (2)
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        with _warnings_as_notes(args.command):
            return args.run(args)
    except CommandError as error:
        if error.code == EXIT_USAGE:
            args.parser.print_usage(sys.stderr)
        print(f"lambdamart {args.command}: error: {error}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        print(f"lambdamart {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MemoryError as error:  # e.g. a LETOR file whose largest feature index makes its rows very wide
        detail = f" ({error})" if str(error) else ""
        print(f"lambdamart {args.command}: error: not enough memory{detail}. Check the data's width (the largest "
              f"feature index of a LETOR file sets it) and size.", file=sys.stderr)
        return EXIT_DATA


def _stdout_to_devnull():
    """Point file descriptor 1 at os.devnull after a broken pipe (the remedy the Python docs give for SIGPIPE).

    What is still buffered in ``sys.stdout`` is then flushed there at interpreter exit, instead of failing a
    second time. A ``sys.stdout`` without a file descriptor (``main`` called in-process, e.g. under pytest's
    capture) is left alone.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both an OSError and a ValueError
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


@contextmanager
def _warnings_as_notes(command):
    """Show warnings as one line on stderr, without the source location a command-line user has no use for."""
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"lambdamart {command}: warning: {message}", file=sys.stderr)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = original


# ------------------------------------------------------------------------------------------------ demo


def run_demo(args):
    """``lambdamart demo``: generate data, train with early stopping, report test metrics beside a baseline.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (see :func:`build_parser`).

    Returns
    -------
    int
        0; failures raise :class:`CommandError`.
    """
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits

    from . import metrics
    from .datasets import make_ranking_data
    from .ranker import LambdaMARTRanker

    if args.queries < 10:
        raise usage_error("--queries must be at least 10 (the queries are split into train, validation and test).")
    if args.rounds < 1:
        raise usage_error("--rounds must be at least 1.")
    if args.jobs == 0:
        raise usage_error("--jobs must be a positive thread count, or negative to leave cores free.")
    if not 0 <= args.seed < 2**32:  # numpy's RandomState, which splits the queries, takes no other seed
        raise usage_error(f"--seed must be between 0 and 2**32 - 1, got {args.seed}.")
    started = time.perf_counter()
    print(f"Generating {args.queries} MSLR-shaped queries (make_ranking_data, seed {args.seed}) ...", flush=True)
    X, y, qid = make_ranking_data(args.queries, random_state=args.seed)
    # Split by query, 60/20/20: a query's documents never straddle two sets.
    shuffled = np.random.RandomState(args.seed).permutation(args.queries)
    n_train, n_valid = int(0.6 * args.queries), int(0.2 * args.queries)
    part = np.empty(args.queries, dtype=int)
    part[shuffled[:n_train]], part[shuffled[n_train:n_train + n_valid]], part[shuffled[n_train + n_valid:]] = 0, 1, 2
    sets = [part[qid] == i for i in range(3)]
    (X_tr, y_tr, q_tr), (X_va, y_va, q_va), (X_te, y_te, q_te) = [(X[m], y[m], qid[m]) for m in sets]
    n_test = args.queries - n_train - n_valid
    print(f"train {X_tr.shape[0]:,} rows / {n_train} queries, validation {X_va.shape[0]:,} rows / {n_valid} "
          f"queries, test {X_te.shape[0]:,} rows / {n_test} queries; {X.shape[1]} features, labels 0-4\n",
          flush=True)

    # A two-round fit on a tenth of the queries first: it compiles the numba kernels on the very first run (they are
    # cached on disk afterwards), so the progress below times training alone and its ETA means something. A tenth,
    # not a handful: big enough to take the threaded paths the full fit takes (fits from 500k feature values use
    # threads), so it compiles those kernels and not the single-threaded ones the full fit never runs.
    start = time.perf_counter()
    print("Loading the numba kernels (compiled on the first run only) ...", end=" ", flush=True)
    few = np.isin(q_tr, np.unique(q_tr)[:max(3, n_train // 10)])
    few_valid = np.isin(q_va, np.unique(q_va)[:2])
    LambdaMARTRanker(n_estimators=2, n_jobs=args.jobs, random_state=args.seed).fit(
        X_tr[few], y_tr[few], q_tr[few], eval_set=[(X_va[few_valid], y_va[few_valid], q_va[few_valid])])
    print(f"{time.perf_counter() - start:.1f}s\n", flush=True)

    print(f"LambdaMART: up to {args.rounds} rounds, learning rate 0.1, 31 leaves, early stopping after 20 rounds "
          f"without a better validation NDCG@10", flush=True)
    start = time.perf_counter()
    ranker = LambdaMARTRanker(n_estimators=args.rounds, learning_rate=0.1, n_iter_no_change=20, n_jobs=args.jobs,
                              random_state=args.seed, verbose=10)
    ranker.fit(X_tr, y_tr, q_tr, eval_set=[(X_va, y_va, q_va)])
    print(f"LambdaMART: kept the best {ranker.n_estimators_} of {ranker.n_iter_} trees, fitted in "
          f"{time.perf_counter() - start:.1f}s\n", flush=True)

    print("Pointwise baseline: HistGradientBoostingRegressor on the labels, same validation rows for early "
          "stopping ...", flush=True)
    start = time.perf_counter()
    baseline = HistGradientBoostingRegressor(max_iter=args.rounds, learning_rate=0.1, max_leaf_nodes=31,
                                             early_stopping=True, n_iter_no_change=20, random_state=args.seed)
    with threadpool_limits(limits=args.jobs if args.jobs and args.jobs > 0 else None):  # its OpenMP threads
        baseline.fit(X_tr, y_tr, X_val=X_va, y_val=y_va)
    print(f"baseline: {baseline.n_iter_} trees in {time.perf_counter() - start:.1f}s\n", flush=True)

    rows = [
        ("NDCG@1", metrics.ndcg, {"k": 1}),
        ("NDCG@5", metrics.ndcg, {"k": 5}),
        ("NDCG@10", metrics.ndcg, {"k": 10}),
        ("MAP", metrics.mean_average_precision, {}),
        ("MRR", metrics.mean_reciprocal_rank, {}),
    ]
    ours, theirs = ranker.predict(X_te), baseline.predict(X_te)
    print(f"Test set ({n_test} queries never seen in training); the last column is a 95 % confidence interval of "
          f"the per-query difference:")
    print(f"  {'metric':<10}{'LambdaMART':>12}{'pointwise':>12}{'difference':>20}")
    for name, metric, kwargs in rows:
        a, b = metric(y_te, ours, q_te, reduce=None, **kwargs), metric(y_te, theirs, q_te, reduce=None, **kwargs)
        half_width = 1.96 * np.std(a - b, ddof=1) / np.sqrt(len(a)) if len(a) > 1 else np.nan
        print(f"  {name:<10}{a.mean():>12.4f}{b.mean():>12.4f}{a.mean() - b.mean():>+12.4f} ± {half_width:.4f}")

    importances = ranker.feature_importances_
    top = np.argsort(-importances, kind="stable")[:8]
    print("\nTop features by gain (share of the total split gain):")
    for f in top:
        print(f"  f{f:<5}{importances[f]:6.3f}  {'#' * max(1, int(round(40 * importances[f] / importances[top[0]])))}")
    print(f"\nDone in {time.perf_counter() - started:.0f}s. Next: 'lambdamart train --help' to train on your own "
          "LETOR files, or the README for the Python API.")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ train


def parse_params(items):
    """``["key=value", ...]`` to a dict of ``LambdaMARTRanker`` parameters, values parsed as Python literals.

    Parameters
    ----------
    items : list of str
        The ``--param`` values; the last value of a key wins.

    Returns
    -------
    dict
        Parameter name to value.

    Raises
    ------
    CommandError
        A usage error (exit code 2) for a malformed item, an unknown parameter (with the right name when it is
        another library's) or a value the ranker rejects.
    """
    from ._compat import validate_params
    from .ranker import LambdaMARTRanker

    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise usage_error(f"--param {item!r} is not key=value (e.g. --param learning_rate=0.05).")
        params[key] = _literal(text.strip())
    known = LambdaMARTRanker().get_params()
    for key in params:
        if key not in known:
            raise usage_error(_unknown_parameter(key, known))
    ranker = LambdaMARTRanker(**params)
    try:
        validate_params(ranker)
    except (TypeError, ValueError) as error:
        raise usage_error(f"invalid --param: {error}") from None
    return params


def _literal(text):
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _unknown_parameter(key, known):
    message = f"unknown parameter {key!r}."
    alias = _ALIASES.get(key.lower().lstrip("-"))
    close = difflib.get_close_matches(key, known, n=3)
    if alias:
        message += f" LambdaMARTRanker calls it {alias!r}: --param {alias}=..."
    elif close:
        message += f" Did you mean {' or '.join(repr(c) for c in close)}?"
    return message + f" Parameters: {', '.join(sorted(known))}."


def run_train(args):
    """``lambdamart train``: read the training (and validation) file, fit, save the model.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (see :func:`build_parser`).

    Returns
    -------
    int
        0; failures raise :class:`CommandError`.
    """
    from ._model_format import encode_param
    from .ranker import LambdaMARTRanker

    params = parse_params(args.param)
    for name, value in params.items():  # fail now, not after training, if the model file cannot hold a value
        try:
            encode_param(name, value)
        except TypeError as error:
            raise usage_error(str(error)) from None
    params.setdefault("verbose", 10)
    _check_writable(args.model, "--model")
    if args.resume and args.checkpoint_dir is None:
        raise usage_error("--resume continues from the checkpoints in --checkpoint-dir DIR; give that option too.")
    if args.checkpoint_every < 1:
        raise usage_error("--checkpoint-every must be at least 1.")
    if args.checkpoint_dir is not None:
        params.update(checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
                      warm_start=args.resume)
    if args.position is not None:
        _check_readable(args.position, "--position")  # before reading the training data, not after
    init_model = _load_model(args.init_model, "--init-model") if args.init_model is not None else None
    if args.scheduler is not None or args.dask_workers is not None:
        if args.position is not None:
            raise usage_error("--position works on this machine's fit; on a cluster, pass position= to "
                              "DaskLambdaMARTRanker.fit in Python.")
        return _train_on_cluster(args, params, init_model)
    for option, paths in (("--train", args.train), ("--valid", args.valid or [])):
        if len(paths) > 1:
            raise usage_error(f"{option} takes one file on this machine; several files are for a cluster "
                              f"(--scheduler ADDRESS or --dask-workers N).")
        for path in paths:
            _check_readable(path, option)
    args.train = args.train[0]
    args.valid = args.valid[0] if args.valid else None

    zero_based = _zero_based(args)
    if zero_based == "auto" and args.valid is not None:  # one numbering for both files, as sklearn reads several
        zero_based = any(_scan(path, option)[1] == 0 for path, option in ((args.train, "--train"),
                                                                           (args.valid, "--valid")))
    X, y, qid = _read_letor(args.train, "--train", zero_based)
    sets = [(args.train, X, y, qid)]
    if args.valid is not None:
        sets.append((args.valid,) + _read_letor(args.valid, "--valid", zero_based))
    width = max(s[1].shape[1] for s in sets)  # files list only non-zero features, so widths can differ
    sets = [(path, _dense(X, width), y, qid) for path, X, y, qid in sets]
    for path, X, _, qid in sets:
        print(f"{path}: {_plural(X.shape[0], 'row')}, {_plural(np.unique(qid).size, 'query')}, "
              f"{_plural(X.shape[1], 'feature')}", flush=True)

    (_, X, y, qid), eval_set = sets[0], [s[1:] for s in sets[1:]]
    position = _read_positions(args.position, X.shape[0]) if args.position is not None else None
    ranker = LambdaMARTRanker(**params)
    start = time.perf_counter()
    try:
        ranker.fit(X, y, qid, eval_set=eval_set or None, init_model=init_model, position=position)
    except (ValueError, TypeError) as error:  # labels the gain cannot use, too few queries to hold out, ...
        raise CommandError(f"cannot train on {args.train}: {error}") from None
    return _save_and_summarise(ranker, args.model, time.perf_counter() - start)


def _train_on_cluster(args, params, init_model):
    """``train`` on a Dask cluster: the workers read the files and fit; the client writes the model."""
    try:
        import distributed

        from .dask import DaskLambdaMARTRanker, read_letor
    except ImportError as error:
        raise CommandError(f"--scheduler and --dask-workers need Dask: {error}") from None
    if args.dask_workers is not None and args.dask_workers < 1:
        raise usage_error("--dask-workers must be at least 1.")
    if args.scheduler is not None:
        try:
            client = distributed.Client(args.scheduler, timeout="30s")
        except (OSError, TimeoutError) as error:
            raise CommandError(f"--scheduler: cannot reach {args.scheduler}: {error}") from None
        cluster = None
    else:
        cluster = distributed.LocalCluster(n_workers=args.dask_workers, threads_per_worker=1, processes=True,
                                           dashboard_address=":0")
        client = distributed.Client(cluster)
    # The workers read the files, which may not be on this machine: without --index-base each read_letor call
    # decides the numbering of its own files.
    zero_based = _zero_based(args)
    try:
        sets = []
        for option, paths in (("--train", args.train), ("--valid", args.valid)):
            if paths:
                try:
                    sets.append((option, " ".join(paths), read_letor(paths, dtype=np.float64,
                                                                     zero_based=zero_based)))
                except (ValueError, OSError) as error:
                    raise CommandError(_file_error(option, " ".join(paths), error)) from None
        width = max(arrays[0].shape[1] for _, _, arrays in sets)
        for i, (option, names, arrays) in enumerate(sets):
            if arrays[0].shape[1] < width:  # files list only non-zero features, so widths can differ
                sets[i] = (option, names, read_letor(args.train if option == "--train" else args.valid,
                                                     n_features=width, dtype=np.float64, zero_based=zero_based))
        for _, names, (X, _, _) in sets:
            print(f"{names}: {_plural(X.shape[0], 'row')}, {_plural(X.numblocks[0], 'block')}, "
                  f"{_plural(X.shape[1], 'feature')}", flush=True)
        (_, names, (X, y, qid)), eval_set = sets[0], [arrays for _, _, arrays in sets[1:]]
        ranker = DaskLambdaMARTRanker(client=client, **params)
        start = time.perf_counter()
        try:
            ranker.fit(X, y, qid, eval_set=eval_set or None, init_model=init_model)
        except (ValueError, TypeError) as error:
            raise CommandError(f"cannot train on {names}: {error}") from None
        return _save_and_summarise(ranker.to_local(), args.model, time.perf_counter() - start)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _save_and_summarise(ranker, path, seconds):
    """Write the model and print what was trained."""
    try:
        ranker.save_model(path)
    except OSError as error:
        raise CommandError(f"cannot write the model to {path}: {error.strerror or error}") from None

    summary = f"trained {_plural(ranker.n_estimators_, 'tree')} in {seconds:.1f}s"
    if ranker.best_iteration_ is not None:
        valid = ranker.validation_score_
        best = f"NDCG@{ranker.eval_at} {valid[ranker.best_iteration_ - 1]:.5f}"
        if ranker.n_estimators_ < ranker.n_iter_:
            summary += f", the best of {ranker.n_iter_} rounds (validation {best})"
        else:
            summary += f" (validation NDCG@{ranker.eval_at} {valid[-1]:.5f}; best {best} at round " \
                       f"{ranker.best_iteration_})"
    print(f"{summary}; model written to {path}", flush=True)
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ predict, evaluate


def run_export(args):
    """``lambdamart export``: a saved model in another library's format (``LambdaMARTRanker.export_model``).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (see :func:`build_parser`).

    Returns
    -------
    int
        0; failures raise :class:`CommandError`.
    """
    _check_readable(args.model, "--model")
    _check_writable(args.output, "--output")
    ranker = _load_model(args.model)
    try:
        with _writing(args.output):
            ranker.export_model(args.output, format=args.format)
    except ImportError as error:
        raise CommandError(str(error)) from None
    except ValueError as error:
        raise CommandError(f"cannot export {args.model} as {args.format}: {error}") from None
    print(f"wrote {ranker.n_estimators_} trees to {args.output} ({args.format})", file=sys.stderr)
    return EXIT_OK


def run_import(args):
    """``lambdamart import``: a LightGBM or XGBoost model as a lambdamart model file (``import_model``).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (see :func:`build_parser`).

    Returns
    -------
    int
        0; failures raise :class:`CommandError`.
    """
    from .model_io import import_model

    _check_readable(args.input, "--input")
    _check_writable(args.model, "--model")
    try:
        ranker = import_model(args.input)
    except ValueError as error:
        raise CommandError(f"--input: {error}") from None
    with _writing(args.model):
        ranker.save_model(args.model)
    print(f"wrote {ranker.n_estimators_} trees over {ranker.n_features_in_} features to {args.model}",
          file=sys.stderr)
    return EXIT_OK


def run_predict(args):
    """``lambdamart predict``: write one score per data line, to stdout or ``--output``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (see :func:`build_parser`).

    Returns
    -------
    int
        0; failures raise :class:`CommandError`.
    """
    _check_readable(args.model, "--model")
    _check_readable(args.data, "--data")
    if args.output is not None:
        _check_writable(args.output, "--output")
    ranker = _load_model(args.model)
    if args.format == "trec":
        return _predict_run(args, ranker)
    X = _dense(_read_features(args.data, _data_zero_based(args, ranker)), ranker.n_features_in_, args.data)
    scores = ranker.predict(X)
    text = "".join(f"{s!r}\n" for s in scores.tolist())  # shortest repr: reads back as the same float64
    if args.output is None:
        _write_stdout(text)
    else:
        with _writing(args.output):
            write_atomically(args.output, text, encoding="ascii")
        print(f"wrote {len(scores):,} scores to {args.output}", file=sys.stderr)
    return EXIT_OK


def _predict_run(args, ranker):
    """``predict --format trec``: the data's documents ranked per query as a TREC run (docno = data line number)."""
    from .trec import format_run, to_run, write_run

    X, _, qid = _read_letor(args.data, "--data", _data_zero_based(args, ranker))
    scores = ranker.predict(_dense(X, ranker.n_features_in_, args.data))
    docno = np.arange(1, scores.shape[0] + 1)
    try:
        run = to_run(scores, qid, docno, run_name=args.run_name)
    except ValueError as error:
        raise usage_error(f"--run-name: {error}") from None
    if args.output is None:
        _write_stdout(format_run(run))
    else:
        with _writing(args.output):
            write_run(args.output, run)
        print(f"wrote a run of {_plural(np.unique(qid).size, 'query')} to {args.output}", file=sys.stderr)
    return EXIT_OK


def _write_stdout(text):
    """Write ``text`` to stdout in pieces of at most PIPE_BUF bytes, so that a reader who leaves is always noticed.

    With PYTHONUNBUFFERED set (common in containers), ``sys.stdout.write`` makes a single ``write(2)`` and ignores
    a short count: when the reader of a pipe leaves during a large write, the kernel returns the bytes written so
    far, the rest is dropped without an error, and the command would exit 0 having lost its output. A write of at
    most PIPE_BUF bytes to a pipe is atomic: all of it, or EPIPE (BrokenPipeError).
    """
    step = getattr(select, "PIPE_BUF", 512)  # 512 is the least POSIX allows
    for start in range(0, len(text), step):  # ASCII text, so characters are bytes
        sys.stdout.write(text[start:start + step])
    sys.stdout.flush()


def parse_metrics(text):
    """``"ndcg@10,map"`` to a list of ``(name, function, keyword arguments)``.

    Parameters
    ----------
    text : str
        The ``--metrics`` value: comma-separated names, ours with an optional ``@k`` cut-off or trec_eval's
        (:func:`lambdamart.evaluation.parse_metric`).

    Returns
    -------
    list of tuple
        ``(name as written, lowercased unless a trec_eval name; metric function of lambdamart.metrics; its keyword
        arguments)``.

    Raises
    ------
    CommandError
        A usage error (exit code 2) for an unknown metric, a bad cut-off or an empty list.
    """
    from .evaluation import parse_metric

    parsed = []
    for name in text.split(","):
        name = name.strip()
        if not name:
            continue
        try:
            function, kwargs = parse_metric(name)
        except ValueError as error:
            raise usage_error(str(error)) from None
        display = name.lower() if "@" in name or "_" not in name and name != "Rprec" else name
        parsed.append((display, function, kwargs))
    if not parsed:
        raise usage_error("--metrics is empty. Metrics: ndcg[@k], map[@k], mrr[@k], p@k, recall@k, ... (see --help).")
    return parsed


def run_evaluate(args):
    """``lambdamart evaluate``: print one ``name value`` line per metric of the model on the file, or of the run.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (see :func:`build_parser`).

    Returns
    -------
    int
        0; failures raise :class:`CommandError`.
    """
    from . import metrics

    trec_mode = args.qrels is not None or args.run_file is not None
    model_mode = args.model is not None or args.data is not None
    if trec_mode == model_mode or (trec_mode and None in (args.qrels, args.run_file)) or (
            model_mode and None in (args.model, args.data)):
        raise usage_error("give either --model and --data (a model on LETOR data) or --qrels and --run (a TREC run).")
    wanted = parse_metrics(args.metrics or (_DEFAULT_TREC_METRICS if trec_mode else _DEFAULT_METRICS))
    if trec_mode:
        return _evaluate_run(args, wanted)
    _check_readable(args.model, "--model")
    _check_readable(args.data, "--data")
    ranker = _load_model(args.model)
    X, y, qid = _read_letor(args.data, "--data", _data_zero_based(args, ranker))
    X = _dense(X, ranker.n_features_in_, args.data)
    scores = ranker.predict(X)
    print(f"{args.data}: {_plural(X.shape[0], 'row')}, {_plural(np.unique(qid).size, 'query')}", file=sys.stderr)
    width = max(len(name) for name, _, _ in wanted)
    for name, metric, kwargs in wanted:
        if metric in (metrics.ndcg, metrics.dcg) and "gain" not in kwargs:
            kwargs = dict(kwargs, gain=ranker.gain)  # the gain the model was trained and validated with
        try:
            value = metric(y, scores, qid, **kwargs)
        except ValueError as error:  # e.g. labels too large for exponential gain
            raise CommandError(f"{name} on {args.data}: {error}") from None
        print(f"{name:<{width}}  {value:.6f}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ TREC runs


def _read_trec(path, option, reader):
    _check_readable(path, option)
    try:
        return reader(path)
    except (ValueError, OSError) as error:
        raise CommandError(_file_error(option, str(path), error)) from None


def _trec_values(qrels, run, path, wanted):
    """Per-query values of each metric on a run, as trec_eval computes them: {name: values}, the query ids.

    gMAP's values are logs, so that its mean (exponentiated) and its tests are on the scale it averages.
    """
    from . import metrics
    from .evaluation import evaluate_run

    try:
        result = evaluate_run(qrels, run, [name for name, _, _ in wanted])
    except ValueError as error:
        raise CommandError(f"{path}: {error}") from None
    if result.query_ids.size == 0:
        raise CommandError(f"{path}: none of its queries is in the qrels; is it a run of this collection?")
    values = dict(result.values)
    for name, metric, _ in wanted:
        if metric is metrics.geometric_mean_average_precision:
            values[name] = np.log(values[name])
    return values, result.query_ids


def _evaluate_run(args, wanted):
    from .trec import read_qrels, read_run

    qrels = _read_trec(args.qrels, "--qrels", read_qrels)
    run = _read_trec(args.run_file, "--run", read_run)
    values, query_ids = _trec_values(qrels, run, args.run_file, wanted)
    print(f"{args.run_file}: {_plural(run.qid.size, 'line')}, {_plural(query_ids.size, 'query')} evaluated",
          file=sys.stderr)
    width = max(len(name) for name, _, _ in wanted)
    for name, metric, _ in wanted:
        print(f"{name:<{width}}  {_average(values[name], metric):.6f}")
    return EXIT_OK


def run_compare(args):
    """``lambdamart compare``: a table of metrics per run, with significance markers against the first run.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (see :func:`build_parser`).

    Returns
    -------
    int
        0; failures raise :class:`CommandError`.
    """
    from .evaluation import MAX_RESAMPLES, correct_p_values, paired_test
    from .trec import read_qrels, read_run

    wanted = parse_metrics(args.metrics)
    if len(args.runs) < 2:
        raise usage_error("compare needs at least two runs: the baseline first, then the runs to test against it.")
    if not 0 < args.alpha < 1:
        raise usage_error("--alpha must be between 0 and 1 (e.g. 0.05).")
    if not 1 <= args.resamples <= MAX_RESAMPLES:
        raise usage_error(f"--resamples must be between 1 and {MAX_RESAMPLES:,} (the bootstrap keeps every "
                          "resample's mean).")
    if args.seed < 0:
        raise usage_error("--seed must be a non-negative integer.")
    qrels = _read_trec(args.qrels, "--qrels", read_qrels)
    runs = [_read_trec(path, "run", read_run) for path in args.runs]
    evaluated = [_trec_values(qrels, run, path, wanted) for run, path in zip(runs, args.runs)]
    # Pair the runs on every judged query some run retrieved; a run that misses one counts 0 there (trec_eval -c).
    queries = np.unique(np.concatenate([ids for _, ids in evaluated]))
    table = {}
    for name, _, _ in wanted:
        table[name] = []
        for values, ids in evaluated:
            aligned = np.zeros(queries.size)
            aligned[np.searchsorted(queries, ids)] = values[name]
            table[name].append(aligned)
    labels = _run_labels(args.runs)
    rng = np.random.default_rng(args.seed)
    marks = {}
    for name, _, _ in wanted:
        base = table[name][0]
        p = [paired_test(base, other, test=args.test, n_resamples=args.resamples, random_state=rng).p_value
             if queries.size >= 2 else 1.0 for other in table[name][1:]]
        if args.correction != "none":
            p = correct_p_values(p, args.correction)
        marks[name] = [""] + ["*" if value < args.alpha else "" for value in p]
    tests = {"t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank test", "sign": "sign test",
             "randomization": f"randomization test ({args.resamples} resamples)",
             "bootstrap": f"bootstrap ({args.resamples} resamples)"}
    correction = "no correction" if args.correction == "none" else \
        f"{args.correction.capitalize()} correction over {_plural(len(runs) - 1, 'comparison')} per metric"
    print(f"{_plural(queries.size, 'query')}; * = differs from {labels[0]} at p < {args.alpha:g} ({tests[args.test]}, "
          f"{correction})")
    name_width = max(len("run"), *(len(label) for label in labels))
    widths = [max(len(name), 7) for name, _, _ in wanted]
    print(f"{'run':<{name_width}}" + "".join(f"  {name:>{w}} " for (name, _, _), w in zip(wanted, widths)))
    for i, label in enumerate(labels):
        cells = [f"{_average(table[name][i], metric):.4f}{marks[name][i] or ' '}" for name, metric, _ in wanted]
        cells = "".join(f"  {cell:>{w + 1}}" for cell, w in zip(cells, widths))
        print(f"{label:<{name_width}}{cells}")
    return EXIT_OK


def _average(values, metric):
    """The mean of per-query values; gMAP's are logs (tested as such), so its mean is exp of their mean."""
    from . import metrics

    return float(np.exp(values.mean())) if metric is metrics.geometric_mean_average_precision else float(values.mean())


def _run_labels(paths):
    """Each run's file name, or its path when two runs share a file name."""
    names = [os.path.basename(str(path)) for path in paths]
    return names if len(set(names)) == len(names) else [str(path) for path in paths]


# ------------------------------------------------------------------------------------------------ files


def _plural(n, word):
    plural = word[:-1] + "ies" if word.endswith("y") else word + "s"
    return f"{n:,} {word if n == 1 else plural}"


def _check_readable(path, option):
    if not os.path.exists(path):
        raise CommandError(f"{option} file not found: {path}")
    if os.path.isdir(path):
        raise CommandError(f"{option} {path} is a directory, not a file.")
    if not os.access(path, os.R_OK):
        raise CommandError(f"{option} file {path} is not readable.")


@contextmanager
def _writing(path):
    """Turn an OSError while writing ``path`` into the command's one-line error."""
    try:
        yield
    except OSError as error:
        raise CommandError(f"cannot write {path}: {error.strerror or error}") from None


def _check_writable(path, option):
    """Fail before the work, not after, when an output path cannot be written."""
    if names_a_directory(path):
        raise CommandError(f"{option} {path!r} is a directory; give a file name.")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise CommandError(f"{option}: the file {path} exists and is not writable.")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CommandError(f"{option}: the folder {folder} does not exist.")
    if not os.access(folder, os.W_OK):
        raise CommandError(f"{option}: the folder {folder} is not writable.")


def _load_model(path, option="--model"):
    from .model_io import load_model

    try:
        return load_model(path)
    except ValueError as error:
        raise CommandError(f"{option}: {error}") from None
    except OSError as error:
        raise CommandError(f"{option}: cannot read {path}: {error.strerror or error}") from None


def _zero_based(args):
    """``zero_based`` of the readers for ``--index-base``."""
    return {"auto": "auto", "0": True, "1": False}[args.index_base]


def _scan(path, option):
    """:func:`~lambdamart.datasets.scan_letor` of ``path``, its errors as the command's."""
    from .datasets import scan_letor

    try:
        return scan_letor(path)
    except (ValueError, OSError) as error:
        raise CommandError(_file_error(option, path, error)) from None


def _data_zero_based(args, ranker):
    """``zero_based`` for ``--data`` scored by ``ranker``, with a note when ``auto`` could be reading it wrong.

    A 0-based file in which no row has feature 0 reads as 1-based, every column one to the left. If its last
    feature is there, its largest index is then the model's width minus one: exactly what 0-based numbering would
    give, and what a 1-based file shows only when no row has the model's last feature.
    """
    zero_based = _zero_based(args)
    if zero_based == "auto":
        _, lowest, highest, _ = _scan(args.data, "--data")
        if lowest is not None and lowest > 0 and highest == ranker.n_features_in_ - 1:
            print(f"note: {args.data} has no feature index 0, so it is read 1-based (index 1 is the model's first "
                  f"column), but its indices run to {highest}, as a 0-based file for the model's "
                  f"{ranker.n_features_in_} features would. If they start at 0, pass --index-base 0.",
                  file=sys.stderr)
    return zero_based


def _read_letor(path, option, zero_based):
    """Sparse features, labels and query ids of a LETOR file (qid: fields or FILE.query sizes)."""
    from .datasets import load_letor

    try:
        return load_letor(path, sparse=True, dtype=np.float64, zero_based=zero_based)
    except (ValueError, OSError) as error:
        raise CommandError(_file_error(option, path, error)) from None


def _read_positions(path, n_rows):
    """The displayed ranks of ``--position``: one integer >= 1 per line, as many as --train has rows."""
    positions = []
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                text = line.strip()
                rank = int64_or_none(text)
                if rank is None or rank < 1:
                    raise CommandError(f"--position {path}, line {number}: expected a rank (an integer >= 1), got "
                                       f"{text!r}.")
                positions.append(rank)
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"--position: cannot read {path}: {error}") from None
    if len(positions) != n_rows:
        raise CommandError(f"--position {path} has {len(positions)} lines but --train has {n_rows} rows; give one "
                           f"rank per row, in the same order.")
    return np.array(positions, dtype=np.int64)


def _read_features(path, zero_based):
    """Sparse features of an SVMlight/LETOR file, with or without query information (predict needs none)."""
    from .datasets import load_features

    try:
        return load_features(path, sparse=True, dtype=np.float64, zero_based=zero_based)
    except (ValueError, OSError) as error:
        raise CommandError(_file_error("--data", path, error)) from None


def _file_error(option, path, error):
    if isinstance(error, OSError) and not isinstance(error, FileNotFoundError):
        return f"{option}: cannot read {path}: {error.strerror or error}"
    message = str(error).strip("'\"")
    return message if path in message else f"{option} {path}: {message}"


def _dense(X, width, path=None):
    """C-contiguous float64 features with exactly ``width`` columns.

    SVMlight files list only non-zero features, so a file's width is its largest feature index: narrower files
    are padded with zero columns. Columns beyond ``width`` (the model's) cannot have been used by the model, which
    saw them as all zero or never; they are dropped, with a note when they hold values.
    """
    if X.shape[1] > width:
        if path is not None and X[:, width:].count_nonzero():
            print(f"note: {path} has {X.shape[1]} feature columns but the model was trained on {width}; the "
                  f"extra columns are ignored.", file=sys.stderr)
        X = X[:, :width]
    elif X.shape[1] < width:
        X = X.copy()
        X.resize((X.shape[0], width))
    # float64, as the file writes them: float32 moved values across thresholds of models fitted (or imported) on
    # float64 data, so the command line scored some rows unlike Python and the model's own library.
    return np.ascontiguousarray(X.toarray(), dtype=np.float64)


if __name__ == "__main__":
    sys.exit(main())
