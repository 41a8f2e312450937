"""Gradient histograms of one tree node: per feature and bin, the sums of λ, of w and the row count.

A node's histogram is a ``(total_bins, 4)`` float64 array from :func:`new_histograms`: columns λ, w, count and
an unused fourth, so that one bin is one 32-byte vector updated by a single load, add and store (twice as fast
as three scalar ones). Feature ``f`` owns rows ``bin_offsets[f]:bin_offsets[f + 1]`` (its value bins, then its
missing bin).

Histograms are built with a *layout* made once per fit (:func:`make_layout`):

- Features are cut into contiguous *blocks*, one per thread, balanced by work. A thread builds its block's bins
  for all rows of the node, so no two threads write the same bin and every bin sums its rows in node order: the
  result does not depend on the number of blocks or threads.
- A block's *dense* features are read from the column-major codes, four features per pass over the node's rows
  (their four histograms stay in the L1 cache), with the codes of later rows requested ahead of time: a node's
  rows are scattered over the training set.
- A *sparse* feature, one whose most frequent bin holds at least ``SPARSE_SHARE`` of the rows (zeros, missing
  values, flags), is stored apart as per-row lists of the bins other than that one; the skipped bin is filled in
  afterwards as the node's totals minus the feature's other bins (exact for the count). The dense features beyond
  a multiple of four are stored so too.
"""

from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

# Most-frequent-bin share from which a feature is stored sparse. On MSLR-like data (make_ranking_data) trees grew
# as fast from 0.3 to 0.5, 15 % slower from 0.7 and 1.5x slower with no sparse features at all.
SPARSE_SHARE = 0.5
# Rows ahead of the current one whose codes are requested from memory.
_PREFETCH_DISTANCE = 16
# Bin indices in the sparse lists are relative to the block's first bin and stored as uint16.
_MAX_BLOCK_BINS = 1 << 16
# Rows sampled to find each feature's most frequent bin (any choice is correct; a good one saves work).
_MODE_SAMPLE = 100_000


class HistogramLayout(NamedTuple):
    """How the bin codes are laid out for histogram building (see the module docstring); made by :func:`make_layout`.

    A named tuple of arrays, so numba kernels (also parallel ones) take it as it is.

    Attributes
    ----------
    bin_offsets : int64 array (n_features + 1,)
        Feature ``f`` owns histogram rows ``bin_offsets[f]:bin_offsets[f + 1]`` (value bins, then missing bin).
    block_features : int64 array (n_blocks + 1,)
        Block ``k`` owns features ``block_features[k]:block_features[k + 1]``.
    dense_features : int64 array
        The dense features, in order; block ``k`` has ``dense_features[block_dense[k]:block_dense[k + 1]]``.
    block_dense : int64 array (n_blocks + 1,)
    sparse_ptr : int64 array (n_blocks, n_rows + 1)
        Row ``r``'s sparse entries in block ``k`` are ``sparse_bin[sparse_ptr[k, r]:sparse_ptr[k, r + 1]]``.
    sparse_bin : uint16 array
        Bins of the sparse entries, relative to their block's first bin.
    mode_bin : int64 array (n_features,)
        The bin a sparse feature leaves out of its lists (its most frequent); -1 for a dense feature.
    """

    bin_offsets: np.ndarray
    block_features: np.ndarray
    dense_features: np.ndarray
    block_dense: np.ndarray
    sparse_ptr: np.ndarray
    sparse_bin: np.ndarray
    mode_bin: np.ndarray

    @property
    def total_bins(self):
        """Rows of a histogram: all features' value and missing bins."""
        return int(self.bin_offsets[-1])

    @property
    def n_blocks(self):
        """Number of feature blocks (threads share the work block by block)."""
        return self.block_features.shape[0] - 1


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


def make_layout(codes, n_bins, n_blocks):
    """The histogram layout of the bin codes ``codes`` (n_features, n_rows), cut into about ``n_blocks`` blocks.

    Returns
    -------
    HistogramLayout
    """
    n_features, n_rows = codes.shape
    bin_offsets = bin_offsets_for(n_bins)
    step = max(1, n_rows // _MODE_SAMPLE)
    counts = _bin_counts(codes[:, ::step], int(np.max(n_bins)) + 1)
    share = counts.max(axis=1) / max(1, counts.sum(axis=1)[0])
    sparse = share >= SPARSE_SHARE
    # Dense features go four per pass; the last one to three would each need a pass of their own, while in the
    # per-row lists they cost only their updates: the most concentrated ones move there. (Which features are in
    # lists changes the rounding of their skipped bin, so it must not depend on the blocks.)
    dense_features = np.flatnonzero(~sparse)
    sparse[dense_features[np.argsort(-share[dense_features], kind="stable")[:dense_features.shape[0] % 4]]] = True
    mode_bin = np.where(sparse, counts.argmax(axis=1), -1).astype(np.int64)
    dense_features = np.flatnonzero(~sparse).astype(np.int64)
    sparse_features = np.flatnonzero(sparse).astype(np.int64)
    # Work per row: one update per dense feature, the rows outside the skipped bin for a sparse one.
    block_features = _cut_blocks(np.where(sparse, 1.0 - share, 1.0), ~sparse, bin_offsets, max(1, n_blocks))
    block_dense = np.searchsorted(dense_features, block_features).astype(np.int64)
    sparse_ptr, sparse_bin = _sparse_rows(codes, bin_offsets, block_features, sparse_features,
                                          np.searchsorted(sparse_features, block_features), mode_bin)
    return HistogramLayout(bin_offsets=bin_offsets, block_features=block_features, dense_features=dense_features,
                           block_dense=block_dense, sparse_ptr=sparse_ptr, sparse_bin=sparse_bin, mode_bin=mode_bin)


def _cut_blocks(work, dense, bin_offsets, n_blocks):
    """Block boundaries: contiguous feature ranges of about equal work, each within ``_MAX_BLOCK_BINS`` bins, cut
    where possible after a multiple of four dense features."""
    n_features = work.shape[0]
    cumulative = np.concatenate(([0.0], np.cumsum(work)))
    fits_groups = np.concatenate(([0], np.cumsum(dense))) % 4 == 0
    candidates = np.flatnonzero(fits_groups)
    targets = cumulative[-1] * np.arange(1, n_blocks) / n_blocks
    nearest = np.abs(cumulative[candidates][None, :] - targets[:, None]).argmin(axis=1)
    bounds = [0]
    for cut in list(candidates[nearest]) + [n_features]:
        while bin_offsets[cut] - bin_offsets[bounds[-1]] > _MAX_BLOCK_BINS:
            # Too many bins for uint16 list entries: cut earlier, after whole groups if there is room.
            limit = np.searchsorted(bin_offsets, bin_offsets[bounds[-1]] + _MAX_BLOCK_BINS, "right") - 1
            within = candidates[(candidates > bounds[-1]) & (candidates <= limit)]
            bounds.append(int(within[-1] if within.shape[0] else limit))
        if cut > bounds[-1]:
            bounds.append(int(cut))
    return np.asarray(bounds, dtype=np.int64)


def _bin_counts(codes, width):
    """Rows per bin of every feature, ``(n_features, width)``. numpy: a kernel for this once-per-fit count cost
    more to compile than it ever saved."""
    return np.stack([np.bincount(column, minlength=width) for column in codes])


@njit(cache=True)  # serial, as the binning kernels (see binning.py)
def _sparse_rows(codes, bin_offsets, block_features, sparse_features, block_sparse, mode_bin):
    n_blocks = block_features.shape[0] - 1
    n_rows = codes.shape[1]
    chunk = 1024
    n_chunks = (n_rows + chunk - 1) // chunk
    # ptr[k, r + 1] first counts row r's entries in block k; prefix sums then make it the end of the row's list,
    # the lists laid out block after block.
    ptr = np.zeros((n_blocks, n_rows + 1), dtype=np.int64)
    for start in range(n_chunks):
        for k in range(n_blocks):
            for s in range(block_sparse[k], block_sparse[k + 1]):
                f = sparse_features[s]
                for i in range(start * chunk, min(start * chunk + chunk, n_rows)):
                    ptr[k, i + 1] += codes[f, i] != mode_bin[f]
    total = 0
    for k in range(n_blocks):
        ptr[k, 0] = total
        for i in range(n_rows):
            ptr[k, i + 1] += ptr[k, i]
        total = ptr[k, n_rows]
    sparse_bin = np.empty(total, dtype=np.uint16)
    for start in range(n_chunks):
        row_bins = np.empty(sparse_features.shape[0] + 1, dtype=np.uint16)
        for k in range(n_blocks):
            base = bin_offsets[block_features[k]]
            for i in range(start * chunk, min(start * chunk + chunk, n_rows)):
                # Every bin is written and only the kept ones advance: no branch to mispredict on each feature.
                n = 0
                for s in range(block_sparse[k], block_sparse[k + 1]):
                    f = sparse_features[s]
                    code = codes[f, i]
                    row_bins[n] = bin_offsets[f] - base + code
                    n += code != mode_bin[f]
                # A loop, not a slice assignment, whose shape check would compile numba's string formatting.
                for j in range(n):
                    sparse_bin[ptr[k, i] + j] = row_bins[j]
    return ptr, sparse_bin


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


@njit(cache=True)
def _accumulate_four(hist, rows, ordered_grad, ordered_hess, c0, c1, c2, c3, b0, b1, b2, b3):
    # Four features per pass: the row index, λ and w are loaded once for four histograms, and four independent
    # updates keep the CPU busy while the gathered codes arrive.
    n = rows.shape[0]
    for i in range(n):
        if i + _PREFETCH_DISTANCE < n:
            later = rows[i + _PREFETCH_DISTANCE]
            _prefetch(c0, later)
            _prefetch(c1, later)
            _prefetch(c2, later)
            _prefetch(c3, later)
        r = rows[i]
        g = ordered_grad[i]
        h = ordered_hess[i]
        _add_to_bin(hist, b0 + c0[r], g, h)
        _add_to_bin(hist, b1 + c1[r], g, h)
        _add_to_bin(hist, b2 + c2[r], g, h)
        _add_to_bin(hist, b3 + c3[r], g, h)


@njit(cache=True)
def _accumulate_one(hist, rows, ordered_grad, ordered_hess, column, base):
    for i in range(rows.shape[0]):
        _add_to_bin(hist, base + column[rows[i]], ordered_grad[i], ordered_hess[i])


@njit(cache=True)
def _accumulate_sparse(hist, rows, ordered_grad, ordered_hess, ptr, sparse_bin, base):
    n = rows.shape[0]
    ahead = _PREFETCH_DISTANCE
    for i in range(n):
        # Where a row's list starts is itself a load, so it is requested twice as far ahead as the list.
        if i + 2 * ahead < n:
            _prefetch(ptr, rows[i + 2 * ahead])
        if i + ahead < n:
            _prefetch(sparse_bin, ptr[rows[i + ahead]])
        r = rows[i]
        g = ordered_grad[i]
        h = ordered_hess[i]
        for e in range(ptr[r], ptr[r + 1]):
            _add_to_bin(hist, base + sparse_bin[e], g, h)


@njit(cache=True)
def build_block(codes, layout, k, rows, ordered_grad, ordered_hess, sum_grad, sum_hess, count, hist):
    """Histograms of block ``k``'s features for the node whose rows are ``rows`` (λ ``ordered_grad[i]`` for row
    ``rows[i]``) and whose totals are ``sum_grad``, ``sum_hess`` and ``count``."""
    bin_offsets, dense_features, mode_bin = layout.bin_offsets, layout.dense_features, layout.mode_bin
    block_dense = layout.block_dense
    if hist.shape[1] != 4:
        raise ValueError("a histogram has 4 columns (see new_histograms)")
    f0, f1 = layout.block_features[k], layout.block_features[k + 1]
    base = bin_offsets[f0]
    hist[base:bin_offsets[f1], :] = 0.0
    d = block_dense[k]
    while d + 4 <= block_dense[k + 1]:
        a, b, c, e = dense_features[d], dense_features[d + 1], dense_features[d + 2], dense_features[d + 3]
        _accumulate_four(hist, rows, ordered_grad, ordered_hess, codes[a], codes[b], codes[c], codes[e],
                         bin_offsets[a], bin_offsets[b], bin_offsets[c], bin_offsets[e])
        d += 4
    for rest in range(d, block_dense[k + 1]):  # only where a block had to be cut inside a group of four
        f = dense_features[rest]
        _accumulate_one(hist, rows, ordered_grad, ordered_hess, codes[f], bin_offsets[f])
    _accumulate_sparse(hist, rows, ordered_grad, ordered_hess, layout.sparse_ptr[k], layout.sparse_bin, base)
    for f in range(f0, f1):
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


@njit(cache=True)
def subtract_feature(parent, child, bin_offsets, f):
    """``parent -= child`` on feature ``f``'s bins: the parent's histogram becomes its other child's."""
    for b in range(bin_offsets[f], bin_offsets[f + 1]):
        parent[b, 0] -= child[b, 0]
        parent[b, 1] -= child[b, 1]
        parent[b, 2] -= child[b, 2]
