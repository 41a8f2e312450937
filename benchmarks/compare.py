"""Side-by-side benchmark of LambdaMARTRanker, LightGBM's lambdarank and XGBoost's rank:ndcg.

    python benchmarks/compare.py [--data LETOR_DIR | --synthetic N_QUERIES] [--rounds 100] [--threads 2]
                                 [--repeat 1] [--profile] [--objectives] [--output benchmarks/RESULTS.md]
                                 [--libraries lambdamart,lightgbm,xgboost]

Every library trains on the same rows with the same settings, each in a fresh subprocess (this script run again
in a hidden worker mode) that reads the data from one temporary .npz file. A process per library keeps their
thread pools, allocators and import costs apart, makes peak RSS a per-library figure, and makes "first fit in a
fresh process" mean what it says. The parent computes every NDCG with ``lambdamart.metrics.ndcg`` from the scores
the workers save, so one metric implementation judges all three.

Speed is only meaningful as a ratio measured in one run (DESIGN.md §6): the tables give ratios to LightGBM beside
the raw times. Nothing here asserts a timing.
"""

import argparse
import datetime
import importlib
import importlib.metadata
import importlib.util
import json
import os
import pickle
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# LightGBM's example data, kept outside the repository (it may not be copied in); used when present.
SHARED_EXAMPLE = REPO.parent / "shared" / "data" / "lightgbm-lambdarank-example"

DEFAULT_QUERIES = 6000  # make_ranking_data(6000): ~570k training rows x 136, the shape of MSLR-WEB10K Fold 1
TRAIN_SHARE = 0.8  # of the queries, the rest is the held-out test split
NDCG_CUTOFFS = (1, 5, 10)
PREDICT_REPEATS = 3  # batch predict: best of this many timed calls, after one untimed call
SERVING_DOCS = 100  # documents per call: one query, as a search service scores its candidates
SERVING_CALLS = 1000
TINY_ROWS, TINY_QUERIES, TINY_ROUNDS = 50, 5, 3  # the fit that pays import-time and JIT-cache loading costs
# XGBoost has no minimum row count per leaf. The closest knob is the minimum hessian sum, set to the value
# LightGBM (min_sum_hessian_in_leaf) and LambdaMARTRanker (min_sum_hessian) use by default.
XGB_MIN_CHILD_WEIGHT = 1e-3


# ------------------------------------------------------------------------------------------------ library adapters


def _lambdamart_params(s):
    return dict(n_estimators=s["rounds"], learning_rate=s["learning_rate"], max_leaf_nodes=s["leaves"],
                min_samples_leaf=s["min_leaf"], max_bins=s["bins"], truncation_level=s["truncation"],
                n_jobs=s["threads"], random_state=s["seed"])


def _lightgbm_params(s):
    return dict(objective="lambdarank", n_estimators=s["rounds"], learning_rate=s["learning_rate"],
                num_leaves=s["leaves"], min_child_samples=s["min_leaf"], max_bin=s["bins"],
                lambdarank_truncation_level=s["truncation"], n_jobs=s["threads"], random_state=s["seed"],
                verbose=-1)


def _xgboost_params(s):
    # Leaf-wise growth capped by leaves, not depth, as the other two grow; reg_lambda=0 because XGBoost's default
    # L2 of 1 is not what the others use (both default to 0); top-k pairs per document stand in for truncation.
    return dict(objective="rank:ndcg", tree_method="hist", n_estimators=s["rounds"],
                learning_rate=s["learning_rate"], grow_policy="lossguide", max_leaves=s["leaves"], max_depth=0,
                min_child_weight=XGB_MIN_CHILD_WEIGHT, reg_lambda=0.0, max_bin=s["bins"],
                lambdarank_pair_method="topk", lambdarank_num_pair_per_sample=s["truncation"],
                n_jobs=s["threads"], random_state=s["seed"])


def _fit_qid(model, X, y, qid):
    model.fit(X, y, qid=qid)  # one query id per row (rows are sorted by qid, which XGBoost requires)


def _fit_group(model, X, y, qid):
    model.fit(X, y, group=_group_sizes(qid))  # LightGBM wants the sizes of consecutive queries


def _serve_lambdamart(model):
    # One thread, like the others; a 100-row call takes the serial path anyway (no thread start-up).
    model.set_params(n_jobs=1)
    return model.predict


def _serve_lightgbm(model):
    booster = model.booster_
    return lambda X: booster.predict(X, num_threads=1)


def _serve_xgboost(model):
    booster = model.get_booster()
    booster.set_param({"nthread": 1})
    return booster.inplace_predict


@dataclass(frozen=True)
class Library:
    """How to build, train and serve one library's ranker; everything else is shared code."""

    module: str  # import name, also the distribution name for its version
    estimator: str  # class in ``module``
    params: Callable[[dict], dict]  # benchmark settings -> constructor arguments
    fit: Callable
    serve: Callable  # fitted model -> predict function for one query
    serve_path: str  # what ``serve`` calls, for the report
    jit_cache: bool = False  # numba kernels cached on disk: warm the cache first, report what was compiled

    def make(self, settings, extra=None):
        cls = getattr(importlib.import_module(self.module), self.estimator)
        return cls(**{**self.params(settings), **(extra or {})})


LIBRARIES = {
    "lambdamart": Library("lambdamart", "LambdaMARTRanker", _lambdamart_params, _fit_qid, _serve_lambdamart,
                          "LambdaMARTRanker.predict(X), n_jobs=1", jit_cache=True),
    "lightgbm": Library("lightgbm", "LGBMRanker", _lightgbm_params, _fit_group, _serve_lightgbm,
                        "booster_.predict(X, num_threads=1) (Booster, not the sklearn wrapper)"),
    "xgboost": Library("xgboost", "XGBRanker", _xgboost_params, _fit_qid, _serve_xgboost,
                       "get_booster().inplace_predict(X), nthread=1 (Booster, not the sklearn wrapper)"),
}
REFERENCE = "lightgbm"  # ratios are to this library


# ------------------------------------------------------------------------------------------------ small helpers


def _group_sizes(qid):
    """Sizes of the runs of equal, consecutive query ids."""
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    return np.diff(np.r_[starts, qid.shape[0]])


def _timed(func, *args, **kwargs):
    start = time.perf_counter()
    out = func(*args, **kwargs)
    return time.perf_counter() - start, out


def _peak_rss_bytes():
    """Peak resident memory of this process.

    On Linux this is VmHWM, not ``ru_maxrss``: exec carries the parent's high-water mark into the child's
    ``ru_maxrss``, so every worker would report at least the parent's RSS (which holds the whole dataset).
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports kilobytes, macOS bytes


def _tiny_data(data):
    """The first training rows as a few equal pseudo-queries: enough to run every kernel once, in milliseconds."""
    rows = min(TINY_ROWS, data["X_train"].shape[0])
    qid = np.repeat(np.arange(TINY_QUERIES), -(-rows // TINY_QUERIES))[:rows]
    return data["X_train"][:rows], data["y_train"][:rows], qid


def _tiny_fit(lib, settings, data):
    X, y, qid = _tiny_data(data)
    model = lib.make({**settings, "rounds": TINY_ROUNDS})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "all labels equal" on a 50-row slice: irrelevant here
        lib.fit(model, X, y, qid)
    return model


def _serving_batches(X, n_calls=SERVING_CALLS, n_docs=SERVING_DOCS):
    """``n_calls`` blocks of ``n_docs`` consecutive test rows (C-contiguous views, no copies), cycling."""
    if X.shape[0] < n_docs:
        X = np.resize(X, (n_docs, X.shape[1]))  # tiny test split: repeat rows
    starts = (np.arange(n_calls) * n_docs) % (X.shape[0] - n_docs + 1)
    return [X[s:s + n_docs] for s in starts]


def _numba_state():
    """Numba kernels of the imported lambdamart modules: how many, signatures present, signatures compiled here.

    ``signatures`` counts what is compiled or loaded from the on-disk cache in this process; ``compiled`` counts
    cache misses, i.e. real compilations.
    """
    from numba.core.dispatcher import Dispatcher

    kernels = {}
    for name, module in list(sys.modules.items()):
        if name == "lambdamart" or name.startswith("lambdamart."):
            kernels.update((id(o), o) for o in vars(module).values() if isinstance(o, Dispatcher))
    kernels = list(kernels.values())
    compiled = sorted(f"{k.py_func.__module__}.{k.__name__}" for k in kernels if k.stats.cache_misses)
    return {"kernels": len(kernels), "signatures": sum(len(k.signatures) for k in kernels),
            "compiled": sum(sum(k.stats.cache_misses.values()) for k in kernels), "compiled_names": compiled}


# ------------------------------------------------------------------------------------------------ worker side


def _load_data(path):
    with np.load(path) as f:
        return {name: f[name] for name in f.files}


def work_warmup(job, data):
    """Compile or load every kernel the fit, predict and serving workers will call, so the disk cache is warm."""
    lib = LIBRARIES[job["library"]]
    tiny = _tiny_fit(lib, job["settings"], data)
    # One round on the full training split too: kernels may pick other code paths (or types) for large inputs.
    one_round = lib.make({**job["settings"], "rounds": 1})
    lib.fit(one_round, data["X_train"], data["y_train"], data["qid_train"])
    for model in (tiny, one_round):  # different tree counts: both the serial and the threaded predict path
        model.predict(data["X_test"])
        model.predict(_serving_batches(data["X_test"], n_calls=1)[0])
    return {"numba": _numba_state()}


def work_fit(job, data):
    """Import, tiny fit, the timed fit, batch predict; saves the test scores and the pickled model."""
    lib = LIBRARIES[job["library"]]
    settings, extra = job["settings"], job.get("params")
    import_s, _ = _timed(importlib.import_module, lib.module)
    first_call_s, _ = _timed(_tiny_fit, lib, settings, data)
    model = lib.make(settings, extra)
    cpu_start = time.process_time()
    fit_s, _ = _timed(lib.fit, model, data["X_train"], data["y_train"], data["qid_train"])
    fit_cpu_s = time.process_time() - cpu_start  # all threads: less sensitive to other work than wall time
    X_test = data["X_test"]
    predict_first_s, scores = _timed(model.predict, X_test)
    predict_s = min(_timed(model.predict, X_test)[0] for _ in range(PREDICT_REPEATS))
    np.save(job["scores"], np.asarray(scores, dtype=np.float64))
    with open(job["model"], "wb") as f:
        pickle.dump(model, f, protocol=pickle.HIGHEST_PROTOCOL)
    result = dict(import_s=import_s, first_call_s=first_call_s, fit_s=fit_s, fit_cpu_s=fit_cpu_s,
                  predict_first_s=predict_first_s,
                  predict_s=predict_s, rows_per_s=X_test.shape[0] / predict_s,
                  model_bytes=os.path.getsize(job["model"]))
    if lib.jit_cache:
        result["numba"] = _numba_state()
    return result


def work_serve(job, data):
    """Serving latency: unpickle in a fresh process, one timed first call, then many single-query calls."""
    lib = LIBRARIES[job["library"]]
    import_s, _ = _timed(importlib.import_module, lib.module)
    result = {"import_s": import_s}
    if lib.jit_cache:
        result["numba_after_import"] = _numba_state()  # importing must compile (or even load) nothing
    with open(job["model"], "rb") as f:
        unpickle_s, model = _timed(pickle.load, f)
    predict = lib.serve(model)
    batches = _serving_batches(data["X_test"])
    first_s, _ = _timed(predict, batches[0])
    latencies = np.empty(len(batches))
    for i, batch in enumerate(batches):
        start = time.perf_counter_ns()
        predict(batch)
        latencies[i] = time.perf_counter_ns() - start
    latencies *= 1e-9
    result.update(unpickle_s=unpickle_s, first_predict_s=first_s, p50_s=float(np.percentile(latencies, 50)),
                  p99_s=float(np.percentile(latencies, 99)), mean_s=float(latencies.mean()), calls=len(batches))
    if lib.jit_cache:
        result["numba"] = _numba_state()
    return result


# Kernels lambdamart.ranker calls through module-level names, and the stage each belongs to. The profile replaces
# these names in lambdamart.ranker with timing shims (numba kernels return only when their work is done, so wall
# time around a call is the kernel's time); a Python call costs ~1 us against milliseconds of kernel work.
PROFILED_KERNELS = {
    "find_thresholds": "binning (thresholds, codes, histogram layout)",
    "bin_features": "binning (thresholds, codes, histogram layout)",
    "make_layout": "binning (thresholds, codes, histogram layout)",
    "inverse_ideal_dcg": "lambdas",
    "lambdarank_gradients": "lambdas",
    "grow_tree": "tree growth (histograms, split finding, partition)",
    "add_leaf_values": "score update",
    "add_tree_binned": "score update",
    "per_query": "validation scoring",
}
VALIDATION = "validation scoring"
# Binning and the binned tree walk also serve the eval_set; they count as validation when their row count is not
# the training set's (the profile's eval_set is the test split, which never has as many rows as the training one).
_ROW_COUNT = {"bin_features": lambda args: args[1].shape[0], "add_tree_binned": lambda args: args[0].shape[1]}


def _install_profile_shims(module, n_train_rows, seconds, calls):
    missing = []
    for name, stage in PROFILED_KERNELS.items():
        original = getattr(module, name, None)
        if original is None:
            missing.append(name)
            continue

        def shim(*args, _original=original, _name=name, _stage=stage, **kwargs):
            start = time.perf_counter()
            out = _original(*args, **kwargs)
            elapsed = time.perf_counter() - start
            rows = _ROW_COUNT.get(_name)
            stage_now = VALIDATION if rows is not None and args and rows(args) != n_train_rows else _stage
            seconds[stage_now] = seconds.get(stage_now, 0.0) + elapsed
            calls[_name] = calls.get(_name, 0) + 1
            return out

        setattr(module, name, shim)
    return missing


def work_profile(job, data):
    """Where LambdaMARTRanker's fit time goes, with the test split as eval_set so validation scoring shows."""
    lib = LIBRARIES["lambdamart"]
    settings = job["settings"]
    _tiny_fit(lib, settings, data)  # pay cache loading before the profiled fit, as the timed fit does
    ranker_module = importlib.import_module("lambdamart.ranker")
    seconds, calls = {}, {}
    missing = _install_profile_shims(ranker_module, data["X_train"].shape[0], seconds, calls)
    model = lib.make(settings, {"early_stopping": False})
    eval_set = [(data["X_test"], data["y_test"], data["qid_test"])]
    fit_s, _ = _timed(model.fit, data["X_train"], data["y_train"], data["qid_train"], eval_set=eval_set)
    return dict(fit_s=fit_s, seconds=seconds, calls=calls, missing=missing, numba=_numba_state())


WORKER_MODES = {"warmup": work_warmup, "fit": work_fit, "serve": work_serve, "profile": work_profile}


def run_worker(job_path):
    with open(job_path) as f:
        job = json.load(f)
    data = _load_data(job["data"])
    rss_after_load = _peak_rss_bytes()  # baseline: interpreter, numpy and the data, before the library
    result = WORKER_MODES[job["mode"]](job, data)
    result.update(rss_after_load=rss_after_load, peak_rss=_peak_rss_bytes())
    with open(job["result"], "w") as f:
        json.dump(result, f)
    return 0


# ------------------------------------------------------------------------------------------------ parent side


class WorkerError(RuntimeError):
    pass


def run_job(job, workdir):
    """Run one worker process on ``job`` and return its result dict; raises WorkerError with its stderr."""
    tag = f"{job['mode']}-{job['library']}-{job.get('tag', '')}"
    job = {**job, "result": str(workdir / f"{tag}.json")}
    job_path = workdir / f"{tag}.job.json"
    job_path.write_text(json.dumps(job))
    # The environment is left as the user has it (no OMP_NUM_THREADS etc.): every library is given the thread
    # count explicitly, as a user would, and an OpenMP variable would change LightGBM's and XGBoost's runtimes.
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(job_path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise WorkerError(f"{job['mode']} worker for {job['library']} failed (exit {proc.returncode}):\n{tail}")
    with open(job["result"]) as f:
        return json.load(f)


def _progress(message):
    print(message, file=sys.stderr, flush=True)


def _split_by_query(X, y, qid, train_share=TRAIN_SHARE):
    """First ``train_share`` of the query ids for training, the rest for testing (generated queries are i.i.d.)."""
    queries = np.unique(qid)
    if queries.shape[0] < 2:
        raise SystemExit("compare.py: the data needs at least 2 queries to hold some out.")
    n_train = min(max(1, int(round(train_share * queries.shape[0]))), queries.shape[0] - 1)
    train = np.isin(qid, queries[:n_train])
    return (X[train], y[train], qid[train]), (X[~train], y[~train], qid[~train])


def _sorted_by_query(X, y, qid):
    """Rows grouped by query id (stable): XGBoost requires it and LightGBM's group sizes assume it."""
    if np.all(qid[1:] >= qid[:-1]):
        return X, y, qid
    order = np.argsort(qid, kind="stable")
    return np.ascontiguousarray(X[order]), y[order], qid[order]


def _dataset(name, source, train, test):
    (X_tr, y_tr, q_tr), (X_te, y_te, q_te) = _sorted_by_query(*train), _sorted_by_query(*test)
    arrays = dict(X_train=np.ascontiguousarray(X_tr, dtype=np.float32), y_train=y_tr, qid_train=q_tr,
                  X_test=np.ascontiguousarray(X_te, dtype=np.float32), y_test=y_te, qid_test=q_te)
    return {"name": name, "source": source, "arrays": arrays}


def synthetic_dataset(n_queries):
    from lambdamart.datasets import make_ranking_data

    X, y, qid = make_ranking_data(n_queries, random_state=0)
    return _dataset("synthetic", f"make_ranking_data({n_queries}, random_state=0), first 80 % of queries to train",
                    *_split_by_query(X, y, qid))


# (train file, test file) of the layouts we accept: LightGBM's example (sizes in .query files) and an MSLR fold.
LETOR_LAYOUTS = (("rank.train", "rank.test"), ("train.txt", "test.txt"))


def letor_dataset(directory):
    from lambdamart.datasets import load_letor

    directory = Path(directory)
    if not directory.is_dir():
        raise SystemExit(f"compare.py: --data {directory}: not a directory.")
    if not any((directory / t).exists() for t, _ in LETOR_LAYOUTS) and (directory / "Fold1").is_dir():
        directory = directory / "Fold1"  # an MSLR root: take its first fold
    for train_name, test_name in LETOR_LAYOUTS:
        if (directory / train_name).exists() and (directory / test_name).exists():
            train, test = load_letor(directory / train_name), load_letor(directory / test_name)
            train, test = _same_width(train, test)
            return _dataset(directory.name, f"{directory / train_name} / {test_name} (load_letor)", train, test)
    layouts = " or ".join(f"{a} + {b}" for a, b in LETOR_LAYOUTS)
    raise SystemExit(f"compare.py: --data {directory}: expected {layouts} in the directory "
                     "(LightGBM's example layout, with .query size files, or an MSLR fold).")


def _same_width(train, test):
    """Pad the narrower split with zero columns: in LETOR files an absent feature is 0."""
    width = max(train[0].shape[1], test[0].shape[1])

    def pad(X):
        return np.hstack([X, np.zeros((X.shape[0], width - X.shape[1]), X.dtype)]) if X.shape[1] < width else X

    return (pad(train[0]), *train[1:]), (pad(test[0]), *test[1:])


def datasets_from_args(args):
    """Loaders (called one at a time, so only one dataset is in memory) for the datasets to run."""
    if args.data:
        return [lambda: letor_dataset(args.data)]
    if args.synthetic:
        return [lambda: synthetic_dataset(args.synthetic)]
    loaders = [lambda: synthetic_dataset(DEFAULT_QUERIES)]
    if SHARED_EXAMPLE.is_dir():
        loaders.append(lambda: letor_dataset(SHARED_EXAMPLE))
    return loaders


def _ndcg_scores(scores, arrays):
    from lambdamart.metrics import ndcg

    # Exponential gain, queries without a relevant document count 1, tied scores averaged: DESIGN.md §2.
    return {k: ndcg(arrays["y_test"], scores, arrays["qid_test"], k=k, gain="exponential", empty=1.0,
                    ties="average") for k in NDCG_CUTOFFS}


def _shape(arrays):
    X_tr, X_te = arrays["X_train"], arrays["X_test"]
    return dict(train_rows=X_tr.shape[0], test_rows=X_te.shape[0], features=X_tr.shape[1],
                train_queries=int(np.unique(arrays["qid_train"]).shape[0]),
                test_queries=int(np.unique(arrays["qid_test"]).shape[0]),
                data_bytes=int(sum(a.nbytes for a in arrays.values())))


def benchmark_dataset(dataset, libraries, args, workdir):
    """Every worker run for one dataset; returns the section of the report (failures recorded, not raised)."""
    arrays = dataset["arrays"]
    section = {"name": dataset["name"], "source": dataset["source"], "shape": _shape(arrays), "fit": {},
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
    for name, (fit, files) in _fastest_fits(attempt, libraries, args.repeat, workdir, dataset["name"]).items():
        fit["ndcg"] = _ndcg_scores(np.load(files["scores"]), arrays)
        section["fit"][name] = fit
        serve = attempt(f"{name} serving", {"mode": "serve", "library": name, **files})
        if serve is not None:
            section["serve"][name] = serve
    if args.profile and "lambdamart" in libraries:
        section["profile"] = attempt("lambdamart profile", {"mode": "profile", "library": "lambdamart"})
    if args.objectives and "lambdamart" in libraries:
        section["objectives"] = run_objectives(attempt, workdir, dataset["name"], arrays)
    return section


def _fastest_fits(attempt, libraries, repeat, workdir, dataset_name):
    """Fit workers, ``repeat`` rounds with the libraries interleaved (so a busy spell on a shared machine hits all
    of them alike); per library, the run with the shortest fit and its files, plus every run's fit time."""
    best, runs = {}, {name: [] for name in libraries}
    for r in range(repeat):
        for name in libraries:
            tag = f"{dataset_name}-{r}"
            files = {"scores": str(workdir / f"{tag}-{name}-scores.npy"), "model": str(workdir / f"{tag}-{name}.pkl")}
            label = f"{name} fit" + (f" (run {r + 1} of {repeat})" if repeat > 1 else "")
            fit = attempt(label, {"mode": "fit", "library": name, "tag": tag, **files})
            if fit is None:
                continue
            runs[name].append(fit["fit_s"])
            if name not in best or fit["fit_s"] < best[name][0]["fit_s"]:
                best[name] = (fit, files)
    for name, (fit, _) in best.items():
        fit["fit_runs"] = runs[name]
    return {name: best[name] for name in libraries if name in best}


def ranker_objectives():
    """The values LambdaMARTRanker's ``objective`` parameter accepts, from its scikit-learn constraints."""
    from lambdamart import LambdaMARTRanker

    options = set()
    for constraint in LambdaMARTRanker._parameter_constraints.get("objective", []):
        options |= set(getattr(constraint, "options", ()))
    return sorted(options) or ["lambdarank"]


def run_objectives(attempt, workdir, name, arrays):
    objectives = ranker_objectives()
    if objectives == ["lambdarank"]:
        _progress("--objectives: LambdaMARTRanker accepts only objective='lambdarank'; nothing to compare.")
        return {"skipped": "LambdaMARTRanker accepts only objective='lambdarank' so far; nothing to compare."}
    results = {}
    for objective in objectives:
        files = {"scores": str(workdir / f"{name}-objective-{objective}.npy"),
                 "model": str(workdir / f"{name}-objective-{objective}.pkl")}
        fit = attempt(f"lambdamart objective={objective}", {"mode": "fit", "library": "lambdamart",
                                                           "tag": f"{name}-{objective}",
                                                           "params": {"objective": objective}, **files})
        if fit is not None:
            results[objective] = {"fit_s": fit["fit_s"], "ndcg10": _ndcg_scores(np.load(files["scores"]),
                                                                                arrays)[10]}
    return {"results": results}


def settings_from_args(args):
    return dict(rounds=args.rounds, learning_rate=0.1, leaves=31, min_leaf=20, bins=255, truncation=30,
                threads=args.threads, seed=0)


# ------------------------------------------------------------------------------------------------ report


def _md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _sec(x):
    return "–" if x is None else f"{x:.2f} s" if x >= 1 else f"{x * 1000:.0f} ms" if x >= 0.01 else \
        f"{x * 1000:.2f} ms"


def _us(x):
    return f"{x * 1e6:.0f} µs"


def _mb(x):
    return f"{x / 2**20:.0f} MB" if x >= 2**20 else f"{x / 2**10:.0f} kB"


def _ratio(ours, ref):
    return "–" if ours is None or ref in (None, 0) else f"{ours / ref:.2f}×"


def machine_info():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        model = platform.processor() or model
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = ""
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        memory = f", {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GB RAM"
    return f"{model}, {os.cpu_count()} logical cores ({usable} usable){memory}, {platform.platform()}"


def _load_average():
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


def versions():
    found = {"python": platform.python_version()}
    for dist in ("lambdamart", "numpy", "numba", "scikit-learn", "lightgbm", "xgboost"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = "not installed"
    return found


def git_revision():
    """Commit of the checkout, flagged when lambdamart/ has uncommitted changes (kernels change concurrently)."""
    def git(*cmd):
        return subprocess.run(["git", "-C", str(REPO), *cmd], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown (not a git checkout)"
    dirty = git("status", "--porcelain", "--", "lambdamart")
    return commit + (" + uncommitted changes in lambdamart/" if dirty else "")


def render_report(meta, sections, libraries, skipped):
    parts = [
        "# Benchmark: LambdaMARTRanker vs LightGBM vs XGBoost",
        "",
        f"- Date: {meta['date']}",
        f"- Command: `{meta['command']}`",
        f"- Machine: {meta['machine']}",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        f"- lambdamart checkout: {meta['revision']}",
        f"- Load average (1 min) before / after the run: {meta['load_before']} / {meta['load_after']} "
        "(other work on a shared machine makes every figure noisier; multi-threaded runs suffer most)",
        f"- Settings: {meta['settings']['rounds']} rounds, learning rate 0.1, 31 leaves, min 20 rows per leaf, "
        f"255 bins, truncation 30, {meta['settings']['threads']} threads",
    ]
    parts += [f"- Skipped: {note}" for note in skipped]
    parts += ["", "Constructor arguments, exactly as run:", ""]
    parts += [f"- `{LIBRARIES[n].estimator}({_kwargs(LIBRARIES[n].params(meta['settings']))})`" for n in libraries]
    for section in sections:
        parts += ["", *render_section(section, libraries)]
    parts += ["", render_notes()]
    return "\n".join(parts) + "\n"


def _kwargs(params):
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def render_section(section, libraries):
    s = section["shape"]
    out = [f"## {section['name']}: {s['train_rows']:,} training rows × {s['features']} features "
           f"({s['train_queries']:,} queries), {s['test_rows']:,} test rows ({s['test_queries']:,} queries)",
           "", f"Data: {section['source']}; {_mb(s['data_bytes'])} of arrays (float32 features) in every worker.", ""]
    fits = section["fit"]
    if fits:
        out += [_training_table(fits, libraries), "", _ratio_table(fits, section["serve"], libraries), ""]
    if section["serve"]:
        out += [_serving_table(section["serve"], libraries), ""]
        out += _import_check(section)
    if section.get("profile"):
        out += _profile_table(section["profile"], fits.get("lambdamart"))
    if section.get("objectives"):
        out += _objectives_lines(section["objectives"])
    if fits.get("lambdamart") and fits.get(REFERENCE):
        out += _targets(fits, section["serve"])
    for error in section["errors"]:
        out += ["", "**Failed:**", "", "```", error, "```"]
    return out


def _training_table(fits, libraries):
    header = ["library", "import", "first-call overhead (tiny fit)", "fit", "fit CPU (all threads)",
              "first fit in fresh process", "predict (test split)", "rows/s", "peak RSS", "RSS over data",
              "model pickle", *[f"NDCG@{k}" for k in NDCG_CUTOFFS]]
    rows = []
    for name in (n for n in libraries if n in fits):
        r = fits[name]
        fit = _sec(r["fit_s"])
        if len(r["fit_runs"]) > 1:
            fit += " (fastest of " + ", ".join(_sec(t) for t in r["fit_runs"]) + ")"
        rows.append([name, _sec(r["import_s"]), _sec(r["first_call_s"]), fit, _sec(r["fit_cpu_s"]),
                     _sec(_first_fit(r)), _sec(r["predict_s"]), f"{r['rows_per_s']:,.0f}", _mb(r["peak_rss"]),
                     _mb(r["peak_rss"] - r["rss_after_load"]), _mb(r["model_bytes"]),
                     *[f"{_ndcg(r, k):.4f}" for k in NDCG_CUTOFFS]])
    return "### Training and batch prediction\n\n" + _md_table(header, rows)


def _ratio_table(fits, serves, libraries):
    ref = fits.get(REFERENCE)
    if ref is None:
        return f"(no ratios: {REFERENCE} did not run)"
    ref_serve = serves.get(REFERENCE, {})
    header = ["library", "fit", "fit CPU", "first fit", "predict rows/s", "peak RSS", "RSS over data", "serving p50",
              "serving p99", *[f"NDCG@{k} (Δ)" for k in NDCG_CUTOFFS]]
    rows = []
    for name in (n for n in libraries if n in fits):
        r, sv = fits[name], serves.get(name, {})
        ndcgs = [f"{_ratio(_ndcg(r, k), _ndcg(ref, k))} ({_ndcg(r, k) - _ndcg(ref, k):+.4f})" for k in NDCG_CUTOFFS]
        rows.append([name, _ratio(r["fit_s"], ref["fit_s"]), _ratio(r["fit_cpu_s"], ref["fit_cpu_s"]),
                     _ratio(_first_fit(r), _first_fit(ref)),
                     _ratio(r["rows_per_s"], ref["rows_per_s"]), _ratio(r["peak_rss"], ref["peak_rss"]),
                     _ratio(_overhead(r), _overhead(ref)), _ratio(sv.get("p50_s"), ref_serve.get("p50_s")),
                     _ratio(sv.get("p99_s"), ref_serve.get("p99_s")), *ndcgs])
    return (f"### Ratios to {REFERENCE} (times, memory: lower is better; rows/s, NDCG: higher is better)\n\n"
            + _md_table(header, rows))


def _ndcg(r, k):
    return r["ndcg"][k]


def _first_fit(r):
    return r["import_s"] + r["first_call_s"] + r["fit_s"]


def _overhead(r):
    return r["peak_rss"] - r["rss_after_load"]


def _serving_table(serves, libraries):
    header = ["library", "call", "import", "unpickle", "first predict", "p50", "p99", "mean"]
    rows = [[name, LIBRARIES[name].serve_path, _sec(serves[name]["import_s"]),
             _sec(serves[name]["unpickle_s"]), _sec(serves[name]["first_predict_s"]), _us(serves[name]["p50_s"]),
             _us(serves[name]["p99_s"]), _us(serves[name]["mean_s"])] for name in libraries if name in serves]
    return (f"### Serving: one query of {SERVING_DOCS} documents per call, {SERVING_CALLS:,} calls, model unpickled "
            "in a fresh process\n\n" + _md_table(header, rows))


def _import_check(section):
    serve = section["serve"].get("lambdamart")
    if not serve or "numba_after_import" not in serve:
        return []
    state = serve["numba_after_import"]
    verdict = "nothing compiled or loaded" if state["signatures"] == 0 else \
        f"{state['signatures']} signatures present (something compiles or loads at import)"
    lines = [f"`import lambdamart` in the serving process took {_sec(serve['import_s'])}; afterwards its "
             f"{state['kernels']} numba kernels had {state['signatures']} signatures: {verdict}. "
             f"Kernels compiled in the whole serving process: {serve['numba']['compiled']}."]
    warm, fit = section.get("warmup"), section["fit"].get("lambdamart")
    if warm and fit:
        lines[0] += (f" The warm-up process compiled {_compiled(warm['numba'])} (none when the cache was already "
                     f"warm); the timed fit process compiled {_compiled(fit['numba'])}.")
    return lines + [""]


def _compiled(state):
    if not state["compiled"]:
        return "nothing"
    return f"{state['compiled']} signatures ({', '.join(state['compiled_names'])})"


def _profile_table(profile, fit):
    total = profile["fit_s"]
    stages = sorted(profile["seconds"].items(), key=lambda kv: -kv[1])
    other = total - sum(profile["seconds"].values())
    rows = [[stage, _sec(sec), f"{100 * sec / total:.1f} %"] for stage, sec in stages]
    rows.append(["other (input checks, query grouping, Python loop, tree records)", _sec(other),
                 f"{100 * other / total:.1f} %"])
    rows.append(["**fit total (profile run)**", _sec(total), "100 %"])
    calls = ", ".join(f"{k} ×{v}" for k, v in sorted(profile["calls"].items()))
    lines = ["### Where LambdaMARTRanker's fit time goes (`--profile`)", "",
             "A separate process fits once more with the test split as `eval_set` (early_stopping=False) so that "
             "validation scoring shows; the kernels named in `lambdamart.ranker` are wrapped in timing shims. "
             f"Without the eval_set the fit is the rest: about {_sec(total - profile['seconds'].get(VALIDATION, 0))}"
             + (f" (timed fit above: {_sec(fit['fit_s'])})." if fit else "."), "",
             _md_table(["stage", "time", "share"], rows), "", f"Kernel calls: {calls}."]
    if profile["missing"]:
        lines.append(f"Not found in lambdamart.ranker (so not timed): {', '.join(profile['missing'])}.")
    if profile["numba"]["compiled"]:
        lines.append(f"Warning: the profile process compiled {_compiled(profile['numba'])}; that time is in it.")
    return lines + [""]


def _objectives_lines(objectives):
    if "skipped" in objectives:
        return [f"Objectives (`--objectives`): {objectives['skipped']}", ""]
    rows = [[name, _sec(r["fit_s"]), f"{r['ndcg10']:.4f}"] for name, r in objectives["results"].items()]
    return ["### LambdaMARTRanker objectives", "", _md_table(["objective", "fit", "NDCG@10"], rows), ""]


def _targets(fits, serves):
    """The targets of issue 5, computed for this run (reported, never asserted)."""
    ours, ref = fits["lambdamart"], fits[REFERENCE]
    checks = [
        ("fit time ≤ 1.0× LightGBM (target 0.7×)", ours["fit_s"] / ref["fit_s"], lambda v: v <= 1.0, "{:.2f}×"),
        ("NDCG@10 ≥ LightGBM − 0.003", _ndcg(ours, 10) - _ndcg(ref, 10), lambda v: v >= -0.003, "{:+.4f}"),
        ("predict rows/s ≥ LightGBM", ours["rows_per_s"] / ref["rows_per_s"], lambda v: v >= 1.0, "{:.2f}×"),
        ("peak RSS ≤ 1.5× LightGBM", ours["peak_rss"] / ref["peak_rss"], lambda v: v <= 1.5, "{:.2f}×"),
        ("import + JIT load of a first fit ≤ 3 s (warm cache)", ours["import_s"] + ours["first_call_s"],
         lambda v: v <= 3.0, "{:.2f} s"),
    ]
    if "lambdamart" in serves and REFERENCE in serves:
        for q in ("p50", "p99"):
            checks.append((f"serving {q} ≤ LightGBM", serves["lambdamart"][f"{q}_s"] / serves[REFERENCE][f"{q}_s"],
                           lambda v: v <= 1.0, "{:.2f}×"))
    rows = [[what, fmt.format(value), "met" if ok(value) else "**not met**"] for what, value, ok, fmt in checks]
    return ["### Targets of issue 5 on this data (reported, not asserted)", "",
            _md_table(["target", "this run", ""], rows), ""]


def render_notes():
    return f"""## How this is measured, and what was decided for fairness

- Same rows for everyone: float32 features, rows grouped by query id (XGBoost requires sorted qid; LightGBM gets the
  sizes of consecutive queries as `group`, the others `qid`). The split is by query: no query straddles train and
  test. Every library builds its own bins from the same numpy array inside `fit` (LightGBM's Dataset, XGBoost's
  quantile sketch, our binning), so fit time includes that.
- Each library runs in fresh processes: a fit worker (import, a tiny {TINY_ROUNDS}-round fit on {TINY_ROWS} rows,
  the timed fit, batch predict) and a serving worker. For lambdamart a warm-up process runs first so the numba
  cache on disk is warm; the tiny fit then measures what loading cached kernels costs ("first-call overhead"), and
  "first fit in fresh process" = import + tiny fit + fit. The tiny fit runs for every library, so the columns mean
  the same for all. Fit is timed once per process; with `--repeat N` every library is fitted N times, the
  libraries interleaved, and the fastest run is reported (its other figures come from the same process).
  "Fit CPU" is the process's CPU time during fit, all threads summed: other work on the machine inflates it less
  than wall time (spinning thread pools still count).
- Batch predict: one untimed call, then the best of {PREDICT_REPEATS}; rows/s is test rows over that time. Each
  library predicts with the thread count of the benchmark.
- Peak RSS is the worker's high-water mark at the end (VmHWM from /proc/self/status: on Linux `ru_maxrss` of a
  freshly exec'd child starts at its parent's peak, which here holds the whole dataset, so it would be wrong).
  "RSS over data" subtracts the peak measured right after the worker loaded the data (before importing the
  library), so it is the library's import plus training and prediction overhead.
- NDCG@k is `lambdamart.metrics.ndcg` on each library's test scores: gain 2^label − 1, a query without relevant
  documents counts 1, tied scores averaged over their orders (so no library gains from row order on ties).
- XGBoost has no minimum row count per leaf: `min_child_weight={XGB_MIN_CHILD_WEIGHT}` (the minimum hessian sum
  LightGBM and lambdamart also use by default) stands in, and no leaf-size floor applies to it. `reg_lambda=0`
  matches the other two (XGBoost's default is 1). `max_depth=0` with `grow_policy="lossguide"` grows leaf-wise to
  31 leaves. Truncation 30 is emulated with `lambdarank_pair_method="topk"`, `lambdarank_num_pair_per_sample=30`;
  that is close to, not the same as, LightGBM's truncation level.
- Serving: each library's leanest documented single-query path on one thread (named in the table); LightGBM and
  XGBoost are called through their Booster, which skips their sklearn wrappers' input checks, while ours goes
  through `LambdaMARTRanker.predict` with its scikit-learn validation. The {SERVING_CALLS:,} calls score blocks of
  {SERVING_DOCS} consecutive test rows; the first call after unpickling is timed apart and not in the percentiles.
- The profile wraps the kernels `lambdamart.ranker` calls by module-level name in timing shims (numba returns only
  when the work is done); finer splits inside `grow_tree` are not measured.
"""


# ------------------------------------------------------------------------------------------------ command line


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Benchmark LambdaMARTRanker against LightGBM and XGBoost (fit, predict, memory, NDCG, serving).")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", metavar="LETOR_DIR",
                        help="directory with rank.train/rank.test (+ .query files) or train.txt/test.txt (MSLR fold)")
    source.add_argument("--synthetic", metavar="N_QUERIES", type=_positive_int,
                        help=f"make_ranking_data(N_QUERIES) instead of the default {DEFAULT_QUERIES} queries "
                             "(and no second dataset)")
    parser.add_argument("--rounds", type=_positive_int, default=100, help="boosting rounds (default 100)")
    parser.add_argument("--threads", type=_positive_int, default=2, help="threads for every library (default 2)")
    parser.add_argument("--repeat", type=_positive_int, default=1,
                        help="fit every library this many times, interleaved, and report the fastest (default 1)")
    parser.add_argument("--profile", action="store_true", help="break down where LambdaMARTRanker's fit time goes")
    parser.add_argument("--objectives", action="store_true",
                        help="fit time and NDCG@10 for every objective LambdaMARTRanker accepts")
    parser.add_argument("--output", type=Path, default=HERE / "RESULTS.md",
                        help="markdown report (default benchmarks/RESULTS.md)")
    parser.add_argument("--libraries", type=_library_list, default=list(LIBRARIES),
                        help="comma-separated subset of " + ",".join(LIBRARIES))
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one job file in this process
    args = parser.parse_args(argv)
    if args.synthetic is not None and args.synthetic < 2:
        parser.error("--synthetic needs at least 2 queries (some are held out for testing).")
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


def installed(names):
    """The requested libraries that can be imported, and a note for each one that cannot."""
    present = [n for n in names if importlib.util.find_spec(LIBRARIES[n].module) is not None]
    notes = [f"{n} (not installed; `pip install -e \".[bench]\"`)" for n in names if n not in present]
    return present, notes


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return run_worker(args.worker)
    libraries, skipped = installed(args.libraries)
    if importlib.util.find_spec("lambdamart") is None:  # the parent needs it for the data and the metrics
        raise SystemExit("compare.py: lambdamart itself is not importable; run `pip install -e .` first.")
    if args.threads > (os.cpu_count() or 1):
        _progress(f"warning: --threads {args.threads} exceeds the {os.cpu_count()} cores; timings oversubscribe.")
    meta = dict(date=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
                command="python benchmarks/compare.py " + shlex.join(argv if argv is not None else sys.argv[1:]),
                machine=machine_info(), versions=versions(), revision=git_revision(),
                settings=settings_from_args(args), load_before=_load_average())
    sections = []
    with tempfile.TemporaryDirectory(prefix="lambdamart-bench-") as tmp:
        for load in datasets_from_args(args):
            dataset = load()
            _progress(f"[{dataset['name']}] {dataset['source']}")
            sections.append(benchmark_dataset(dataset, libraries, args, Path(tmp)))
            del dataset
    meta["load_after"] = _load_average()
    report = render_report(meta, sections, libraries, skipped)
    print(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    _progress(f"wrote {args.output}")
    return 1 if any(section["errors"] for section in sections) else 0


if __name__ == "__main__":
    sys.exit(main())
