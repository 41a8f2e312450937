"""Gradient histograms of one tree node: per feature and bin, the sums of λ, of w and the row count.

A node's histogram is a ``(total_bins, 4)`` float64 array from :func:`new_histograms`: columns λ, w, count and
an unused fourth, so that one bin is one 32-byte vector updated by a single load, add and store (twice as fast
as three scalar ones). Feature ``f`` owns rows ``bin_offsets[f]:bin_offsets[f + 1]`` (its value bins, then its
missing bin).

Histograms are built with a *layout* made once per fit (:func:`make_layout`):

- Features are shared out in *blocks*, one per thread, balanced by estimated work. A thread builds its block's
  bins for all rows of the node, so no two threads write the same bin and every bin sums its rows in node order:
  the result does not depend on the number of blocks or threads. On large data the sparse features go to as few
  blocks as their work allows (usually one), as each block's lists cost a fixed amount per row, and the dense
  features fill up; on small data blocks are contiguous ranges of features.
- A block's *dense* features are copied once per fit into row-major *groups* of up to ``GROUP_FEATURES``: each
  row's codes of a group are adjacent bytes, so one pass over the node's rows reads a row's group from one cache
  line and updates the group's histograms (which stay in the L2 cache), with the codes of later rows requested
  ahead of time: a node's rows are scattered over the training set.
- A *sparse* feature, one whose most frequent bin holds at least ``SPARSE_SHARE`` of the rows (zeros, missing
  values, flags), is stored apart as per-row lists of the bins other than that one; the skipped bin is filled in
  afterwards as the node's totals minus the feature's other bins (exact for the count). A block's lists are a table
  of the same number of *slots* per row, so a row's loop always runs as long and its end is predicted; a shorter
  list is padded with the skipped bins of the block's features, whose sums are overwritten by that fill anyway,
  and the entries of a longer one that do not fit go to a per-row *overflow* list.
"""

from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .._jit import inner_kernel, kernel
from .binning import over_ranges

# Most-frequent-bin share from which a feature is stored sparse. On MSLR-like data (make_ranking_data, 131k rows)
# a node's histogram cost 76, 78, 85 and 92 ns per row from shares 0.3, 0.5, 0.7 and with no sparse features at
# all: a list costs ~17 ns per row (its variable length ends in a mispredicted branch) plus ~0.8 ns per entry.
# 0.35 (17 more features listed at 131k rows) made those fits 2 % slower (3 x 2 interleaved fresh processes).
SPARSE_SHARE = 0.5
# Most dense features per row-major group, one pass over a node's rows per group. Reading column-major codes
# costs a cache line per row and feature, which for a small node of a large training set (rows far apart) made a
# pass 2-4x slower per feature than for the root; a row's group is one line. Measured on make_ranking_data at 570k
# rows, one thread: 0.71-0.87 ns per row and feature for any node size with groups of 16 to 32, against 1.06-3.8
# ns reading four columns per pass; groups of 8 were 10-40 % slower, of 64 slower on mid-sized nodes (their
# histograms outgrow the L2 cache). Blocks of 34 dense features grew trees 8 % faster in two groups of 17 than in
# three of 11-12.
GROUP_FEATURES = 32
# The blocks' work per row in dense-feature updates (0.77 ns each on make_ranking_data at 570k rows): a sparse entry
# costs about one, and a block's table of them 6 more per row (its padding and overflow lists; 16 entries a row
# took 17 ns). With all sparse features in one block of two, a node's histogram took 12 % less time than with them
# cut in two (measured with lists of the rows' own lengths, whose mispredicted ends cost 12 a row).
_ENTRY_WORK = 1.0
_LIST_WORK = 6.0
# The slot table's width per block minimises, over the rows' list lengths, the work of a slot (a padded or filled
# one, about a dense update) plus that of a row with an overflow list (its loop's end mispredicted, as every row's
# was with lists of their own lengths) and of an entry in one. make_ranking_data at 570k rows (16 +- 4.4 entries a
# row in one block): 19 slots, the block's lists 13-16 instead of 21 ns a row (slots padded with one repeated bin
# instead of distinct ones were 2-3 ns slower: each update then waits for the last). A row's slots start on a
# 64-byte line and take whole lines (_SLOTS_PER_LINE), so a row far from the last costs one cache miss, not two:
# 10 % and 1 % of those rows, 16.5 and 23.5 ns a row instead of 18.3 and 28.8 with rows of 19 slots back to back.
_SLOT_WORK = 1.0
_OVERFLOW_ROW_WORK = 12.0
_OVERFLOW_ENTRY_WORK = 1.5
_SLOTS_PER_LINE = 32  # uint16 slots in a 64-byte cache line
# From this many training rows the histograms are most of a tree's time, and the sparse features' lists go to as
# few blocks as possible (the model above). On smaller data the split search weighs as much (LightGBM's example,
# 3k rows: 57 % of a tree), costs per feature in a way this model does not capture, and contiguous blocks of equal
# histogram work kept the threads better balanced (that fit took 0.79-0.89x LightGBM's time against 1.12-1.32x);
# counting the search's work too (_SEARCH_WORK) balances them better still.
_SHARED_LISTS_ROWS = 50_000
# The split search's work per bin of a feature, over the number of rows, in dense-feature updates per row: a tree
# searches ~50 nodes over all their bins (~3.3 ns a bin) and histograms ~2x its rows (~0.8 ns an update). Counted
# in the cut of small data into blocks: LightGBM's example grew its trees 3.5 % faster (blocks of 3.4k and 3.2k
# bins instead of 3.6k and 3.0k), 16k generated rows 1 %. Since both children are searched in one pass the search
# costs about half as much a bin; 55 instead of 100 made no difference to the example's fit (4 x 10 fits).
_SEARCH_WORK = 100.0
# Rows ahead of the current one whose codes are requested from memory.
_PREFETCH_DISTANCE = 16
# Bin indices in the sparse lists are relative to their block's first sparse bin and stored as uint16.
_MAX_BLOCK_BINS = 1 << 16
# Rows sampled to find each feature's most frequent bin (any choice is correct; a good one saves work).
_MODE_SAMPLE = 25_000
# Rows per step of the copy into row-major groups: the step's column-major codes of a group stay in the L2 cache.
_COPY_ROWS = 16_384


class HistogramLayout(NamedTuple):
    """How the bin codes are laid out for histogram building (see the module docstring); made by :func:`make_layout`.

    A named tuple of arrays, so numba kernels (also parallel ones) take it as it is.

    Attributes
    ----------
    bin_offsets : int64 array (n_features + 1,)
        Feature ``f`` owns histogram rows ``bin_offsets[f]:bin_offsets[f + 1]`` (value bins, then missing bin).
    block_ptr : int64 array (n_blocks + 1,)
    block_members : int64 array (n_features,)
        Block ``k`` owns the features ``block_members[block_ptr[k]:block_ptr[k + 1]]`` (ascending).
    dense_features : int64 array
        The dense features, in order; group ``q`` has ``dense_features[group_dense[q]:group_dense[q + 1]]``.
    block_groups : int64 array (n_blocks + 1,)
        Block ``k`` owns the groups ``block_groups[k]:block_groups[k + 1]`` (contiguous dense features of its own).
    group_dense : int64 array (n_groups + 1,)
    group_codes : uint8 array (n_dense_features * n_rows,)
        The dense features' codes, group after group, row-major within a group: with ``w`` features in group ``q``,
        row ``r``'s codes of it are ``group_codes[group_dense[q] * n_rows + r * w:][:w]``.
    dense_offsets : int64 array
        ``bin_offsets`` of each dense feature, in ``dense_features`` order.
    slot_width : int64 array (n_blocks,)
        Slots per row of each block's table of sparse entries (0 for a block without sparse features).
    slot_start : int64 array (n_blocks + 1,)
        Block ``k``'s table is ``sparse_slots[slot_start[k]:slot_start[k + 1]].reshape(n_rows, -1)``: a row's
        slots are its first ``slot_width[k]`` entries, the rest of the row (up to whole cache lines) is unused.
    sparse_slots : uint16 array, 64-byte aligned
        Row by row, a row's first ``slot_width[k]`` sparse bins of block ``k``, then (for a shorter list) skipped
        bins of the block's sparse features, relative to ``sparse_base`` of the block.
    overflow_ptr : int64 array (n_blocks, n_rows + 1)
        Row ``r``'s entries in block ``k`` beyond its slots are ``overflow_bin[overflow_ptr[k, r]:overflow_ptr[k,
        r + 1]]``.
    overflow_bin : uint16 array
        Bins of those entries, relative to ``sparse_base`` of their block.
    sparse_base : int64 array (n_blocks,)
        The first histogram row of each block's sparse features.
    mode_bin : int64 array (n_features,)
        The bin a sparse feature leaves out of its lists (its most frequent); -1 for a dense feature.
    """

    bin_offsets: np.ndarray
    block_ptr: np.ndarray
    block_members: np.ndarray
    dense_features: np.ndarray
    block_groups: np.ndarray
    group_dense: np.ndarray
    group_codes: np.ndarray
    dense_offsets: np.ndarray
    slot_width: np.ndarray
    slot_start: np.ndarray
    sparse_slots: np.ndarray
    overflow_ptr: np.ndarray
    overflow_bin: np.ndarray
    sparse_base: np.ndarray
    mode_bin: np.ndarray

    @property
    def total_bins(self):
        """Rows of a histogram: all features' value and missing bins."""
        return int(self.bin_offsets[-1])

    @property
    def n_blocks(self):
        """Number of feature blocks (threads share the work block by block)."""
        return self.block_ptr.shape[0] - 1


def bin_offsets_for(n_bins):
    """Histogram row offsets for features with ``n_bins`` value bins each (plus one missing bin)."""
    offsets = np.zeros(len(n_bins) + 1, dtype=np.int64)
    np.cumsum(np.asarray(n_bins) + 1, out=offsets[1:])
    return offsets


def new_histograms(n_histograms, total_bins):
    """Zeroed ``(n_histograms, total_bins, 4)`` histograms, aligned so that no bin straddles two cache lines."""
    size = n_histograms * total_bins * 4
    raw = np.zeros(size + 8)
    start = (-raw.ctypes.data % 64) // 8
    return raw[start:start + size].reshape(n_histograms, total_bins, 4)


def make_layout(codes, n_bins, n_blocks, split=None):
    """The histogram layout of the bin codes ``codes`` (n_features, n_rows), cut into about ``n_blocks`` blocks.

    ``split`` shares ranges of rows among threads for the copies, as in :func:`~.binning.find_thresholds`.

    Returns
    -------
    HistogramLayout
    """
    n_features, n_rows = codes.shape
    bin_offsets = bin_offsets_for(n_bins)
    step = max(1, n_rows // _MODE_SAMPLE)
    counts = _bin_counts(codes, int(np.max(n_bins)) + 1, step)
    share = counts.max(axis=1) / max(1, counts.sum(axis=1)[0])
    sparse = share >= SPARSE_SHARE
    mode_bin = np.where(sparse, counts.argmax(axis=1), -1).astype(np.int64)
    dense_features = np.flatnonzero(~sparse).astype(np.int64)
    sparse_features = np.flatnonzero(sparse).astype(np.int64)
    # Work per row, in dense-feature updates.
    work = np.where(sparse, (1.0 - share) * _ENTRY_WORK, 1.0)
    if n_rows >= _SHARED_LISTS_ROWS:
        sparse_chunks, dense_runs = _share_out(work[sparse_features], sparse_features, work[dense_features],
                                               bin_offsets, max(1, n_blocks))
    else:
        search_work = _SEARCH_WORK / max(n_rows, 1) * np.diff(bin_offsets)
        bounds = _cut_blocks(work + search_work, bin_offsets, max(1, n_blocks))
        sparse_at, dense_at = np.searchsorted(sparse_features, bounds), np.searchsorted(dense_features, bounds)
        sparse_chunks = list(zip(sparse_at[:-1], sparse_at[1:]))
        dense_runs = list(zip(dense_at[:-1], dense_at[1:]))
    members = [np.sort(np.concatenate((sparse_features[s0:s1], dense_features[d0:d1])))
               for (s0, s1), (d0, d1) in zip(sparse_chunks, dense_runs)]
    # Each block's dense features in as few groups as GROUP_FEATURES allows, of about equal width.
    group_dense, block_groups = [0], [0]
    for d0, d1 in dense_runs:
        n_groups = -(-(d1 - d0) // GROUP_FEATURES)
        group_dense.extend(d0 + ((d1 - d0) * np.arange(1, n_groups + 1)) // max(1, n_groups))
        block_groups.append(len(group_dense) - 1)
    group_dense = np.asarray(group_dense, dtype=np.int64)
    group_codes = np.empty(dense_features.shape[0] * n_rows, dtype=np.uint8)

    def copy_groups(lo, hi):
        for a, b in zip(group_dense[:-1], group_dense[1:]):
            by_row = group_codes[a * n_rows:b * n_rows].reshape(n_rows, b - a)
            for c0 in range(lo, hi, _COPY_ROWS):
                c1 = min(c0 + _COPY_ROWS, hi)
                by_row[c0:c1] = codes[dense_features[a:b], c0:c1].T
    over_ranges(copy_groups, n_rows, codes.size, split)
    block_sparse = np.asarray([0] + [s1 for _, s1 in sparse_chunks], dtype=np.int64)
    sparse_base = bin_offsets[np.append(sparse_features, 0)[block_sparse[:-1]]]
    lists = _sparse_rows(codes, bin_offsets, sparse_base, sparse_features, block_sparse, mode_bin, split)
    return HistogramLayout(bin_offsets=bin_offsets,
                           block_ptr=np.cumsum([0] + [m.shape[0] for m in members]).astype(np.int64),
                           block_members=np.concatenate(members).astype(np.int64), dense_features=dense_features,
                           block_groups=np.asarray(block_groups, dtype=np.int64), group_dense=group_dense,
                           group_codes=group_codes, dense_offsets=bin_offsets[dense_features],
                           **lists, sparse_base=sparse_base, mode_bin=mode_bin)


def _share_out(sparse_work, sparse_features, dense_work, bin_offsets, n_blocks):
    """The blocks' shares of the features: per block, a range of the sparse features and a range of the dense ones
    (both in feature order), of about equal work (``sparse_work`` and ``dense_work`` per feature, and
    ``_LIST_WORK`` per block with sparse features).

    The sparse features go to the first blocks, in as few as their work allows, each within ``_MAX_BLOCK_BINS``
    bins of its lists; the dense features then fill every block up to the average. More blocks than ``n_blocks``
    only when the bin limit needs them.
    """
    n_chunks = 0
    if sparse_features.shape[0]:
        # m blocks of lists: the slowest block takes the longer of a list block and the average; the fewest blocks
        # within 5 % of the best (each block of lists adds its per-row cost to the total).
        m, entries = np.arange(1, n_blocks + 1), sparse_work.sum()
        slowest = np.maximum(entries / m + _LIST_WORK, (dense_work.sum() + entries + m * _LIST_WORK) / n_blocks)
        n_chunks = int(m[np.argmax(slowest <= 1.05 * slowest.min())])
    # Cut the sparse features into n_chunks of about equal entry work, then further wherever a chunk's bins overflow.
    cumulative = np.concatenate(([0.0], np.cumsum(sparse_work)))
    cuts = np.abs(cumulative[None, :] - (cumulative[-1] * np.arange(1, n_chunks) / n_chunks)[:, None]).argmin(axis=1)
    bounds = [0]
    for cut in list(cuts) + [sparse_features.shape[0]]:
        while cut > bounds[-1] and (bin_offsets[sparse_features[cut - 1] + 1]
                                    - bin_offsets[sparse_features[bounds[-1]]] > _MAX_BLOCK_BINS):
            first = bin_offsets[sparse_features[bounds[-1]]]
            ends = bin_offsets[sparse_features[bounds[-1]:cut] + 1]
            bounds.append(bounds[-1] + max(1, int(np.searchsorted(ends, first + _MAX_BLOCK_BINS, "right"))))
        if cut > bounds[-1]:
            bounds.append(int(cut))
    sparse_chunks = list(zip(bounds[:-1], bounds[1:]))
    n_total = max(n_blocks, len(sparse_chunks))
    chunk_work = [cumulative[b] - cumulative[a] + _LIST_WORK for a, b in sparse_chunks]
    chunk_work += [0.0] * (n_total - len(chunk_work))
    sparse_chunks += [(bounds[-1], bounds[-1])] * (n_total - len(sparse_chunks))
    # Dense features: block k gets what is left of the average after its lists, in feature order.
    dense_cumulative = np.cumsum(dense_work)
    total = dense_cumulative[-1] if dense_work.shape[0] else 0.0
    room = np.maximum(0.0, (total + sum(chunk_work)) / n_total - np.asarray(chunk_work))
    ends = np.searchsorted(dense_cumulative - dense_work / 2, np.cumsum(room) * total / max(room.sum(), 1e-12))
    ends[-1] = dense_work.shape[0]
    dense_runs = list(zip(np.concatenate(([0], ends[:-1])), ends))
    keep = [k for k, ((s0, s1), (d0, d1)) in enumerate(zip(sparse_chunks, dense_runs)) if s1 > s0 or d1 > d0]
    return [sparse_chunks[k] for k in keep] or [(0, 0)], [dense_runs[k] for k in keep] or [(0, 0)]


def _cut_blocks(work, bin_offsets, n_blocks):
    """Block boundaries: contiguous feature ranges of about equal work, each within ``_MAX_BLOCK_BINS`` bins."""
    n_features = work.shape[0]
    cumulative = np.concatenate(([0.0], np.cumsum(work)))
    targets = cumulative[-1] * np.arange(1, n_blocks) / n_blocks
    nearest = np.abs(cumulative[None, :] - targets[:, None]).argmin(axis=1)
    bounds = [0]
    for cut in list(nearest) + [n_features]:
        while bin_offsets[cut] - bin_offsets[bounds[-1]] > _MAX_BLOCK_BINS:
            # Too many bins for uint16 list entries: cut earlier.
            bounds.append(int(np.searchsorted(bin_offsets, bin_offsets[bounds[-1]] + _MAX_BLOCK_BINS, "right") - 1))
        if cut > bounds[-1]:
            bounds.append(int(cut))
    return np.asarray(bounds, dtype=np.int64)


@kernel
def _bin_counts(codes, width, step):
    """Per feature, how many of every ``step``-th row fall in each bin: ``(n_features, width)``.

    A kernel, not a ``np.bincount`` per feature: on LightGBM's example (300 features of 3k rows) those took 2.2 ms
    of a 0.2 s fit, this 0.5 ms (compiled once per environment, in 0.4 s). Four counters per feature, so that a run
    of equal codes (a sparse feature's zeros) is not one chain of increments of the same memory. The rows are
    strided here rather than by the caller: a strided view is another array type, another compilation.
    """
    n_features = codes.shape[0]
    n_sampled = (codes.shape[1] + step - 1) // step
    whole = n_sampled - n_sampled % 4
    counts = np.zeros((n_features, width), dtype=np.int64)
    lanes = np.zeros((4, width), dtype=np.int64)
    for f in range(n_features):
        lanes[:] = 0
        column = codes[f]
        for i in range(0, whole, 4):
            lanes[0, column[i * step]] += 1
            lanes[1, column[(i + 1) * step]] += 1
            lanes[2, column[(i + 2) * step]] += 1
            lanes[3, column[(i + 3) * step]] += 1
        for i in range(whole, n_sampled):
            lanes[0, column[i * step]] += 1
        for b in range(width):
            counts[f, b] = lanes[0, b] + lanes[1, b] + lanes[2, b] + lanes[3, b]
    return counts


def _sparse_rows(codes, bin_offsets, sparse_base, sparse_features, block_sparse, mode_bin, split):
    """The blocks' tables of sparse entries: the :class:`HistogramLayout` fields ``slot_width``, ``slot_start``,
    ``sparse_slots``, ``overflow_ptr`` and ``overflow_bin``, as a dict; ``split`` shares ranges of rows among
    threads.

    The arrays are allocated here by numpy, which asks Linux for transparent huge pages on large arrays (numba's
    allocations do not): a node's rows read their lists from all over these arrays, and with 4 kB pages nearly
    every row missed the TLB twice. Trees on 3M generated rows grew 5-7 % faster.
    """
    n_blocks, n_rows = sparse_base.shape[0], codes.shape[1]
    overflow_ptr = np.zeros((n_blocks, n_rows + 1), dtype=np.int64)
    slot_width = np.zeros(n_blocks, dtype=np.int64)
    slot_start = np.zeros(n_blocks + 1, dtype=np.int64)
    n_values = n_rows * sparse_features.shape[0]
    no_entries = np.empty(0, dtype=np.uint16)  # the counting pass writes none

    def fill(slots, overflow_bin, write):
        over_ranges(lambda lo, hi: _fill_sparse_rows(codes, bin_offsets, sparse_base, sparse_features, block_sparse,
                                                     mode_bin, slot_width, slot_start, slots, overflow_ptr,
                                                     overflow_bin, lo, hi, write), n_rows, n_values, split)

    fill(no_entries, no_entries, False)  # row r's entries in block k, at overflow_ptr[k, r + 1]
    for k in range(n_blocks):
        slot_width[k] = _slot_width(overflow_ptr[k, 1:])
    np.cumsum(-(-slot_width // _SLOTS_PER_LINE) * _SLOTS_PER_LINE * n_rows, out=slot_start[1:])
    # What does not fit in a row's slots, and where it ends: the overflow lists, block after block.
    np.maximum(overflow_ptr[:, 1:] - slot_width[:, None], 0, out=overflow_ptr[:, 1:])
    np.cumsum(overflow_ptr[:, 1:], axis=1, out=overflow_ptr[:, 1:])
    overflow_ptr += np.concatenate(([0], np.cumsum(overflow_ptr[:-1, -1])))[:, None]
    raw = np.zeros(slot_start[-1] + _SLOTS_PER_LINE, dtype=np.uint16)  # zeros: the unused slots are defined too
    first = (-raw.ctypes.data % 64) // 2
    sparse_slots = raw[first:first + slot_start[-1]]
    overflow_bin = np.empty(overflow_ptr[-1, -1], dtype=np.uint16)
    fill(sparse_slots, overflow_bin, True)
    return dict(slot_width=slot_width, slot_start=slot_start, sparse_slots=sparse_slots, overflow_ptr=overflow_ptr,
                overflow_bin=overflow_bin)


def _slot_width(entries):
    """The number of slots per row for rows of ``entries`` sparse entries each that costs the least work."""
    if entries.shape[0] == 0:
        return 0
    rows = np.bincount(entries)  # rows[c]: how many rows have c entries
    lengths = np.arange(rows.shape[0])
    # For a width of L slots: the rows with more than L entries, and their entries beyond the L-th.
    longer = entries.shape[0] - np.cumsum(rows)
    beyond = np.cumsum((lengths * rows)[::-1])[::-1] - lengths * np.cumsum(rows[::-1])[::-1]
    work = lengths * _SLOT_WORK + (longer * _OVERFLOW_ROW_WORK + beyond * _OVERFLOW_ENTRY_WORK) / entries.shape[0]
    return int(np.argmin(work))


@kernel(nogil=True)  # serial, as the binning kernels (see binning.py)
def _fill_sparse_rows(codes, bin_offsets, sparse_base, sparse_features, block_sparse, mode_bin, slot_width, slot_start,
                      sparse_slots, overflow_ptr, overflow_bin, row_lo, row_hi, write):
    """For the rows ``row_lo:row_hi``: without ``write``, count every row's entries per block into
    ``overflow_ptr[k, r + 1]``; with ``write``, fill the rows' slots and their overflow lists at ``overflow_ptr``.
    Two passes, so that the caller can choose the widths and allocate the arrays between them."""
    n_blocks = sparse_base.shape[0]
    chunk = 1024
    row_bins = np.empty(sparse_features.shape[0] + 1, dtype=np.uint16)
    for start in range(row_lo, row_hi, chunk):
        stop = min(start + chunk, row_hi)
        for k in range(n_blocks):
            if not write:
                for s in range(block_sparse[k], block_sparse[k + 1]):
                    f = sparse_features[s]
                    for i in range(start, stop):
                        overflow_ptr[k, i + 1] += codes[f, i] != mode_bin[f]
                continue
            base, width = sparse_base[k], slot_width[k]
            stride = (slot_start[k + 1] - slot_start[k]) // codes.shape[1]  # rows here, so at least one
            first, n_features = block_sparse[k], block_sparse[k + 1] - block_sparse[k]
            for i in range(start, stop):
                # Every bin is written and only the kept ones advance: no branch to mispredict on each feature.
                n = 0
                for s in range(first, first + n_features):
                    f = sparse_features[s]
                    code = codes[f, i]
                    row_bins[n] = bin_offsets[f] - base + code
                    n += code != mode_bin[f]
                # Padding cycles through the block's skipped bins, so consecutive slots update different bins.
                at = slot_start[k] + i * stride
                for j in range(width):
                    if j < n:
                        sparse_slots[at + j] = row_bins[j]
                    else:
                        f = sparse_features[first + j % n_features]
                        sparse_slots[at + j] = bin_offsets[f] - base + mode_bin[f]
                # Loops, not slice assignments, whose shape checks would compile numba's string formatting.
                for j in range(width, n):
                    overflow_bin[overflow_ptr[k, i] + j - width] = row_bins[j]


@intrinsic
def _prefetch(typingctx, array, index):
    """Ask the CPU to start loading ``array.flat[index]`` (C-contiguous ``array``) into cache; no effect on values."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        byte_pointer = ir.IntType(8).as_pointer()
        function = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [byte_pointer] + [ir.IntType(32)] * 3))
        # read access, high temporal locality, data cache
        flags = [ir.Constant(ir.IntType(32), v) for v in (0, 3, 1)]
        builder.call(function, [builder.bitcast(builder.gep(data, [args[1]]), byte_pointer)] + flags)
        return context.get_dummy_value()
    return types.void(array, index), codegen


@intrinsic
def _add_to_bin(typingctx, hist, b, grad, hess):
    """``hist[b, :] += (grad, hess, 1, 0)`` as one 4-double vector operation (``hist`` C-contiguous, 4 columns)."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        vector = ir.VectorType(ir.DoubleType(), 4)
        first = builder.mul(args[1], ir.Constant(ir.IntType(64), 4))
        pointer = builder.bitcast(builder.gep(data, [first]), vector.as_pointer())
        increment = ir.Constant(vector, [0.0, 0.0, 1.0, 0.0])
        for lane, value in ((0, args[2]), (1, args[3])):
            increment = builder.insert_element(increment, value, ir.Constant(ir.IntType(32), lane))
        builder.store(builder.fadd(builder.load(pointer, align=8), increment), pointer, align=8)
        return context.get_dummy_value()
    if hist.ndim != 2 or hist.layout != "C" or hist.dtype != types.float64:
        return None  # a typing error: the address arithmetic needs contiguous rows
    return types.void(hist, types.int64, types.float64, types.float64), codegen


@inner_kernel
def _accumulate_group(hist, rows, ordered_grad, ordered_hess, group_codes, offsets):
    # A row's λ and w are loaded once for the whole group, and its codes come from one cache line. The inner loop
    # runs over the array's own row length (not a separate count): 20 % faster, as LLVM then sees whole rows.
    n = rows.shape[0]
    for i in range(n):
        if i + _PREFETCH_DISTANCE < n:
            _prefetch(group_codes, rows[i + _PREFETCH_DISTANCE] * group_codes.shape[1])
        r = rows[i]
        g = ordered_grad[i]
        h = ordered_hess[i]
        for p in range(group_codes.shape[1]):
            _add_to_bin(hist, offsets[p] + group_codes[r, p], g, h)


@inner_kernel
def _accumulate_sparse(hist, rows, ordered_grad, ordered_hess, slots, width, base, overflow_ptr, overflow_bin):
    n = rows.shape[0]
    ahead = _PREFETCH_DISTANCE
    for i in range(n):
        if i + ahead < n:
            _prefetch(slots, rows[i + ahead] * slots.shape[1])
            _prefetch(overflow_ptr, rows[i + ahead])
        r = rows[i]
        g = ordered_grad[i]
        h = ordered_hess[i]
        for p in range(width):
            _add_to_bin(hist, base + slots[r, p], g, h)
        if overflow_ptr[r + 1] > overflow_ptr[r]:  # most rows have none: a predicted branch
            for e in range(overflow_ptr[r], overflow_ptr[r + 1]):
                _add_to_bin(hist, base + overflow_bin[e], g, h)


@inner_kernel
def build_block(codes, layout, k, rows, ordered_grad, ordered_hess, sum_grad, sum_hess, count, hist):
    """Histograms of block ``k``'s features for the node whose rows are ``rows`` (λ ``ordered_grad[i]`` for row
    ``rows[i]``) and whose totals are ``sum_grad``, ``sum_hess`` and ``count``."""
    bin_offsets, mode_bin, group_dense = layout.bin_offsets, layout.mode_bin, layout.group_dense
    if hist.shape[1] != 4:
        raise ValueError("a histogram has 4 columns (see new_histograms)")
    members = layout.block_members[layout.block_ptr[k]:layout.block_ptr[k + 1]]
    for f in members:
        hist[bin_offsets[f]:bin_offsets[f + 1], :] = 0.0
    n_rows = layout.overflow_ptr.shape[1] - 1
    for q in range(layout.block_groups[k], layout.block_groups[k + 1]):
        a, b = group_dense[q], group_dense[q + 1]
        _accumulate_group(hist, rows, ordered_grad, ordered_hess,
                          layout.group_codes[a * n_rows:b * n_rows].reshape(n_rows, b - a), layout.dense_offsets[a:b])
    width = layout.slot_width[k]
    if width > 0 or layout.overflow_ptr[k, n_rows] > layout.overflow_ptr[k, 0]:  # else no sparse entries to add
        table = layout.sparse_slots[layout.slot_start[k]:layout.slot_start[k + 1]]
        _accumulate_sparse(hist, rows, ordered_grad, ordered_hess, table.reshape(n_rows, table.shape[0] // n_rows),
                           width, layout.sparse_base[k], layout.overflow_ptr[k], layout.overflow_bin)
    for f in members:
        if mode_bin[f] >= 0:
            skipped = bin_offsets[f] + mode_bin[f]
            hist[skipped, 0] = sum_grad
            hist[skipped, 1] = sum_hess
            hist[skipped, 2] = count
            for b in range(bin_offsets[f], bin_offsets[f + 1]):
                if b != skipped:
                    hist[skipped, 0] -= hist[b, 0]
                    hist[skipped, 1] -= hist[b, 1]
                    hist[skipped, 2] -= hist[b, 2]


@inner_kernel
def subtract_feature(parent, child, bin_offsets, f):
    """``parent -= child`` on feature ``f``'s bins: the parent's histogram becomes its other child's."""
    for b in range(bin_offsets[f], bin_offsets[f + 1]):
        subtract_bin(parent, child, b)


@inner_kernel
def subtract_bin(parent, child, b):
    """``parent[b] -= child[b]`` (λ, w and row count)."""
    parent[b, 0] -= child[b, 0]
    parent[b, 1] -= child[b, 1]
    parent[b, 2] -= child[b, 2]
