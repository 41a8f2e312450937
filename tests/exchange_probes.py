"""Rows that probe every split of a model at its threshold, and the leaf each row reaches, for the tests of
export_model and import_model (test_export.py, test_import.py)."""

import numpy as np

F32 = np.float32


def leaves(trees, X, right_from=None):
    """(n_rows, n_trees): the local index (within its tree) of the leaf each row reaches, by our rule; with
    ``right_from``, values x >= right_from go right at a +inf threshold (our XGBoost model: +inf; its tree dump,
    which has no infinities: the largest float32)."""
    starts = trees["tree_starts"]
    node = np.broadcast_to(starts, (X.shape[0], starts.shape[0])).copy()
    rows = np.arange(X.shape[0])[:, None]
    while True:
        split = trees["left"][node] >= 0
        if not split.any():
            return node - starts
        x = X[rows, np.maximum(trees["feature"][node], 0)]
        threshold = trees["threshold"][node]
        go_left = np.where(np.isnan(x), trees["missing_left"][node], x <= threshold)
        if right_from is not None:
            go_left &= ~((x >= right_from) & (threshold == np.inf))
        node = np.where(split, np.where(go_left, trees["left"][node], trees["right"][node]), node)


def leaf_ranks(trees, local_leaves):
    """LightGBM's leaf numbering: a leaf's rank among its tree's leaves in node order."""
    starts = trees["tree_starts"]
    is_leaf = (trees["left"] < 0).astype(np.int64)
    rank = np.empty_like(is_leaf)
    for start, stop in zip(starts, np.append(starts[1:], is_leaf.shape[0])):
        rank[start:stop] = np.cumsum(is_leaf[start:stop]) - 1
    return rank[local_leaves + starts]


def at_thresholds_f64(t):
    """Float64 values at and around threshold t, NaN and the infinities."""
    return [t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf), np.nan, np.inf, -np.inf]


def at_thresholds_f32(t):
    """Float32 values at and around the largest float32 <= t, and NaN (XGBoost's view of t)."""
    m = F32(t)
    if m > t:
        m = np.nextafter(m, F32(-np.inf))
    return [m, np.nextafter(m, F32(-np.inf)), np.nextafter(m, F32(np.inf)), F32(np.nan)]


def probe_rows(trees, base, values_at, dtype=np.float64):
    """Rows of ``base`` (cycled) with one feature set to each of ``values_at(threshold)``, for every split; then
    rows with every feature at one of its thresholds' values at once."""
    base = np.asarray(base, dtype=dtype)
    split = np.flatnonzero(trees["left"] >= 0)
    rows, per_feature = [], {}
    for j, node in enumerate(split):
        f = trees["feature"][node]
        t = trees["threshold"][node]
        values = [v for v in values_at(t) if not (np.isinf(t) and np.isinf(v) and dtype == np.float32)]
        per_feature.setdefault(f, []).extend(values)
        for v in values:
            row = base[j % base.shape[0]].copy()
            row[f] = v
            rows.append(row)
    longest = max((len(v) for v in per_feature.values()), default=0)
    for k in range(longest):
        row = base[k % base.shape[0]].copy()
        for f, values in per_feature.items():
            row[f] = values[k % len(values)]
        rows.append(row)
    return np.asarray(rows, dtype=dtype)
