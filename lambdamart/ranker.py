"""``LambdaMARTRanker``: scikit-learn plumbing around the boosting loop.

The estimator validates input, lays the rows out query by query, bins the features once and then, per round,
asks the objective for (λ, w), grows one tree and updates the scores. All numeric work happens in the kernels of
``objective``, ``binning``, ``grower`` and ``predict``; this module only orchestrates them.
"""

import threading
import time
import warnings
from contextlib import contextmanager
from numbers import Integral, Real

import numba
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import __version__
from ._gains import check_labels, label_gains
from ._values import first_non_number
from ._queries import group_from_sizes, group_queries
from .binning import MAX_BINS, bin_features, find_thresholds
from .ensemble import concatenate_trees, make_tree
from .grower import add_leaf_values, grow_tree, make_workspace
from .histogram import make_layout
from ._metric_kernels import NDCG, per_query
from .metrics import ndcg
from . import model_io
from .model_io import InconsistentVersionWarning
from .objective import (discount_table, inverse_ideal_dcg, lambdarank_gradients, listmle_gradients,
                        listnet_gradients, pointwise_gradients, ranknet_gradients, update_position_bias)
from .predict import add_tree_binned, predict_parallel, predict_serial

# Rows sampled to place bin thresholds, as scikit-learn's HistGradientBoosting does.
_BINNING_SUBSAMPLE = 200_000
# Below this many row-tree visits a predict runs on the calling thread: starting threads costs more.
_SERIAL_PREDICT_WORK = 200_000
# Below this many feature values a fit runs on one thread: its many short parallel regions (one per tree node)
# would cost more to start than they save, and stall badly when the machine is oversubscribed.
_SERIAL_FIT_CELLS = 2_000_000

# The workqueue threading layer (numba's fallback when neither TBB nor OpenMP is available) aborts the process
# when two threads launch parallel regions at once, so launches are serialised until a thread-safe layer is known.
_LAUNCH_LOCK = threading.RLock()

_NO_QID_WARNING = (
    "score() received no qid, so all rows are scored as one query. To score per query, pass qid; inside "
    "GridSearchCV or cross_validate, enable routing with sklearn.set_config(enable_metadata_routing=True) and "
    "pass qid to fit."
)


class LambdaMARTRanker(BaseEstimator):
    """Gradient-boosted LambdaMART ranker.

    Each boosting round computes, per query, LambdaRank gradients λ and second-order weights w from the change in
    NDCG that swapping two documents would cause, fits a histogram regression tree to them (leaf-wise growth,
    Newton leaf values ``-Σλ / (Σw + l2_regularization)``), and adds it, scaled by ``learning_rate``, to the
    scores. Documents of a query are ranked by ``predict`` score, highest first.

    Parameters
    ----------
    objective : {"lambdarank", "lambdarank_map", "ranknet", "listnet", "listmle", "pointwise"}, \
            default="lambdarank"
        Training objective, all boosted with the same trees and Newton steps:

        - ``"lambdarank"``: LambdaMART, pairs weighted by |ΔNDCG| (as LightGBM's ``lambdarank``);
        - ``"lambdarank_map"``: pairs of a relevant and a non-relevant document weighted by |ΔAP|;
        - ``"ranknet"``: pairwise logistic loss over all pairs with different labels (or sampled pairs, see
          ``pairs_per_document``);
        - ``"listnet"``: cross entropy between softmax of the label gains and softmax of the scores;
        - ``"listmle"``: Plackett-Luce likelihood of the label order (ties in labels broken at random each round);
        - ``"pointwise"``: squared error on the labels, a baseline.
    n_estimators : int, default=100
        Maximum number of boosting rounds (trees).
    learning_rate : float, default=0.1
        Shrinkage applied to every leaf value.
    max_leaf_nodes : int, default=31
        Maximum number of leaves per tree (leaf-wise growth).
    max_depth : int or None, default=None
        Maximum depth of a tree; None for no limit.
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
        IDCG is computed at that depth.
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
        estimated as the (1 / (1 + p))-th power of its share of the pair losses. 0 is the paper's unregularised
        estimate; larger p keeps the biases nearer 1, trading correction for stability at rarely clicked
        positions.
    pair_normalization : bool, default=True
        Divide each pair's |ΔNDCG| by ``0.01 + |Δscore|`` (LightGBM's ``lambdarank_norm``).
    query_normalization : bool, default=True
        Scale each query's λ and w by ``log2(1 + Σ|λ|) / Σ|λ|`` (LightGBM's ``lambdarank_norm``).
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
        Seeds binning subsamples, ``subsample``, ``max_features`` and the validation split.
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
        Training NDCG@``eval_at`` after each round (recorded when there is a validation set or ``verbose``).
    validation_score_ : ndarray
        Validation NDCG@``eval_at`` after each round (empty without a validation set).
    position_bias_ : ndarray of shape (2, n_positions)
        With ``fit(..., position=...)``: the learned bias of each displayed position (column p - 1 for rank p),
        for clicked (row 0) and unclicked (row 1) documents, relative to the top position.
    feature_importances_ : ndarray of shape (n_features_in_,)
        Per-feature total split gain or split count (see ``importance_type``), normalised to sum to 1.

    Notes
    -----
    A fitted ranker pickles (with ``pickle`` or ``joblib``) and predicts bit-identically after loading; a pickle
    written by another lambdamart version warns with :class:`lambdamart.InconsistentVersionWarning`. For a file
    that loads without pickle (and so cannot run code), use :meth:`save_model` and :func:`lambdamart.load_model`.
    """

    __metadata_request__fit = {"qid": True}
    __metadata_request__score = {"qid": True}

    _parameter_constraints = {
        "objective": [StrOptions({"lambdarank", "lambdarank_map", "ranknet", "listnet", "listmle", "pointwise"})],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "max_leaf_nodes": [Interval(Integral, 2, None, closed="left")],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
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
        "verbose": [Interval(Integral, 0, None, closed="left")],
        "importance_type": [StrOptions({"gain", "split"})],
    }

    def __init__(self, objective="lambdarank", *, n_estimators=100, learning_rate=0.1, max_leaf_nodes=31,
                 max_depth=None, min_samples_leaf=20, min_sum_hessian=1e-3, l2_regularization=0.0, max_bins=255,
                 truncation_level=30, sigma=1.0, gain="exponential", relevance_threshold=0.0,
                 pairs_per_document=None, position_bias_norm=0.5, pair_normalization=True,
                 query_normalization=True, subsample=1.0, max_features=1.0, early_stopping="auto",
                 validation_fraction=0.1, n_iter_no_change=10, tol=1e-7, eval_at=10, n_jobs=None,
                 random_state=None, verbose=0, importance_type="gain"):
        self.objective = objective
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
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
        self.subsample = subsample
        self.max_features = max_features
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.eval_at = eval_at
        self.n_jobs = n_jobs
        self.random_state = random_state
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
        state = super().__getstate__()
        state["_lambdamart_version"] = __version__
        return state

    def __setstate__(self, state):
        state = dict(state)
        version = state.pop("_lambdamart_version", "unknown")
        if version != __version__:
            warnings.warn(InconsistentVersionWarning(type(self).__name__, version, __version__), stacklevel=2)
        super().__setstate__(state)

    # ------------------------------------------------------------------ fit

    def fit(self, X, y, qid=None, *, group=None, sample_weight=None, eval_set=None, position=None):
        """Fit the ranker.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Features; NaN marks a missing value. Sparse input is densified.
        y : array-like of shape (n_samples,)
            Relevance labels (non-negative; integers for exponential gain).
        qid : array-like of shape (n_samples,), default=None
            Query id of every row, in any order. None (and no ``group``) treats all rows as one query.
        group : array-like of int, default=None
            LightGBM-style query sizes of consecutive rows, instead of ``qid``.
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights; they multiply the row's λ and w.
        eval_set : list of (X, y) or (X, y, qid) tuples, default=None
            Validation data scored every round; the first one drives early stopping.
        position : array-like of int of shape (n_samples,), default=None
            Rank at which each row was displayed when its label (a click) was logged, 1 for the top. Turns on
            Unbiased LambdaMART (``"lambdarank"`` and ``"lambdarank_map"``): position biases for clicked and
            unclicked documents are learned alongside the trees (``position_bias_``) and divide each pair's λ.

        Returns
        -------
        self
        """
        self._validate_params()
        n_threads = _n_threads(self.n_jobs)
        X, y, groups, sample_weight = self._check_fit_data(X, y, qid, group, sample_weight)
        position = self._check_position(position, X.shape[0])
        rng = check_random_state(self.random_state)
        train, valid = self._split_train_valid(X, y, groups, sample_weight, eval_set, rng)
        train["position"] = position[train["rows"]] if position is not None else np.zeros(0, dtype=np.int64)

        with _parallel_region(1 if X.size < _SERIAL_FIT_CELLS else n_threads):
            thresholds, threshold_offsets = self._bin_thresholds(X, train["rows"], rng)
            n_bins = np.diff(threshold_offsets) + 1
            codes = bin_features(X, train["rows"], thresholds, threshold_offsets)
            trees = self._boost(codes, n_bins, thresholds, threshold_offsets, train, valid, rng)
        self._trees = concatenate_trees(trees)
        return self

    def _check_fit_data(self, X, y, qid, group, sample_weight):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None: pass the "
                             f"relevance label of every row.")
        X = _check_X(self, X, reset=True)
        y = _check_y(y, X.shape[0], "y")
        if group is not None and qid is not None:
            raise ValueError("pass either qid (one id per row) or group (query sizes), not both.")
        groups = group_from_sizes(group, X.shape[0]) if group is not None else group_queries(qid, X.shape[0])
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        return X, y, groups, sample_weight

    def _check_position(self, position, n_samples):
        if position is None:
            return None
        if self.objective not in ("lambdarank", "lambdarank_map"):
            raise ValueError(f"position (Unbiased LambdaMART) works with objective 'lambdarank' or "
                             f"'lambdarank_map', not {self.objective!r}.")
        position = np.asarray(position)
        if position.shape != (n_samples,):
            raise ValueError(f"position must hold one displayed rank per row: {n_samples} rows, got shape "
                             f"{position.shape}.")
        if position.dtype.kind not in "iuf" or not np.all(np.isfinite(position)) or \
                np.any(position != np.round(position)) or np.any(position < 1):
            raise ValueError("position must hold whole displayed ranks >= 1 (1 is the top of the page).")
        return position.astype(np.int64)

    def _split_train_valid(self, X, y, groups, sample_weight, eval_set, rng):
        """Training and validation rows, each laid out query by query (lists of row indices into X)."""
        rows = groups.take(np.arange(X.shape[0]))
        offsets = groups.offsets
        holdout = self.early_stopping is True and not eval_set
        valid = []
        if holdout:
            n_queries = groups.n_queries
            n_valid = int(np.ceil(self.validation_fraction * n_queries))
            if n_valid >= n_queries:
                raise ValueError(f"early_stopping needs at least 2 queries to hold some out; got {n_queries}.")
            is_valid = np.zeros(n_queries, dtype=bool)
            is_valid[rng.choice(n_queries, n_valid, replace=False)] = True
            (rows, offsets), (v_rows, v_offsets) = _select_queries(rows, offsets, ~is_valid), \
                _select_queries(rows, offsets, is_valid)
            valid.append(_query_set(X[v_rows], y[v_rows], v_offsets, self.gain, "y"))
        for i, item in enumerate(self._check_eval_set(eval_set)):
            valid.append(self._eval_set_item(item, i))
        train = _query_set(None, y[rows], offsets, self.gain, "y")
        train["rows"] = rows
        train["sample_weight"] = sample_weight[rows] if sample_weight is not None else np.zeros(0)
        sizes = np.diff(offsets)
        starts = offsets[:-1][sizes > 0]
        if np.array_equal(np.maximum.reduceat(train["y"], starts), np.minimum.reduceat(train["y"], starts)):
            warnings.warn("every training query has all labels equal (or a single document), so there is no "
                          "order within a query to learn: the model cannot rank documents (ranking objectives "
                          "predict a constant). Check the labels, or the qid that groups rows into queries.",
                          UserWarning, stacklevel=3)
        return train, valid

    def _check_eval_set(self, eval_set):
        """eval_set as a list of (X, y, qid) items, with a clear error for the usual shapes of mistake."""
        if eval_set is None:
            return []
        hint = ("eval_set must be a list of (X, y) or (X, y, qid) tuples, e.g. eval_set=[(X_valid, y_valid, "
                "qid_valid)]")
        if isinstance(eval_set, tuple) and len(eval_set) in (2, 3) and getattr(eval_set[0], "ndim", 1) == 2:
            raise ValueError(f"{hint}; got a single tuple: wrap it in a list.")
        if isinstance(eval_set, (str, bytes)) or not hasattr(eval_set, "__iter__"):
            raise ValueError(f"{hint}; got {type(eval_set).__name__}.")
        return list(eval_set)

    def _eval_set_item(self, item, i):
        where = f"eval_set[{i}]"
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise ValueError(f"{where} must be a tuple (X, y) or (X, y, qid), got {type(item).__name__}"
                             f"{f' of length {len(item)}' if isinstance(item, (tuple, list)) else ''}.")
        X_v, y_v = item[0], item[1]
        qid_v = item[2] if len(item) == 3 else None
        try:
            X_v = _check_X(self, X_v, reset=False)
        except ValueError as e:
            raise ValueError(f"{where} X: {e}") from None
        y_v = _check_y(y_v, X_v.shape[0], f"{where} y")
        try:
            g = group_queries(qid_v, X_v.shape[0])
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        return _query_set(g.take(X_v), g.take(y_v), g.offsets, self.gain, f"{where} y")

    def _bin_thresholds(self, X, train_rows, rng):
        sample = train_rows
        if train_rows.shape[0] > _BINNING_SUBSAMPLE:
            sample = train_rows[np.sort(rng.choice(train_rows.shape[0], _BINNING_SUBSAMPLE, replace=False))]
        return find_thresholds(X, self.max_bins, sample)

    def _boost(self, codes, n_bins, thresholds, threshold_offsets, train, valid, rng):
        n_rows = codes.shape[1]
        offsets = train["offsets"]
        n_queries = offsets.shape[0] - 1
        n_features = codes.shape[0]
        # One histogram block per thread of the fit (see lambdamart.histogram).
        layout = make_layout(codes, n_bins, numba.get_num_threads())
        gradients = self._gradient_step(train, rng)
        valid_codes = [bin_features(v["X"], np.arange(v["X"].shape[0]), thresholds, threshold_offsets)
                       for v in valid]
        valid_scores = [np.zeros(v["y"].shape[0]) for v in valid]
        valid_rows = [np.arange(v["y"].shape[0], dtype=np.int64) for v in valid]
        stopping = bool(valid) and self.early_stopping is not False
        record = bool(valid) or self.verbose > 0

        scores = np.zeros(n_rows)
        grad = np.zeros(n_rows)
        hess = np.zeros(n_rows)
        all_queries = np.arange(n_queries, dtype=np.int64)
        all_features = np.arange(n_features, dtype=np.int64)
        n_tree_features = max(1, int(round(self.max_features * n_features)))
        n_tree_queries = max(1, int(round(self.subsample * n_queries)))
        max_depth = -1 if self.max_depth is None else self.max_depth
        workspace = make_workspace(n_rows, int(layout[0][-1]), self.max_leaf_nodes)

        trees, train_score, valid_score = [], [], []
        best_score, best_iter = -np.inf, 0
        start_time = time.perf_counter()
        for it in range(self.n_estimators):
            if n_tree_queries < n_queries:
                queries = np.sort(rng.choice(n_queries, n_tree_queries, replace=False))
                rows = _query_rows(offsets, queries)
            else:
                queries, rows = all_queries, np.arange(n_rows, dtype=np.int64)
            features = all_features
            if n_tree_features < n_features:
                features = np.sort(rng.choice(n_features, n_tree_features, replace=False)).astype(np.int64)
            gradients(scores, queries, grad, hess)
            tree = grow_tree(codes, n_bins, layout, features, grad, hess, rows, self.max_leaf_nodes, max_depth,
                             self.min_samples_leaf, float(self.min_sum_hessian), float(self.l2_regularization),
                             float(self.learning_rate), workspace)
            feature, split_bin, missing_left, left, right, value, gain, count, node_start, node_stop = tree
            add_leaf_values(scores, rows, feature, value, node_start, node_stop)
            if rows.shape[0] < n_rows:
                rest = np.setdiff1d(np.arange(n_rows, dtype=np.int64), rows, assume_unique=True)
                add_tree_binned(codes, n_bins, feature, split_bin, missing_left, left, right, value, rest, scores)
            for v_codes, v_scores, v_rows in zip(valid_codes, valid_scores, valid_rows):
                add_tree_binned(v_codes, n_bins, feature, split_bin, missing_left, left, right, value, v_rows,
                                v_scores)
            trees.append(make_tree(feature, split_bin, missing_left, left, right, value, gain, count, thresholds,
                                   threshold_offsets))

            if record:
                train_score.append(self._ndcg(train, scores))
                if valid:
                    valid_score.append(self._ndcg(valid[0], valid_scores[0]))
            if self.verbose and ((it + 1) % self.verbose == 0 or it + 1 == self.n_estimators):
                self._print_progress(it, train_score, valid_score, start_time)
            if valid_score and valid_score[-1] > best_score + self.tol:
                best_score, best_iter = valid_score[-1], it
            if stopping and it - best_iter >= self.n_iter_no_change:
                if self.verbose:
                    print(f"early stopping: best round {best_iter + 1}, NDCG@{self.eval_at} {best_score:.5f}")
                break

        self.n_iter_ = len(trees)
        self.train_score_ = np.asarray(train_score)
        self.validation_score_ = np.asarray(valid_score)
        self.best_iteration_ = best_iter + 1 if valid else None
        if stopping:
            trees = trees[:best_iter + 1]
        self.n_estimators_ = len(trees)
        return trees

    def _gradient_step(self, train, rng):
        """``step(scores, queries, grad, hess)``: fill λ and w of the listed queries for ``self.objective``."""
        y, gains, offsets, weight = train["y"], train["gains"], train["offsets"], train["sample_weight"]
        sigma = float(self.sigma)
        objective = self.objective
        if objective in ("lambdarank", "lambdarank_map"):
            discounts = discount_table(int(np.diff(offsets).max(initial=1)))
            if objective == "lambdarank_map":
                # Binary relevance stands in for both the labels and the gains; the normaliser is 1/R.
                y = gains = (y > self.relevance_threshold).astype(np.float64)
                n_relevant = np.add.reduceat(y, offsets[:-1])
                norm = np.divide(1.0, n_relevant, out=np.zeros_like(n_relevant), where=n_relevant > 0)
            else:
                norm = inverse_ideal_dcg(gains, offsets, discounts, self.truncation_level)
            args = (discounts, norm, self.truncation_level, sigma, bool(self.pair_normalization),
                    bool(self.query_normalization), objective == "lambdarank_map")
            position = train["position"]
            if position.shape[0] == 0:
                no_bias = np.ones((2, 0))
                return lambda s, q, g, h: lambdarank_gradients(s, gains, y, offsets, q, *args, position, no_bias,
                                                               weight, g, h, no_bias)
            # Unbiased LambdaMART: biases start at 1 and are re-estimated from every round's pair losses.
            self.position_bias_ = np.ones((2, int(position.max())))
            cost = np.zeros((2, position.shape[0]))

            def unbiased(s, q, g, h):
                cost[:] = 0.0
                lambdarank_gradients(s, gains, y, offsets, q, *args, position, self.position_bias_, weight, g, h,
                                     cost)
                self.position_bias_ = update_position_bias(position, cost, self.position_bias_,
                                                           float(self.position_bias_norm))
            return unbiased
        if objective == "ranknet":
            def ranknet(s, q, g, h):
                k = self.pairs_per_document
                partners = np.zeros((0, 0), dtype=np.int64) if k is None else rng.randint(0, 2**31, (len(s), k))
                ranknet_gradients(s, y, offsets, q, sigma, partners.astype(np.int64), weight, g, h)
            return ranknet
        if objective == "listnet":
            return lambda s, q, g, h: listnet_gradients(s, gains, offsets, q, weight, g, h)
        if objective == "listmle":
            # Ties in labels are ordered at random, afresh every round.
            return lambda s, q, g, h: listmle_gradients(s, y, offsets, q, rng.random_sample(len(s)), weight, g, h)
        return lambda s, q, g, h: pointwise_gradients(s, y, offsets, q, weight, g, h)

    def _ndcg(self, data, scores):
        """NDCG@eval_at of scores laid out like ``data`` (queries without relevant documents count 1)."""
        values = per_query(NDCG, data["gains"], data["gains"], scores, data["offsets"], self.eval_at, True)
        return float(np.mean(np.where(np.isnan(values), 1.0, values)))

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

    def predict(self, X):
        """Scores of the rows of ``X``, in input order; rank a query's documents by descending score.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of float64, shape (n_samples,)
        """
        check_is_fitted(self, "_trees")
        X = _check_X(self, X, reset=False, ensure_min_samples=0)
        t = self._trees
        args = (X, t["feature"], t["threshold"], t["missing_left"], t["left"], t["right"], t["value"],
                t["tree_starts"])
        if X.shape[0] * max(t["tree_starts"].shape[0], 1) <= _SERIAL_PREDICT_WORK:
            return predict_serial(*args)
        with _parallel_region(self.n_jobs):
            return predict_parallel(*args)

    def score(self, X, y, qid=None, sample_weight=None):
        """NDCG@``eval_at`` of the predictions, per query and averaged (what GridSearchCV uses with no scoring).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Relevance labels.
        qid : array-like of shape (n_samples,), default=None
            Query id of every row. Without it all rows are scored as one query, with a warning that says how to
            route qid through scikit-learn's metadata routing.
        sample_weight : array-like of shape (n_samples,), default=None
            Row weights; each query counts in the mean with the mean weight of its rows.

        Returns
        -------
        float
            NDCG@``eval_at`` with the ranker's ``gain`` (exponential by default); queries without a relevant
            document count 1.
        """
        if qid is None:
            warnings.warn(_NO_QID_WARNING, UserWarning, stacklevel=2)
        scores = self.predict(X)
        with _parallel_region(self.n_jobs):  # the metric kernel runs in parallel too
            return ndcg(y, scores, qid, k=self.eval_at, gain=self.gain, sample_weight=sample_weight)

    @property
    def feature_importances_(self):
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

    def save_model(self, path):
        """Write the fitted model to a JSON file that :func:`lambdamart.load_model` reads without pickle.

        The file holds the parameters, feature names and every tree's split features, raw thresholds, children
        and leaf values; the loaded ranker predicts bit-identically. See :mod:`lambdamart.model_io` for the
        format. The file is written to a temporary name and renamed, so readers never see a partial file.

        Parameters
        ----------
        path : str or os.PathLike
            Destination file; overwritten if it exists.

        Returns
        -------
        self
        """
        check_is_fitted(self, "_trees")
        model_io.save_model(self, path)
        return self


def _check_X(estimator, X, reset, **kwargs):
    """Validated float32/float64 features, dense and C-contiguous (one compiled layout per kernel).

    NaN means missing and ±inf is a value, so neither is rejected. Sparse input is densified. Non-numeric columns
    (pandas categorical, string, datetime; numpy object arrays holding text) raise an error naming the column, and a
    DataFrame whose columns differ from fit's gets an error listing both.
    """
    if (not reset and type(X) is np.ndarray and X.ndim == 2 and (X.dtype == np.float32 or X.dtype == np.float64)
            and 0 < X.shape[1] == getattr(estimator, "n_features_in_", None)
            and X.shape[0] >= kwargs.get("ensure_min_samples", 1) and kwargs.keys() <= {"ensure_min_samples"}
            and not hasattr(estimator, "feature_names_in_")):
        # A plain native-endian float array of the fitted width, fitted without feature names, passes every check
        # below unchanged and without a warning; skipping them saves ~40 µs a call (a 100-row query scores in ~120).
        return np.ascontiguousarray(X)
    _check_dataframe_dtypes(X)
    try:
        X_checked = validate_data(estimator, X, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32),
                                  ensure_all_finite=False, reset=reset, **kwargs)
    except ValueError as e:
        if not reset and "feature names" in str(e).lower() and hasattr(estimator, "feature_names_in_"):
            raise ValueError(_feature_names_message(str(e), estimator.feature_names_in_, X)) from None
        located = _locate_non_numeric(X)
        if located is not None:
            raise ValueError(located) from None
        raise
    return np.ascontiguousarray(X_checked.toarray() if sp.issparse(X_checked) else X_checked)


_ENCODE_HINT = ("LambdaMARTRanker needs numeric features: encode the column first (e.g. with "
                "sklearn.preprocessing.OrdinalEncoder or OneHotEncoder, or pandas' .cat.codes), or drop it.")


# What pandas' infer_dtype calls an object column that holds only numbers (and missing values).
_NUMERIC_INFERRED = {"integer", "floating", "mixed-integer-float", "decimal", "boolean", "empty", "integer-na"}


def _check_dataframe_dtypes(X):
    """Reject pandas columns that are not numbers, naming them (instead of numpy's 'could not convert' error)."""
    dtypes = getattr(X, "dtypes", None)
    columns = getattr(X, "columns", None)
    if dtypes is None or columns is None or not hasattr(dtypes, "items"):
        return
    for column, dtype in dtypes.items():
        kind = getattr(dtype, "kind", "O")
        name = getattr(dtype, "name", str(dtype))
        if name == "category":
            raise ValueError(f"X column {column!r} is categorical (pandas 'category' dtype), which LambdaMARTRanker "
                             f"does not split on. {_ENCODE_HINT} If its categories are numbers that are meaningful "
                             f"as values, use X[{column!r}].astype(float).")
        if kind in "mM":
            raise ValueError(f"X column {column!r} holds dates or durations (dtype {name}). {_ENCODE_HINT} For a "
                             f"date, a number such as days since a reference date works.")
        if kind in "biuf":
            continue
        # Object and string columns: fine only if every value is a number (or missing).
        from pandas.api.types import infer_dtype  # X is a DataFrame here, so pandas is installed

        # infer_dtype scans the column in C; only a bad column pays for the Python search of its first bad value.
        if infer_dtype(X[column], skipna=True) in _NUMERIC_INFERRED:
            continue
        values = np.asarray(X[column], dtype=object)
        present = np.flatnonzero(np.asarray(X[column].notna()))
        row = next((i for i in present if isinstance(values[i], (str, bytes))), None)
        if row is None:
            row = present[first_non_number(values[present])[0]]
        value = values[row]
        if isinstance(value, str):
            raise ValueError(f"X column {column!r} holds text (dtype {name}; e.g. {value!r} at row {row}). "
                             f"{_ENCODE_HINT} If the text is numbers, convert it with pd.to_numeric first.")
        raise ValueError(f"X column {column!r} holds non-numeric values (dtype {name}; e.g. {value!r} at "
                         f"row {row}). {_ENCODE_HINT}")


def _locate_non_numeric(X):
    """A message naming the first column and row of a 2-D array-like X whose value is not a number, or None."""
    if sp.issparse(X) or hasattr(X, "dtypes") or getattr(getattr(X, "dtype", None), "kind", "O") in "biufc":
        return None  # numeric arrays and sparse matrices; DataFrames were checked column by column
    try:
        X = np.asarray(X, dtype=object)
    except Exception:  # ragged or otherwise not an array: scikit-learn's own message says why
        return None
    if X.ndim != 2:
        return None
    for j in range(X.shape[1]):
        try:
            X[:, j].astype(np.float64)
        except (TypeError, ValueError):
            i, value = first_non_number(X[:, j])
            return f"X column {j} holds a non-numeric value ({value!r} at row {i}). {_ENCODE_HINT}"
    return None


def _feature_names_message(message, expected, X):
    """scikit-learn's feature-name mismatch message, with the two column lists and the fix."""
    got = getattr(X, "columns", None)
    got = "no column names (a plain array)" if got is None else [str(c) for c in got]
    return (f"{message.rstrip()}\nColumns at fit: {[str(c) for c in expected]}\nColumns given: {got}\nSelect "
            f"the fit columns in the fit order, e.g. X[ranker.feature_names_in_].")


def _check_y(y, n_samples, name):
    """Relevance labels, one per row, as float64 (object arrays such as pandas nullable integers converted)."""
    y_array = np.asarray(y)
    if y_array.ndim != 1 or y_array.shape[0] != n_samples:
        if y_array.ndim == 2 and y_array.shape == (n_samples, 1):
            raise ValueError(f"{name} must be one-dimensional (one label per row), got shape {y_array.shape}; pass "
                             f"y.ravel() or a single column.")
        raise ValueError(f"{name} must be one label per row: X has {n_samples} rows, {name} has shape "
                         f"{y_array.shape}.")
    return check_labels(y_array, name)


def _query_set(X, y, offsets, gain, name):
    """A set of queries laid out contiguously, with the label gains (which also checks them)."""
    return dict(X=X, y=y, offsets=offsets, gains=label_gains(y, gain, name))


def _select_queries(rows, offsets, keep):
    """Rows and offsets of the queries where ``keep`` is True."""
    sizes = np.diff(offsets)[keep]
    new_offsets = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    return rows[_query_rows(offsets, np.flatnonzero(keep))], new_offsets


def _query_rows(offsets, queries):
    """Positions of the rows of ``queries`` (sorted), concatenated."""
    sizes = offsets[queries + 1] - offsets[queries]
    starts = np.repeat(offsets[queries] - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes)
    return (starts + np.arange(sizes.sum())).astype(np.int64)


def _thread_safe_layer():
    """Whether numba's threading layer is known to allow concurrent parallel launches from several threads."""
    try:
        return numba.threading_layer() in ("tbb", "omp")
    except ValueError:  # no parallel region has run yet, so no layer has been chosen
        return False


@contextmanager
def _parallel_region(n_jobs):
    """Run numba parallel kernels with ``n_jobs`` threads, serialised on layers that abort on concurrent launches."""
    previous = numba.get_num_threads()
    numba.set_num_threads(_n_threads(n_jobs))
    try:
        if _thread_safe_layer():
            yield
        else:
            with _LAUNCH_LOCK:
                yield
    finally:
        numba.set_num_threads(previous)


def _n_threads(n_jobs):
    """Thread count for ``n_jobs``, with joblib's convention: None or -1 all cores, -2 all but one, ..."""
    available = numba.config.NUMBA_NUM_THREADS
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None or -1 for all cores, or a positive thread count.")
    if n_jobs is None:
        return available
    if n_jobs < 0:
        return max(1, available + 1 + n_jobs)
    return min(n_jobs, available)
