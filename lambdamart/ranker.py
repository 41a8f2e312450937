"""``LambdaMARTRanker``: the estimator, which validates input and orchestrates the stages of a fit.

Per fit: check the input (``_validation``), lay the rows out query by query (``_queries``), bin the features once
(``_engine.binning``, ``_engine.histogram``), then per round ask the objective (``_objectives``) for λ and w, grow one
tree (``_engine.grower``) and update the scores. All numeric work happens in those modules' kernels; this module
only decides what runs when. ``docs/design.md`` describes the whole flow.
"""

import functools
import os
import signal
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Integral, Real
from typing import NamedTuple

import numba
import numpy as np
from numpy.typing import ArrayLike
from sklearn import get_config
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _exchange, _model_format
from ._checkpoint import (
    Checkpoints,
    TrainingState,
    check_compatible,
    check_same_data,
    data_fingerprint,
    encode_params,
    fingerprint,
    query_digest_sum,
    read_latest,
)
from ._compat import Interval, StrOptions, validate_params
from ._engine.binning import MAX_BINS, bin_features, find_thresholds
from ._engine.contributions import contributions_serial, expected_values, explain_rows
from ._engine.grower import GrowthParams, add_leaf_values, add_leaf_values_threaded, grow_tree, make_workspace
from ._engine.histogram import make_layout
from ._engine.predict import (
    QuickScoreLayout,
    WalkLayout,
    add_tree_binned,
    quick_score_layout,
    quick_score_rows,
    row_key_buffer,
    score_rows,
    walk_layout,
)
from ._engine.symmetric import grow_symmetric_tree, symmetric_depth
from ._engine.tree import concatenate_trees, make_trees, split_trees
from ._files import write_atomically
from ._gains import label_gains
from ._jit import compile_ahead, wait_for_helper
from ._metric_kernels import NDCG, per_query
from ._objectives import OBJECTIVES, TrainingQueries, make_objective
from ._parallel import (
    fit_threads,
    n_threads,
    node_parallel_work,
    node_partition_rows,
    parallel_region,
    split_over_threads,
)
from ._queries import group_from_sizes, group_queries
from ._validation import check_eval_set, check_position, check_sample_weights, check_X, check_y
from ._version import __version__
from .exceptions import InconsistentVersionWarning
from .metrics import ndcg

# Rows sampled to place bin thresholds, as scikit-learn's HistGradientBoosting does.
_BINNING_SUBSAMPLE = 200_000
# Below this many row-tree visits a predict runs on the calling thread: starting threads costs more.
_SERIAL_PREDICT_WORK = 200_000
# Below this many row-leaf visits TreeSHAP runs on the calling thread (each visit costs O(depth²), far more than a
# predict's row-tree step).
_SERIAL_CONTRIBUTIONS_WORK = 20_000

_NO_QID_WARNING = (
    "score() received no qid, so all rows are scored as one query. To score per query, pass qid; inside "
    "GridSearchCV or cross_validate, enable routing with sklearn.set_config(enable_metadata_routing=True) and "
    "pass qid to fit."
)
_NO_QID_ERROR = (
    "score() received no qid, but this ranker was fitted on several queries: scored as one query, its NDCG would "
    "mean nothing. Pass qid. "
)
_NO_QID_ROUTING_OFF = (
    "Inside GridSearchCV or cross_validate, enable routing with sklearn.set_config(enable_metadata_routing=True) and "
    "pass qid to fit: with routing off, qid reaches fit but not score."
)
_NO_QID_ROUTING_ON = (
    "Metadata routing is on, but the caller routed no qid to score: pass qid where the data go in "
    "(GridSearchCV.fit(X, y, qid=qid), cross_validate(..., params={'qid': qid})). Tools that route no metadata "
    "(permutation_importance) cannot score per query."
)

#: The stages of a fit that ``fit_profile_`` times, in the order they run.
FIT_STAGES = ("binning", "gradients", "tree_growth", "score_update", "validation")


@dataclass
class _EvalQueries:
    """A validation set during a fit: its bin codes, label gains, query offsets and running scores."""

    codes: np.ndarray
    gains: np.ndarray
    offsets: np.ndarray
    scores: np.ndarray


def _unchanged_on_failure(fit):
    """Decorate a ``fit`` method so that, when it raises, the estimator is left as it was before.

    A refused or abandoned fit (bad data, a continuation on other data, a second Ctrl-C) must not leave the earlier
    model's trees beside the new data's feature count, or without their position biases.
    """
    @functools.wraps(fit)
    def guarded(self, *args, **kwargs):
        earlier = dict(self.__dict__)
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(earlier)
            raise
    return guarded


class LambdaMARTRanker(BaseEstimator):
    """Gradient-boosted LambdaMART ranker.

    Each boosting round computes, per query, LambdaRank gradients λ and second-order weights w from the change in
    NDCG that swapping two documents would cause, fits a histogram regression tree to them (leaf-wise growth,
    Newton leaf values ``-Σλ / (Σw + l2_regularization)``), and adds it, scaled by ``learning_rate``, to the
    scores. Documents of a query are ranked by ``predict`` score, highest first.

    Parameters
    ----------
    objective : {"lambdarank", "lambdarank_map", "ranknet", "listnet", "listmle", "pointwise", "xendcg", "frank", \
            "lambdaloss", "yetirank"}, default="lambdarank"
        Training objective, all boosted with the same trees and Newton steps:

        - ``"lambdarank"``: LambdaMART, pairs weighted by |ΔNDCG| (as LightGBM's ``lambdarank``);
        - ``"lambdarank_map"``: pairs of a relevant and a non-relevant document weighted by |ΔAP|;
        - ``"ranknet"``: pairwise logistic loss over all pairs with different labels (or sampled pairs, see
          ``pairs_per_document``);
        - ``"listnet"``: cross entropy between softmax of the label gains and softmax of the scores;
        - ``"listmle"``: Plackett-Luce likelihood of the label order (ties in labels broken at random each round);
        - ``"pointwise"``: squared error on the labels, a baseline;
        - ``"xendcg"``: XE-NDCG, cross entropy between softmax of the scores and a target proportional to
          gain + 1 - γ, γ ~ U(0, 1) drawn per document each round (as LightGBM's ``rank_xendcg``);
        - ``"frank"``: FRank's fidelity loss 1 - sqrt(P) over all pairs with different labels, P the logistic
          probability that the pair is ordered right (like ``"ranknet"`` over all pairs, quadratic in a query's
          size: a fit warns above 10^8 pairs a round);
        - ``"lambdaloss"``: LambdaLoss's NDCG-Loss2++, pairwise logistic loss weighted by the rank terms
          ρ + μ·δ and the gain difference (Wang et al., 2018); μ 5 by default;
        - ``"yetirank"``: YetiRank, pairwise logistic loss over the neighbours of 10 rankings perturbed by
          logistic noise each round, weighted 0.85^position · label difference (as CatBoost's ``YetiRank``).
    n_estimators : int, default=100
        Maximum number of boosting rounds (trees).
    learning_rate : float, default=0.1
        Shrinkage applied to every leaf value.
    max_leaf_nodes : int, default=31
        Maximum number of leaves per tree.
    max_depth : int or None, default=None
        Maximum depth of a tree; None for no limit (symmetric trees: the fewest levels that hold ``max_leaf_nodes``
        leaves, 5 for 31).
    grow_policy : {"auto", "symmetric", "leafwise"}, default="auto"
        How trees grow. ``"symmetric"``: level by level, every node of a level split by the same feature and
        threshold (CatBoost's oblivious trees), the one whose gains summed over the level are largest; a node
        where it leaves a side short of ``min_samples_leaf`` rows stays a leaf, and a level that would pass
        ``max_leaf_nodes`` splits only its nodes of largest gain. ``"leafwise"``: the leaf of largest gain splits
        next, each by its own best split (LightGBM's and XGBoost's ``lossguide`` trees). ``"auto"``: symmetric,
        except for Unbiased LambdaMART (``fit`` with ``position``), which is leaf-wise. Symmetric trees fit less
        noise and ranked better on every dataset of the factor study (``benchmarks/GROW_POLICY.md``) and, with
        early stopping, on generated data of up to 970k training rows (``benchmarks/GROW_SIZE_EARLY_STOPPING.md``);
        at 100 rounds leaf-wise trees, which learn more per tree, ranked 0.002 better from 1.2M rows. On click logs
        whose logging ranker followed a feature, leaf-wise trees learned the position bias closer to the truth.
    min_samples_leaf : int, default=20
        Minimum number of rows in a leaf (rows of zero weight count, as in LightGBM).
    min_sum_hessian : float, default=1e-3
        Minimum sum of second-order weights w in a leaf.
    l2_regularization : float, default=0.0
        L2 penalty on leaf values (added to Σw).
    max_bins : int, default=255
        Maximum number of value bins per feature (≤ 255); missing values get a bin of their own.
    truncation_level : int, default=30
        Only pairs with at least one document among the current top ``truncation_level`` contribute to λ, and
        IDCG is computed at that depth (LightGBM's default). A level at least the longest query's length trains on
        every pair. On a few dozen long queries the pairs below the cut are signal the model lacks: on 26
        generated training queries of about 100 documents, 100 ranked 0.006 better at 100 rounds (four times
        what a meaningless change moves it there). On more queries (150 and 1000 generated ones, MQ2008) it moved
        NDCG@10 by -0.006 to +0.003, and it costs fit time on long queries (``benchmarks/FACTORS_TRUNCATION.md``,
        ``benchmarks/FACTORS_SMALL.md``).
    sigma : float, default=1.0
        Steepness of the pairwise logistic loss.
    gain : {"exponential", "linear"} or array-like, default="exponential"
        Label gain: 2**label - 1, label, or ``gain[label]`` for integer labels.
    relevance_threshold : float, default=0.0
        ``"lambdarank_map"`` only: a document is relevant when its label exceeds this.
    pairs_per_document : int or None, default=None
        ``"ranknet"`` only: pair each document with this many random documents of its query per round instead of
        with all of them (O(n·k) instead of O(n²) for large queries).
    position_bias_norm : float, default=0.5
        Unbiased LambdaMART only (``fit(..., position=...)``): the regularisation p of the position biases, each
        estimated as the (1 / (1 + p))-th power of its pair losses relative to the top position's. 0 is the
        paper's unregularised estimate; larger p keeps the biases nearer 1, trading correction for stability at
        rarely clicked positions.
    pair_normalization : bool, default=True
        Divide each pair's |ΔNDCG| by ``0.01 + |Δscore|`` (LightGBM's ``lambdarank_norm``).
    query_normalization : bool, default=True
        Scale each query's λ and w by ``log2(1 + Σ|λ|) / Σ|λ|`` (LightGBM's ``lambdarank_norm``).
    ties : {"average", "input"}, default="average"
        ``"lambdarank"`` only: how documents with equal scores (all of a query's in the first round, those in the
        same leaves after it) are ranked when weighting pairs by |ΔNDCG|. ``"average"``: each pair's weight is its
        mean over every order of the tied documents, so the model does not depend on the order of the rows within
        a query. ``"input"``: ties keep their input order, as in LightGBM's ``lambdarank`` and XGBoost's
        ``rank:ndcg`` (the same choice as the metrics' ``ties``).
    subsample : float, default=1.0
        Fraction of queries used to grow each tree.
    max_features : float, default=1.0
        Fraction of features each tree may split on.
    early_stopping : "auto" or bool, default="auto"
        ``"auto"``: stop on the first ``eval_set`` when one is given, otherwise train all rounds. ``True``: also
        hold out ``validation_fraction`` of the queries when no ``eval_set`` is given. ``False``: never stop
        early (``eval_set`` scores are still recorded).
    validation_fraction : float, default=0.1
        Fraction of queries held out for early stopping when ``early_stopping=True`` and no ``eval_set``.
    n_iter_no_change : int, default=10
        Stop when validation NDCG@``eval_at`` has not improved by more than ``tol`` for this many rounds.
    tol : float, default=1e-7
        Minimum improvement that counts.
    eval_at : int, default=10
        Cut-off k of the NDCG used for early stopping, ``validation_score_`` and :meth:`score`.
    n_jobs : int or None, default=None
        Threads for fit and predict; None or -1 uses all cores.
    random_state : int, RandomState or None, default=None
        Seeds binning subsamples, ``subsample``, ``max_features``, the validation split, RankNet's sampled
        partners (``pairs_per_document``), ListMLE's tie-breaks, XE-NDCG's random targets and YetiRank's
        perturbations of the scores.
    warm_start : bool, default=False
        When True, a second ``fit`` on the same data with a larger ``n_estimators`` adds rounds to the fitted
        ensemble instead of starting again (scikit-learn's meaning): the bin thresholds, the validation split, the
        random state, the early-stopping record and what the objective learned (position biases) carry over, and
        the result is bit-identical to one fit of the larger ``n_estimators``. Other parameters than ``n_estimators``
        (and ``verbose``, ``n_jobs``, ``importance_type``, the checkpoint ones) raise a ValueError, as do other data
        when the fit continued had ``warm_start=True`` or a ``checkpoint_dir`` (it then keeps a digest of its binned
        data; other row or feature counts are always refused). A fit that early stopping ended stays as it is, as one
        longer fit would have stopped there too. The training state comes from the last fit of this ranker (or an
        unpickled one; not a model loaded with :func:`~lambdamart.load_model`), else from the newest checkpoint in
        ``checkpoint_dir``: after a crash, the same fit with ``warm_start=True`` continues from there and ends with
        the model an uninterrupted fit makes.
    checkpoint_dir : str, os.PathLike or None, default=None
        A directory where ``fit`` saves its training state every ``checkpoint_every`` rounds and at its end, as
        files ``round-NNNNNN.npz`` (the newest two are kept; written atomically, read without pickle). A fit that
        starts afresh (not continuing one, see ``warm_start``) first deletes the directory's checkpoint files. A
        continued fit must use the same data and parameters (``n_estimators``, ``verbose``, ``n_jobs``,
        ``importance_type`` and these three may change); anything else is refused with a message.
    checkpoint_every : int, default=10
        Rounds between checkpoints.
    verbose : int, default=0
        Print progress every ``verbose`` rounds (0: silent).
    importance_type : {"gain", "split"}, default="gain"
        What :attr:`feature_importances_` measures: the total split gain of each feature (``"gain"``) or the
        number of splits on it (``"split"``). Either way the importances are normalised to sum to 1.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names of a pandas ``X`` given to fit.
    n_estimators_ : int
        Number of trees in the model (after early stopping kept the best).
    n_iter_ : int
        Number of boosting rounds run.
    best_iteration_ : int or None
        1-based round with the best validation score, when there is a validation set.
    train_score_ : ndarray
        Training NDCG@``eval_at`` after each round (recorded when there is a validation set or ``verbose``; NaN
        for the rounds of an earlier fit that did not record, continued with ``warm_start``).
    validation_score_ : ndarray
        Validation NDCG@``eval_at`` after each round (empty without a validation set).
    position_bias_ : ndarray of shape (2, n_positions)
        With ``fit(..., position=...)``: the learned bias of each displayed position (column p - 1 for rank p),
        for clicked (row 0) and unclicked (row 1) documents, relative to the top position.
    feature_importances_ : ndarray of shape (n_features_in_,)
        Per-feature total split gain or split count (see ``importance_type``), normalised to sum to 1.
    fit_profile_ : dict of str to float
        Seconds the last fit spent in each stage (``"binning"``, ``"gradients"``, ``"tree_growth"``,
        ``"score_update"``, ``"validation"``) and in all (``"total"``). A diagnostic of that fit: not saved by
        :meth:`save_model`.

    Notes
    -----
    A fitted ranker pickles (with ``pickle`` or ``joblib``) and predicts bit-identically after loading; a pickle
    written by another lambdamart version warns with :class:`lambdamart.InconsistentVersionWarning`. For a file
    that loads without pickle (and so cannot run code), use :meth:`save_model` and :func:`lambdamart.load_model`.

    Ctrl-C during ``fit`` (SIGINT in the main thread: a terminal, a notebook's interrupt button) ends training after
    the round under way and keeps the rounds done, with a ``UserWarning``: the ranker is then the model a fit of
    that many rounds grows. A second Ctrl-C raises ``KeyboardInterrupt`` at once and the fit is lost. A fit that
    raises, for bad data or a second Ctrl-C, leaves the ranker as it was before it.
    """

    __metadata_request__fit = {"qid": True}
    __metadata_request__score = {"qid": True}

    _parameter_constraints = {
        "objective": [StrOptions(set(OBJECTIVES))],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "max_leaf_nodes": [Interval(Integral, 2, None, closed="left")],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "grow_policy": [StrOptions({"auto", "symmetric", "leafwise"})],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left")],
        "min_sum_hessian": [Interval(Real, 0, None, closed="left")],
        "l2_regularization": [Interval(Real, 0, None, closed="left")],
        "max_bins": [Interval(Integral, 2, MAX_BINS, closed="both")],
        "truncation_level": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "gain": [StrOptions({"exponential", "linear"}), "array-like"],
        "relevance_threshold": [Interval(Real, None, None, closed="neither")],
        "pairs_per_document": [Interval(Integral, 1, None, closed="left"), None],
        "position_bias_norm": [Interval(Real, 0, None, closed="left")],
        "pair_normalization": ["boolean"],
        "ties": [StrOptions({"average", "input"})],
        "query_normalization": ["boolean"],
        "subsample": [Interval(Real, 0, 1, closed="right")],
        "max_features": [Interval(Real, 0, 1, closed="right")],
        "early_stopping": [StrOptions({"auto"}), "boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "eval_at": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "checkpoint_dir": [str, os.PathLike, None],
        "checkpoint_every": [Interval(Integral, 1, None, closed="left")],
        "verbose": [Interval(Integral, 0, None, closed="left")],
        "importance_type": [StrOptions({"gain", "split"})],
    }

    def __init__(self, objective="lambdarank", *, n_estimators=100, learning_rate=0.1, max_leaf_nodes=31,
                 max_depth=None, grow_policy="auto", min_samples_leaf=20, min_sum_hessian=1e-3,
                 l2_regularization=0.0, max_bins=255, truncation_level=30, sigma=1.0, gain="exponential",
                 relevance_threshold=0.0, pairs_per_document=None, position_bias_norm=0.5, pair_normalization=True,
                 query_normalization=True, ties="average", subsample=1.0, max_features=1.0, early_stopping="auto",
                 validation_fraction=0.1, n_iter_no_change=10, tol=1e-7, eval_at=10, n_jobs=None,
                 random_state=None, warm_start=False, checkpoint_dir=None, checkpoint_every=10, verbose=0,
                 importance_type="gain"):
        self.objective = objective
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.grow_policy = grow_policy
        self.min_samples_leaf = min_samples_leaf
        self.min_sum_hessian = min_sum_hessian
        self.l2_regularization = l2_regularization
        self.max_bins = max_bins
        self.truncation_level = truncation_level
        self.sigma = sigma
        self.gain = gain
        self.relevance_threshold = relevance_threshold
        self.pairs_per_document = pairs_per_document
        self.position_bias_norm = position_bias_norm
        self.pair_normalization = pair_normalization
        self.query_normalization = query_normalization
        self.ties = ties
        self.subsample = subsample
        self.max_features = max_features
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.eval_at = eval_at
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.warm_start = warm_start
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.verbose = verbose
        self.importance_type = importance_type

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # XGBoost's XGBRanker uses the same type name; scikit-learn has no ranker type, and a ranker is neither a
        # regressor (score() is NDCG, not R²) nor a classifier.
        tags.estimator_type = "ranker"
        tags.target_tags.required = True
        tags.input_tags.allow_nan = True  # NaN is a missing value with a learned direction
        tags.input_tags.sparse = True  # densified
        return tags

    def __getstate__(self):
        # A copy: on Python 3.11+ the state scikit-learn hands on is the instance's own __dict__.
        state = dict(super().__getstate__())
        state.pop("_layouts", None)  # derived again from the trees when unpickled
        state["_lambdamart_version"] = __version__
        return state

    def __setstate__(self, state):
        state = dict(state)
        version = state.pop("_lambdamart_version", "unknown")
        if version != __version__:
            warnings.warn(InconsistentVersionWarning(type(self).__name__, version, __version__), stacklevel=2)
        if "_trees" in state:  # a fitted ranker from before a parameter existed was fitted as it then behaved
            state = {**_model_format.EARLIER_DEFAULTS, **state}
        super().__setstate__(state)
        if "_trees" in state:
            self._set_trees(state["_trees"])

    # ------------------------------------------------------------------ fit

    @_unchanged_on_failure
    def fit(self, X: ArrayLike, y: ArrayLike, qid: ArrayLike | None = None, *, group: ArrayLike | None = None,
            sample_weight: ArrayLike | None = None, eval_set: list[tuple] | None = None,
            position: ArrayLike | None = None,
            init_model: "LambdaMARTRanker | str | os.PathLike | None" = None) -> "LambdaMARTRanker":
        """Fit the ranker.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Features; NaN marks a missing value. Sparse input is densified.
        y : array-like of shape (n_samples,)
            Relevance labels (non-negative; integers when ``gain`` is a table).
        qid : array-like of shape (n_samples,), default=None
            Query id of every row, in any order. None (and no ``group``) treats all rows as one query.
        group : array-like of int, default=None
            LightGBM-style query sizes of consecutive rows, instead of ``qid``.
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights; they multiply the row's λ and w.
        eval_set : list of (X, y) or (X, y, qid) tuples, default=None
            Validation data scored every round; the first one drives early stopping.
        position : array-like of int of shape (n_samples,), default=None
            Rank at which each row was displayed when its label (a click) was logged, 1 for the top (at most
            10000: one bias is learned per rank; clip deeper ranks so that they share one). Turns on
            Unbiased LambdaMART (``"lambdarank"`` and ``"lambdarank_map"``): position biases for clicked and
            unclicked documents are learned alongside the trees (``position_bias_``) and divide each pair's λ.
        init_model : LambdaMARTRanker, str or os.PathLike, default=None
            A fitted ranker, or a model file written by :meth:`save_model`, to continue boosting from (LightGBM's
            ``init_model``, XGBoost's ``xgb_model``): its predictions are the starting scores of ``X`` and of the
            eval sets, the fit adds up to ``n_estimators`` rounds, and the model holds its trees followed by the
            new ones (``n_estimators_`` counts both; ``n_iter_``, ``best_iteration_`` and the scores count this
            fit's rounds). Only its trees carry over, not its bin thresholds or position biases, so ``X`` may be
            new data with the same features.

        Returns
        -------
        self
        """
        state, init, finished = self._begin_fit(init_model)
        profile = dict.fromkeys(FIT_STAGES, 0.0)
        fit_start = time.perf_counter()
        threads = n_threads(self.n_jobs)
        X, y, groups, sample_weight = self._check_fit_data(X, y, qid, group, sample_weight)
        self._fitted_on_queries = groups.n_queries > 1  # then score() needs qid
        position = check_position(position, X.shape[0])
        if init is not None:
            _check_same_features(init, self, "init_model")
        if state is None:
            rng = check_random_state(self.random_state)
        else:  # the draws of the first fit again (validation split), then its state after its last round
            rng = np.random.RandomState()
            rng.set_state(state.start_rng)
        start_rng = rng.get_state()
        eval_items = check_eval_set(eval_set)
        train_rows, offsets, holdout = self._split_queries(groups, rng, self.early_stopping is True and not eval_items)
        eval_sets = [(X[rows], label_gains(y[rows], self.gain, "y"), offsets_v) for rows, offsets_v in holdout]
        for i, (X_v, y_v, qid_v) in enumerate(eval_items):  # a loop: a comprehension's frame (before 3.12) would
            eval_sets.append(self._eval_set_queries(X_v, y_v, qid_v, i))  # move its warnings' stacklevel
        if eval_sets and self.early_stopping is not False and _no_query_has_an_order(eval_sets[0][1], eval_sets[0][2]):
            warnings.warn("early stopping watches a validation set in which every query has all labels equal (or a "
                          "single document): its NDCG is the same after every round, so the fit stops after "
                          f"n_iter_no_change={self.n_iter_no_change} rounds and keeps the first. Check its labels and "
                          "qid, or pass early_stopping=False.", UserWarning, stacklevel=3)
        queries = self._training_queries(y, train_rows, offsets, sample_weight, position)
        if not finished:
            OBJECTIVES[self.objective].warn_about_cost(np.diff(offsets), self.get_params(deep=False))

        # Every parallel kernel of the fit runs inside this region, the objective's set-up included.
        with parallel_region(fit_threads(X.size, self.n_estimators, threads)):
            objective = make_objective(self.objective, queries, self.get_params(deep=False), rng)
            with _timed(profile, "binning"):
                if state is None:
                    thresholds, threshold_offsets = self._bin_thresholds(X, train_rows, rng)
                else:
                    self._check_same_data(state, X.shape[1], train_rows.shape[0])
                    thresholds, threshold_offsets = state.thresholds, state.threshold_offsets
                    objective.restore(state.objective)
                    rng.set_state(state.end_rng)
                n_bins = np.diff(threshold_offsets) + 1
                codes = bin_features(X, train_rows, thresholds, threshold_offsets, split_over_threads)
            with _timed(profile, "validation"):
                valid = [_EvalQueries(bin_features(X_v, np.arange(X_v.shape[0]), thresholds, threshold_offsets,
                                                   split_over_threads),
                                      gains_v, offsets_v, np.zeros(X_v.shape[0]))
                         for X_v, gains_v, offsets_v in eval_sets]
            digest = ""
            # Under warm_start too, so that a later fit continuing this one can check that its data are these.
            if self.warm_start or self.checkpoint_dir is not None or (state is not None and state.fingerprint):
                digest = data_fingerprint(
                    [query_digest_sum(0, codes, offsets, queries.gains, queries.sample_weight, queries.position)]
                    + [query_digest_sum(i + 1, v.codes, v.offsets, v.gains) for i, v in enumerate(valid)])
                if state is not None:
                    check_same_data(state.fingerprint, digest, legacy=lambda: fingerprint(
                        codes, queries.gains, offsets, queries.sample_weight, queries.position,
                        *[a for v in valid for a in (v.codes, v.gains, v.offsets)]))
            if finished:  # the data are those of the fit continued, which has every round asked for
                if state is self.__dict__.get("_boosting_state"):
                    self._set_features(state)  # the fit's, which checking X replaced by those of X
                else:  # from a checkpoint
                    self._set_fitted(state)
                return self
            init_trees = state.init_trees if state is not None else init._trees if init is not None else None
            scores = np.zeros(train_rows.shape[0])
            if init_trees is not None:  # init_model's predictions are the starting scores
                scores = _predict_trees(init_trees, X, self.n_jobs)[train_rows]
                for v, (X_v, _, _) in zip(valid, eval_sets):
                    v.scores = _predict_trees(init_trees, X_v, self.n_jobs)
            trees = list(state.trees) if state is not None else []

            def snapshot(record):
                """The state after the rounds grown so far, for checkpoints and warm_start."""
                return TrainingState(start_rng=start_rng, end_rng=rng.get_state(), trees=list(trees), record=record,
                                     thresholds=thresholds, threshold_offsets=threshold_offsets,
                                     objective=objective.state(), n_features=X.shape[1],
                                     n_rows=train_rows.shape[0], init_trees=init_trees, fingerprint=digest,
                                     feature_names=getattr(self, "feature_names_in_", None))

            checkpoints = None
            if self.checkpoint_dir is not None:
                checkpoints = Checkpoints(self.checkpoint_dir, self.checkpoint_every, self.get_params(deep=False),
                                          fresh=state is None)
            rounds = _Rounds(self, has_valid=bool(valid), record=None if state is None else state.record,
                             checkpoints=checkpoints, snapshot=snapshot)
            self._boost(codes, n_bins, queries, objective, valid, rng, profile, scores, trees, rounds)
        self._set_fitted(snapshot(rounds.record()))
        profile["total"] = time.perf_counter() - fit_start
        self.fit_profile_ = profile
        if self.verbose:
            print("fit profile: " + ", ".join(f"{k} {v:.2f}s" for k, v in profile.items()), flush=True)
        return self

    def _check_fit_data(self, X, y, qid, group, sample_weight):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None: pass the "
                             f"relevance label of every row.")
        X = check_X(self, X, reset=True)
        y = check_y(y, X.shape[0], "y")
        if group is not None and qid is not None:
            raise ValueError("pass either qid (one id per row) or group (query sizes), not both.")
        groups = group_from_sizes(group, X.shape[0]) if group is not None else group_queries(qid, X.shape[0])
        if sample_weight is not None:
            sample_weight = check_sample_weights(sample_weight, X)
        return X, y, groups, sample_weight

    def _split_queries(self, groups, rng, holdout):
        """Training rows and offsets, laid out query by query; with ``holdout``, also the held-out queries.

        The held-out queries come as a list of one (rows, offsets) pair, for early stopping.
        """
        rows = groups.take(np.arange(groups.offsets[-1]))
        offsets = groups.offsets
        if not holdout:
            return rows, offsets, []
        n_queries = groups.n_queries
        n_valid = int(np.ceil(self.validation_fraction * n_queries))
        if n_valid >= n_queries:
            raise ValueError(f"early_stopping holds out validation_fraction={self.validation_fraction} of the "
                             f"{n_queries} queries, {n_valid}, which leaves none to train on; lower "
                             f"validation_fraction, or pass eval_set=[(X_valid, y_valid, qid_valid)] instead.")
        is_valid = np.zeros(n_queries, dtype=bool)
        is_valid[rng.choice(n_queries, n_valid, replace=False)] = True
        return (*_select_queries(rows, offsets, ~is_valid), [_select_queries(rows, offsets, is_valid)])

    def _training_queries(self, y, rows, offsets, sample_weight, position):
        labels = y[rows]
        if _no_query_has_an_order(labels, offsets):
            warnings.warn("every training query has all labels equal (or a single document), so there is no "
                          "order within a query to learn: the model cannot rank documents (ranking objectives "
                          "predict a constant). Check the labels, or the qid that groups rows into queries.",
                          UserWarning, stacklevel=4)
        return TrainingQueries(
            labels=labels, gains=label_gains(labels, self.gain, "y"), offsets=offsets,
            sample_weight=sample_weight[rows] if sample_weight is not None else np.zeros(0),
            position=position[rows] if position is not None else np.zeros(0, dtype=np.int64))

    def _eval_set_queries(self, X, y, qid, i):
        """Features, label gains and offsets of ``eval_set[i]``, laid out query by query."""
        where = f"eval_set[{i}]"
        try:
            X = check_X(self, X, reset=False)
        except ValueError as e:
            raise ValueError(f"{where} X: {e}") from None
        y = check_y(y, X.shape[0], f"{where} y")
        if qid is None and X.shape[0] > 1:
            warnings.warn(f"{where} has no qid, so all its rows are scored as one query. Pass (X, y, qid) to score it "
                          "per query.", UserWarning, stacklevel=4)
        try:
            groups = group_queries(qid, X.shape[0])
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        return groups.take(X), label_gains(groups.take(y), self.gain, f"{where} y"), groups.offsets

    def _bin_thresholds(self, X, train_rows, rng):
        sample = train_rows
        if train_rows.shape[0] > _BINNING_SUBSAMPLE:
            sample = train_rows[np.sort(rng.choice(train_rows.shape[0], _BINNING_SUBSAMPLE, replace=False))]
        elif train_rows.shape[0] == X.shape[0]:
            sample = None  # every row, in query order: the thresholds do not depend on the order, so no gather
        return find_thresholds(X, self.max_bins, sample, split_over_threads)

    def _growth_params(self, n_rows, unbiased=False):
        """The tree-growth parameters for ``n_rows`` training rows, as the numba grower takes them.

        ``unbiased``: the fit learns position biases. ``max_leaf_nodes`` is capped at the leaves ``n_rows`` rows can
        fill with ``min_samples_leaf`` each: no tree grows more, and the local grower allocates a histogram per leaf
        up front (``max_leaf_nodes=10**9`` asked for terabytes).
        """
        max_leaf_nodes = self.max_leaf_nodes
        symmetric = self.grow_policy == "symmetric" or (self.grow_policy == "auto" and not unbiased)
        max_depth = -1 if self.max_depth is None else self.max_depth
        if symmetric:  # the depth the leaves allow, before they are capped by the rows below
            max_depth = symmetric_depth(max_leaf_nodes, max_depth)
        max_leaf_nodes = min(max_leaf_nodes, max(2, n_rows // self.min_samples_leaf))
        return GrowthParams(max_leaf_nodes=max_leaf_nodes, max_depth=max_depth, symmetric=symmetric,
                            min_samples_leaf=self.min_samples_leaf, min_sum_hessian=float(self.min_sum_hessian),
                            l2_regularization=float(self.l2_regularization), learning_rate=float(self.learning_rate))

    def _begin_fit(self, init_model):
        """Check the parameters; return the state to continue (or None), init_model's ranker (or None) and ``finished``.

        ``finished`` is whether the state has nothing left to fit: every round asked for is there, or early stopping
        ended the fit continued (as it would have ended one longer fit).
        """
        validate_params(self)
        if self.checkpoint_dir is not None and os.path.exists(self.checkpoint_dir) \
                and not os.path.isdir(self.checkpoint_dir):
            raise ValueError(f"checkpoint_dir={os.fspath(self.checkpoint_dir)!r} is a file; give a directory (it is "
                             f"created if missing).")
        state = self._state_to_continue()
        init = _initial_model(init_model, state)
        finished = state is not None and (len(state.trees) == self.n_estimators or state.record["stopped"])
        if not finished:
            for name in ("position_bias_", "fit_profile_"):  # nothing learned by an earlier fit may survive this one
                self.__dict__.pop(name, None)
        return state, init, finished

    def _state_to_continue(self):
        """With ``warm_start``, the training state to continue (this ranker's, else the newest checkpoint's)."""
        if not self.warm_start:
            return None
        state = None
        if hasattr(self, "_trees"):
            state = self.__dict__.get("_boosting_state")
            if state is not None:
                check_compatible(self.__dict__.get("_boosting_params", {}), self.get_params(deep=False),
                                 "this ranker's model")
            if state is None and self.checkpoint_dir is None:
                raise ValueError("warm_start continues a fit made by this ranker (or an unpickled one, or one "
                                 "saved in checkpoint_dir); this ranker has trees but no training state (it was "
                                 "loaded from a model file, or comes from a Dask fit). Set warm_start=False to fit "
                                 "afresh.")
        if state is None and self.checkpoint_dir is not None:
            checkpoint = read_latest(self.checkpoint_dir)
            if checkpoint is not None:
                check_compatible(checkpoint.params, self.get_params(deep=False), f"the checkpoint {checkpoint.path}")
                state = checkpoint.state
                if self.verbose:
                    print(f"continuing from {checkpoint.path} after round {len(state.trees)}", flush=True)
        if state is not None and self.n_estimators < len(state.trees):
            raise ValueError(f"warm_start adds rounds: n_estimators={self.n_estimators} must be at least the "
                             f"{len(state.trees)} rounds already fitted (set warm_start=False to fit afresh).")
        return state

    def _check_same_data(self, state, n_features, n_rows):
        """Refuse to continue ``state`` on data of another shape, or with other feature names."""
        if (n_features, n_rows) != (state.n_features, state.n_rows):
            raise ValueError(f"warm_start adds rounds to a fit on the same data, which had {state.n_rows} training "
                             f"rows of {state.n_features} features; got {n_rows} rows of {n_features}. Set "
                             f"warm_start=False to fit these data afresh.")
        names = getattr(self, "feature_names_in_", None)
        if state.feature_names is not None and names is not None and not np.array_equal(state.feature_names, names):
            raise ValueError(f"warm_start adds rounds to a fit on features named {_shown(state.feature_names)}, "
                             f"which differ from X's {_shown(names)}; give X the same columns in the same order, or "
                             f"set warm_start=False to fit afresh.")

    def _set_fitted(self, state):
        """The fitted attributes of the model ``state`` holds (its trees up to the best round under early stopping)."""
        rounds = _Rounds(self, has_valid=bool(state.record["valid_score"]), record=state.record)
        trees = make_trees(rounds.finish(state.trees), state.thresholds, state.threshold_offsets)
        if state.init_trees is not None:
            trees = concatenate_trees(split_trees(state.init_trees) + split_trees(trees))
        self._set_trees(trees)
        self.n_estimators_ = trees["tree_starts"].shape[0]
        self._set_features(state)
        for name, value in state.objective.items():
            setattr(self, f"{name}_", value)
        self._boosting_state = state
        self._boosting_params = encode_params(self.get_params(deep=False))  # what warm_start must continue with

    def _set_features(self, state):
        self.n_features_in_ = state.n_features
        if state.feature_names is not None:
            self.feature_names_in_ = np.asarray(state.feature_names, dtype=object)
        else:
            self.__dict__.pop("feature_names_in_", None)

    def _boost(self, codes, n_bins, queries, objective, valid, rng, profile, scores, trees, rounds):
        """The boosting rounds from the training ``scores``, continuing ``trees`` (appended to) and ``rounds``.

        Earlier rounds' trees in ``trees`` (a continued fit) are added to the scores first, in order, as those
        rounds added them.
        """
        n_features, n_rows = codes.shape
        offsets = queries.offsets
        n_queries = queries.n_queries
        with _timed(profile, "binning"):
            # One histogram block per thread of the fit (see lambdamart._engine.histogram).
            layout = make_layout(codes, n_bins, numba.get_num_threads(), split_over_threads)

        grad = np.zeros(n_rows)
        hess = np.zeros(n_rows)
        all_queries = np.arange(n_queries, dtype=np.int64)
        all_rows = np.arange(n_rows, dtype=np.int64)
        all_features = np.arange(n_features, dtype=np.int64)
        n_tree_features = max(1, int(round(self.max_features * n_features)))
        n_tree_queries = max(1, int(round(self.subsample * n_queries)))
        # Without subsampling every tree partitions this buffer of all rows, put back in order after each tree.
        tree_rows = all_rows.copy()
        every_row = n_tree_queries == n_queries
        params = self._growth_params(n_rows, unbiased=queries.position.shape[0] > 0)
        workspace = make_workspace(n_rows, layout, params.max_leaf_nodes)
        parallel_work, partition_rows = node_parallel_work(), node_partition_rows(n_rows)
        # With an empty cache, the growth kernels compile in a helper process while this one compiles the
        # objective's in the first round.
        grow = grow_symmetric_tree if params.symmetric else grow_tree
        growth_helper = compile_ahead(grow, (codes, n_bins, layout, all_features, grad, hess, all_rows, params,
                                                  workspace, parallel_work, partition_rows))

        valid_rows = [np.arange(v.scores.shape[0], dtype=np.int64) for v in valid]
        watch = _Stopwatch(profile)
        for tree in trees:  # the scores the earlier rounds left, rebuilt with the same additions in order
            add_tree_binned(codes, n_bins, tree, all_rows, scores)
            for v, rows_v in zip(valid, valid_rows):
                add_tree_binned(v.codes, n_bins, tree, rows_v, v.scores)
        with rounds:
            for it in range(len(trees), self.n_estimators):
                if n_tree_queries < n_queries:
                    tree_queries = np.sort(rng.choice(n_queries, n_tree_queries, replace=False))
                    rows = _query_rows(offsets, tree_queries)
                else:
                    tree_queries, rows = all_queries, tree_rows
                features = all_features
                if n_tree_features < n_features:
                    features = np.sort(rng.choice(n_features, n_tree_features, replace=False)).astype(np.int64)
                watch.start()
                objective.gradients(scores, tree_queries, grad, hess)
                watch.lap("gradients")
                wait_for_helper(growth_helper)
                growth_helper = None
                tree = grow(codes, n_bins, layout, features, grad, hess, rows, params, workspace, parallel_work,
                            partition_rows)
                _check_leaf_values(tree.value, it, self.learning_rate)
                watch.lap("tree_growth")
                leaf_values = (scores, rows, tree.feature, tree.value, tree.node_start, tree.node_stop, every_row)
                if partition_rows is None:
                    add_leaf_values(*leaf_values)
                else:  # a large fit: its threads share the scatter and the rows' reordering
                    add_leaf_values_threaded(*leaf_values, numba.get_num_threads())
                if rows.shape[0] < n_rows:  # rows outside the subsample walk the tree
                    rest = np.setdiff1d(all_rows, rows, assume_unique=True)
                    add_tree_binned(codes, n_bins, tree, rest, scores)
                watch.lap("score_update")
                trees.append(tree)
                for v, rows_v in zip(valid, valid_rows):
                    add_tree_binned(v.codes, n_bins, tree, rows_v, v.scores)
                train_score = valid_score = None
                if rounds.recording:
                    train_score = self._ndcg(queries.gains, offsets, scores)
                    if valid:
                        valid_score = self._ndcg(valid[0].gains, valid[0].offsets, valid[0].scores)
                watch.lap("validation")
                if rounds.end_round(it, train_score, valid_score):
                    break

    def _ndcg(self, gains, offsets, scores):
        """NDCG@eval_at of scores laid out by ``offsets`` (queries without relevant documents count 1)."""
        return float(np.mean(_ndcg_per_query(gains, offsets, scores, self.eval_at)))

    def _print_progress(self, it, train_score, valid_score, start_time):
        elapsed = time.perf_counter() - start_time
        parts = [f"[{it + 1}/{self.n_estimators}]"]
        if train_score:
            parts.append(f"train NDCG@{self.eval_at} {train_score[-1]:.5f}")
        if valid_score:
            parts.append(f"valid NDCG@{self.eval_at} {valid_score[-1]:.5f}")
        eta = elapsed / (it + 1) * (self.n_estimators - it - 1)
        parts.append(f"elapsed {elapsed:.1f}s  eta {eta:.1f}s")
        print("  ".join(parts), flush=True)

    # ------------------------------------------------------------ predict

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Scores of the rows of ``X``, in input order; rank a query's documents by descending score.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of float64, shape (n_samples,)
        """
        if "_trees" not in self.__dict__:  # scikit-learn's check costs 1.4 µs of a ~60 µs query; it raises here
            check_is_fitted(self, "_trees")
        return _predict_trees(self._trees, check_X(self, X, reset=False, ensure_min_samples=0), self.n_jobs,
                              self._scoring_layouts())

    def _set_trees(self, trees):
        """Make the flat ensemble ``trees`` the model, with the layouts predict scores it by.

        Derived once, here: a query scored in ~50 µs should not pay for them again, and predict must not change the
        estimator.
        """
        self._trees = trees
        self._layouts = (trees, _scoring_layouts(trees))

    def _scoring_layouts(self):
        """The trees' :class:`_ScoringLayouts`.

        The ones derived with the trees (see :meth:`_set_trees`), or ones derived now if the trees were replaced
        otherwise.
        """
        cached = self.__dict__.get("_layouts")
        return cached[1] if cached is not None and cached[0] is self._trees else _scoring_layouts(self._trees)

    def predict_contributions(self, X: ArrayLike) -> np.ndarray:
        """Each feature's contribution to each row's score (SHAP values), plus the expected score in the last column.

        Exact path-dependent TreeSHAP (Lundberg et al. 2020, Algorithm 2), LightGBM's ``pred_contrib`` layout. The
        contributions are the Shapley values of a game whose value for a set of known features is the model's
        expected score given those features, taken path by path: at a split on a known feature the row's own branch
        is followed, at a split on any other feature both branches are, weighted by their *cover*, the share of the
        node's training rows each received (the trees' ``count``; for a fit with ``subsample`` the rows of that
        round's queries). No background data is needed, and the values are exact, not sampled.

        The last column is the expected score: the sum over trees of the cover-weighted mean of the leaf values,
        the same for every row. Each row sums to :meth:`predict` of that row (up to floating-point rounding, well
        under 1e-9 of the score's scale). A feature never split on has zero contribution everywhere. Missing values
        (NaN) go where each split sends them, as in :meth:`predict`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of float64, shape (n_samples, n_features_in_ + 1)
            Column j < n_features_in_ holds feature j's contribution; the last column the expected score.
        """
        check_is_fitted(self, "_trees")
        return _contributions_of_trees(self._trees, check_X(self, X, reset=False, ensure_min_samples=0),
                                       self.n_jobs, self._scoring_layouts().walk.depth)

    def score(self, X: ArrayLike, y: ArrayLike, qid: ArrayLike | None = None,
              sample_weight: ArrayLike | None = None) -> float:
        """NDCG@``eval_at`` of the predictions, per query and averaged (what GridSearchCV uses with no scoring).

        The metric is this ranker's own (its ``eval_at`` and ``gain``): a search whose grid varies them compares
        different metrics, so pass ``scoring=ndcg_scorer(k)`` there.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Relevance labels.
        qid : array-like of shape (n_samples,), default=None
            Query id of every row. Required when the ranker was fitted on several queries (a ValueError says how
            to route qid through scikit-learn's metadata routing); otherwise, without it all rows are scored as one
            query, with a warning.
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights; each query counts in the mean with the mean weight of its rows.

        Returns
        -------
        float
            NDCG@``eval_at`` with the ranker's ``gain`` (exponential by default); queries without a relevant
            document count 1.
        """
        return self._score_predictions(self.predict(X), y, qid, sample_weight)

    def _score_predictions(self, scores, y, qid, sample_weight):
        """:meth:`score` of given predictions (the warning points at the caller of ``score``)."""
        if qid is None:
            # An error, not a warning, when the fit had queries: a parallel search's workers swallow warnings, and
            # would pick parameters by a one-query NDCG.
            if self.__dict__.get("_fitted_on_queries", False):
                routing = get_config()["enable_metadata_routing"]
                raise ValueError(_NO_QID_ERROR + (_NO_QID_ROUTING_ON if routing else _NO_QID_ROUTING_OFF))
            warnings.warn(_NO_QID_WARNING, UserWarning, stacklevel=3)
        with parallel_region(self.n_jobs):  # the metric kernel runs in parallel too
            return ndcg(y, scores, qid, k=self.eval_at, gain=self.gain, sample_weight=sample_weight)

    @property
    def feature_importances_(self) -> np.ndarray:
        """Per-feature total split gain (``importance_type="gain"``) or split count (``"split"``), summing to 1.

        All zeros when no tree has a split.
        """
        check_is_fitted(self, "_trees")
        if self.importance_type not in ("gain", "split"):
            raise ValueError(f"importance_type must be 'gain' or 'split', got {self.importance_type!r}.")
        t = self._trees
        split = t["feature"] >= 0
        weights = t["gain"][split] if self.importance_type == "gain" else None
        importances = np.bincount(t["feature"][split], weights=weights, minlength=self.n_features_in_)
        importances = importances.astype(np.float64)
        total = importances.sum()
        return importances / total if total > 0 else importances

    def save_model(self, path: str | os.PathLike) -> "LambdaMARTRanker":
        """Write the fitted model to a JSON file that :func:`lambdamart.load_model` reads without pickle.

        The file holds the parameters, feature names and every tree's split features, raw thresholds, children
        and leaf values (and ``position_bias_``, when learned); the loaded ranker predicts bit-identically. See
        :mod:`lambdamart.model_io` for the format. The file is written to a temporary name and renamed, so readers
        never see a partial file.

        Parameters
        ----------
        path : str or os.PathLike
            Destination file; overwritten if it exists.

        Returns
        -------
        self
        """
        check_is_fitted(self, "_trees")
        _model_format.write_model(self, path)
        return self

    def export_model(self, path: str | os.PathLike, *, format: str) -> "LambdaMARTRanker":
        """Write the fitted trees in another library's model format, for serving them there.

        Every format keeps the split rule: ``x <= threshold`` goes left, NaN goes the learned way.

        - ``"lightgbm"``: LightGBM's text model; ``lightgbm.Booster(model_file=path).predict(X)`` equals our
          ``predict`` (float64 comparisons and sums, thresholds and leaves written exactly), except that LightGBM
          reads inputs with |x| <= 1e-35 as 0: at a threshold in [-1e-35, 1e-35), such as the 0.0 of training
          values {-1, 1}, a nonzero input that small may go the other way.
        - ``"xgboost"``: XGBoost's JSON model for ``xgboost.Booster().load_model(path)``. XGBoost compares and sums
          in float32: thresholds are chosen so that every float32 value goes our way; float64 values that are not
          float32 are rounded by XGBoost and may go the other way near a threshold; scores agree to ~1e-6.
        - ``"xgboost-dump"``: XGBoost's JSON tree dump (a JSON array, one object per tree, as
          ``Booster.get_dump(dump_format="json")``), the ``model/xgboost+json`` definition the Elasticsearch and
          OpenSearch learning-to-rank plugins read; features are named by ``feature_names_in_`` (else f0, f1, ...)
          and must match the plugin's feature set.
        - ``"onnx"``: an ONNX model with one ``ai.onnx.ml`` ``TreeEnsemble`` node (opset 5; needs the ``onnx``
          extra): input ``X``, float64 of shape (batch, n_features); output ``score``, float64 (batch, 1).

        Use :meth:`save_model` for lambdamart's own lossless format. See docs/design.md, "Exchanging models with
        other libraries", for the mappings.

        Parameters
        ----------
        path : str or os.PathLike
            Destination file; written atomically and overwritten if it exists.
        format : {"lightgbm", "xgboost", "xgboost-dump", "onnx"}
            The target format.

        Returns
        -------
        self
        """
        check_is_fitted(self, "_trees")
        if format not in _exchange.WRITERS:
            raise ValueError(f"format must be one of {sorted(_exchange.WRITERS)}, got {format!r}; use save_model "
                             f"for lambdamart's own format.")
        if format == "onnx":
            try:
                import onnx  # noqa: F401
            except ImportError:
                raise ImportError("export_model(format='onnx') needs the onnx package: pip install "
                                  "'lambdamart[onnx]'.") from None
        names = getattr(self, "feature_names_in_", None)
        content = _exchange.WRITERS[format](self._trees, self.n_features_in_, None if names is None else list(names))
        write_atomically(path, content)
        return self


class _ScoringLayouts(NamedTuple):
    """How predict scores a flat ensemble.

    QuickScorer's layout when every tree has at most 32 leaves (else None), and the walk layout, which scores the
    other ensembles and gives the contributions each tree's depth.
    """

    quick: QuickScoreLayout | None
    walk: WalkLayout


def _scoring_layouts(trees):
    """The :class:`_ScoringLayouts` of the flat ensemble ``trees``."""
    walk = walk_layout(trees)  # first: it checks that the trees are trees
    return _ScoringLayouts(quick_score_layout(trees), walk)


def _predict_trees(trees, X, n_jobs, layouts=None):
    """The scores of the flat ensemble ``trees`` for the rows of a checked ``X``.

    ``layouts`` are its :func:`_scoring_layouts` if the caller keeps them.
    """
    layouts = _scoring_layouts(trees) if layouts is None else layouts
    # QuickScorer when the trees allow it: 20-40 % faster than the walk, with the same sums in the same order.
    kernel, args = ((quick_score_rows, tuple(layouts.quick)) if layouts.quick is not None
                    else (_score_rows_on_this_thread, tuple(layouts.walk)))
    out = np.empty(X.shape[0])
    if X.shape[0] * max(trees["tree_starts"].shape[0], 1) <= _SERIAL_PREDICT_WORK:
        kernel(X, 0, X.shape[0], *args, out)  # no thread hand-off for a query
        return out
    return _rows_on_threads(kernel, X, args, out, n_jobs)


def _score_rows_on_this_thread(X, lo, hi, *args):
    """``score_rows`` with the calling thread's key buffer."""
    score_rows(X, lo, hi, row_key_buffer(hi - lo, X.shape[1]), *args)


def _rows_on_threads(kernel, X, args, out, n_jobs):
    """``kernel(X, lo, hi, *args, out)`` over ranges of the rows of ``X`` on ``n_jobs`` threads; returns ``out``."""
    with parallel_region(n_jobs):
        split_over_threads(lambda lo, hi: kernel(X, lo, hi, *args, out), X.shape[0])
    return out


def _contributions_of_trees(trees, X, n_jobs, tree_depth):
    """The TreeSHAP values (and expected score, last column) of the flat ensemble ``trees`` for a checked ``X``.

    ``tree_depth`` is each tree's depth (the predict walk layout's).
    """
    left, count = trees["left"], trees["count"]
    bad = np.flatnonzero((left >= 0) & (count <= 0))
    if bad.size:
        raise ValueError(f"predict_contributions weighs each split's branches by their training row counts (the "
                         f"trees' 'count'), but {bad.size} split(s) have count 0, e.g. node {bad[0]}. A model "
                         f"fitted by lambdamart always has them; give an imported model its node counts (cover).")
    expected = expected_values(left, trees["right"], trees["value"], count, trees["tree_starts"])
    args = (trees["feature"], trees["threshold"], trees["missing_left"], left, trees["right"], trees["value"],
            count, trees["tree_starts"], tree_depth, np.int64(tree_depth.max(initial=0)), float(expected.sum()))
    if X.shape[0] * max(int(np.count_nonzero(left < 0)), 1) <= _SERIAL_CONTRIBUTIONS_WORK:
        return contributions_serial(X, *args)
    return _rows_on_threads(explain_rows, X, args, np.empty((X.shape[0], X.shape[1] + 1)), n_jobs)


def _initial_model(init_model, state):
    """The fitted ranker of ``fit(init_model=...)`` (loaded from its file), checked against a continued ``state``."""
    if init_model is None:
        return None
    if isinstance(init_model, (str, os.PathLike)):
        init_model = _model_format.read_model(init_model, LambdaMARTRanker)
    elif not isinstance(init_model, LambdaMARTRanker):
        raise TypeError(f"init_model must be a fitted LambdaMARTRanker or the path of a model file written by "
                        f"save_model, got {type(init_model).__name__}.")
    check_is_fitted(init_model, "_trees")
    if state is not None and (state.init_trees is None or any(
            not np.array_equal(state.init_trees[name], init_model._trees[name], equal_nan=True)
            for name in state.init_trees)):
        raise ValueError("warm_start continues a fit that did not start from this init_model; pass the init_model "
                         "that fit started from (or none), or set warm_start=False to fit afresh.")
    return init_model


def _check_same_features(model, estimator, what):
    """Raise if ``model`` was fitted on other features than the data ``estimator`` just checked."""
    if model.n_features_in_ != estimator.n_features_in_:
        raise ValueError(f"{what} was fitted on {model.n_features_in_} features, but X has "
                         f"{estimator.n_features_in_}.")
    theirs, mine = getattr(model, "feature_names_in_", None), getattr(estimator, "feature_names_in_", None)
    if theirs is not None and mine is not None and not np.array_equal(theirs, mine):
        raise ValueError(f"{what} was fitted on features named {_shown(theirs)}, which differ from X's "
                         f"{_shown(mine)}; give X the same columns in the same order.")


def _shown(names, n=5):
    """The first ``n`` feature names for a message, with "..." when there are more."""
    names = [str(name) for name in names]
    return str(names[:n])[:-1] + (", ...]" if len(names) > n else "]")


def _ndcg_per_query(gains, offsets, scores, k):
    """NDCG@k of every query laid out by ``offsets``; a query without a relevant document counts 1 (as LightGBM)."""
    values = per_query(NDCG, gains, gains, scores, offsets, k, True)
    return np.where(np.isnan(values), 1.0, values)


class _Rounds:
    """A fit's learning curves, early stopping and Ctrl-C, shared by the local and the distributed boosting loops.

    ``recording`` says whether the loop must compute the round's NDCG (with a validation set, or ``verbose``).
    Used as a context manager around the loop, it turns a first Ctrl-C (SIGINT, in the main thread, when Python's
    own handler is in place, as in a terminal or a notebook) into the end of training after the round under way:
    the rounds done are kept, with a warning. A second Ctrl-C raises ``KeyboardInterrupt`` at once.
    """

    def __init__(self, estimator, has_valid, record=None, checkpoints=None, snapshot=None):
        self.estimator, self.has_valid = estimator, has_valid
        # ``snapshot(record)`` is the fit's TrainingState after the rounds so far, which ``checkpoints`` writes.
        self.checkpoints, self.snapshot = checkpoints, snapshot
        self.stopped = False
        self.stopping = has_valid and estimator.early_stopping is not False
        self.recording = has_valid or estimator.verbose > 0
        self.train_score, self.valid_score = [], []
        self.best_score, self.best_iter = -np.inf, 0
        if record is not None:  # an earlier fit's rounds, continued (warm_start)
            self.train_score, self.valid_score = list(record["train_score"]), list(record["valid_score"])
            self.best_score, self.best_iter = record["best_score"], record["best_iter"]
            self.stopped = record["stopped"]
        self.start_time = time.perf_counter()
        self.interrupted = False
        self._previous_handler = None

    def __enter__(self):
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous_handler = signal.signal(signal.SIGINT, self._interrupt)
        return self

    def __exit__(self, *exc_info):
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
            self._previous_handler = None

    def _interrupt(self, signum, frame):
        if self.interrupted:  # the second Ctrl-C: the user wants out now
            raise KeyboardInterrupt
        self.interrupted = True

    def end_round(self, it, train_score, valid_score):
        """Record round ``it``'s NDCG (None when not computed); True when training should stop."""
        est = self.estimator
        if train_score is not None:
            # NaN for the rounds of a continued fit that did not record (verbose=0, no validation set)
            self.train_score.extend([np.nan] * (it - len(self.train_score)))
            self.train_score.append(train_score)
        if valid_score is not None:
            self.valid_score.append(valid_score)
        if self.valid_score and self.valid_score[-1] > self.best_score + est.tol:
            self.best_score, self.best_iter = self.valid_score[-1], it
        early_stop = self.stopping and it - self.best_iter >= est.n_iter_no_change
        self.stopped = self.stopped or early_stop
        stop = early_stop or self.interrupted
        # The checkpoint is written before the round's progress line, so a round printed is a round saved.
        if self.checkpoints is not None and (stop or it + 1 == est.n_estimators or self.checkpoints.due(it + 1)):
            self.checkpoints.write(self.snapshot(self.record()))
        if est.verbose and ((it + 1) % est.verbose == 0 or it + 1 == est.n_estimators):
            est._print_progress(it, self.train_score, self.valid_score, self.start_time)
        if early_stop:
            if est.verbose:
                print(f"early stopping: best round {self.best_iter + 1}, NDCG@{est.eval_at} {self.best_score:.5f}")
        elif stop:
            warnings.warn(f"fit interrupted (Ctrl-C) after round {it + 1} of {est.n_estimators}: the model keeps the "
                          f"rounds done. Press Ctrl-C twice to abandon a fit instead.", UserWarning, stacklevel=2)
        return stop

    def record(self):
        """The learning curves and early-stopping state, for a fit that continues these rounds."""
        return dict(train_score=list(self.train_score), valid_score=list(self.valid_score),
                    best_score=self.best_score, best_iter=self.best_iter, stopped=self.stopped)

    def finish(self, trees):
        """Set the estimator's round attributes; return the trees it keeps (up to the best round when stopping)."""
        est = self.estimator
        est.n_iter_ = len(trees)
        # NaN for the last rounds when a continuation did not record them (verbose=0, no validation set)
        missing = len(trees) - len(self.train_score) if self.train_score else 0
        est.train_score_ = np.asarray(self.train_score + [np.nan] * missing)
        est.validation_score_ = np.asarray(self.valid_score)
        est.best_iteration_ = self.best_iter + 1 if self.has_valid else None
        if self.stopping:
            trees = trees[:self.best_iter + 1]
        est.n_estimators_ = len(trees)
        return trees


class _Stopwatch:
    """Adds the time since the last :meth:`start` or :meth:`lap` to ``profile[stage]`` at each lap.

    The rounds' stages are timed by laps rather than by :func:`_timed`'s context managers: Python runs with cold
    caches between two trees, where each context manager cost a few µs, and small data have a round per ~2 ms.
    """

    def __init__(self, profile):
        self.profile = profile
        self.last = 0.0

    def start(self):
        self.last = time.perf_counter()

    def lap(self, stage):
        now = time.perf_counter()
        self.profile[stage] += now - self.last
        self.last = now


@contextmanager
def _timed(profile, stage):
    """Add the wall time of the block to ``profile[stage]`` (numba kernels return when their work is done)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        profile[stage] += time.perf_counter() - start


def _select_queries(rows, offsets, keep):
    """Rows and offsets of the queries where ``keep`` is True."""
    sizes = np.diff(offsets)[keep]
    new_offsets = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    return rows[_query_rows(offsets, np.flatnonzero(keep))], new_offsets


def _no_query_has_an_order(values, offsets):
    """Whether every query of ``values`` (laid out by ``offsets``) has one value only: no order to learn or score."""
    starts = offsets[:-1][np.diff(offsets) > 0]
    return np.array_equal(np.maximum.reduceat(values, starts), np.minimum.reduceat(values, starts))


def _check_leaf_values(values, it, learning_rate):
    """Refuse a round whose tree has a NaN or infinite value.

    The model could not be saved (model files refuse them) and every later round would learn from NaN gradients.
    """
    if not np.all(np.isfinite(values)):
        raise ValueError(f"Round {it + 1} grew a leaf whose value is not finite: the learning rate times a Newton "
                         f"step (learning_rate={learning_rate!r}) overflowed float64. Use a smaller learning_rate, or "
                         "l2_regularization > 0.")


def _query_rows(offsets, queries):
    """Positions of the rows of ``queries`` (sorted), concatenated."""
    sizes = offsets[queries + 1] - offsets[queries]
    starts = np.repeat(offsets[queries] - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes)
    return (starts + np.arange(sizes.sum())).astype(np.int64)
