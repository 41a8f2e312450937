"""Relevance labels to gains G(l), shared by the metrics and the objective (DESIGN §2)."""

import numpy as np

# 2**53 - 1 is the largest value of 2**l - 1 that float64 holds exactly.
MAX_EXPONENTIAL_LABEL = 53


def check_labels(y, name="y"):
    """Validate relevance labels: finite and non-negative. Returns float64 array."""
    y = np.asarray(y)
    if y.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numeric relevance labels, got dtype {y.dtype}.")
    y = y.astype(np.float64, copy=False)
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains NaN or infinite labels; relevance labels must be finite numbers.")
    if y.size and y.min() < 0:
        raise ValueError(f"{name} contains a negative label ({y.min():g}); relevance labels must be >= 0.")
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
                    f"only up to label {MAX_EXPONENTIAL_LABEL}). Use gain='linear' or pass a gain table."
                )
            return np.exp2(y) - 1.0
        if gain == "linear":
            return y.copy()
        raise ValueError(f"gain must be 'exponential', 'linear' or an array of gains per label, got {gain!r}.")
    table = np.asarray(gain, dtype=np.float64)
    if table.ndim != 1 or table.size == 0:
        raise ValueError("a gain table must be a non-empty one-dimensional array: gain[label].")
    if not np.all(np.isfinite(table)) or table.min() < 0:
        raise ValueError("a gain table must hold finite, non-negative gains.")
    if y.size and (np.any(y != np.floor(y)) or y.max() >= table.size):
        raise ValueError(
            f"with a gain table of {table.size} entries, labels must be integers in [0, {table.size - 1}]; "
            f"{name} holds {y.max():g}."
        )
    return table[y.astype(np.intp)]
