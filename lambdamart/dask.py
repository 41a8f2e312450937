"""LambdaMART on a Dask cluster: data-parallel training that grows the same trees as a single-machine fit.

:class:`DaskLambdaMARTRanker` takes ``dask.array`` or ``dask.dataframe`` inputs whose rows may come in any order,
with a query's rows in any partitions. The fit follows LightGBM's "data parallel" design on Dask's own primitives:

1. Rows are regrouped by query on the cluster (a task-based shuffle: each input chunk is cut by destination, each
   destination gathers its pieces), so that every worker holds whole queries, in the order a local fit lays them
   out (queries by sorted id, rows of a query in input order).
2. Each worker's rows live in an actor (``distributed``'s worker-resident objects). Bin thresholds are computed
   once on the client from a sample of rows, the same sample a local fit would draw, and sent to every actor.
3. Every round the client sends each actor the round's draws (queries, features, random state) in one call, and
   the actors grow the tree among themselves, as LightGBM's data-parallel learner does: each computes λ and w of
   its own queries (they are per query, so no communication); each node's histogram is reduce-scattered (every
   actor owns a block of features and receives the others' histograms of its block only, summing them); each
   actor searches its block and the actors swap their best splits, so every one of them applies the same split to
   its rows. The client does not touch a histogram: per tree it makes one call and gets back the tree, the
   random state and the NDCG sums; leaf values, score updates and validation NDCG are the actors' own.

Given the same rows, the model has the same split features and thresholds as ``LambdaMARTRanker.fit``; leaf values
agree up to the order of floating-point sums. ``to_local()`` hands back a plain fitted ``LambdaMARTRanker``.

A lost worker does not end a fit: the client keeps the trees of the completed rounds, the position biases and the
random state, places the rows on the workers left (Dask recomputes the input chunks the lost one held), and the
new actors rebuild their scores from the trees before the interrupted round runs again with the same draws.
"""

import asyncio
import concurrent.futures
import inspect
import operator
import threading
import time
import uuid
from dataclasses import dataclass

import numpy as np

try:
    import dask
    import dask.array as da
    import distributed
except ImportError as error:  # an optional extra
    raise ImportError("lambdamart.dask needs dask and distributed: pip install 'lambdamart[dask]'") from error

from distributed.protocol import to_serialize
from sklearn.utils import check_random_state

from ._checkpoint import Checkpoints, TrainingState, check_same_data, data_fingerprint, query_digest_sum
from ._compat import feature_names_of
from ._dask_io import read_letor
from ._engine.binning import bin_features, find_thresholds
from ._engine.grower import add_leaf_values, find_node_split
from ._engine.histogram import make_layout
from ._engine.predict import add_tree_binned
from ._engine.stepwise import RowShard, RowSource, grow_symmetric_stepwise, grow_tree_stepwise, level_split
from ._gains import label_gains
from ._objectives import OBJECTIVES, TrainingQueries, make_objective
from ._objectives.lambdarank import update_position_bias
from ._parallel import parallel_region
from ._queries import as_id_array, group_queries
from ._validation import ENCODE_HINT, check_position, check_sample_weights, check_y
from .exceptions import SchedulerLostError, WorkerLostError
from .ranker import (
    _BINNING_SUBSAMPLE,
    LambdaMARTRanker,
    _check_leaf_values,
    _check_same_features,
    _ndcg_per_query,
    _predict_trees,
    _query_rows,
    _Rounds,
    _unchanged_on_failure,
)

__all__ = ["DaskLambdaMARTRanker", "read_letor"]


# ------------------------------------------------------------------------------------------------- on the workers


def _route_chunk(X, y, qid, sample_weight, position, query_ids, query_shard, first_row, n_shards, gain, where):
    """Cut one input chunk into the rows of each shard: ``[dict per shard]`` with each row's query and input index.

    The rows are checked as a local fit checks them (``where`` prefixes the names in the messages), the labels
    against ``gain`` too: an error here ends the fit before any actor starts, not from a shard's set-up.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got a chunk of shape {X.shape}.")
    qid = np.asarray(qid).reshape(-1)
    y = check_y(y, X.shape[0], f"{where}y")
    label_gains(y, gain, f"{where}y")  # raises on labels the gain can't take (beyond a table, fractional, too large)
    position = check_position(position, X.shape[0])
    sample_weight = None if sample_weight is None else check_sample_weights(sample_weight, X, whole=False)
    query = np.searchsorted(query_ids, qid)
    shard = query_shard[query]
    row = first_row + np.arange(X.shape[0], dtype=np.int64)
    pieces = []
    for s in range(n_shards):
        keep = shard == s
        # A chunk that is all one shard's (input already partitioned by query) goes on without a copy.
        keep = slice(None) if keep.all() else keep
        pieces.append(dict(X=X[keep], y=y[keep], query=query[keep], row=row[keep],
                           sample_weight=None if sample_weight is None else sample_weight[keep],
                           position=None if position is None else position[keep]))
    return pieces


def _gather_shard(pieces):
    """One shard's rows from its pieces of every chunk, laid out as a local fit would: by query, then input order."""
    pieces = [p for p in pieces if p["row"].shape[0]] or pieces[:1]
    parts = {key: [p[key] for p in pieces if p[key] is not None] for key in pieces[0]}
    query = np.concatenate(parts["query"])
    row = np.concatenate(parts["row"])
    order = np.lexsort((row, query))
    in_order = bool(np.all(order[1:] > order[:-1]))  # input already by query: no reordering copy

    def join(values):
        if not values:
            return None
        joined = values[0] if len(values) == 1 else np.concatenate(values)
        return joined if in_order else joined[order]

    return {key: join(values) for key, values in parts.items()}


class _Shard:
    """The rows of whole queries on one worker, and everything a round needs from them (a Dask actor).

    The client calls it for the steps of a fit; during a round it grows the tree together with the other actors
    (its peers), each owning a block of features (see the module docstring).
    """

    def __init__(self, data, valid_data, params):
        self.params = params
        # numba's kernels get the worker's threads, not every core: workers share the machine.
        self.threads = distributed.get_worker().state.nthreads
        self.X, self.y, self.query = data["X"], data["y"], data["query"]
        self.sample_weight, self.position = data["sample_weight"], data["position"]
        self.valid = valid_data  # the eval sets' rows on this worker: dicts with X, y and query
        self.mailbox = _Mailbox()

    def connect(self, fit, addresses, index):
        """Join fit ``fit`` as actor ``index`` of the actors on the workers at ``addresses``."""
        self.fit, self.addresses, self.index = fit, addresses, index
        self.worker = distributed.get_worker()
        self.exchanges = 0  # the tag of the next exchange: every actor makes the same exchanges in the same order
        self.histogram_bytes = 0  # histogram blocks sent to the peers
        _MAILBOXES[fit] = self.mailbox
        # Parts travel on the workers' own batched worker-to-worker streams (one-way messages, no reply to wait
        # for: half the cost of an actor call per part, measured).
        self.worker.stream_handlers.setdefault(_PART, _receive_part)

    def close(self):
        """Leave the fit: parts that still come for it are dropped."""
        _MAILBOXES.pop(self.fit, None)

    async def abort(self, reason):
        """End the round under way and leave the fit: a peer failed, so its part of an exchange will never come."""
        self.close()
        self.mailbox.fail(reason)

    def exchange(self, outgoing):
        """Send ``outgoing[j]`` to every peer ``j`` and return what each peer sent here (own part at own index)."""
        tag = self.exchanges
        self.exchanges += 1
        others = [j for j in range(len(self.addresses)) if j != self.index]
        for j in others:  # sent by the worker's event loop while this thread waits for the peers' parts
            message = {"op": _PART, "fit": self.fit, "tag": tag, "sender": self.index,
                       "payload": to_serialize(outgoing[j])}
            self.worker.loop.add_callback(self.worker.send_to_worker, self.addresses[j], message)
        incoming = self.mailbox.take(tag, others)
        incoming[self.index] = outgoing[self.index]
        return [incoming[j] for j in range(len(self.addresses))]

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

    def setup(self, thresholds, threshold_offsets, first_row, n_train_rows, n_positions, growth, init_trees, trees):
        """Bin the rows, build the objective; ``first_row`` is this shard's first row in the global layout.

        ``n_positions`` is the largest displayed position of the training rows of all shards (Unbiased
        LambdaMART, as a local fit; 0 without);
        ``growth`` the trees' :class:`~lambdamart._engine.grower.GrowthParams`. The scores start from
        ``init_trees`` (init_model's flat trees, or None) and the ``trees`` grown so far (a fit that goes on
        after a lost worker, or continues a checkpoint), added in order as the rounds added them.
        """
        with parallel_region(self.threads):
            self._setup(thresholds, threshold_offsets, first_row, n_train_rows, n_positions)
            sets = [(self.codes, self.scores)] + [(v["codes"], v["scores"]) for v in self.valid_sets]
            if init_trees is not None:
                for (_, scores), X in zip(sets, [self.X] + [v["X"] for v in self.valid]):
                    scores[:] = _predict_trees(init_trees, X, self.threads)
            rows = [np.arange(scores.shape[0], dtype=np.int64) for _, scores in sets]
            for tree in trees:
                for (codes, scores), rows_s in zip(sets, rows):
                    add_tree_binned(codes, self.n_bins, tree, rows_s, scores)
        del self.X  # the codes are all a round needs
        self.growth = growth
        # This actor's block of features: contiguous, about equal shares of the histogram's bins.
        bin_offsets = self.layout.bin_offsets
        n_peers = len(self.addresses)
        cuts = np.searchsorted(bin_offsets, bin_offsets[-1] * np.arange(n_peers + 1) / n_peers)
        cuts[-1] = self.n_bins.shape[0]
        self.feature_blocks = np.stack([cuts[:-1], cuts[1:]], axis=1)
        self.bin_blocks = bin_offsets[self.feature_blocks]

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
        # One set of row buffers and one histogram for every round: fresh ones per node cost page faults.
        self.all_rows = all_rows
        self.rows = RowShard(self.codes, self.n_bins, self.layout, self.grad, self.hess, all_rows, local_totals=True,
                             reuse_histogram=True)

    def digest(self):
        """The part of the fit's data digest this shard holds: the sum of its queries' (``query_digest_sum``)."""
        return (query_digest_sum(0, self.codes, self.offsets, self.gains, self.sample_weight, self.position)
                + sum(query_digest_sum(i + 1, v["codes"], v["offsets"], v["gains"])
                      for i, v in enumerate(self.valid_sets)))

    def grow_round(self, tree_queries, features, rng_state, position_bias, record):
        """One boosting round on this shard's queries among ``tree_queries`` (all when None), with the peers.

        Returns a dict: ``tree`` (the grown tree, from the first actor only: every actor grows the same),
        ``rng_state`` after the objective's draws, ``loss_totals`` (Unbiased LambdaMART, with the current
        ``position_bias``), ``ndcg`` (sums and query counts of training and first eval set, when ``record``),
        ``exchanges`` and ``histogram_bytes`` (with the peers, so far).
        """
        self.mailbox.check()
        self.draws.set_state(rng_state)
        if position_bias is not None:
            self.objective.position_bias = position_bias
        if tree_queries is None:  # every query: the rows are all rows, in order
            local = np.arange(self.query_ids.shape[0], dtype=np.int64)
            tree_rows = self.all_rows
        else:
            local = np.flatnonzero(np.isin(self.query_ids, tree_queries)).astype(np.int64)
            tree_rows = _query_rows(self.offsets, local)
        with parallel_region(self.threads):
            self.objective.gradients(self.scores, local, self.grad, self.hess)
            self.rows.reset(tree_rows)
            grow = grow_symmetric_stepwise if self.growth.symmetric else grow_tree_stepwise
            tree = grow(_PeerRows(self, self.rows), self.n_bins, self.layout.bin_offsets, features, self.growth)
            sums = self._add_tree(tree, self.rows, tree_rows, record)
        loss_totals = None
        if position_bias is not None:
            loss_totals = getattr(self.objective, "loss_totals", None)
            if loss_totals is None:  # no training rows here (all held out, or none placed): nothing to add
                loss_totals = np.zeros_like(position_bias)
        return dict(tree=tree if self.index == 0 else None, rng_state=self.draws.get_state(),
                    loss_totals=loss_totals, ndcg=sums, exchanges=self.exchanges,
                    histogram_bytes=self.histogram_bytes)

    def _add_tree(self, tree, rows, tree_rows, record):
        """Add the tree to the scores (training rows and eval sets); NDCG sums and query counts when ``record``."""
        starts = np.array(rows.node_start, dtype=np.int64)
        stops = np.array(rows.node_stop, dtype=np.int64)
        add_leaf_values(self.scores, rows.rows, tree.feature, tree.value, starts, stops, False)
        if tree_rows.shape[0] < self.scores.shape[0]:
            rest = np.setdiff1d(np.arange(self.scores.shape[0], dtype=np.int64), tree_rows, assume_unique=True)
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


class _PeerRows(RowSource):
    """One actor's rows as its part of the fit's rows: the grower's :class:`RowSource` on every worker.

    Node histograms are reduce-scattered: this actor builds its rows' histogram, sends every peer the rows of that
    peer's block of features and sums what the peers send of its own block, in actor order (so the sums do not
    depend on arrival order). The histograms it returns hold its block only. Split search covers the block's
    features; the actors then swap their best splits and all keep the best, ties to the lowest feature as in a
    search over all features.
    """

    def __init__(self, shard, rows):
        self.shard, self.rows = shard, rows
        self.features = shard.feature_blocks[shard.index]
        self.bins = shard.bin_blocks[shard.index]

    def _reduce_scatter(self, local, totals=()):
        # Each block travels as its (Σλ, Σw) columns and its row counts as int32 (a sixth fewer bytes; whole
        # numbers add up exactly either way). ``local`` is the shard's reused array: the parts are copies.
        outgoing = [(totals, local[start:stop, :2].copy(), local[start:stop, 2].astype(np.int32))
                    for start, stop in self.shard.bin_blocks]
        self.shard.histogram_bytes += sum(part[1].nbytes + part[2].nbytes for j, part in enumerate(outgoing)
                                          if j != self.shard.index)
        parts = self.shard.exchange(outgoing)
        hist = np.empty((parts[0][1].shape[0], 3))
        hist[:, :2], hist[:, 2] = parts[0][1], parts[0][2]
        for part in parts[1:]:  # in actor order, whatever the order of arrival
            hist[:, :2] += part[1]
            hist[:, 2] += part[2]
        return [p[0] for p in parts], hist

    def root(self):
        """See :meth:`RowSource.root`; the totals are summed over all actors, the histogram is this block's."""
        sum_grad, sum_hess, count, hist = self.rows.root()
        totals, hist = self._reduce_scatter(hist, (sum_grad, sum_hess, count))
        return sum(t[0] for t in totals), sum(t[1] for t in totals), sum(t[2] for t in totals), hist

    def split(self, node, split, left, right, small_is_left, small_totals, histogram=True):
        """See :meth:`RowSource.split`; the histogram is this block's, summed over all actors."""
        hist = self.rows.split(node, split, left, right, small_is_left, None, histogram)
        return self._reduce_scatter(hist)[1] if histogram else None

    def best_splits(self, nodes, n_bins, bin_offsets, features, params):
        """See :meth:`RowSource.best_splits`: this block's best, then the best of every actor's."""
        mine = features[(features >= self.features[0]) & (features < self.features[1])]
        offsets = bin_offsets - self.bins[0]  # the block's histograms start at its first bin
        found = [find_node_split(hist, n_bins, offsets, mine, sum_grad, sum_hess, float(count), params)
                 for hist, sum_grad, sum_hess, count in nodes]
        best = None
        for theirs in self.shard.exchange([found] * len(self.shard.addresses)):
            best = theirs if best is None else [t if t.gain > b.gain else b for b, t in zip(best, theirs)]
        return best

    def level_split(self, nodes, n_bins, bin_offsets, features, params):
        """See :meth:`RowSource.level_split`: this block's best, then the best of every actor's.

        Actors are read in order, so ties go to the lowest feature; what the split does at each node comes from the
        actor that holds its histograms.
        """
        mine = features[(features >= self.features[0]) & (features < self.features[1])]
        found = level_split(nodes, n_bins, bin_offsets - self.bins[0], mine, params)
        best = None
        for theirs in self.shard.exchange([found] * len(self.shard.addresses)):
            best = theirs if best is None or theirs[0].gain > best[0].gain else best
        return best


class _Mailbox:
    """What the peers sent this actor, by exchange and sender; the round's thread waits for an exchange's parts.

    Parts are put by the worker's event loop (:func:`_receive_part`) while the round runs in the actor's thread.
    """

    def __init__(self):
        self.parts = {}
        self.failure = None
        self.changed = threading.Condition()

    def put(self, tag, sender, payload):
        with self.changed:
            self.parts[tag, sender] = payload
            self.changed.notify_all()

    def fail(self, reason):
        with self.changed:
            self.failure = reason
            self.changed.notify_all()

    def check(self):
        if self.failure is not None:
            raise RuntimeError(f"this round of the fit was ended: {self.failure}")

    def take(self, tag, senders):
        """The parts of exchange ``tag`` from ``senders``, by sender, once all have come (or the fit ended)."""
        deadline = time.monotonic() + _PEER_TIMEOUT
        with self.changed:
            while not all((tag, s) in self.parts for s in senders):
                self.check()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no word from the peers of this fit for {_PEER_TIMEOUT:.0f} s; giving up.")
                self.changed.wait(1.0)
            return {s: self.parts.pop((tag, s)) for s in senders}


# A failed peer ends a round through the client's abort; this bound only ends a wait no client is left to end.
_PEER_TIMEOUT = 3600.0
_PART = "lambdamart-part"  # the op of exchange parts on the workers' streams
_MAILBOXES = {}  # this worker's actors' mailboxes, by fit


def _receive_part(fit, tag, sender, payload):
    """A part of an exchange, from a peer's stream (on the worker's event loop)."""
    mailbox = _MAILBOXES.get(fit)
    if mailbox is not None:  # else the fit is over here, or ended
        mailbox.put(tag, sender, payload)


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


@dataclass
class _QueryTable:
    """What one pass over the chunks of qid (and position, sample_weight) tells the client (:func:`_query_table`)."""

    ids: np.ndarray  # the sorted query ids
    sizes: np.ndarray  # rows per query
    top_position: np.ndarray | None  # the largest position of each query (None without position)
    weighs: bool | None  # whether any row has a non-zero weight (None without sample_weight)


@dataclass
class _Inputs:
    """A fit's data as the client knows it: dask collections, the query table, eval sets, held-out queries."""

    X: da.Array
    arrays: dict  # y, qid, sample_weight, position (dask arrays chunked like X's rows, or None)
    query_ids: np.ndarray
    query_sizes: np.ndarray
    evals: list  # (X, arrays, query_ids, query_sizes) of every eval set
    held_out: np.ndarray | None  # flags over the queries held out for early stopping


@dataclass
class _Progress:
    """What the client keeps of a fit, from which the actors' state is rebuilt on any set of workers."""

    trees: list  # every tree grown so far (bin space)
    position_bias: np.ndarray | None
    init_trees: dict | None  # init_model's flat trees: the starting scores
    train_queries: np.ndarray  # the queries that are not held out
    thresholds: tuple | None = None  # (thresholds, threshold_offsets), once computed
    n_train: int = 0  # training rows over all workers
    fingerprint: str = ""  # the data digest, once computed (kept for continuations, as a local fit keeps it)


class _Cluster:
    """The actors of a fit, one per worker, called together from the client.

    Every call goes to all actors at once and waits for all answers; a worker lost on the way ends the fit with a
    :class:`~lambdamart.exceptions.WorkerLostError` naming it and the stage (round) of the fit.
    """

    def __init__(self, client, futures, workers):
        self.client, self.futures, self.workers = client, futures, workers
        self.actors = None  # once the futures are done
        self.stage = "set-up"
        self.round_trips = 0  # calls to all actors, each waiting for every answer
        self.traffic = {"exchanges": 0, "histogram_bytes": 0}  # between the actors, so far

    def call(self, method, *args, each=None):
        """``actor.method(*args)`` on every actor (or ``actor.method(*each[i])`` on actor i); the answers in order."""
        self.round_trips += 1
        futures = [getattr(a, method)(*(args if each is None else each[i])) for i, a in enumerate(self.actors)]
        answers = [None] * len(futures)
        pending = list(range(len(futures)))
        while pending:
            # Answers are awaited in turn, a moment each: an actor may wait on a failed peer until it is told, so
            # waiting on it alone would hang.
            i = pending.pop(0)
            try:
                answers[i] = futures[i].result(timeout=_POLL_SECONDS)
            except (TimeoutError, asyncio.TimeoutError):  # the same from Python 3.11
                pending.append(i)
            except Exception as error:
                self._end(i, error)
        return answers

    def _end(self, failed, error):
        """Stop the other actors' round (they may be waiting for the failed one) and raise.

        A lost worker raises :class:`~lambdamart.exceptions.WorkerLostError` (the fit may go on without it); any
        other failure raises as it is.
        """
        try:
            _raise_if_lost(self.client, [self.workers[failed]], self.stage, error, wait=True)
        except (WorkerLostError, SchedulerLostError) as lost:
            self._abort_others(failed, error)
            raise lost from error
        self._abort_others(failed, error)
        raise error

    def release(self, ended):
        """After a fit that did not end well (``ended`` False): end the actors' rounds and let the actors go.

        A fit abandoned on the way (an error, a second Ctrl-C) would leave every actor's mailbox in its worker's
        ``_MAILBOXES`` until the worker exits, and the actors alive while anything (a traceback) holds them. Best
        effort and bounded in time: a lost worker has nothing left to clean up. A fit that ended has closed every
        actor, and its actors go with the last reference to them.
        """
        if ended:
            return
        if self.actors is not None:
            calls = []
            for actor in self.actors:
                try:
                    calls.append(actor.abort("the fit was abandoned"))
                except Exception:  # the actor's worker is gone
                    pass
            deadline = time.monotonic() + _RELEASE_SECONDS
            for call in calls:
                try:
                    call.result(timeout=max(0.0, deadline - time.monotonic()))
                except Exception:
                    pass
        if self.client.status == "running":  # else the scheduler is gone, and the actors with it
            try:
                self.client.cancel(self.futures)
            except Exception:  # best effort, as above
                pass

    def _abort_others(self, failed, error):
        try:
            alive = _workers(self.client)
        except SchedulerLostError:  # no scheduler, no actors to reach
            return
        for i, actor in enumerate(self.actors):
            if i != failed and self.workers[i] in alive:
                try:
                    actor.abort(f"the actor on {self.workers[failed]} failed ({error!r})").result(timeout=10)
                except Exception:  # best effort: the fit fails below either way
                    pass


_POLL_SECONDS = 0.2
# How long an abandoned fit waits for its actors to leave it (see _Cluster.release).
_RELEASE_SECONDS = 5.0
# Worker losses in a row (no round completed in between) after which a fit gives up rather than redeploy again.
_RECOVERIES_WITHOUT_PROGRESS = 3
# How long a fit waits for a client that is reconnecting to its scheduler (the client gives up after its own
# timeout, 30 s by default, first).
_RECONNECT_SECONDS = 600.0
# How long a failed call waits for the scheduler to notice that the worker it went to is gone.
_LOSS_NOTICE_SECONDS = 10.0


def _await_on(client, futures, workers):
    """The results of ``futures``, tasks pinned to ``workers``; a WorkerLostError if one of those workers is lost.

    A task pinned to a lost worker would wait for it forever, so the workers are looked at between short waits.
    """
    while True:
        try:
            distributed.wait(futures, timeout=_POLL_SECONDS)
        except (TimeoutError, asyncio.TimeoutError):
            _raise_if_lost(client, workers, "placing the rows on the workers")
            continue
        try:
            return [f.result() for f in futures]
        except concurrent.futures.CancelledError as error:
            # The scheduler cancels tasks whose inputs went with a lost worker it has not reported yet.
            _raise_if_lost(client, workers, "placing the rows on the workers", error, wait=True)
            raise WorkerLostError(f"placing the rows on the workers was cancelled by the scheduler ({error!r}), "
                                  f"after a change of the cluster's workers.") from error
        except (ValueError, TypeError):
            raise  # the rows' own error, from the checks of the routing task: no lost worker to wait for
        except Exception as error:
            _raise_if_lost(client, workers, "placing the rows on the workers", error, wait=True)
            raise


def _raise_if_lost(client, workers, stage, error=None, wait=False):
    """Raise a WorkerLostError if one of ``workers`` has left the cluster.

    With ``wait``, wait a moment for the scheduler to notice a loss (a failed call may come first).
    """
    deadline = time.monotonic() + (_LOSS_NOTICE_SECONDS if wait else 0.0)
    while True:
        alive = _workers(client, stage, error)
        lost = [w for w in workers if w not in alive]
        if lost:
            raise WorkerLostError(f"worker {lost[0]} was lost during {stage} of the fit"
                                  + (f" ({error!r})." if error is not None else "."))
        if time.monotonic() >= deadline:
            return
        time.sleep(_POLL_SECONDS)


def _check_scheduler(client, stage, error=None):
    """Raise a SchedulerLostError if the client has given up on its scheduler.

    While the client tries to reconnect (its ``timeout``), this waits until it is connected again or has given up.
    """
    deadline = time.monotonic() + _RECONNECT_SECONDS
    while client.status == "connecting" and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
    if client.status != "running":
        raise _scheduler_lost(stage, error)


def _scheduler_lost(stage, error=None):
    """The SchedulerLostError of a fit that lost its scheduler during ``stage`` (``error``: what showed it)."""
    return SchedulerLostError(f"the client lost its Dask scheduler during {stage} of the fit"
                              + (f" ({error!r})" if error is not None else "")
                              + "; the fit cannot go on without it. Start the cluster again and fit again: with "
                                "checkpoint_dir set and warm_start=True, the fit continues from its newest "
                                "checkpoint.")


# Newer schedulers list only the first few workers in their identity unless told how many.
_IDENTITY_KWARGS = {"n_workers": -1} if "n_workers" in inspect.signature(distributed.Scheduler.identity).parameters \
    else {}


def _workers(client, stage="a check of the workers", error=None):
    """The addresses of all the cluster's workers, as the scheduler lists them now.

    Raises a SchedulerLostError if the client has given up on its scheduler (``stage`` and ``error`` go into its
    message). Asked of the scheduler, not read from ``client.scheduler_info()``: that returns the client's cached
    identity, which the client's periodic refresh overwrites with one listing no workers (recent distributed
    releases), so a check could find live workers gone (a needless redeployment) or every worker gone (a failed
    fit).
    """
    deadline = time.monotonic() + _RECONNECT_SECONDS
    while True:
        _check_scheduler(client, stage, error)
        try:
            return client.sync(client.scheduler.identity, **_IDENTITY_KWARGS).get("workers", {})
        except OSError as lost:
            # The scheduler went away since the client last knew: the client now reconnects or gives up, which the
            # next look at it sees.
            if time.monotonic() >= deadline:
                raise _scheduler_lost(stage, lost) from lost
            error = error or lost
            time.sleep(_POLL_SECONDS)


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
        (``"total"``); and the traffic of the fit: ``"round_trips"`` (calls from the client to all workers, each
        waiting for every answer: one per round plus a few to set up), ``"exchanges"`` (between the workers, per
        worker: two per searched split) and ``"histogram_bytes"`` (histogram blocks the workers sent each other);
        ``"recoveries"`` (workers lost during the fit, each followed by placing the rows on the workers left) and
        ``"recovery"`` (seconds those placements took, included in ``"regroup"`` and ``"binning"``).

    Other fitted attributes are :class:`~lambdamart.LambdaMARTRanker`'s.
    """

    def __init__(self, objective="lambdarank", *, client=None, n_estimators=100, learning_rate=0.1,
                 max_leaf_nodes=31, max_depth=None, grow_policy="auto", min_samples_leaf=20, min_sum_hessian=1e-3,
                 l2_regularization=0.0, max_bins=255, truncation_level=30, sigma=1.0, gain="exponential",
                 relevance_threshold=0.0, pairs_per_document=None, position_bias_norm=0.5, pair_normalization=True,
                 query_normalization=True, ties="average", subsample=1.0, max_features=1.0, early_stopping="auto",
                 validation_fraction=0.1, n_iter_no_change=10, tol=1e-7, eval_at=10, n_jobs=None,
                 random_state=None, warm_start=False, checkpoint_dir=None, checkpoint_every=10, verbose=0,
                 importance_type="gain"):
        super().__init__(objective, n_estimators=n_estimators, learning_rate=learning_rate,
                         max_leaf_nodes=max_leaf_nodes, max_depth=max_depth, grow_policy=grow_policy,
                         min_samples_leaf=min_samples_leaf,
                         min_sum_hessian=min_sum_hessian, l2_regularization=l2_regularization, max_bins=max_bins,
                         truncation_level=truncation_level, sigma=sigma, gain=gain,
                         relevance_threshold=relevance_threshold, pairs_per_document=pairs_per_document,
                         position_bias_norm=position_bias_norm, pair_normalization=pair_normalization,
                         query_normalization=query_normalization, ties=ties, subsample=subsample,
                         max_features=max_features,
                         early_stopping=early_stopping, validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, tol=tol, eval_at=eval_at, n_jobs=n_jobs,
                         random_state=random_state, warm_start=warm_start, checkpoint_dir=checkpoint_dir,
                         checkpoint_every=checkpoint_every, verbose=verbose, importance_type=importance_type)
        self.client = client

    _parameter_constraints = {**LambdaMARTRanker._parameter_constraints, "client": "no_validation"}

    def _local_params(self):
        params = self.get_params(deep=False)
        params.pop("client")
        return params

    @_unchanged_on_failure
    def fit(self, X, y, qid=None, *, sample_weight=None, eval_set=None, position=None, init_model=None):
        """Fit on the cluster; the same trees as ``LambdaMARTRanker.fit`` on the same rows.

        A worker lost during the fit (its process killed, its machine gone) does not end it: the rows are
        regrouped from their source onto the workers left (Dask recomputes what the lost worker held), the new
        shards rebuild their training scores from the trees grown so far, and the round under way starts again,
        with the same draws. The model is the one a fit without the fault grows. Losing the scheduler or this
        client ends the fit; with ``checkpoint_dir``, ``warm_start=True`` then continues from the newest
        checkpoint.

        Parameters
        ----------
        X : dask.array.Array or dask.dataframe.DataFrame of shape (n_samples, n_features)
            Features (numpy arrays and pandas DataFrames are sent to the cluster first). As in a local fit, a
            DataFrame's column names (all strings) become ``feature_names_in_``, and features that are not float32
            or float64 are converted to float64.
        y : dask.array.Array or dask Series of shape (n_samples,)
            Relevance labels, chunked like ``X``'s rows.
        qid : dask.array.Array or dask Series of shape (n_samples,)
            Query id of every row, in any order and in any partitions; required.
        sample_weight : dask.array.Array of shape (n_samples,), default=None
            Row weights, chunked like ``X``'s rows; as in a local fit, at least one must be positive.
        eval_set : list of (X, y, qid) tuples, default=None
            Validation data (dask or numpy), scored every round; the first one drives early stopping.
        position : dask.array.Array of int of shape (n_samples,), default=None
            Displayed rank of every row (Unbiased LambdaMART), chunked like ``X``'s rows; every round the
            workers' position losses are summed on the client and the biases sent back, as a local fit updates them.
        init_model : LambdaMARTRanker, str or os.PathLike, default=None
            A model to continue boosting from, as in :meth:`LambdaMARTRanker.fit`.

        Returns
        -------
        self
        """
        state, init, finished = self._begin_fit(init_model)
        if qid is None:
            raise ValueError("DaskLambdaMARTRanker needs qid: the query id of every row (queries are what the "
                             "workers share out).")
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
        if init is not None:
            _check_same_features(init, self, "init_model")
        if state is None:
            rng = check_random_state(self.random_state)
        else:  # the first fit's draws again (the held-out queries), then its state after its last round
            rng = np.random.RandomState()
            rng.set_state(state.start_rng)
        start_rng = rng.get_state()

        table = _query_table(client, arrays["qid"], arrays["position"], arrays["sample_weight"])
        query_ids, query_sizes = table.ids, table.sizes
        if table.weighs is False:  # a local fit's check of all weights; each chunk's rows are checked on the workers
            raise ValueError("Sample weights must contain at least one non-zero number: every row of sample_weight "
                             "is 0, so no row counts in the fit. Give the rows to learn from positive weights.")
        evals = []
        for i, item in enumerate(eval_set or []):
            X_v, y_v, qid_v = (tuple(item) + (None,))[:3]
            if qid_v is None:
                raise ValueError(f"eval_set[{i}] needs a qid: give (X, y, qid) tuples.")
            X_v, arrays_v, names_v = _as_dask(X_v, {"y": y_v, "qid": qid_v, "sample_weight": None, "position": None},
                                              where=f"eval_set[{i}] ")
            if X_v.shape[1] != self.n_features_in_:
                raise ValueError(f"eval_set[{i}] X has {X_v.shape[1]} features, but X has {self.n_features_in_}.")
            if names is not None and names_v is not None and list(names_v) != list(names):
                # As a local fit, which checks an eval set's columns against the fit's.
                raise ValueError(f"eval_set[{i}] X has columns {list(names_v)}, but X has {list(names)}; select the "
                                 f"fit columns in the fit order, e.g. X_valid[list(X.columns)].")
            table_v = _query_table(client, arrays_v["qid"])
            evals.append((X_v, arrays_v, table_v.ids, table_v.sizes))
        n_queries = query_ids.shape[0]
        self._fitted_on_queries = n_queries > 1  # then score() needs qid
        held_out = None
        if self.early_stopping is True and not eval_set:
            n_valid = int(np.ceil(self.validation_fraction * n_queries))
            if n_valid >= n_queries:
                raise ValueError(f"early_stopping needs at least 2 queries to hold some out; got {n_queries}.")
            held_out = np.zeros(n_queries, dtype=bool)
            held_out[rng.choice(n_queries, n_valid, replace=False)] = True
        inputs = _Inputs(X=X, arrays=arrays, query_ids=query_ids, query_sizes=query_sizes, evals=evals,
                         held_out=held_out)
        train_queries = np.flatnonzero(~held_out) if held_out is not None else np.arange(n_queries)
        if finished:  # every round asked for is there: the data checked as for a continuation, nothing trained
            self._check_same_data(state, self.n_features_in_, int(query_sizes[train_queries].sum()))
            self._set_fitted(state)
            return self
        OBJECTIVES[self.objective].warn_about_cost(query_sizes[train_queries], self._local_params())
        # One bias per position up to the largest among the training rows, as a local fit (held-out rows' deeper
        # positions get none).
        n_positions = 0 if table.top_position is None else int(table.top_position[train_queries].max(initial=0))
        progress = _Progress(trees=[], position_bias=np.ones((2, n_positions)) if n_positions else None,
                             init_trees=init._trees if init is not None else None, train_queries=train_queries)
        if state is not None:
            progress.trees = list(state.trees)
            progress.position_bias = state.objective.get("position_bias")
            progress.init_trees = state.init_trees
            progress.thresholds = (state.thresholds, state.threshold_offsets)
            rng.set_state(state.end_rng)
        profile = {"regroup": 0.0, "binning": 0.0, "boosting": 0.0, "recoveries": 0, "recovery": 0.0}

        def snapshot(record):
            return TrainingState(start_rng=start_rng, end_rng=rng.get_state(), trees=list(progress.trees),
                                 record=record, thresholds=progress.thresholds[0],
                                 threshold_offsets=progress.thresholds[1],
                                 objective={} if progress.position_bias is None else
                                 {"position_bias": progress.position_bias.copy()},
                                 n_features=self.n_features_in_, n_rows=progress.n_train,
                                 init_trees=progress.init_trees, fingerprint=progress.fingerprint,
                                 feature_names=names)

        checkpoints = None
        if self.checkpoint_dir is not None:
            checkpoints = Checkpoints(self.checkpoint_dir, self.checkpoint_every, self._local_params(),
                                      fresh=state is None)
        rounds = _Rounds(self, has_valid=held_out is not None or bool(eval_set),
                         record=None if state is None else state.record, checkpoints=checkpoints, snapshot=snapshot)
        with rounds:
            self._train(client, inputs, progress, rng, rounds, state, profile)
        self._set_fitted(snapshot(rounds.record()))
        profile["total"] = time.perf_counter() - started
        self.fit_profile_ = profile
        return self

    def _train(self, client, inputs, progress, rng, rounds, state, profile):
        """Deploy the rows on the workers and boost; after a lost worker, deploy on the workers left and go on."""
        failures_in_a_row = 0
        while True:
            workers = sorted(_workers(client, f"round {len(progress.trees) + 1}"))
            if not workers:
                raise WorkerLostError("every worker of the cluster is lost; the fit cannot go on. Start workers, "
                                      "then fit again (with checkpoint_dir and warm_start=True it continues).")
            rounds_before = len(progress.trees)
            lost_at = time.perf_counter()
            try:
                cluster = self._deploy(client, workers, inputs, progress, rng, state, profile)
                ended = False
                try:
                    if profile["recoveries"]:
                        profile["recovery"] += time.perf_counter() - lost_at
                    boosting = time.perf_counter()
                    try:
                        self._boost_on(cluster, progress, rng, rounds)
                    finally:
                        profile["boosting"] += time.perf_counter() - boosting
                        for name, count in [("round_trips", cluster.round_trips), *cluster.traffic.items()]:
                            profile[name] = profile.get(name, 0) + count
                    cluster.call("close")
                    ended = True
                finally:
                    cluster.release(ended)
                return
            except WorkerLostError as error:
                failures_in_a_row = 1 if len(progress.trees) > rounds_before else failures_in_a_row + 1
                if failures_in_a_row > _RECOVERIES_WITHOUT_PROGRESS:
                    raise WorkerLostError(f"{error} The fit lost workers {failures_in_a_row} times without "
                                          f"completing a round in between, so it stops here.") from error
                profile["recoveries"] += 1
                if self.verbose:
                    print(f"{error} Going on with the workers left, from round {len(progress.trees) + 1}.",
                          flush=True)

    def _deploy(self, client, workers, inputs, progress, rng, state, profile):
        """Regroup the rows onto ``workers``, one actor each, binned and with the scores of the trees so far."""
        regroup = time.perf_counter()
        train_parts = _regroup(client, inputs.X, inputs.arrays, inputs.query_ids,
                               _assign_queries(inputs.query_sizes, len(workers)), workers, self.gain)
        valid_parts = [[] for _ in workers]
        for i, (X_v, arrays_v, ids_v, sizes_v) in enumerate(inputs.evals):
            for s, part in enumerate(_regroup(client, X_v, arrays_v, ids_v, _assign_queries(sizes_v, len(workers)),
                                              workers, self.gain, f"eval_set[{i}] ")):
                valid_parts[s].append(part)
        params = self._local_params()
        cluster = _Cluster(client, [client.submit(_Shard, data, valid, params, actor=True, workers=[w])
                                    for data, valid, w in zip(train_parts, valid_parts, workers)], workers)
        try:
            return self._set_up(cluster, inputs, progress, rng, state, profile, regroup)
        except BaseException:
            cluster.release(ended=False)  # the actors of a set-up that failed (or was interrupted) go
            raise

    def _set_up(self, cluster, inputs, progress, rng, state, profile, regroup):
        """The actors of ``cluster`` created, connected, with their training rows, binned and scored; the cluster."""
        client, workers = cluster.client, cluster.workers
        cluster.actors = actors = _await_on(client, cluster.futures, workers)
        fit_id = uuid.uuid4().hex  # this deployment's: parts of an earlier one's exchanges are not taken for it
        cluster.call("connect", each=[(fit_id, workers, i) for i in range(len(actors))])
        n_rows = np.array(cluster.call("hold_out", inputs.held_out), dtype=np.int64)
        first_row = np.concatenate(([0], np.cumsum(n_rows)))
        progress.n_train = n_train = int(first_row[-1])
        if state is not None:
            self._check_same_data(state, self.n_features_in_, n_train)
        binning = time.perf_counter()
        profile["regroup"] += binning - regroup
        if progress.thresholds is None:
            # The bin thresholds, from the sample of training rows a local fit draws (positions in its layout).
            sample = np.arange(n_train)
            before = rng.get_state()
            if n_train > _BINNING_SUBSAMPLE:
                sample = np.sort(rng.choice(n_train, _BINNING_SUBSAMPLE, replace=False))
            shard_of = np.searchsorted(first_row, sample, side="right") - 1
            try:
                X_sample = np.concatenate(cluster.call("rows_at", each=[(sample[shard_of == s] - first_row[s],)
                                                                        for s in range(len(actors))]))
            except WorkerLostError:
                rng.set_state(before)  # the next deployment draws the same sample
                raise
            with parallel_region(self.n_jobs):
                progress.thresholds = find_thresholds(X_sample, self.max_bins)
        n_positions = 0 if progress.position_bias is None else progress.position_bias.shape[1]
        thresholds, threshold_offsets = progress.thresholds
        cluster.call("setup", each=[(thresholds, threshold_offsets, int(first_row[s]), n_train, n_positions,
                                     self._growth_params(n_train, unbiased=n_positions > 0), progress.init_trees,
                                     progress.trees)
                                    for s in range(len(actors))])
        if not progress.fingerprint and (self.warm_start or self.checkpoint_dir is not None):
            # As a local fit: the shards' sums add up to its digest of the same data, so either continues the other.
            progress.fingerprint = data_fingerprint(cluster.call("digest"))
            if state is not None:
                check_same_data(state.fingerprint, progress.fingerprint)
        profile["binning"] += time.perf_counter() - binning
        return cluster

    def _boost_on(self, cluster, progress, rng, rounds):
        """The boosting rounds from the next one on: the client draws as a local fit does, the actors grow the tree.

        Every completed round is in ``progress`` (its tree and position biases) and ``rng``; a round a lost worker
        cut short leaves both as they were before it.
        """
        n_features = progress.thresholds[1].shape[0] - 1
        train_queries = progress.train_queries
        n_queries = train_queries.shape[0]
        n_tree_features = max(1, int(round(self.max_features * n_features)))
        n_tree_queries = max(1, int(round(self.subsample * n_queries)))
        all_features = np.arange(n_features, dtype=np.int64)
        for it in range(len(progress.trees), self.n_estimators):
            cluster.stage = f"round {it + 1}"
            before = rng.get_state()
            tree_queries = None
            if n_tree_queries < n_queries:
                tree_queries = train_queries[np.sort(rng.choice(n_queries, n_tree_queries, replace=False))]
            features = all_features
            if n_tree_features < n_features:
                features = np.sort(rng.choice(n_features, n_tree_features, replace=False)).astype(np.int64)
            try:
                answers = cluster.call("grow_round", tree_queries, features, rng.get_state(), progress.position_bias,
                                       rounds.recording)
            except WorkerLostError:
                rng.set_state(before)  # the round starts again, with the same draws
                raise
            rng.set_state(answers[0]["rng_state"])  # the draws the objectives made on the workers
            _check_leaf_values(answers[0]["tree"].value, it, self.learning_rate)
            if progress.position_bias is not None:  # as a local fit, the biases move after every round's gradients
                progress.position_bias = update_position_bias(sum(a["loss_totals"] for a in answers),
                                                              progress.position_bias, float(self.position_bias_norm))
            progress.trees.append(answers[0]["tree"])
            cluster.traffic = {"exchanges": answers[0]["exchanges"],
                               "histogram_bytes": sum(a["histogram_bytes"] for a in answers)}
            train_score = valid_score = None
            if rounds.recording:  # mean NDCG over all queries: sums and counts of every worker's queries
                sums = [a["ndcg"] for a in answers]
                train_score = sum(s[0][0] for s in sums) / sum(s[0][1] for s in sums)
                if rounds.has_valid:
                    valid_score = sum(s[1][0] for s in sums) / sum(s[1][1] for s in sums)
            if rounds.end_round(it, train_score, valid_score):
                break

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
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D (rows, features), got {X.ndim} dimensions; a single row is "
                                 f"X.reshape(1, -1).")
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
                     "train_score_", "validation_score_", "fit_profile_", "position_bias_", "_fitted_on_queries"):
            if hasattr(self, name):
                setattr(local, name, getattr(self, name))
        return local


def _predict_block(block, model):
    return model.predict(block)


def _predict_frame(frame, model):
    import pandas as pd  # a dask DataFrame's partitions are pandas DataFrames

    return pd.Series(model.predict(frame), index=frame.index)


def _query_table(client, qid, position=None, sample_weight=None):
    """The :class:`_QueryTable` of ``qid``: sorted query ids and row counts, per chunk on the workers, merged here.

    With ``position``, also the largest position of each query (a local fit sizes the position biases by its
    training rows, which are known only once queries are held out); with ``sample_weight``, whether any row weighs
    (a local fit refuses weights that are all zero). Both come from the same pass over the chunks. (``None`` for
    what was not given.)

    (``dask.array.unique(..., return_counts=True)`` took 1.2 s on 571k rows in 2 chunks, this 0.05-0.15 s.)
    """
    chunks = [a.to_delayed().ravel() if a is not None else [None] * qid.numblocks[0]
              for a in (qid, position, sample_weight)]
    parts = client.compute([dask.delayed(_chunk_summary)(*chunk) for chunk in zip(*chunks)], sync=True)
    ids, inverse = np.unique(np.concatenate([part[0] for part in parts]), return_inverse=True)
    if ids.dtype.kind == "f" and not np.isfinite(ids).all():
        raise ValueError("qid contains NaN or infinite values; every row needs a query id: drop those rows or give "
                         "them an id.")
    inverse = inverse.reshape(-1)
    sizes = np.bincount(inverse, weights=np.concatenate([part[1] for part in parts]), minlength=ids.shape[0])
    top_position = None
    if position is not None:
        top_position = np.zeros(ids.shape[0], dtype=np.int64)
        np.maximum.at(top_position, inverse, np.concatenate([part[2] for part in parts]))
    weighs = None if sample_weight is None else any(part[3] for part in parts)
    return _QueryTable(ids=ids, sizes=sizes.astype(np.int64), top_position=top_position, weighs=weighs)


def _chunk_summary(qid, position, sample_weight):
    """One chunk's query ids, row counts, largest position per query, and whether any row weighs (see above)."""
    ids, inverse, counts = np.unique(qid, return_inverse=True, return_counts=True)
    top_position = weighs = None
    if position is not None:
        position = check_position(position, np.shape(qid)[0])  # a bad position raises here, before the fit starts
        top_position = np.zeros(ids.shape[0], dtype=np.int64)
        np.maximum.at(top_position, inverse.reshape(-1), position)
    if sample_weight is not None:
        try:
            weighs = bool(np.any(np.asarray(sample_weight) != 0))
        except (TypeError, ValueError):  # not numbers: the routing task's check_sample_weights says what is wrong
            weighs = True
    return ids, counts, top_position, weighs


def _assign_queries(sizes, n_shards):
    """The shard of each query (sorted by id): contiguous ranges of about equal row counts."""
    cumulative = np.cumsum(sizes)
    bounds = cumulative[-1] * np.arange(1, n_shards) / n_shards
    return np.searchsorted(bounds, cumulative - sizes / 2.0).astype(np.int64)


def _as_dask(X, arrays, where=""):
    """X as a dask array with one chunk of columns, and the 1-D arrays chunked like its rows (checked)."""
    names = _feature_names(X)
    if hasattr(X, "to_dask_array"):  # a dask DataFrame
        X = X.to_dask_array(lengths=True)
    elif not isinstance(X, da.Array):
        X = da.from_array(np.asarray(X))
    if X.ndim != 2:
        raise ValueError(f"{where}X must be 2-D (rows, features), got {X.ndim} dimensions.")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{where}X must hold numbers, got dtype {X.dtype} (a text, category or object column?). "
                         f"{ENCODE_HINT}")
    if X.dtype != np.float32 and X.dtype != np.float64:
        # As a local fit converts them (check_X): the kernels are compiled for float32 and float64 only.
        X = X.astype(np.float64)
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(f"{where}X has unknown chunk sizes; call X.compute_chunk_sizes() first.")
    if 0 in X.shape:
        raise ValueError(f"{where}X has shape {X.shape}; fit needs at least one row and one feature.")
    X = X.rechunk({1: -1})
    out = {}
    for name, a in arrays.items():
        if a is None:
            out[name] = None
            continue
        if hasattr(a, "to_dask_array"):
            a = a.to_dask_array(lengths=True)
        elif not isinstance(a, da.Array):
            a = as_id_array(a) if name == "qid" else np.asarray(a)
            if a.shape[:1] != X.shape[:1]:
                raise ValueError(f"{where}{name} has {a.shape[0] if a.ndim else 0} entries but X has {X.shape[0]} "
                                 f"rows; give one per row.")
            a = da.from_array(a, chunks=X.chunks[0])
        if a.ndim != 1:
            raise ValueError(f"{where}{name} must be one-dimensional, got shape {a.shape}.")
        if any(np.isnan(c) for c in a.chunks[0]):
            raise ValueError(f"{where}{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first.")
        if a.chunks[0] != X.chunks[0]:
            raise ValueError(f"{where}the row chunks of {name} {a.chunks[0]} do not line up with X's {X.chunks[0]}; "
                             f"rechunk them alike, e.g. {name}.rechunk(X.chunks[0]).")
        out[name] = a
    return X, out, names


def _feature_names(X):
    """The feature names a local fit keeps of ``X``: a pandas or dask DataFrame's columns when all are strings.

    None for other input, or columns that are not all strings; columns of strings and other types mixed raise
    scikit-learn's TypeError, as in a local fit.
    """
    columns = getattr(X, "columns", None)
    if columns is None:
        return None
    import pandas as pd  # a DataFrame, pandas' or dask's: pandas is installed

    # scikit-learn's own rule (the one validate_data applies in a local fit), on an empty frame of the columns.
    return feature_names_of(pd.DataFrame(columns=list(columns)))


def _regroup(client, X, arrays, query_ids, query_shard, workers, gain, where=""):
    """Futures of each worker's rows (whole queries, laid out as a local fit would), from the chunks of ``X``.

    ``gain`` is the fit's, which the labels are checked against; ``where`` names the data in error messages.
    """
    n_shards = len(workers)
    parts = {name: (a.to_delayed().ravel().tolist() if a is not None else None) for name, a in arrays.items()}
    X_parts = X.to_delayed().ravel().tolist()
    starts = np.concatenate(([0], np.cumsum(X.chunks[0])))
    optional = [name for name in ("sample_weight", "position") if parts[name] is not None]
    chunk_futures = client.compute(X_parts + parts["y"] + parts["qid"] + [p for name in optional for p in parts[name]])
    n = len(X_parts)
    # The query table goes to the workers once, not inside every routing task. Every placement gets keys of its
    # own (hash=False, pure=False): after a lost worker, a new placement must not share keys with the one being
    # released, or the scheduler may cancel the new tasks with the old (seen on distributed 2024.1).
    query_ids, query_shard = client.scatter([query_ids, query_shard], broadcast=True, hash=False)
    routed = []
    for c in range(n):
        extra = {name: chunk_futures[(3 + optional.index(name)) * n + c] if name in optional else None
                 for name in ("sample_weight", "position")}
        routed.append(client.submit(_route_chunk, chunk_futures[c], chunk_futures[n + c], chunk_futures[2 * n + c],
                                    extra["sample_weight"], extra["position"], query_ids, query_shard,
                                    int(starts[c]), n_shards, gain, where, pure=False))
    shards = []
    for s, worker in enumerate(workers):
        pieces = [client.submit(operator.getitem, r, s, pure=False) for r in routed]
        shards.append(client.submit(_gather_shard, pieces, workers=[worker], pure=False))
    return shards
