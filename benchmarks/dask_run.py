"""``--dask N``: the Dask rankers on one LocalCluster, and what is measured there.

One worker process (``compare.py --worker JOB``, mode ``dask``) is the cluster's client. It starts a
``distributed.LocalCluster`` of N single-threaded worker processes, puts every library's inputs on the workers
(scattered chunk by chunk before anything is timed), has each library fit a tiny warm-up model, then fits each
library ``repeat`` times, interleaved, timing the wall clock of ``fit`` on the client. The test scores of each
library's fastest fit go to a file; the parent computes their NDCG as it does for every other figure.

For ours it also measures one no-op actor call to every worker, and computes from the fitted trees and the
histogram size the histogram bytes the workers exchange per tree; the fitted ranker's ``fit_profile_`` counts its
calls, exchanges and histogram bytes itself and times its stages, and those are reported too, as measured.

Nothing here imports dask or a benchmarked library at module level: the parent imports this module for its
constants, and the worker imports the libraries when it runs them.
"""

import time
import traceback

import numpy as np
from context import REPO
from libraries import DASK_LIBRARIES

WARMUP_QUERIES = 8  # per chunk: the tiny fit that loads every library's kernels on every worker
WARMUP_ROUNDS = 3
ROUND_TRIP_CALLS = 200  # no-op actor round trips timed (after 20 untimed ones); the median is reported


def run_dask(job, data):
    import distributed

    from lambdamart.dask import _workers as cluster_workers

    n_workers, settings = job["workers"], {**job["settings"], "threads": 1}
    result = {"workers": n_workers, "fit": {}, "errors": []}
    with distributed.LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        workers = sorted(cluster_workers(client))
        bounds = query_chunks(data["qid_train"], n_workers)
        train = send_inputs(client, workers, bounds, data["X_train"], data["y_train"], data["qid_train"])
        rows, tiny_bounds = warmup_rows(data["qid_train"], bounds, WARMUP_QUERIES)
        tiny = send_inputs(client, workers, tiny_bounds, data["X_train"][rows], data["y_train"][rows],
                           data["qid_train"][rows])
        X_test = send_inputs(client, workers, query_chunks(data["qid_test"], n_workers), data["X_test"])["X"]
        result["chunks"] = np.diff(bounds).tolist()
        result["warmup_rows"] = int(rows.shape[0])

        libraries = []
        for name in job["libraries"]:
            lib = DASK_LIBRARIES[name]
            try:
                model = lib.make({**settings, "rounds": WARMUP_ROUNDS}, client)
                lib.fit(model, tiny)
                np.asarray(model.predict(tiny["X"]).compute())
                libraries.append(name)
            except Exception:
                result["errors"].append(f"{name} ({lib.estimator}) warm-up fit failed:\n{_tail()}")

        best, runs = {}, {name: [] for name in libraries}
        for _ in range(job["repeat"]):
            for name in [n for n in libraries if n in runs]:
                lib = DASK_LIBRARIES[name]
                model = lib.make(settings, client)
                try:
                    start = time.perf_counter()
                    lib.fit(model, train)
                    fit_s = time.perf_counter() - start
                except Exception:
                    result["errors"].append(f"{name} ({lib.estimator}) fit failed:\n{_tail()}")
                    del runs[name]
                    best.pop(name, None)
                    continue
                runs[name].append(fit_s)
                if name not in best or fit_s < best[name][0]:
                    best[name] = (fit_s, model)

        for name, (fit_s, model) in best.items():
            lib = DASK_LIBRARIES[name]
            try:
                start = time.perf_counter()
                scores = np.asarray(model.predict(X_test).compute(), dtype=np.float64)
                predict_s = time.perf_counter() - start
            except Exception:
                result["errors"].append(f"{name} ({lib.estimator}) predict failed:\n{_tail()}")
                continue
            np.save(job["scores"][name], scores)
            result["fit"][name] = dict(fit_s=fit_s, fit_runs=runs[name], predict_s=predict_s,
                                       estimator=f"{lib.module}.{lib.estimator}", inputs=lib.inputs,
                                       params=lib.params(settings))
        if "lambdamart" in best:
            result["ours"] = our_costs(client, workers, best["lambdamart"], data, settings)
    return result


# ------------------------------------------------------------------------------------------------ inputs


def query_chunks(qid, n_chunks):
    """Row bounds of about ``n_chunks`` chunks of equal row counts, cut at query boundaries (rows sorted by qid)."""
    n = qid.shape[0]
    starts = np.r_[np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]]), n]  # first row of each query, then the end
    cuts = starts[np.searchsorted(starts, n * np.arange(1, n_chunks) / n_chunks)]
    return np.unique(np.r_[0, cuts, n]).astype(np.int64)  # fewer chunks than asked when queries are scarce


def warmup_rows(qid, bounds, n_queries):
    """Rows of the first ``n_queries`` queries of every chunk, and the bounds of those chunks."""
    pieces = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        ends = np.r_[np.flatnonzero(qid[start + 1:stop] != qid[start:stop - 1]) + 1, stop - start]
        pieces.append(np.arange(start, start + ends[min(n_queries, ends.shape[0]) - 1]))
    return np.concatenate(pieces), np.r_[0, np.cumsum([p.shape[0] for p in pieces])].astype(np.int64)


def send_inputs(client, workers, bounds, X, y=None, qid=None):
    """Dask arrays of the rows, chunk ``i`` scattered to worker ``i % workers`` (so in memory before any fit):
    ``X``, ``y``, ``qid`` and ``group`` (per chunk, the sizes of its queries: LightGBM's Dask ``group``)."""
    import dask.array as da

    parts = {name: [] for name in ("X", "y", "qid", "group")}

    def put(name, array, worker):
        future = client.scatter(np.ascontiguousarray(array), workers=[worker], hash=False)
        parts[name].append(da.from_delayed(future, shape=array.shape, dtype=array.dtype))

    for i, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
        worker = workers[i % len(workers)]
        put("X", X[start:stop], worker)
        if y is not None:
            put("y", y[start:stop], worker)
            put("qid", qid[start:stop], worker)
            put("group", np.diff(np.r_[np.flatnonzero(np.r_[True, np.diff(qid[start:stop]) != 0]), stop - start]),
                worker)
    return {name: da.concatenate(chunks) for name, chunks in parts.items() if chunks}


# ------------------------------------------------------------------------------------------------ our costs


def our_costs(client, workers, best, data, settings):
    """Calls and histogram traffic per tree of our fastest fit (see the module docstring)."""
    fit_s, model = best
    trees = int(model.n_estimators_)
    splits = int(np.count_nonzero(model._trees["feature"] >= 0))
    total_bins, bins_how, sample_rows = histogram_bins(data["X_train"], settings)
    profile = {k: float(v) for k, v in (getattr(model, "fit_profile_", None) or {}).items()
               if isinstance(v, (int, float, np.number))}
    return dict(trees=trees, splits=splits, total_bins=total_bins, bins_how=bins_how, sample_rows=sample_rows,
                round_trip_s=noop_round_trip(client, workers), fit_s=fit_s, rows=int(data["X_train"].shape[0]),
                features=int(data["X_train"].shape[1]), itemsize=int(data["X_train"].itemsize),
                profile=profile)


def noop_round_trip(client, workers):
    """Median seconds of one call of a trivial actor method on every worker, issued together and awaited together
    (as ``DaskLambdaMARTRanker`` starts a round)."""
    actors = [client.submit(dict, actor=True, workers=[w], pure=False).result() for w in workers]

    def round_trip():
        start = time.perf_counter()
        for future in [a.get(0) for a in actors]:
            future.result()
        return time.perf_counter() - start

    for _ in range(20):
        round_trip()
    return float(np.median([round_trip() for _ in range(ROUND_TRIP_CALLS)]))


def histogram_bins(X, settings):
    """Histogram rows of our fit (value bins + one missing bin per feature): exactly, from the thresholds our fit
    draws (same sample, same seed), or approximately from distinct values if those internals have moved; how it
    was found; and the rows of the binning sample our fit gathers on the client."""
    try:
        from sklearn.utils import check_random_state

        from lambdamart._engine.binning import find_thresholds
        from lambdamart._engine.histogram import bin_offsets_for
        from lambdamart.ranker import _BINNING_SUBSAMPLE

        rng, n = check_random_state(settings["seed"]), X.shape[0]
        sample = np.arange(n) if n <= _BINNING_SUBSAMPLE else np.sort(rng.choice(n, _BINNING_SUBSAMPLE,
                                                                                  replace=False))
        _, threshold_offsets = find_thresholds(np.ascontiguousarray(X[sample]), settings["bins"])
        return (int(bin_offsets_for(np.diff(threshold_offsets) + 1)[-1]), "from the thresholds our fit draws",
                int(sample.shape[0]))
    except (ImportError, AttributeError, TypeError):
        distinct = [np.unique(column[~np.isnan(column)]).shape[0] for column in X.T]
        return (int(sum(min(settings["bins"], d) + 1 for d in distinct)), "approximated from distinct values",
                min(X.shape[0], 200_000))


def _tail(lines=15):
    return "\n".join(traceback.format_exc().strip().splitlines()[-lines:]).replace(f"{REPO}/", "")
