"""The worker processes: how the parent starts one (``run_job``) and what one does (``run_worker``, ``work_*``).

A worker is ``compare.py --worker JOB`` in a fresh interpreter. The job file names the mode, the library, the
settings and the files: the data (.npz, written once by the parent), where to write the result (JSON) and, for fit
and serving workers, the test scores and the pickled model. Fresh processes keep the libraries' thread pools,
allocators and import costs apart, make peak RSS a per-library figure, and make "first fit in a fresh process"
mean what it says. The ``dask`` mode (``--dask N``) is the client of a LocalCluster instead (``dask_run.py``).

Nothing here imports a benchmarked library at module level: the workers time those imports.
"""

import importlib
import json
import os
import pickle
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from context import REPO
from libraries import LIBRARIES, trees_used

SCRIPT = Path(__file__).resolve().with_name("compare.py")  # what a worker process runs, with --worker

PREDICT_REPEATS = 3  # batch predict: best of this many timed calls, after one untimed call
SERVING_DOCS = 100  # documents per call: one query, as a search service scores its candidates
SERVING_CALLS = 1000
# The calls cycle through the first rows of the test split only: a service scores candidates whose features it has
# just computed, so they are in cache, and the figure should not depend on the test split's size.
SERVING_ROWS = 1000
TINY_ROWS, TINY_QUERIES, TINY_ROUNDS = 50, 5, 3  # the fit that pays import-time and JIT-cache loading costs
# Training sets of fewer values (rows × features) warm up with all the timed fit's rounds (a second or two).
_FULL_WARMUP_VALUES = 2_000_000
# Training sets of fewer values are fitted twice by the fit worker, and the second fit is timed (see work_fit).
REPEATED_FIT_VALUES = 20_000_000


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
    proc = subprocess.run([sys.executable, str(SCRIPT), "--worker", str(job_path)], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        tail = tail.replace(f"{REPO}{os.sep}", "")  # the report is committed: repository paths, not this machine's
        raise WorkerError(f"{job['mode']} worker for {job['library']} failed (exit {proc.returncode}):\n{tail}")
    with open(job["result"]) as f:
        return json.load(f)


# ------------------------------------------------------------------------------------------------ worker side


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


def work_warmup(job, data):
    """Compile or load every kernel the fit, predict and serving workers will call, so the disk cache is warm."""
    lib = LIBRARIES[job["library"]]
    tiny = _tiny_fit(lib, job["settings"], data)
    # A fit on the full training split too: kernels may pick other code paths (or types) for large inputs, and a
    # small fit's thread use depends on its rounds as well (lambdamart's fits on a few hundred thousand values
    # take threads only for many rounds). All the timed fit's rounds where that is cheap, else one.
    rounds = job["settings"]["rounds"] if data["X_train"].size < _FULL_WARMUP_VALUES else 1
    full = lib.make({**job["settings"], "rounds": rounds})
    lib.fit(full, data["X_train"], data["y_train"], data["qid_train"])
    for model in (tiny, full):  # different tree counts: both the serial and the threaded predict path
        model.predict(data["X_test"])
        model.predict(_serving_batches(data["X_test"], n_calls=1)[0])
    return {"numba": _numba_state()}


def work_fit(job, data):
    """Import, tiny fit, the timed fit, batch predict; saves the test scores and the pickled model."""
    lib = LIBRARIES[job["library"]]
    settings, extra = job["settings"], job.get("params")
    import_s, _ = _timed(importlib.import_module, lib.module)
    first_call_s, _ = _timed(_tiny_fit, lib, settings, data)
    train = data["X_train"], data["y_train"], data["qid_train"]
    first_fit_s = None
    if data["X_train"].size < REPEATED_FIT_VALUES:
        # "Fit" is a repeated fit's time, as in a grid search: on small data the kernels a tiny fit does not reach
        # (lambdamart's threaded ones: a tiny fit runs on one thread) cost a noticeable share of the first fit to
        # load from the JIT cache, so the first fit is timed on its own ("first fit in fresh process") and "fit"
        # is the second. On large data that share is lost in the fit's time, and the fit runs once.
        first_fit_s, _ = _timed(lib.fit, lib.make(settings, extra), *train)
    model = lib.make(settings, extra)
    cpu_start = time.process_time()
    fit_s, _ = _timed(lib.fit, model, *train)
    fit_cpu_s = time.process_time() - cpu_start  # all threads: less sensitive to other work than wall time
    X_test = data["X_test"]
    predict_first_s, scores = _timed(model.predict, X_test)
    predict_s = min(_timed(model.predict, X_test)[0] for _ in range(PREDICT_REPEATS))
    np.save(job["scores"], np.asarray(scores, dtype=np.float64))
    with open(job["model"], "wb") as f:
        pickle.dump(model, f, protocol=pickle.HIGHEST_PROTOCOL)
    result = dict(import_s=import_s, first_call_s=first_call_s, fit_s=fit_s, fit_cpu_s=fit_cpu_s,
                  first_fit_s=fit_s if first_fit_s is None else first_fit_s,
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
    result.update(unpickle_s=unpickle_s, first_predict_s=first_s, **_latency_figures(_latencies(predict, batches)))
    if lib.jit_cache:
        result["numba"] = _numba_state()
    return result


def work_serve_control(job, data):
    """The host's share of the serving tail: a call that reads each query's rows like a model must and then only
    does arithmetic, lasting as long as lambdamart's median call (``job["p50_s"]``), timed like work_serve.

    On a machine whose hypervisor stalls the guest now and then (a timer tick, the first touch of recently unused
    pages), a call of a given length is hit with some probability whatever it computes: this p99 is that floor.
    """
    import numba

    # numba, not numpy: one call without temporaries, and a loop whose length the calibration sets exactly.
    @numba.njit(nogil=True)
    def read_then_spin(X, spins):
        total = 0.0
        for i in range(X.shape[0]):
            for j in range(X.shape[1]):
                total += X[i, j]
        for _ in range(spins):  # a dependent chain: the compiler can neither drop nor shorten it
            total = total * 0.999999 + 1e-9
        return total

    batches = _serving_batches(data["X_test"])

    def one_pass(spins):
        return _latencies(lambda batch: read_then_spin(batch, spins), batches)

    spins = 1000
    read_then_spin(batches[0], spins)
    for _ in range(6):  # calibrate: the median call over a pass of the batches, scaled to the target
        spins = max(1, round(spins * job["p50_s"] / float(np.median(one_pass(spins)))))
    return _latency_figures(one_pass(spins))


def work_profile(job, data):
    """Where LambdaMARTRanker's fit time goes, with the test split as eval_set so validation shows.

    The stage times are the estimator's own ``fit_profile_`` (it times each stage of its fit), so they follow the
    code wherever it moves; a ranker without that attribute fails this worker rather than report nothing.
    """
    lib = LIBRARIES["lambdamart"]
    settings = job["settings"]
    _tiny_fit(lib, settings, data)  # pay cache loading before the profiled fit, as the timed fit does
    model = lib.make(settings, {"early_stopping": False})
    eval_set = [(data["X_test"], data["y_test"], data["qid_test"])]
    model.fit(data["X_train"], data["y_train"], data["qid_train"], eval_set=eval_set)
    stages = getattr(model, "fit_profile_", None)
    if not stages or "total" not in stages:
        raise RuntimeError(f"LambdaMARTRanker.fit left no fit_profile_ with a 'total' (got {stages!r}); --profile "
                           "reads the estimator's own stage timings.")
    return dict(stages={stage: float(seconds) for stage, seconds in stages.items()}, numba=_numba_state())


def work_dask(job, data):
    """``--dask N``: this process is the client of a LocalCluster on which every library fits (dask_run.py)."""
    from dask_run import run_dask

    return run_dask(job, data)


def work_folds(job, data):
    """``--letor-folds``: every fold under every protocol, for every variant of one library (every objective of
    ours); saves each run's test scores (one .npz, keys ``fold/protocol/variant``) and returns fit times and trees.

    First an untimed fit of every variant under every protocol (at most 100 rounds) on the first fold, so that no
    timed fit compiles or loads a kernel: a tiny fit of the default objective left each other objective's first
    timed fits compiling their own kernels when the cache was cold (seconds, against a few hundred milliseconds for
    the five fits). Folds are small, so the fits run one after another in this process.
    """
    lib = LIBRARIES[job["library"]]

    def fit(fold, protocol, variant, rounds=None):
        settings = job["settings"][protocol]
        early = protocol == "early_stopping"
        model = lib.make({**settings, "rounds": rounds or settings["rounds"]},
                         {**job["variants"][variant], **(lib.early_stopping if early else {})})
        train, valid = ([data[f"{fold}/{a}_{split}"] for a in ("X", "y", "qid")] for split in ("train", "valid"))
        fit_s, _ = _timed(lib.fit, model, *train, valid if early else None)
        return model, fit_s

    for protocol in job["settings"]:
        for variant in job["variants"]:
            fit(job["folds"][0], protocol, variant, rounds=100)
    runs, scores = [], {}
    for fold in job["folds"]:
        for protocol in job["settings"]:
            for variant in job["variants"]:
                model, fit_s = fit(fold, protocol, variant)
                scores[f"{fold}/{protocol}/{variant}"] = np.asarray(model.predict(data[f"{fold}/X_test"]), np.float64)
                runs.append(dict(fold=fold, protocol=protocol, variant=variant, fit_s=fit_s,
                                 trees=trees_used(model)))
    np.savez(job["scores"], **scores)
    return {"runs": runs}


WORKER_MODES = {"warmup": work_warmup, "fit": work_fit, "serve": work_serve, "serve_control": work_serve_control,
                "profile": work_profile, "dask": work_dask, "folds": work_folds}


# ------------------------------------------------------------------------------------------------ worker helpers


def _load_data(path):
    with np.load(path) as f:
        return {name: f[name] for name in f.files}


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


def _latencies(call, batches):
    """Seconds each ``call(batch)`` took, in the order of ``batches``."""
    took = np.empty(len(batches))
    for i, batch in enumerate(batches):
        start = time.perf_counter_ns()
        call(batch)
        took[i] = time.perf_counter_ns() - start
    return took * 1e-9


def _latency_figures(latencies):
    """p50, p99 and mean of ``latencies`` (seconds) and their count, as a worker reports them."""
    return dict(p50_s=float(np.percentile(latencies, 50)), p99_s=float(np.percentile(latencies, 99)),
                mean_s=float(latencies.mean()), calls=len(latencies))


def _serving_batches(X, n_calls=SERVING_CALLS, n_docs=SERVING_DOCS):
    """``n_calls`` blocks of ``n_docs`` consecutive rows of the first ``SERVING_ROWS`` test rows (C-contiguous views,
    no copies), cycling."""
    X = X[:SERVING_ROWS]
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
