"""Side-by-side benchmark of LambdaMARTRanker, LightGBM's lambdarank, XGBoost's rank:ndcg and CatBoost's YetiRank.

    python benchmarks/compare.py [--data LETOR_DIR | --synthetic N_QUERIES] [--rounds 100] [--threads 2]
                                 [--repeat 1] [--profile] [--objectives] [--dask N_WORKERS]
                                 [--output benchmarks/RESULTS.md] [--libraries lambdamart,lightgbm,xgboost,catboost]
    python benchmarks/compare.py --letor-folds LETOR4_DIR [--threads 2] [--output benchmarks/LETOR.md]

The second form measures ranking quality only: the five standard folds of a LETOR 4.0 dataset under two protocols
(fixed settings; early stopping), every objective of ours, tested query by query (``folds.py``).

Every library trains on the same rows with the same settings, each in a fresh subprocess (this script run again
in a hidden worker mode) that reads the data from one temporary .npz file. A process per library keeps their
thread pools, allocators and import costs apart, makes peak RSS a per-library figure, and makes "first fit in a
fresh process" mean what it says. The parent computes every NDCG with ``lambdamart.metrics.ndcg`` from the scores
the workers save, so one metric implementation judges them all.

Speed is only meaningful as a ratio measured in one run (docs/design.md, "Benchmarks and measurement"): the tables
give ratios to LightGBM beside the raw times. Nothing here asserts a timing.

This module is the command line and the orchestration; the rest sits beside it in benchmarks/ (imported as
top-level modules, with this script's directory on sys.path):

- ``libraries.py``: the benchmark settings and each library's adapter (build, fit, serve);
- ``worker.py``: starting a worker process and what each worker mode (warm-up, fit, serve, profile, dask) measures;
- ``dask_run.py``: ``--dask N``, the Dask rankers on one LocalCluster (the client is a worker process);
- ``data.py``: the datasets, their split by query, the five folds of a LETOR 4.0 layout, and the NDCG of test scores;
- ``draws.py``: with ``--sizes``, NDCG@10 over several draws of the data at every size but 3M (quality only);
- ``folds.py``: ``--letor-folds``, the five-fold quality protocol, its metrics and paired tests;
- ``report.py``: the markdown report;
- ``context.py``: machine, versions, checkout, and paths as the report shows them (relative to the repository).
"""

import argparse
import importlib.util
import os
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np
from context import display_path, load_average, run_header
from data import DEFAULT_QUERIES, data_shape, datasets_from_args, ndcg_on_test
from draws import quality_over_draws
from folds import run_letor_folds
from libraries import DASK_LIBRARIES, LIBRARIES, benchmark_settings, installed
from report import render_folds_report, render_report
from worker import WorkerError, run_job, run_worker

HERE = Path(__file__).resolve().parent
# Options whose value is a path: the report's command line shows it relative to the repository root.
PATH_OPTIONS = ("--data", "--letor-folds", "--output")


# ------------------------------------------------------------------------------------------------ orchestration


def benchmark_dataset(dataset, libraries, args, workdir):
    """Every worker run for one dataset; returns the section of the report (failures recorded, not raised)."""
    arrays = dataset["arrays"]
    section = {"name": dataset["name"], "source": dataset["source"], "shape": data_shape(arrays), "fit": {},
               "serve": {}, "errors": []}
    data_path = workdir / f"{dataset['name']}.npz"
    np.savez(data_path, **arrays)  # written once, read by every worker
    base = {"data": str(data_path), "settings": settings_from_args(args), "tag": dataset["name"]}

    def attempt(what, job):
        _progress(f"[{dataset['name']}] {what} ...")
        try:
            return run_job({**base, **job}, workdir)
        except WorkerError as err:
            section["errors"].append(str(err))
            return None

    for name in libraries:
        if LIBRARIES[name].jit_cache:
            section["warmup"] = attempt(f"{name} warm-up (fills the numba cache)", {"mode": "warmup",
                                                                                   "library": name})
    contenders = {name: {"library": name} for name in libraries}
    objectives = objective_contenders() if args.objectives and "lambdamart" in libraries else None
    # The objectives fit in the libraries' rounds, so their ratios to LightGBM's share one stretch of machine time.
    fits = _fastest_fits(attempt, {**contenders, **(objectives or {})}, args.repeat, workdir, dataset["name"])
    for name in libraries:
        if name not in fits:
            continue
        fit, files = fits[name]
        fit["ndcg"] = ndcg_on_test(np.load(files["scores"]), arrays)
        section["fit"][name] = fit
        serve = attempt(f"{name} serving", {"mode": "serve", "library": name, **files})
        if serve is not None:
            section["serve"][name] = serve
    if "lambdamart" in section["serve"]:
        section["serve_control"] = attempt("host control for serving", {
            "mode": "serve_control", "library": "lambdamart", "p50_s": section["serve"]["lambdamart"]["p50_s"]})
    if args.profile and "lambdamart" in libraries:
        section["profile"] = attempt("lambdamart profile", {"mode": "profile", "library": "lambdamart"})
    if objectives is not None:
        section["objectives"] = _objective_results(objectives, fits, arrays)
    if args.dask:
        section["dask"] = run_dask_cluster(attempt, libraries, args, workdir, dataset["name"], arrays)
        section["errors"] += [f"--dask {args.dask}: {error}" for error in section["dask"].get("errors", [])]
    return section


def _fastest_fits(attempt, contenders, repeat, workdir, tag):
    """Fit workers, ``repeat`` rounds with the ``contenders`` (name -> the fit job's library, and parameters if any)
    interleaved, so a busy spell on a shared machine hits all of them alike; per contender, the run with the
    shortest fit and its files, plus every run's fit time."""
    best, runs = {}, {name: [] for name in contenders}
    for r in range(repeat):
        for name, job in contenders.items():
            run_tag = f"{tag}-{name.replace(':', '-')}-{r}"  # names the worker's files too: no run reads another's
            files = {"scores": str(workdir / f"{run_tag}-scores.npy"), "model": str(workdir / f"{run_tag}.pkl")}
            what = f"{name} fit" + (f" (run {r + 1} of {repeat})" if repeat > 1 else "")
            fit = attempt(what, {"mode": "fit", "tag": run_tag, **job, **files})
            if fit is None:
                continue
            runs[name].append(fit["fit_s"])
            if name not in best or fit["fit_s"] < best[name][0]["fit_s"]:
                best[name] = (fit, files)
    for name, (fit, _) in best.items():
        fit["fit_runs"] = runs[name]
    return {name: best[name] for name in contenders if name in best}


def ranker_objectives():
    """The values LambdaMARTRanker's ``objective`` parameter accepts, from its scikit-learn constraints."""
    from lambdamart import LambdaMARTRanker

    options = set()
    for constraint in LambdaMARTRanker._parameter_constraints.get("objective", []):
        options |= set(getattr(constraint, "options", ()))
    return sorted(options) or ["lambdarank"]


def objective_contenders():
    """``--objectives``: a fit job per objective of ours but the default (the ``lambdamart`` fit is that one), named
    ``lambdamart:NAME``; none when there is no other."""
    objectives = [o for o in ranker_objectives() if o != _default_objective()]
    if not objectives:
        _progress("--objectives: LambdaMARTRanker accepts only objective='lambdarank'; nothing to compare.")
    return {f"lambdamart:{o}": {"library": "lambdamart", "params": {"objective": o}} for o in objectives}


def _default_objective():
    from lambdamart import LambdaMARTRanker

    return LambdaMARTRanker().objective


def _objective_results(objectives, fits, arrays):
    """Per objective (the default's from the ``lambdamart`` fit), its fastest fit's time, every run's, and NDCG@10."""
    if not objectives:
        return {"skipped": "LambdaMARTRanker accepts only objective='lambdarank' so far; nothing to compare."}
    results = {}
    for name in sorted([*objectives, f"lambdamart:{_default_objective()}"]):
        fit, files = fits.get(name if name in objectives else "lambdamart", (None, None))
        if fit is not None:
            results[name.split(":", 1)[1]] = {"fit_s": fit["fit_s"], "fit_runs": fit["fit_runs"],
                                              "ndcg10": ndcg_on_test(np.load(files["scores"]), arrays)[10]}
    return {"results": results}


def run_dask_cluster(attempt, libraries, args, workdir, name, arrays):
    """``--dask N``: one client process fits every library's Dask ranker on a LocalCluster of N workers; the NDCG of
    the scores it saves is computed here, as for every other fit."""
    if importlib.util.find_spec("distributed") is None:
        _progress("--dask: dask.distributed is not installed; skipped.")
        return {"skipped": "dask.distributed is not installed (`pip install \"dask[distributed]\"`)."}
    libraries = [lib for lib in libraries if lib in DASK_LIBRARIES]  # CatBoost has no Dask ranker
    scores = {lib: str(workdir / f"{name}-dask-{lib}-scores.npy") for lib in libraries}
    result = attempt(f"--dask {args.dask}: {', '.join(libraries)} on a LocalCluster of {args.dask} workers",
                     {"mode": "dask", "library": "dask", "workers": args.dask, "libraries": libraries,
                      "repeat": args.repeat, "scores": scores})
    if result is None:  # the client process failed: its error is in the section's errors already
        return {"skipped": "the client process failed (below)."}
    for lib, fit in result["fit"].items():
        fit["ndcg"] = ndcg_on_test(np.load(scores[lib]), arrays)
    return result


def settings_from_args(args):
    return benchmark_settings(rounds=args.rounds, threads=args.threads)


def _progress(message):
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ command line


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Benchmark LambdaMARTRanker against LightGBM, XGBoost and CatBoost "
                    "(fit, predict, memory, NDCG, serving).")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", metavar="LETOR_DIR",
                        help="directory with rank.train/rank.test (+ .query files) or train.txt/test.txt (MSLR fold)")
    source.add_argument("--synthetic", metavar="N_QUERIES", type=_positive_int,
                        help=f"make_ranking_data(N_QUERIES) instead of the default {DEFAULT_QUERIES} queries "
                             "(and no second dataset)")
    source.add_argument("--sizes", action="store_true",
                        help="the size sweep: make_ranking_data at ~3k, 16k, 135k and 570k training rows, with a "
                             "summary of fit time, peak memory and NDCG@10 against the other libraries per size, "
                             "and NDCG@10 over several draws of the data at every size but 3M")
    source.add_argument("--letor-folds", metavar="LETOR4_DIR",
                        help="ranking quality only: the five folds of a LETOR 4.0 directory (Fold1..Fold5 or the "
                             "parts S1.txt..S5.txt), two protocols, every objective of ours (report: "
                             "benchmarks/LETOR.md)")
    parser.add_argument("--with-3m", action="store_true",
                        help="with --sizes, also ~3M training rows (MSLR-WEB30K's size; ~4 GB per process)")
    parser.add_argument("--rounds", type=_positive_int, default=100, help="boosting rounds (default 100)")
    parser.add_argument("--threads", type=_positive_int, default=2, help="threads for every library (default 2)")
    parser.add_argument("--repeat", type=_positive_int, default=1,
                        help="fit every library this many times, interleaved, and report the fastest (default 1)")
    parser.add_argument("--profile", action="store_true", help="break down where LambdaMARTRanker's fit time goes")
    parser.add_argument("--objectives", action="store_true",
                        help="fit time and NDCG@10 for every objective LambdaMARTRanker accepts")
    parser.add_argument("--dask", metavar="N_WORKERS", type=_positive_int,
                        help="also fit each library's Dask ranker on a LocalCluster of N_WORKERS single-threaded "
                             "worker processes")
    parser.add_argument("--output", type=Path,
                        help="markdown report (default benchmarks/RESULTS.md; benchmarks/LETOR.md with --letor-folds)")
    parser.add_argument("--libraries", type=_library_list, default=list(LIBRARIES),
                        help="comma-separated subset of " + ",".join(LIBRARIES))
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one job file in this process
    args = parser.parse_args(argv)
    if args.with_3m and not args.sizes:
        parser.error("--with-3m adds a size to --sizes; give --sizes too.")
    if args.synthetic is not None and args.synthetic < 2:
        parser.error("--synthetic needs at least 2 queries (some are held out for testing).")
    if args.letor_folds:
        given = [name for name in ("profile", "objectives", "dask") if getattr(args, name)]
        if given or args.repeat != 1 or args.rounds != 100:
            parser.error("--letor-folds runs its own protocols (every objective, fixed 100 rounds and early stopping); "
                         "drop " + ", ".join(f"--{n}" for n in given or ["--repeat/--rounds"]) + ".")
    if args.output is None:
        args.output = HERE / ("LETOR.md" if args.letor_folds else "RESULTS.md")
    return args


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _library_list(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in LIBRARIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown library {', '.join(unknown) or '(none)'}; choose from "
                                         + ", ".join(LIBRARIES))
    return list(dict.fromkeys(names))


def command_line(argv):
    """The command as the report prints it: from the repository root, with path values shown by ``display_path``
    (the report is committed; this machine's directories mean nothing elsewhere)."""
    shown, path_follows = [], False
    for token in argv:
        option, equals, value = token.partition("=")
        if path_follows:
            token, path_follows = display_path(token), False
        elif _is_path_option(option):
            if equals:
                token = f"{option}={display_path(value)}"
            else:
                path_follows = True
        shown.append(token)
    return "python benchmarks/compare.py " + shlex.join(shown)


def _is_path_option(token):
    # argparse accepts any unambiguous prefix of a long option (--out for --output); argv has parsed already.
    return len(token) > 2 and token.startswith("--") and any(option.startswith(token) for option in PATH_OPTIONS)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        return run_worker(args.worker)
    libraries, skipped = installed(args.libraries)
    if importlib.util.find_spec("lambdamart") is None:  # the parent needs it for the data and the metrics
        raise SystemExit("compare.py: lambdamart itself is not importable; run `pip install -e .` first.")
    if args.threads > (os.cpu_count() or 1):
        _progress(f"warning: --threads {args.threads} exceeds the {os.cpu_count()} cores; timings oversubscribe.")
    meta = run_header(command_line(argv), settings=settings_from_args(args))
    if args.letor_folds:
        return letor_folds_main(args, libraries, meta)
    sections = []
    with tempfile.TemporaryDirectory(prefix="lambdamart-bench-") as tmp:
        for load in datasets_from_args(args):
            dataset = load()
            _progress(f"[{dataset['name']}] {dataset['source']}")
            sections.append(benchmark_dataset(dataset, libraries, args, Path(tmp)))
            del dataset
    draws = quality_over_draws(libraries, settings_from_args(args)) if args.sizes and "lambdamart" in libraries else []
    meta["load_after"] = load_average()
    _write_report(render_report(meta, sections, libraries, skipped, draws), args.output)
    return 1 if any(part["errors"] for part in sections + draws) else 0


def letor_folds_main(args, libraries, meta):
    errors = []

    def attempt(what, job):
        _progress(f"[--letor-folds] {what} ...")
        try:
            return run_job(job, workdir)
        except WorkerError as err:
            errors.append(str(err))
            return None

    with tempfile.TemporaryDirectory(prefix="lambdamart-folds-") as tmp:
        workdir = Path(tmp)
        result = run_letor_folds(args.letor_folds, libraries, ranker_objectives(), args.threads, workdir, attempt)
    meta["load_after"] = load_average()
    _write_report(render_folds_report(meta, result, errors), args.output)
    return 1 if errors else 0


def _write_report(report, path):
    print(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report)
    _progress(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
