"""The three rankers under test: the shared benchmark settings, and how each library builds, trains and serves.

Everything library-specific lives here; the workers, the orchestration and the report only go through
``LIBRARIES``.
"""

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# XGBoost has no minimum row count per leaf. The closest knob is the minimum hessian sum, set to the value
# LightGBM (min_sum_hessian_in_leaf) and LambdaMARTRanker (min_sum_hessian) use by default.
XGB_MIN_CHILD_WEIGHT = 1e-3


def benchmark_settings(rounds, threads):
    """The settings every library is given, in the benchmark's own names (each adapter translates them)."""
    return dict(rounds=rounds, learning_rate=0.1, leaves=31, min_leaf=20, bins=255, truncation=30,
                threads=threads, seed=0)


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


def _group_sizes(qid):
    """Sizes of the runs of equal, consecutive query ids."""
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    return np.diff(np.r_[starts, qid.shape[0]])


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


# ------------------------------------------------------------------------------------------------ --dask


def _dask_fit_qid(model, inputs):
    model.fit(inputs["X"], inputs["y"], qid=inputs["qid"])  # a dask array of query ids, chunked like X's rows


def _dask_fit_group(model, inputs):
    # LightGBM's Dask ranker: ``group`` is a dask array with one chunk per chunk of X, holding the sizes of that
    # chunk's queries (so a query must not straddle two chunks).
    model.fit(inputs["X"], inputs["y"], group=inputs["group"])


# DaskXGBRanker(allow_group_split=True): its default (False) wants dask DataFrames and reshuffles the rows itself into
# one partition per query (a dataframe sort and set_index); True takes dask arrays as they are partitioned. The
# benchmark's chunks never split a query, so True splits nothing: it only skips that reshuffle.


def _without_threads(params):
    # DaskLGBMRanker ignores (with a warning) every alias of num_threads: it uses each Dask worker's thread count.
    return {k: v for k, v in params.items() if k != "n_jobs"}


@dataclass(frozen=True)
class DaskLibrary:
    """How to build and train one library's Dask ranker (``--dask``); predict is the estimator's own."""

    module: str
    estimator: str
    params: Callable[[dict], dict]  # benchmark settings -> constructor arguments (without the client)
    fit: Callable  # (model, inputs) with inputs the dict of dask arrays X, y, qid, group
    inputs: str  # what it is given, for the report

    def make(self, settings, client):
        cls = getattr(importlib.import_module(self.module), self.estimator)
        model = cls(**self.params(settings))
        model.client = client  # each estimator's documented client attribute (a constructor argument for two)
        return model


DASK_LIBRARIES = {
    "lambdamart": DaskLibrary("lambdamart.dask", "DaskLambdaMARTRanker", _lambdamart_params, _dask_fit_qid,
                              "X, y, qid (any order is accepted; given the same query-aligned chunks as the others)"),
    "lightgbm": DaskLibrary("lightgbm.dask", "DaskLGBMRanker", lambda s: _without_threads(_lightgbm_params(s)),
                            _dask_fit_group, "X, y, group (per chunk: sizes of its queries)"),
    "xgboost": DaskLibrary("xgboost.dask", "DaskXGBRanker", lambda s: {**_xgboost_params(s), "allow_group_split": True},
                           _dask_fit_qid, "X, y, qid (sorted within each chunk, as XGBoost requires)"),
}


def installed(names):
    """The requested libraries that can be imported, and a note for each one that cannot."""
    present = [n for n in names if importlib.util.find_spec(LIBRARIES[n].module) is not None]
    notes = [f"{n} (not installed; `pip install -e \".[bench]\"`)" for n in names if n not in present]
    return present, notes
