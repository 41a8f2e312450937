"""Tree growth driven from Python, one node at a time, over histograms that come from anywhere.

:func:`~.grower.grow_tree` grows a tree inside one numba call on rows it holds. A grower whose rows live elsewhere
(on the workers of a cluster, each holding some of the queries) cannot do that: it needs a node's histogram summed
over every holder of rows, and every holder to split its rows the same way. :func:`grow_tree_stepwise` is that
grower. It follows ``grow_tree``'s order exactly (best leaf first, the smaller child's histogram built and the
larger one's taken as the parent's minus it, ties to the lowest index), so on the same rows it grows the same tree;
only the holders of rows, behind the :class:`RowSource` interface, change. A source may also search splits its own
way (each worker of a cluster over the features whose summed histograms it holds, then agreeing on the best), as
long as the best split it answers is the one a search over all features would find. :func:`grow_symmetric_stepwise`
does the same for :func:`~.symmetric.grow_symmetric_tree`'s symmetric trees.
"""

import numpy as np

from .grower import GrownTree, _splittable, find_node_split, gather_node, node_histogram, partition_node
from .histogram import new_histograms
from .split import Split, leaf_value, level_best_split, level_node_splits
from .symmetric import nodes_to_split, symmetric_depth


class RowSource:
    """Where a tree's rows are: builds node histograms and splits nodes' rows on request.

    Subclasses hold the rows (one process, or many) and answer for all of them: a histogram is the sum over all
    rows of the node, wherever they are.
    """

    def root(self):
        """The root's totals ``(Σλ, Σw, count)`` and its histogram, ``(total_bins, 3)`` or wider."""
        raise NotImplementedError

    def split(self, node, split, left, right, small_is_left, small_totals, histogram=True):
        """Split ``node``'s rows by ``split`` into the new nodes ``left`` and ``right``.

        ``small_totals`` are the smaller child's ``(Σλ, Σw, count)`` over all rows, as the split search found them.
        Returns the histogram of the smaller child (``left`` when ``small_is_left``), or None without
        ``histogram`` (the grower will not search the children: the tree is full or they are too small).
        """
        raise NotImplementedError

    def best_splits(self, nodes, n_bins, bin_offsets, features, params):
        """The best :class:`~.split.Split` of each node, over ``features``.

        ``nodes`` holds ``(histogram, Σλ, Σw, count)`` of each node, histograms as :meth:`root` and :meth:`split`
        gave them (and parents minus children). This searches every feature here; a source whose histograms are
        summed over one block of features only searches its block and agrees with its peers on the best.
        """
        return [find_node_split(hist, n_bins, bin_offsets, features, sum_grad, sum_hess, float(count), params)
                for hist, sum_grad, sum_hess, count in nodes]

    def level_split(self, nodes, n_bins, bin_offsets, features, params):
        """The split of a symmetric tree's level: its :class:`~.split.LevelSplit` over ``features`` and, when that
        gains, what it does at each node (:func:`~.split.level_node_splits`; None otherwise).

        ``nodes`` is as for :meth:`best_splits`. A source that searches its block of features only agrees with its
        peers on the best, whose holder also answers what it does at each node.
        """
        return level_split(nodes, n_bins, bin_offsets, features, params)


def level_split(nodes, n_bins, bin_offsets, features, params):
    """:meth:`RowSource.level_split` over histograms held here (``nodes`` as :meth:`RowSource.best_splits` takes
    them)."""
    hists = np.stack([node[0] for node in nodes])
    slots = np.arange(len(nodes), dtype=np.int64)
    sums = np.array([node[1:] for node in nodes], dtype=np.float64)
    limits = (params.l2_regularization, params.min_samples_leaf, params.min_sum_hessian)
    split = level_best_split(hists, slots, sums, n_bins, bin_offsets, features, *limits)
    at_nodes = level_node_splits(hists, slots, sums, split, n_bins, bin_offsets, *limits) if split.gain > 0 else None
    return split, at_nodes


class RowShard(RowSource):
    """Rows held in this process: the binned codes, λ and w of a set of rows, split node by node.

    Alone, it is the source of a tree grown on its rows, and the tree is the one ``grow_tree`` grows on them, bit
    for bit. As one of several shards of a larger set (``local_totals=True``), each node's histogram is over the
    shard's rows only, and the totals it needs (for the bins it fills in as totals minus the rest) are its own.

    Parameters
    ----------
    codes : uint8 array (n_features, n_samples)
    n_bins : int64 array (n_features,)
    layout : HistogramLayout
    grad, hess : float64 arrays (n_samples,)
    rows : int64 array
        The rows of the tree (copied: partitioned in place as nodes split).
    local_totals : bool, default=False
        Use the shard's own sums as node totals (one shard of many) instead of the ones the split search passes.
    reuse_histogram : bool, default=False
        Build every histogram into the same array, overwritten by the next one: for a caller that copies out what
        it keeps (it saves allocating and faulting in fresh pages per node).
    """

    def __init__(self, codes, n_bins, layout, grad, hess, rows, local_totals=False, reuse_histogram=False):
        self.codes, self.n_bins, self.layout, self.grad, self.hess = codes, n_bins, layout, grad, hess
        self.local_totals = local_totals
        self._scratch = new_histograms(1, int(layout.bin_offsets[-1]))[0] if reuse_histogram else None
        capacity = rows.shape[0]
        self._rows = np.empty(capacity, dtype=np.int64)
        self._ordered_grad, self._ordered_hess = np.empty(capacity), np.empty(capacity)
        self._buffer = np.empty(capacity, dtype=np.int64)
        self.reset(rows)

    def reset(self, rows):
        """Start a new tree on ``rows`` (at most as many as the shard was made with), reusing the buffers."""
        self.rows = self._rows[:rows.shape[0]]
        self.rows[:] = rows
        self.node_start, self.node_stop = [0], [rows.shape[0]]

    def _histogram(self, start, stop, totals):
        rows = self.rows[start:stop]
        sum_grad, sum_hess = gather_node(self.grad, self.hess, self.rows, start, stop, self._ordered_grad,
                                         self._ordered_hess)
        if totals is None or self.local_totals:
            totals = (sum_grad, sum_hess, float(stop - start))
        hist = self._scratch if self._scratch is not None else new_histograms(1, int(self.layout.bin_offsets[-1]))[0]
        node_histogram(self.codes, self.layout, rows, self._ordered_grad[start:stop], self._ordered_hess[start:stop],
                       totals[0], totals[1], float(totals[2]), hist)
        return sum_grad, sum_hess, hist

    def root(self):
        """See :meth:`RowSource.root`."""
        sum_grad, sum_hess, hist = self._histogram(0, self.rows.shape[0], None)
        return sum_grad, sum_hess, self.rows.shape[0], hist

    def split(self, node, split, left, right, small_is_left, small_totals, histogram=True):
        """See :meth:`RowSource.split`."""
        start, stop = self.node_start[node], self.node_stop[node]
        f = split.feature
        boundary = partition_node(self.codes, self.rows, start, stop, f, split.bin, self.n_bins[f],
                                  split.missing_left, self._buffer)
        for child, child_start, child_stop in ((left, start, boundary), (right, boundary, stop)):
            while len(self.node_start) <= child:
                self.node_start.append(0)
                self.node_stop.append(0)
            self.node_start[child], self.node_stop[child] = child_start, child_stop
        if not histogram:
            return None
        small = left if small_is_left else right
        return self._histogram(self.node_start[small], self.node_stop[small], small_totals)[2]

    def leaf_rows(self, node):
        """The rows that reached ``node`` (after the splits so far)."""
        return self.rows[self.node_start[node]:self.node_stop[node]]


def grow_tree_stepwise(source, n_bins, bin_offsets, features, params):
    """Grow one tree leaf-wise from the histograms of ``source`` (see :class:`RowSource`).

    Parameters
    ----------
    source : RowSource
    n_bins : int64 array (n_features,)
        Value bins per feature (the missing bin comes after them).
    bin_offsets : int64 array (n_features + 1,)
        Histogram rows of each feature (``HistogramLayout.bin_offsets``).
    features : int64 array
        Sorted indices of the features this tree may split on.
    params : GrowthParams

    Returns
    -------
    GrownTree
        ``node_start`` and ``node_stop`` are zero: the rows are the source's, not in one array.
    """
    sum_grad, sum_hess, count, hist = source.root()
    feature, split_bin, missing_left, left, right, gain = [-1], [0], [False], [-1], [-1], [0.0]
    counts, depths, grads, hesses, hists, splits = [count], [0], [sum_grad], [sum_hess], [hist], [None]

    def splittable(node):
        return _splittable(counts[node], depths[node], params.max_depth, params.min_samples_leaf)

    def search(nodes):
        nodes = [node for node in nodes if splittable(node)]
        if nodes:
            found = source.best_splits([(hists[n], grads[n], hesses[n], counts[n]) for n in nodes], n_bins,
                                       bin_offsets, features, params)
            for node, split in zip(nodes, found):
                splits[node] = split

    search([0])
    n_leaves = 1
    while n_leaves < params.max_leaf_nodes:
        node = -1
        for i in range(len(counts)):
            if left[i] == -1 and splits[i] is not None and splits[i].gain > 0.0 and (
                    node == -1 or splits[i].gain > splits[node].gain):
                node = i
        if node == -1:
            break
        best = splits[node]
        feature[node], split_bin[node], missing_left[node], gain[node] = (best.feature, best.bin, best.missing_left,
                                                                          best.gain)
        lc, rc = len(counts), len(counts) + 1
        left[node], right[node] = lc, rc
        left_count = int(best.left_count)
        right_count = counts[node] - left_count
        for child_count, g, h in ((left_count, best.left_grad, best.left_hess),
                                  (right_count, grads[node] - best.left_grad, hesses[node] - best.left_hess)):
            _add_leaf(feature, split_bin, missing_left, left, right, gain, hists)
            counts.append(child_count)
            depths.append(depths[node] + 1)
            grads.append(g)
            hesses.append(h)
            splits.append(None)
        small_is_left = left_count <= right_count
        small, large = (lc, rc) if small_is_left else (rc, lc)
        n_leaves += 1
        # The children are searched only if the tree can still grow and one of them may split (the decision
        # rests on totals every source agrees on, so all holders of rows skip the same histograms).
        searched = n_leaves < params.max_leaf_nodes and (splittable(small) or splittable(large))
        hists[small] = source.split(node, best, lc, rc, small_is_left, (grads[small], hesses[small], counts[small]),
                                    histogram=searched)
        if searched:
            hists[large] = hists[node]
            hists[large] -= hists[small]  # in place: a split node's histogram is never needed again
            search([small, large])
        hists[node] = None
    return _grown(feature, split_bin, missing_left, left, right, gain, counts, grads, hesses, params)


def grow_symmetric_stepwise(source, n_bins, bin_offsets, features, params):
    """Grow one symmetric tree from the histograms of ``source``: the tree
    :func:`~.symmetric.grow_symmetric_tree` grows on the same rows (the same order of nodes, histograms and sums).

    The arguments and the result are those of :func:`grow_tree_stepwise`.
    """
    sum_grad, sum_hess, count, hist = source.root()
    feature, split_bin, missing_left, left, right, gain = [-1], [0], [False], [-1], [-1], [0.0]
    counts, grads, hesses, hists = [count], [sum_grad], [sum_hess], [hist]
    level, n_leaves, depth = [0], 1, 0
    max_depth = symmetric_depth(params.max_leaf_nodes, params.max_depth)
    while n_leaves < params.max_leaf_nodes and depth < max_depth:
        candidates = [n for n in level if counts[n] >= max(2, 2 * params.min_samples_leaf)]
        if not candidates:
            break
        split, at_nodes = source.level_split([(hists[n], grads[n], hesses[n], counts[n]) for n in candidates],
                                             n_bins, bin_offsets, features, params)
        if not split.gain > 0.0:
            break
        node_gain, left_grad, left_hess, left_count, node_missing_left = at_nodes
        chosen = np.flatnonzero(nodes_to_split(node_gain, params.max_leaf_nodes - n_leaves))
        depth += 1
        # The children are searched only if the tree can still grow below them.
        searched = n_leaves + chosen.shape[0] < params.max_leaf_nodes and depth < max_depth
        level = []
        for k in chosen:
            node = candidates[k]
            feature[node], split_bin[node], missing_left[node] = split.feature, split.bin, bool(node_missing_left[k])
            gain[node] = node_gain[k]
            lc, rc = len(counts), len(counts) + 1
            left[node], right[node] = lc, rc
            n_left = int(left_count[k])
            for child_count, g, h in ((n_left, left_grad[k], left_hess[k]),
                                      (counts[node] - n_left, grads[node] - left_grad[k], hesses[node] - left_hess[k])):
                _add_leaf(feature, split_bin, missing_left, left, right, gain, hists)
                counts.append(child_count)
                grads.append(g)
                hesses.append(h)
            small_is_left = 2 * n_left <= counts[node]
            small, large = (lc, rc) if small_is_left else (rc, lc)
            node_split = Split(node_gain[k], split.feature, split.bin, bool(node_missing_left[k]), left_grad[k],
                               left_hess[k], left_count[k])
            hists[small] = source.split(node, node_split, lc, rc, small_is_left,
                                        (grads[small], hesses[small], counts[small]), histogram=searched)
            if searched:
                hists[large] = hists[node]
                hists[large] -= hists[small]  # in place: a split node's histogram is never needed again
            hists[node] = None
            level += [lc, rc]
            n_leaves += 1
        if not searched:
            break
    return _grown(feature, split_bin, missing_left, left, right, gain, counts, grads, hesses, params)


def _add_leaf(feature, split_bin, missing_left, left, right, gain, hists):
    """A new leaf's entries in a stepwise grower's node lists (its sums are the caller's)."""
    for values, entry in ((feature, -1), (split_bin, 0), (missing_left, False), (left, -1), (right, -1), (gain, 0.0),
                          (hists, None)):
        values.append(entry)


def _grown(feature, split_bin, missing_left, left, right, gain, counts, grads, hesses, params):
    """The :class:`~.grower.GrownTree` of a stepwise grower's node lists, with the leaves' values."""
    n_nodes = len(counts)
    value = np.zeros(n_nodes)
    for i in range(n_nodes):
        if left[i] == -1:
            value[i] = params.learning_rate * leaf_value(grads[i], hesses[i], params.l2_regularization)
    return GrownTree(feature=np.array(feature, dtype=np.int32), split_bin=np.array(split_bin, dtype=np.int32),
                     missing_left=np.array(missing_left, dtype=np.bool_), left=np.array(left, dtype=np.int32),
                     right=np.array(right, dtype=np.int32), value=value, gain=np.array(gain, dtype=np.float64),
                     count=np.array(counts, dtype=np.int64), node_start=np.zeros(n_nodes, dtype=np.int64),
                     node_stop=np.zeros(n_nodes, dtype=np.int64))
