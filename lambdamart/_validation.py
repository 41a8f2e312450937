"""Input checks of the estimator: features, labels, positions and eval sets, with messages that say what to do.

Everything here runs before any numeric work, so bad input fails fast and names the column, row or set at fault.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import validate_data

from ._compat import check_sample_weight
from ._gains import check_labels
from ._values import first_non_number, is_missing


def check_X(estimator, X, reset, **kwargs):
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
    X = _missing_as_nan(X)
    try:
        X_checked = validate_data(estimator, X, accept_sparse=("csr", "csc"), dtype=(np.float64, np.float32),
                                  ensure_all_finite=False, reset=reset, **kwargs)
    except (ValueError, TypeError, OverflowError) as e:
        if (isinstance(e, ValueError) and not reset and "feature names" in str(e).lower()
                and hasattr(estimator, "feature_names_in_")):
            raise ValueError(_feature_names_message(str(e), estimator.feature_names_in_, X)) from None
        located = _locate_non_numeric(X)
        if located is not None:
            if isinstance(e, TypeError):  # an object that is no number at all (a dict, say): its type, as numpy's
                raise TypeError(f"{located} ({e})") from None
            raise ValueError(located) from None
        raise
    return np.ascontiguousarray(X_checked.toarray() if sp.issparse(X_checked) else X_checked)


# How to turn a non-numeric column into features (the local and the Dask fit's messages end with it).
ENCODE_HINT = ("LambdaMARTRanker needs numeric features: encode the column first (e.g. with "
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
                             f"does not split on. {ENCODE_HINT} If its categories are numbers that are meaningful "
                             f"as values, use X[{column!r}].astype(float).")
        if kind in "mM":
            raise ValueError(f"X column {column!r} holds dates or durations (dtype {name}). {ENCODE_HINT} For a "
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
                             f"{ENCODE_HINT} If the text is numbers, convert it with pd.to_numeric first.")
        raise ValueError(f"X column {column!r} holds non-numeric values (dtype {name}; e.g. {value!r} at "
                         f"row {row}). {ENCODE_HINT}")


def _missing_as_nan(X):
    """``X`` with the missing values (None, pandas' NA) of its object columns as NaN, which float conversion takes
    (pd.NA makes it raise); other inputs as they are."""
    dtypes = getattr(X, "dtypes", None)
    if hasattr(dtypes, "items") and hasattr(X, "columns"):  # a DataFrame
        object_columns = [i for i, dtype in enumerate(dtypes) if getattr(dtype, "kind", "") == "O"]
        if not object_columns:
            return X
        X = X.copy(deep=False)  # the caller's frame keeps its values
        for i in object_columns:
            column = X.iloc[:, i]
            X.isetitem(i, column.where(column.notna(), np.nan))
        return X
    if isinstance(X, np.ndarray) and X.dtype == object:
        missing = np.frompyfunc(is_missing, 1, 1)(X).astype(bool)
        return np.where(missing, np.nan, X) if missing.any() else X
    return X


def _locate_non_numeric(X):
    """A message naming the first column and row of a 2-D array-like X whose value is not a float64 number, or
    None."""
    if sp.issparse(X) or getattr(getattr(X, "dtype", None), "kind", "O") in "biufc":
        return None  # numeric arrays and sparse matrices
    if hasattr(X, "dtypes") and hasattr(X, "columns"):  # a DataFrame: its columns' types were checked already
        columns = [(name, np.asarray(X[name], dtype=object)) for name, dtype in X.dtypes.items()
                   if getattr(dtype, "kind", "") == "O"]
    else:
        try:
            X = np.asarray(X, dtype=object)
        except Exception:  # ragged or otherwise not an array: scikit-learn's own message says why
            return None
        if X.ndim != 2:
            return None
        columns = [(j, X[:, j]) for j in range(X.shape[1])]
    for name, values in columns:
        try:
            values.astype(np.float64)
        except (TypeError, ValueError, OverflowError):
            i, value = first_non_number(values)
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            return f"X column {name!r} holds a value that is not a float64 number ({shown} at row {i}). {ENCODE_HINT}"
    return None


def _feature_names_message(message, expected, X):
    """scikit-learn's feature-name mismatch message, with the two column lists and the fix."""
    got = getattr(X, "columns", None)
    got = "no column names (a plain array)" if got is None else [str(c) for c in got]
    return (f"{message.rstrip()}\nColumns at fit: {[str(c) for c in expected]}\nColumns given: {got}\nSelect "
            f"the fit columns in the fit order, e.g. X[ranker.feature_names_in_].")


def check_y(y, n_samples, name):
    """Relevance labels, one per row, as float64 (object arrays such as pandas nullable integers converted)."""
    y_array = np.asarray(y)
    if y_array.ndim != 1 or y_array.shape[0] != n_samples:
        if y_array.ndim == 2 and y_array.shape == (n_samples, 1):
            raise ValueError(f"{name} must be one-dimensional (one label per row), got shape {y_array.shape}; pass "
                             f"y.ravel() or a single column.")
        raise ValueError(f"{name} must be one label per row: X has {n_samples} rows, {name} has shape "
                         f"{y_array.shape}.")
    return check_labels(y_array, name)


# The largest sample weight fit takes: the split gain squares sums of weighted λ, which from ~1e154 overflowed and
# left a model without splits; 1e100 keeps a wide margin for sums over billions of rows.
MAX_SAMPLE_WEIGHT = 1e100


def check_sample_weights(sample_weight, X, whole=True):
    """Row weights for fit as float64: one per row of ``X``, finite, non-negative and at most MAX_SAMPLE_WEIGHT.

    ``whole=False`` checks a part of the fit's rows (a Dask chunk): it may hold no rows, or only zero weights, which
    scikit-learn refuses; the caller checks that some row of the whole weighs.
    """
    weights = np.asarray(sample_weight)
    if not whole and weights.shape == (X.shape[0],) and weights.dtype.kind in "biuf" and not np.any(weights):
        return weights.astype(np.float64)
    sample_weight = check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    if sample_weight.size and sample_weight.max() > MAX_SAMPLE_WEIGHT:
        raise ValueError(f"sample_weight holds weights up to {sample_weight.max():.3g}; the squared sums of "
                         f"weighted gradients in the split gains would overflow. Divide the weights by a constant "
                         f"(only their ratios and min_sum_hessian's scale matter).")
    return sample_weight


# The largest displayed rank fit(position=...) takes (see check_position).
MAX_POSITION = 10_000


def check_position(position, n_samples):
    """Displayed ranks (1 for the top) of every row as int64, or None; raises on anything else."""
    if position is None:
        return None
    position = np.asarray(position)
    if position.shape != (n_samples,):
        raise ValueError(f"position must hold one displayed rank per row: {n_samples} rows, got shape "
                         f"{position.shape}.")
    if position.dtype.kind not in "iuf" or not np.all(np.isfinite(position)) or \
            np.any(position != np.round(position)) or np.any(position < 1):
        raise ValueError("position must hold whole displayed ranks >= 1 (1 is the top of the page).")
    # One bias is learned per rank up to the largest, so the largest sizes the model; checked before the cast, which
    # would wrap a rank beyond int64 around.
    if position.size and np.max(position) > MAX_POSITION:
        raise ValueError(f"position holds ranks up to {np.max(position)}, but Unbiased LambdaMART learns one bias per "
                         f"rank and takes ranks up to {MAX_POSITION}; clip the deeper ones (e.g. "
                         f"np.minimum(position, 100)) so that they share one bias.")
    return position.astype(np.int64)


def check_eval_set(eval_set):
    """eval_set as a list of (X, y) or (X, y, qid) items, with a clear error for the usual shapes of mistake."""
    if eval_set is None:
        return []
    hint = ("eval_set must be a list of (X, y) or (X, y, qid) tuples, e.g. eval_set=[(X_valid, y_valid, "
            "qid_valid)]")
    if isinstance(eval_set, tuple) and len(eval_set) in (2, 3) and getattr(eval_set[0], "ndim", 1) == 2:
        raise ValueError(f"{hint}; got a single tuple: wrap it in a list.")
    if isinstance(eval_set, (str, bytes)) or not hasattr(eval_set, "__iter__"):
        raise ValueError(f"{hint}; got {type(eval_set).__name__}.")
    items = list(eval_set)
    for i, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise ValueError(f"eval_set[{i}] must be a tuple (X, y) or (X, y, qid), got {type(item).__name__}"
                             f"{f' of length {len(item)}' if isinstance(item, (tuple, list)) else ''}.")
    return [(item[0], item[1], item[2] if len(item) == 3 else None) for item in items]
