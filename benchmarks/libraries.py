"""The rankers under test: the shared benchmark settings, and how each library builds, trains and serves.

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


# The early-stopping protocol of ``--letor-folds``: a smaller learning rate, many rounds, and the best round on the
# validation queries' NDCG@10 kept once it has not improved for this many rounds.
EARLY_STOPPING_PATIENCE = 50
EARLY_STOPPING_AT = 10
EARLY_STOPPING_ROUNDS = 1000
EARLY_STOPPING_LEARNING_RATE = 0.05


def benchmark_settings(rounds, threads, learning_rate=0.1):
    """The settings every library is given, in the benchmark's own names (each adapter translates them)."""
    return dict(rounds=rounds, learning_rate=learning_rate, leaves=31, min_leaf=20, bins=255, truncation=30,
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


def _catboost_params(s):
    # CatBoost grows symmetric trees to a depth, not to a leaf count: the fewest levels that hold ``leaves`` leaves
    # (5 for 31, the depth our symmetric trees take). Its minimum rows per leaf applies only to its other growth
    # policies, and YetiRank (CatBoostRanker's default loss, CatBoost's best ranking loss) has no truncation level,
    # so neither setting has a counterpart. Its L2 penalty for YetiRank defaults to 0 already, as the others'.
    return dict(loss_function="YetiRank", iterations=s["rounds"], learning_rate=s["learning_rate"],
                depth=max(1, int(s["leaves"] - 1).bit_length()), border_count=s["bins"],
                thread_count=s["threads"], random_seed=s["seed"], verbose=False, allow_writing_files=False)


def _group_sizes(qid):
    """Sizes of the runs of equal, consecutive query ids."""
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    return np.diff(np.r_[starts, qid.shape[0]])


# The fit adapters: ``valid`` (X, y, qid) is the early-stopping set of ``--letor-folds``, whose patience and metric
# are in the constructor arguments (``Library.early_stopping``) for ours and XGBoost's, in a callback for LightGBM's.


def _fit_lambdamart(model, X, y, qid, valid=None):
    model.fit(X, y, qid, eval_set=None if valid is None else [valid])


def _fit_xgboost(model, X, y, qid, valid=None):
    # One query id per row (rows are sorted by qid, which XGBoost requires).
    if valid is None:
        model.fit(X, y, qid=qid)
    else:
        model.fit(X, y, qid=qid, eval_set=[valid[:2]], eval_qid=[valid[2]], verbose=False)


def _fit_catboost(model, X, y, qid, valid=None):
    # ``group_id``: a query id per row, rows of a query consecutive (as the benchmark's are).
    if valid is None:
        model.fit(X, y, group_id=qid)
    else:
        from catboost import Pool

        model.fit(X, y, group_id=qid, eval_set=Pool(valid[0], valid[1], group_id=valid[2]))


def _fit_lightgbm(model, X, y, qid, valid=None):
    # LightGBM wants the sizes of consecutive queries; its early stopping is a callback given to fit.
    if valid is None:
        model.fit(X, y, group=_group_sizes(qid))
        return
    import lightgbm

    model.fit(X, y, group=_group_sizes(qid), eval_set=[valid[:2]], eval_group=[_group_sizes(valid[2])],
              eval_at=[EARLY_STOPPING_AT],
              callbacks=[lightgbm.early_stopping(EARLY_STOPPING_PATIENCE, first_metric_only=True, verbose=False)])


def trees_used(model):
    """Trees the fitted model predicts with (after early stopping, the best iteration's)."""
    # Ours; CatBoost (the best round's count after early stopping); LightGBM (0 when it did not stop early).
    for attribute in ("n_estimators_", "tree_count_", "best_iteration_"):
        if getattr(model, attribute, 0):
            return int(getattr(model, attribute))
    best = getattr(model, "best_iteration", None)  # XGBoost, 0-based, only after early stopping
    return int(best) + 1 if best is not None else int(model.n_estimators)


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


def _serve_catboost(model):
    return lambda X: model.predict(X, thread_count=1)


@dataclass(frozen=True)
class Library:
    """How to build, train and serve one library's ranker; everything else is shared code."""

    module: str  # import name, also the distribution name for its version
    estimator: str  # class in ``module``
    params: Callable[[dict], dict]  # benchmark settings -> constructor arguments
    fit: Callable
    serve: Callable  # fitted model -> predict function for one query
    serve_path: str  # what ``serve`` calls, for the report
    early_stopping: dict  # constructor arguments of the early-stopping protocol (besides the settings)
    jit_cache: bool = False  # numba kernels cached on disk: warm the cache first, report what was compiled

    def make(self, settings, extra=None):
        cls = getattr(importlib.import_module(self.module), self.estimator)
        return cls(**{**self.params(settings), **(extra or {})})


LIBRARIES = {
    "lambdamart": Library("lambdamart", "LambdaMARTRanker", _lambdamart_params, _fit_lambdamart, _serve_lambdamart,
                          "LambdaMARTRanker.predict(X), n_jobs=1",
                          {"n_iter_no_change": EARLY_STOPPING_PATIENCE, "eval_at": EARLY_STOPPING_AT}, jit_cache=True),
    "lightgbm": Library("lightgbm", "LGBMRanker", _lightgbm_params, _fit_lightgbm, _serve_lightgbm,
                        "booster_.predict(X, num_threads=1) (Booster, not the sklearn wrapper)", {}),
    "xgboost": Library("xgboost", "XGBRanker", _xgboost_params, _fit_xgboost, _serve_xgboost,
                       "get_booster().inplace_predict(X), nthread=1 (Booster, not the sklearn wrapper)",
                       {"early_stopping_rounds": EARLY_STOPPING_PATIENCE,
                        "eval_metric": f"ndcg@{EARLY_STOPPING_AT}"}),
    # NDCG with exponential gains, as the others'; use_best_model keeps the best round's trees, as the others do.
    "catboost": Library("catboost", "CatBoostRanker", _catboost_params, _fit_catboost, _serve_catboost,
                        "CatBoostRanker.predict(X, thread_count=1)",
                        {"early_stopping_rounds": EARLY_STOPPING_PATIENCE, "use_best_model": True,
                         "eval_metric": f"NDCG:top={EARLY_STOPPING_AT};type=Exp"}),
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
