"""Relevance labels to gains G(l), shared by the metrics and the objective (docs/design.md, Metrics)."""

import numpy as np

from ._values import first_non_number, is_missing

# 2**53 - 1 is the largest value of 2**l - 1 that float64 holds exactly.
MAX_EXPONENTIAL_LABEL = 53
# The largest gain: a DCG sums up to a query's length of them, and from ~1e308 / length the sum overflowed to inf
# (inf / inf = NaN, which the metrics took for a query without relevant documents).
MAX_GAIN = 1e100


def check_labels(y, name="y"):
    """Validate relevance labels: numeric, finite and non-negative. Returns a float64 array.

    Object arrays (e.g. pandas nullable integers, or numbers held as Python objects) are converted when every
    entry is a number; a missing entry (None, ``pd.NA``) is reported like NaN.
    """
    y = np.asarray(y)
    if y.dtype == object:
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            i, bad = first_non_number(y)
            if is_missing(bad):
                raise ValueError(f"{name} has a missing label ({bad!r} at row {i}); every row needs a relevance "
                                 f"label: drop those rows or give them a label.") from None
            raise TypeError(f"{name} must hold numeric relevance labels (non-negative numbers), but row {i} holds "
                            f"{bad!r}; convert the labels to numbers first.") from None
    if y.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numeric relevance labels (non-negative numbers), got dtype {y.dtype}; "
                        f"convert the labels to numbers first.")
    y = y.astype(np.float64, copy=False)
    finite = np.isfinite(y)
    if not finite.all():
        i = int(np.argmin(finite.reshape(-1)))
        raise ValueError(f"{name} contains NaN or infinite labels (first {y.reshape(-1)[i]} at row {i}); relevance "
                         f"labels must be finite numbers: drop those rows or give them a label.")
    if y.size and y.min() < 0:
        i = int(np.argmin(y.reshape(-1)))
        raise ValueError(f"{name} contains a negative label ({y.min():g} at row {i}); relevance labels must be "
                         f">= 0 (shift or clip them, e.g. 0 for irrelevant).")
    return y


def label_gains(y, gain="exponential", name="y"):
    """Gain of each label.

    Parameters
    ----------
    y : ndarray of float64
        Labels, already checked by :func:`check_labels`.
    gain : {"exponential", "linear"} or array-like
        ``"exponential"``: 2**l - 1; ``"linear"``: l; an array: ``gain[l]`` for integer labels.

    Returns
    -------
    ndarray of float64
    """
    if isinstance(gain, str):
        if gain == "exponential":
            if y.size and y.max() > MAX_EXPONENTIAL_LABEL:
                raise ValueError(
                    f"{name} has label {y.max():g}, too large for exponential gain 2**label - 1 (exact in float64 "
                    f"only up to label {MAX_EXPONENTIAL_LABEL}). Use gain='linear' (gain = label) or pass a table "
                    f"of gains per label as gain=[...]."
                )
            return np.exp2(y) - 1.0
        if gain == "linear":
            if y.size and y.max() > MAX_GAIN:
                raise ValueError(f"{name} has label {y.max():g}, above the largest gain {MAX_GAIN:g} (DCG sums of "
                                 f"gains would overflow); rescale the labels or give them as grades.")
            return y.copy()
        raise ValueError(f"gain must be 'exponential', 'linear' or an array of gains per label, got {gain!r}.")
    table = np.asarray(gain, dtype=np.float64)
    if table.ndim != 1 or table.size == 0:
        raise ValueError("a gain table must be a non-empty one-dimensional array: gain[label].")
    if not np.all(np.isfinite(table)) or table.min() < 0 or table.max() > MAX_GAIN:
        raise ValueError(f"a gain table must hold finite, non-negative gains up to {MAX_GAIN:g} (DCG sums of "
                         f"larger ones overflow).")
    bad = (y != np.floor(y)) | (y >= table.size)
    if bad.any():
        raise ValueError(
            f"with a gain table of {table.size} entries, labels must be integers in [0, {table.size - 1}]; "
            f"{name} holds {y[np.argmax(bad)]:g}. Extend the table to cover every label, or use gain='linear'."
        )
    return table[y.astype(np.intp)]
