"""LambdaMART on a Dask cluster: data-parallel training that grows the same trees as a single-machine fit.

:class:`DaskLambdaMARTRanker` takes ``dask.array`` or ``dask.dataframe`` inputs whose rows may come in any order,
with a query's rows in any partitions. The fit follows LightGBM's "data parallel" design on Dask's own primitives:

1. Rows are regrouped by query on the cluster (a task-based shuffle: each input chunk is cut by destination, each
   destination gathers its pieces), so that every worker holds whole queries, in the order a local fit lays them
   out (queries by sorted id, rows of a query in input order).
2. Each worker's rows live in an actor (``distributed``'s worker-resident objects). Bin thresholds are computed
   once on the client from a sample of rows, the same sample a local fit would draw, and sent to every actor.
3. Every round each actor computes λ and w of its own queries (they are per query, so no communication); the
   client grows the tree with :func:`lambdamart._engine.stepwise.grow_tree_stepwise`, summing each node's
   histogram over the actors, choosing the split once and having every actor partition its rows by it; leaf
   values, score updates and validation NDCG are reduced the same way.

Given the same rows, the model has the same split features and thresholds as ``LambdaMARTRanker.fit``; leaf values
agree up to the order of floating-point sums. ``to_local()`` hands back a plain fitted ``LambdaMARTRanker``.
"""

import operator
import time

import numpy as np

try:
    import dask.array as da
    import distributed
except ImportError as error:  # an optional extra
    raise ImportError("lambdamart.dask needs dask and distributed: pip install 'lambdamart[dask]'") from error

from sklearn.utils import check_random_state

from ._compat import validate_params
from ._dask_io import read_letor
from ._engine.binning import bin_features, find_thresholds
from ._engine.grower import GrowthParams, add_leaf_values
from ._engine.histogram import make_layout
from ._engine.predict import add_tree_binned
from ._engine.stepwise import RowShard, RowSource, grow_tree_stepwise
from ._engine.tree import concatenate_trees, make_tree
from ._gains import label_gains
from ._objectives import OBJECTIVES, TrainingQueries, make_objective
from ._objectives.lambdarank import update_position_bias
from ._parallel import parallel_region
from ._queries import group_queries
from ._validation import check_position, check_y
from .exceptions import WorkerLostError
from .ranker import _BINNING_SUBSAMPLE, LambdaMARTRanker, _ndcg_per_query, _query_rows, _Rounds

__all__ = ["DaskLambdaMARTRanker", "read_letor"]


# ------------------------------------------------------------------------------------------------- on the workers


def _route_chunk(X, y, qid, sample_weight, position, query_ids, query_shard, first_row, n_shards):
    """Cut one input chunk into the rows of each shard: ``[dict per shard]`` with each row's query and input index."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got a chunk of shape {X.shape}.")
    qid = np.asarray(qid).reshape(-1)
    y = check_y(y, X.shape[0], "y")
    position = check_position(position, X.shape[0])
    query = np.searchsorted(query_ids, qid)
    shard = query_shard[query]
    row = first_row + np.arange(X.shape[0], dtype=np.int64)
    pieces = []
    for s in range(n_shards):
        keep = shard == s
        pieces.append(dict(X=X[keep], y=y[keep], query=query[keep], row=row[keep],
                           sample_weight=None if sample_weight is None else np.asarray(sample_weight)[keep],
                           position=None if position is None else position[keep]))
    return pieces


def _gather_shard(pieces):
    """One shard's rows from its pieces of every chunk, laid out as a local fit would: by query, then input order."""
    parts = {key: [p[key] for p in pieces if p[key] is not None] for key in pieces[0]}
    query = np.concatenate(parts["query"])
    row = np.concatenate(parts["row"])
    order = np.lexsort((row, query))
    data = {key: np.concatenate(values)[order] if values else None for key, values in parts.items()}
    return data


class _Shard:
    """The rows of whole queries on one worker, and everything a round needs from them (a Dask actor).

    Its methods are the steps of a fit the client asks for; the client alone decides what runs when.
    """

    def __init__(self, data, valid_data, params):
        self.params = params
        # numba's kernels get the worker's threads, not every core: workers share the machine.
        self.threads = distributed.get_worker().state.nthreads
        self.X, self.y, self.query = data["X"], data["y"], data["query"]
        self.sample_weight, self.position = data["sample_weight"], data["position"]
        self.valid = valid_data  # the eval sets' rows on this worker: dicts with X, y and query

    def hold_out(self, held_out):
        """Move the queries flagged in ``held_out`` (over all queries) to a validation set; return train rows."""
        if held_out is not None:
            keep = ~held_out[self.query]
            self.valid = [dict(X=self.X[~keep], y=self.y[~keep], query=self.query[~keep])] + self.valid
            self.X, self.y, self.query = self.X[keep], self.y[keep], self.query[keep]
            if self.sample_weight is not None:
                self.sample_weight = self.sample_weight[keep]
            if self.position is not None:
                self.position = self.position[keep]
        return self.X.shape[0]

    def rows_at(self, positions):
        """Feature rows at the given positions of this shard's training rows (for the bin thresholds)."""
        return self.X[positions]

    def setup(self, thresholds, threshold_offsets, first_row, n_train_rows, n_positions):
        """Bin the rows, build the objective; ``first_row`` is this shard's first row in the global layout.

        ``n_positions`` is the largest displayed position over all shards (Unbiased LambdaMART; 0 without).
        """
        with parallel_region(self.threads):
            return self._setup(thresholds, threshold_offsets, first_row, n_train_rows, n_positions)

    def _setup(self, thresholds, threshold_offsets, first_row, n_train_rows, n_positions):
        p = self.params
        self.n_bins = np.diff(threshold_offsets) + 1
        all_rows = np.arange(self.X.shape[0], dtype=np.int64)
        self.codes = bin_features(self.X, all_rows, thresholds, threshold_offsets)
        self.layout = make_layout(self.codes, self.n_bins, self.threads)
        groups = group_queries(self.query, self.query.shape[0])  # rows are already grouped: no permutation
        self.query_ids, self.offsets = groups.ids, groups.offsets
        gains = label_gains(self.y, p["gain"], "y")
        queries = TrainingQueries(labels=self.y, gains=gains, offsets=self.offsets,
                                  sample_weight=np.zeros(0) if self.sample_weight is None else self.sample_weight,
                                  position=np.zeros(0, dtype=np.int64) if self.position is None else self.position)
        self.draws = _GlobalDraws(first_row, n_train_rows)
        self.objective = make_objective(p["objective"], queries, p, self.draws)
        if n_positions:  # the client sums every shard's position losses and sends the biases back
            self.objective.position_bias = np.ones((2, n_positions))
            self.objective.update_biases = False
        self.gains = gains
        self.scores = np.zeros(self.X.shape[0])
        self.grad = np.zeros(self.X.shape[0])
        self.hess = np.zeros(self.X.shape[0])
        self.valid_sets = []
        for v in self.valid:
            n_valid = v["X"].shape[0]
            self.valid_sets.append(dict(
                codes=bin_features(v["X"], np.arange(n_valid), thresholds, threshold_offsets),
                gains=label_gains(v["y"], p["gain"], "eval_set y"),
                offsets=group_queries(v["query"], n_valid).offsets, scores=np.zeros(n_valid)))
        del self.X  # the codes are all a round needs
        return self.layout.bin_offsets

    def start_tree(self, tree_queries, rng_state, position_bias):
        """λ and w of this shard's queries among ``tree_queries`` (all when None); the root's histogram.

        Also returns the random state after the objective's draws and, for Unbiased LambdaMART (with the current
        ``position_bias``), this shard's position loss totals.
        """
        self.draws.set_state(rng_state)
        if position_bias is not None:
            self.objective.position_bias = position_bias
        if tree_queries is None:
            local = np.arange(self.query_ids.shape[0], dtype=np.int64)
        else:
            local = np.flatnonzero(np.isin(self.query_ids, tree_queries)).astype(np.int64)
        self.tree_rows = _query_rows(self.offsets, local)
        with parallel_region(self.threads):
            self.objective.gradients(self.scores, local, self.grad, self.hess)
            self.rows = RowShard(self.codes, self.n_bins, self.layout, self.grad, self.hess, self.tree_rows,
                                 local_totals=True)
            sum_grad, sum_hess, count, hist = self.rows.root()
        loss_totals = getattr(self.objective, "loss_totals", None) if position_bias is not None else None
        return sum_grad, sum_hess, count, hist[:, :3].copy(), self.draws.get_state(), loss_totals

    def split(self, node, split, left, right, small_is_left):
        """Partition a node's rows; the smaller child's histogram over this shard's rows."""
        with parallel_region(self.threads):
            return self.rows.split(node, split, left, right, small_is_left, None)[:, :3].copy()

    def finish_tree(self, tree, record):
        """Add the tree to the scores (training rows and eval sets); NDCG sums and query counts when ``record``."""
        starts = np.array(self.rows.node_start, dtype=np.int64)
        stops = np.array(self.rows.node_stop, dtype=np.int64)
        with parallel_region(self.threads):
            add_leaf_values(self.scores, self.rows.rows, tree.feature, tree.value, starts, stops)
            if self.tree_rows.shape[0] < self.scores.shape[0]:
                rest = np.setdiff1d(np.arange(self.scores.shape[0], dtype=np.int64), self.tree_rows,
                                    assume_unique=True)
                add_tree_binned(self.codes, self.n_bins, tree, rest, self.scores)
            for v in self.valid_sets:
                add_tree_binned(v["codes"], self.n_bins, tree, np.arange(v["scores"].shape[0]), v["scores"])
            if not record:
                return None
            sums = [_ndcg_sum(self.gains, self.offsets, self.scores, self.params["eval_at"])]
            if self.valid_sets:
                v = self.valid_sets[0]
                sums.append(_ndcg_sum(v["gains"], v["offsets"], v["scores"], self.params["eval_at"]))
        return sums


def _ndcg_sum(gains, offsets, scores, k):
    """Sum over this shard's queries of NDCG@k and their number: the client adds these up into the mean."""
    values = _ndcg_per_query(gains, offsets, scores, k)
    return float(np.sum(values)), values.shape[0]


class _GlobalDraws:
    """The random numbers an objective draws per row, as a local fit over all rows would draw them.

    Objectives that draw per round (ListMLE's tie-breaks, RankNet's sampled partners) draw one number (or row of
    numbers) per training row from the fit's random state. A shard draws the whole fit's array from the client's
    state and keeps its own rows' slice, so every shard and the client stay in the same state as a local fit.
    """

    def __init__(self, first_row, n_rows):
        self.first_row, self.n_rows = first_row, n_rows
        self.random = np.random.RandomState()

    def set_state(self, state):
        self.random.set_state(state)

    def get_state(self):
        return self.random.get_state()

    def _rows(self, size):
        size = (size,) if np.isscalar(size) else tuple(size)
        return (self.n_rows,) + size[1:], slice(self.first_row, self.first_row + size[0])

    def random_sample(self, size):
        shape, mine = self._rows(size)
        return self.random.random_sample(shape)[mine]

    def randint(self, low, high, size):
        shape, mine = self._rows(size)
        return self.random.randint(low, high, shape)[mine]


# ------------------------------------------------------------------------------------------------- on the client


class _Cluster(RowSource):
    """The actors of a fit, one per worker, as one :class:`RowSource`: histograms summed over the workers.

    Every call goes to all actors at once and waits for all answers; a worker lost on the way ends the fit with a
    :class:`~lambdamart.exceptions.WorkerLostError` naming it and the stage (round) of the fit.
    """

    def __init__(self, client, actors, workers):
        self.client, self.actors, self.workers = client, actors, workers
        self.stage = "set-up"
        self.rng_state = None
        self.tree_queries = None
        self.position_bias = None  # Unbiased LambdaMART's current biases, None without positions
        self.position_bias_norm = 0.0
        self.round_trips = 0  # calls to all actors, each waiting for every answer
        self.histogram_bytes = 0  # node histograms received from the workers

    def call(self, method, *args, each=None):
        """``actor.method(*args)`` on every actor (or ``actor.method(*each[i])`` on actor i); the answers in order."""
        self.round_trips += 1
        futures = [getattr(a, method)(*(args if each is None else each[i])) for i, a in enumerate(self.actors)]
        answers = []
        for future, worker in zip(futures, self.workers):
            try:
                answers.append(future.result())
            except Exception as error:
                if worker not in self.client.scheduler_info()["workers"]:
                    raise WorkerLostError(f"worker {worker} was lost during {self.stage} of the fit ({error!r}); "
                                          f"its rows and their state went with it, so the fit stops here and "
                                          f"returns no model. Fit again once the cluster is whole.") from error
                raise
        return answers

    def root(self):
        parts = self.call("start_tree", self.tree_queries, self.rng_state, self.position_bias)
        self.histogram_bytes += sum(p[3].nbytes for p in parts)
        self.rng_state = parts[0][4]
        if self.position_bias is not None:  # as a local fit, the biases move after every round's gradients
            totals = sum(p[5] for p in parts)
            self.position_bias = update_position_bias(totals, self.position_bias, self.position_bias_norm)
        return (sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts),
                sum(p[3] for p in parts))

    def split(self, node, split, left, right, small_is_left, small_totals):
        hists = self.call("split", node, split, left, right, small_is_left)
        self.histogram_bytes += sum(h.nbytes for h in hists)
        return sum(hists)


class DaskLambdaMARTRanker(LambdaMARTRanker):
    """:class:`~lambdamart.LambdaMARTRanker` trained on a Dask cluster, data-parallel over whole queries.

    Every parameter is the local ranker's (see :class:`~lambdamart.LambdaMARTRanker`), plus ``client``.

    Parameters
    ----------
    objective : str, default="lambdarank"
        As :class:`~lambdamart.LambdaMARTRanker`; the other parameters below are too.
    client : distributed.Client or None, default=None
        The cluster's client; None uses the current default client (``distributed.default_client()``).

    Attributes
    ----------
    fit_profile_ : dict
        Seconds of the last fit spent regrouping rows onto the workers (``"regroup"``, until every worker's actor
        holds its queries), binning (``"binning"``, thresholds and codes), boosting (``"boosting"``) and in all
        (``"total"``); and the traffic of the boosting rounds: ``"round_trips"`` (calls to all workers, each
        waiting for every answer) and ``"histogram_bytes"`` (node histograms the client received).

    Other fitted attributes are :class:`~lambdamart.LambdaMARTRanker`'s.
    """

    def __init__(self, objective="lambdarank", *, client=None, n_estimators=100, learning_rate=0.1,
                 max_leaf_nodes=31, max_depth=None, min_samples_leaf=20, min_sum_hessian=1e-3,
                 l2_regularization=0.0, max_bins=255, truncation_level=30, sigma=1.0, gain="exponential",
                 relevance_threshold=0.0, pairs_per_document=None, position_bias_norm=0.5, pair_normalization=True,
                 query_normalization=True, subsample=1.0, max_features=1.0, early_stopping="auto",
                 validation_fraction=0.1, n_iter_no_change=10, tol=1e-7, eval_at=10, n_jobs=None,
                 random_state=None, verbose=0, importance_type="gain"):
        super().__init__(objective, n_estimators=n_estimators, learning_rate=learning_rate,
                         max_leaf_nodes=max_leaf_nodes, max_depth=max_depth, min_samples_leaf=min_samples_leaf,
                         min_sum_hessian=min_sum_hessian, l2_regularization=l2_regularization, max_bins=max_bins,
                         truncation_level=truncation_level, sigma=sigma, gain=gain,
                         relevance_threshold=relevance_threshold, pairs_per_document=pairs_per_document,
                         position_bias_norm=position_bias_norm, pair_normalization=pair_normalization,
                         query_normalization=query_normalization, subsample=subsample, max_features=max_features,
                         early_stopping=early_stopping, validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, tol=tol, eval_at=eval_at, n_jobs=n_jobs,
                         random_state=random_state, verbose=verbose, importance_type=importance_type)
        self.client = client

    _parameter_constraints = {**LambdaMARTRanker._parameter_constraints, "client": "no_validation"}

    def _local_params(self):
        params = self.get_params(deep=False)
        params.pop("client")
        return params

    def fit(self, X, y, qid=None, *, sample_weight=None, eval_set=None, position=None):
        """Fit on the cluster; the same trees as ``LambdaMARTRanker.fit`` on the same rows.

        Parameters
        ----------
        X : dask.array.Array or dask.dataframe.DataFrame of shape (n_samples, n_features)
            Features (numpy arrays and pandas DataFrames are sent to the cluster first).
        y : dask.array.Array or dask Series of shape (n_samples,)
            Relevance labels, chunked like ``X``'s rows.
        qid : dask.array.Array or dask Series of shape (n_samples,)
            Query id of every row, in any order and in any partitions; required.
        sample_weight : dask.array.Array of shape (n_samples,), default=None
            Row weights, chunked like ``X``'s rows.
        eval_set : list of (X, y, qid) tuples, default=None
            Validation data (dask or numpy), scored every round; the first one drives early stopping.
        position : dask.array.Array of int of shape (n_samples,), default=None
            Displayed rank of every row (Unbiased LambdaMART), chunked like ``X``'s rows; every round the
            workers' position losses are summed and the biases sent back, as a local fit updates them.

        Returns
        -------
        self
        """
        validate_params(self)
        if qid is None:
            raise ValueError("DaskLambdaMARTRanker needs qid: the query id of every row (queries are what the "
                             "workers share out).")
        for name in ("position_bias_", "fit_profile_"):
            self.__dict__.pop(name, None)
        client = self.client if self.client is not None else distributed.default_client()
        started = time.perf_counter()
        X, arrays, names = _as_dask(X, {"y": y, "qid": qid, "sample_weight": sample_weight, "position": position})
        if position is not None and not OBJECTIVES[self.objective].supports_position:
            raise ValueError(f"position (Unbiased LambdaMART) works with objective 'lambdarank' or "
                             f"'lambdarank_map', not {self.objective!r}.")
        self.n_features_in_ = X.shape[1]
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        rng = check_random_state(self.random_state)

        workers = sorted(client.scheduler_info()["workers"])
        query_ids, query_sizes = (np.asarray(a) for a in client.compute(
            da.unique(arrays["qid"], return_counts=True), sync=True))
        n_queries = query_ids.shape[0]
        query_shard = _assign_queries(query_sizes, len(workers))
        train_parts = _regroup(client, X, arrays, query_ids, query_shard, workers)
        valid_parts = [[] for _ in workers]
        for i, item in enumerate(eval_set or []):
            X_v, y_v, qid_v = (tuple(item) + (None,))[:3]
            if qid_v is None:
                raise ValueError(f"eval_set[{i}] needs a qid: give (X, y, qid) tuples.")
            X_v, arrays_v, _ = _as_dask(X_v, {"y": y_v, "qid": qid_v, "sample_weight": None, "position": None},
                                        where=f"eval_set[{i}] ")
            if X_v.shape[1] != self.n_features_in_:
                raise ValueError(f"eval_set[{i}] X has {X_v.shape[1]} features, but X has {self.n_features_in_}.")
            ids_v, sizes_v = (np.asarray(a) for a in client.compute(
                da.unique(arrays_v["qid"], return_counts=True), sync=True))
            for s, part in enumerate(_regroup(client, X_v, arrays_v, ids_v, _assign_queries(sizes_v, len(workers)),
                                              workers)):
                valid_parts[s].append(part)
        params = self._local_params()
        actors = [client.submit(_Shard, data, valid, params, actor=True, workers=[w]).result()
                  for data, valid, w in zip(train_parts, valid_parts, workers)]
        cluster = _Cluster(client, actors, workers)
        regrouped = time.perf_counter()

        held_out = None
        if self.early_stopping is True and not eval_set:
            n_valid = int(np.ceil(self.validation_fraction * n_queries))
            if n_valid >= n_queries:
                raise ValueError(f"early_stopping needs at least 2 queries to hold some out; got {n_queries}.")
            held_out = np.zeros(n_queries, dtype=bool)
            held_out[rng.choice(n_queries, n_valid, replace=False)] = True
        n_rows = np.array(cluster.call("hold_out", held_out), dtype=np.int64)
        first_row = np.concatenate(([0], np.cumsum(n_rows)))
        n_train = int(first_row[-1])
        train_queries = np.flatnonzero(~held_out) if held_out is not None else np.arange(n_queries)

        # The bin thresholds, from the sample of training rows a local fit draws (positions in its layout).
        sample = np.arange(n_train)
        if n_train > _BINNING_SUBSAMPLE:
            sample = np.sort(rng.choice(n_train, _BINNING_SUBSAMPLE, replace=False))
        shard_of = np.searchsorted(first_row, sample, side="right") - 1
        X_sample = np.concatenate(cluster.call("rows_at", each=[(sample[shard_of == s] - first_row[s],)
                                                                for s in range(len(actors))]))
        with parallel_region(self.n_jobs):
            thresholds, threshold_offsets = find_thresholds(X_sample, self.max_bins)
        n_positions = 0
        if position is not None:
            n_positions = int(client.compute(arrays["position"].max(), sync=True))
            cluster.position_bias = np.ones((2, n_positions))
            cluster.position_bias_norm = float(self.position_bias_norm)
        bin_offsets = cluster.call("setup", each=[(thresholds, threshold_offsets, int(first_row[s]), n_train,
                                                   n_positions) for s in range(len(actors))])[0]
        n_bins = np.diff(threshold_offsets) + 1
        binned = time.perf_counter()
        trees = self._boost_on(cluster, n_bins, bin_offsets, train_queries, rng,
                               has_valid=held_out is not None or bool(eval_set))
        self._trees = concatenate_trees([make_tree(t, thresholds, threshold_offsets) for t in trees])
        if cluster.position_bias is not None:
            self.position_bias_ = cluster.position_bias
        self.fit_profile_ = {"regroup": regrouped - started, "binning": binned - regrouped,
                             "boosting": time.perf_counter() - binned, "total": time.perf_counter() - started,
                             "round_trips": cluster.round_trips, "histogram_bytes": cluster.histogram_bytes}
        return self

    def _boost_on(self, cluster, n_bins, bin_offsets, train_queries, rng, has_valid):
        n_features = n_bins.shape[0]
        n_queries = train_queries.shape[0]
        n_tree_features = max(1, int(round(self.max_features * n_features)))
        n_tree_queries = max(1, int(round(self.subsample * n_queries)))
        all_features = np.arange(n_features, dtype=np.int64)
        params = GrowthParams(max_leaf_nodes=self.max_leaf_nodes,
                              max_depth=-1 if self.max_depth is None else self.max_depth,
                              min_samples_leaf=self.min_samples_leaf, min_sum_hessian=float(self.min_sum_hessian),
                              l2_regularization=float(self.l2_regularization),
                              learning_rate=float(self.learning_rate))
        rounds = _Rounds(self, has_valid)
        trees = []
        for it in range(self.n_estimators):
            cluster.stage = f"round {it + 1}"
            cluster.tree_queries = None
            if n_tree_queries < n_queries:
                cluster.tree_queries = train_queries[np.sort(rng.choice(n_queries, n_tree_queries, replace=False))]
            features = all_features
            if n_tree_features < n_features:
                features = np.sort(rng.choice(n_features, n_tree_features, replace=False)).astype(np.int64)
            cluster.rng_state = rng.get_state()
            tree = grow_tree_stepwise(cluster, n_bins, bin_offsets, features, params)
            rng.set_state(cluster.rng_state)  # the draws the objectives made on the workers
            sums = cluster.call("finish_tree", tree, rounds.recording)
            trees.append(tree)
            train_score = valid_score = None
            if rounds.recording:  # mean NDCG over all queries: sums and counts of every worker's queries
                train_score = sum(s[0][0] for s in sums) / sum(s[0][1] for s in sums)
                if has_valid:
                    valid_score = sum(s[1][0] for s in sums) / sum(s[1][1] for s in sums)
            if rounds.end_round(it, train_score, valid_score):
                break
        return rounds.finish(trees)

    def score(self, X, y, qid=None, sample_weight=None):
        """NDCG@``eval_at`` of the predictions, per query and averaged (see :meth:`LambdaMARTRanker.score`).

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array-like of shape (n_samples, n_features)
        y : dask.array.Array or array-like of shape (n_samples,)
        qid : dask.array.Array or array-like of shape (n_samples,), default=None
        sample_weight : dask.array.Array or array-like of shape (n_samples,), default=None

        Returns
        -------
        float
        """
        scores = self.predict(X)
        # The metric needs whole queries; scores, labels and ids are three numbers a row, small beside X.
        scores, y, qid, sample_weight = (a.compute() if hasattr(a, "compute") else a
                                         for a in (scores, y, qid, sample_weight))
        return self.to_local()._score_predictions(scores, y, qid, sample_weight)

    def predict(self, X):
        """Scores of the rows of ``X``: a lazy dask array for dask input, a numpy array otherwise.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array-like of shape (n_samples, n_features)

        Returns
        -------
        dask.array.Array or ndarray of float64, shape (n_samples,)
        """
        local = self.to_local()
        if hasattr(X, "map_partitions"):  # a dask DataFrame: partitions keep their column names
            return X.map_partitions(_predict_frame, local, meta=(None, "f8")).to_dask_array(lengths=True)
        if isinstance(X, da.Array):
            X = X.rechunk({1: -1})
            return X.map_blocks(_predict_block, local, dtype=np.float64, drop_axis=1)
        return local.predict(X)

    def to_local(self):
        """The fitted model as a plain :class:`~lambdamart.LambdaMARTRanker` (pickle, ``save_model``, serving).

        Returns
        -------
        LambdaMARTRanker
        """
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "_trees")
        local = LambdaMARTRanker(**self._local_params())
        for name in ("_trees", "n_features_in_", "feature_names_in_", "n_estimators_", "n_iter_", "best_iteration_",
                     "train_score_", "validation_score_", "fit_profile_", "position_bias_"):
            if hasattr(self, name):
                setattr(local, name, getattr(self, name))
        return local


def _predict_block(block, model):
    return model.predict(block)


def _predict_frame(frame, model):
    import pandas as pd  # a dask DataFrame's partitions are pandas DataFrames

    return pd.Series(model.predict(frame), index=frame.index)


def _assign_queries(sizes, n_shards):
    """The shard of each query (sorted by id): contiguous ranges of about equal row counts."""
    cumulative = np.cumsum(sizes)
    bounds = cumulative[-1] * np.arange(1, n_shards) / n_shards
    return np.searchsorted(bounds, cumulative - sizes / 2.0).astype(np.int64)


def _as_dask(X, arrays, where=""):
    """X as a dask array with one chunk of columns, and the 1-D arrays chunked like its rows (checked)."""
    names = None
    if hasattr(X, "to_dask_array"):  # a dask DataFrame
        names = np.asarray([str(c) for c in X.columns], dtype=object)
        X = X.to_dask_array(lengths=True)
    elif not isinstance(X, da.Array):
        X = da.from_array(np.asarray(X))
    if X.ndim != 2:
        raise ValueError(f"{where}X must be 2-D (rows, features), got {X.ndim} dimensions.")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(f"{where}X has unknown chunk sizes; call X.compute_chunk_sizes() first.")
    X = X.rechunk({1: -1})
    out = {}
    for name, a in arrays.items():
        if a is None:
            out[name] = None
            continue
        if hasattr(a, "to_dask_array"):
            a = a.to_dask_array(lengths=True)
        elif not isinstance(a, da.Array):
            a = np.asarray(a)
            if a.shape[:1] != X.shape[:1]:
                raise ValueError(f"{where}{name} has {a.shape[0] if a.ndim else 0} entries but X has {X.shape[0]} "
                                 f"rows; give one per row.")
            a = da.from_array(a, chunks=X.chunks[0])
        if a.ndim != 1:
            raise ValueError(f"{where}{name} must be one-dimensional, got shape {a.shape}.")
        if a.chunks[0] != X.chunks[0]:
            raise ValueError(f"{where}the row chunks of {name} {a.chunks[0]} do not line up with X's {X.chunks[0]}; "
                             f"rechunk them alike, e.g. {name}.rechunk(X.chunks[0]).")
        out[name] = a
    return X, out, names


def _regroup(client, X, arrays, query_ids, query_shard, workers):
    """Futures of each worker's rows (whole queries, laid out as a local fit would), from the chunks of ``X``."""
    n_shards = len(workers)
    parts = {name: (a.to_delayed().ravel().tolist() if a is not None else None) for name, a in arrays.items()}
    X_parts = X.to_delayed().ravel().tolist()
    starts = np.concatenate(([0], np.cumsum(X.chunks[0])))
    optional = [name for name in ("sample_weight", "position") if parts[name] is not None]
    chunk_futures = client.compute(X_parts + parts["y"] + parts["qid"] + [p for name in optional for p in parts[name]])
    n = len(X_parts)
    # The query table goes to the workers once, not inside every routing task.
    query_ids, query_shard = client.scatter([query_ids, query_shard], broadcast=True)
    routed = []
    for c in range(n):
        extra = {name: chunk_futures[(3 + optional.index(name)) * n + c] if name in optional else None
                 for name in ("sample_weight", "position")}
        routed.append(client.submit(_route_chunk, chunk_futures[c], chunk_futures[n + c], chunk_futures[2 * n + c],
                                    extra["sample_weight"], extra["position"], query_ids, query_shard,
                                    int(starts[c]), n_shards))
    shards = []
    for s, worker in enumerate(workers):
        pieces = [client.submit(operator.getitem, r, s) for r in routed]
        shards.append(client.submit(_gather_shard, pieces, workers=[worker]))
    return shards
