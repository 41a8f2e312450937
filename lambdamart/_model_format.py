"""Reading and writing the model file described in :mod:`lambdamart.model_io` (format version 1).

Kept apart from the estimator so that the estimator's ``save_model`` and the public ``load_model`` both use it
without importing each other.
"""

import json
import numbers
import os
import warnings

import numpy as np

from ._compat import validate_params
from ._engine.tree import NODE_DTYPES
from ._files import write_atomically
from ._version import __version__

FORMAT = "lambdamart-model"
FORMAT_VERSION = 1

_TREE_FIELDS = ("tree_starts",) + tuple(NODE_DTYPES)
_INT_FIELDS = ("tree_starts", "feature", "left", "right", "count")
_FLOAT_FIELDS = ("threshold", "value", "gain")
_BOOL_FIELDS = ("missing_left",)
_FITTED_FIELDS = ("n_estimators_", "n_iter_", "best_iteration_", "train_score_", "validation_score_")


# ---------------------------------------------------------------- writing


def write_model(ranker, path):
    """Write a fitted ranker to ``path`` in the JSON format of this module.

    Parameters
    ----------
    ranker : LambdaMARTRanker
        A fitted ranker.
    path : str or os.PathLike
        Destination; written atomically (see :func:`lambdamart._files.write_atomically`): never seen half
        written, and a crash leaves the previous file intact.
    """
    write_atomically(path, _dumps(_to_document(ranker)))


def _to_document(ranker):
    trees = ranker._trees
    if set(trees) != set(_TREE_FIELDS):
        # The fitted arrays changed shape of meaning: the format needs a new version, not a silent extension.
        raise ValueError(f"model file format {FORMAT_VERSION} stores the tree fields {sorted(_TREE_FIELDS)}, but "
                         f"this model has {sorted(trees)}.")
    encoded = {}
    for name in _TREE_FIELDS:
        a = trees[name]
        encoded[name] = _encode_floats(a) if name in _FLOAT_FIELDS else a.tolist()
    names = getattr(ranker, "feature_names_in_", None)
    fitted = {
        "n_estimators_": int(ranker.n_estimators_),
        "n_iter_": int(ranker.n_iter_),
        "best_iteration_": None if ranker.best_iteration_ is None else int(ranker.best_iteration_),
        "train_score_": _encode_floats(ranker.train_score_),
        "validation_score_": _encode_floats(ranker.validation_score_),
    }
    if hasattr(ranker, "position_bias_"):
        fitted["position_bias_"] = [_encode_floats(row) for row in ranker.position_bias_]
    if "_fitted_on_queries" in ranker.__dict__:  # score() needs qid when true
        fitted["fitted_on_queries"] = bool(ranker._fitted_on_queries)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "lambdamart_version": __version__,
        "params": {name: encode_param(name, value) for name, value in ranker.get_params(deep=False).items()},
        "n_features_in": int(ranker.n_features_in_),
        "feature_names_in": None if names is None else [str(n) for n in names],
        "fitted": fitted,
        "trees": encoded,
    }


def _dumps(document):
    """JSON with one line per top-level entry and per tree field: readable heads, compact arrays."""
    def dump(value):
        return json.dumps(value, allow_nan=False, separators=(", ", ": "))

    lines = [f"  {dump(key)}: {dump(value)}" for key, value in document.items() if key != "trees"]
    tree_lines = [f"    {dump(key)}: {dump(value)}" for key, value in document["trees"].items()]
    lines.append('  "trees": {\n' + ",\n".join(tree_lines) + "\n  }")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _encode_float(value):
    value = float(value)
    if np.isnan(value):
        return None
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _encode_floats(a):
    a = np.asarray(a, dtype=np.float64)
    out = a.tolist()
    for i in np.flatnonzero(~np.isfinite(a)):
        out[i] = _encode_float(a[i])
    return out


def encode_param(name, value):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, os.PathLike):  # checkpoint_dir
        return os.fspath(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return _encode_float(value)
    if isinstance(value, (np.random.RandomState, np.random.Generator)):
        warnings.warn(f"{name} is a {type(value).__name__}, which a model file cannot hold; it is saved as None. "
                      f"Predictions do not depend on it; pass an int to keep refits reproducible.", UserWarning,
                      stacklevel=4)
        return None
    a = np.asarray(value)
    if a.ndim == 1 and a.dtype.kind in "iuf":
        return _encode_floats(a)
    raise TypeError(f"parameter {name}={value!r} cannot be written to a model file: only numbers, strings, None "
                    f"and 1-D numeric arrays can.")


# ---------------------------------------------------------------- reading


def read_model(path, cls):
    """Read a model file into a fitted estimator of class ``cls`` (see :func:`lambdamart.load_model`)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return _from_document(_parse(raw), cls)
    except _FormatError as e:
        raise ValueError(f"cannot load {os.fspath(path)!r}: {e}") from None


class _FormatError(Exception):
    """A problem with the file's content; load_model turns it into a ValueError naming the file."""


def _reject_constant(token):
    raise _FormatError(f"it contains the non-JSON literal {token}; model files are strict JSON.")


def _unique_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _FormatError("a JSON object repeats a key; the file has been edited or corrupted.")
    return dict(pairs)


def _parse(raw):
    if raw[:1] == b"\x80":
        raise _FormatError("it looks like a pickle. load_model reads only files written by save_model; load a "
                           "pickle with pickle or joblib, and only from a source you trust.")
    try:
        document = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError:
        raise _FormatError("it is not UTF-8 text, so not a model file written by save_model.") from None
    except json.JSONDecodeError as e:
        raise _FormatError(f"it is not valid JSON ({e}); the file may be truncated or not a model file.") from None
    except RecursionError:
        raise _FormatError("it nests JSON too deeply to be a model file.") from None
    except ValueError as e:  # e.g. an integer literal with too many digits
        raise _FormatError(f"it is not a readable JSON document ({e}).") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise _FormatError(f"it is not a lambdamart model file (no \"format\": \"{FORMAT}\" entry).")
    version = document.get("format_version")
    if type(version) is not int:
        raise _FormatError("its format_version is missing or not an integer.")
    if version != FORMAT_VERSION:
        writer = document.get("lambdamart_version")
        newer = " Upgrade lambdamart to read it." if version > FORMAT_VERSION else ""
        raise _FormatError(f"it is in model format version {version} (written by lambdamart {writer!r}), and "
                           f"lambdamart {__version__} reads format version {FORMAT_VERSION}.{newer}")
    return document


def _field(mapping, key, where):
    if key not in mapping:
        raise _FormatError(f"{where} has no {key!r} entry; the file is incomplete.")
    return mapping[key]


def _from_document(doc, cls):
    ranker = cls(**_decode_params(_field(doc, "params", "the file"), cls))
    try:
        validate_params(ranker)
    except (TypeError, ValueError) as e:
        raise _FormatError(f"its parameters are invalid: {e}") from None

    n_features = _field(doc, "n_features_in", "the file")
    if type(n_features) is not int or n_features < 1:
        raise _FormatError(f"n_features_in must be a positive integer, got {n_features!r}.")
    names = _field(doc, "feature_names_in", "the file")
    if names is not None:
        if (not isinstance(names, list) or len(names) != n_features
                or not all(type(n) is str for n in names)):
            raise _FormatError(f"feature_names_in must be null or a list of {n_features} strings.")
        if len(set(names)) != n_features:
            raise _FormatError("feature_names_in repeats a name.")

    trees = _field(doc, "trees", "the file")
    if not isinstance(trees, dict):
        raise _FormatError("trees must be a JSON object of node arrays.")
    unknown = set(trees) - set(_TREE_FIELDS)
    if unknown:
        raise _FormatError(f"trees has fields {sorted(unknown)} that format version {FORMAT_VERSION} does not "
                           f"define.")
    arrays = {name: _decode_tree_field(name, _field(trees, name, "trees")) for name in _TREE_FIELDS}
    arrays = _check_trees(arrays, n_features)

    fitted = _field(doc, "fitted", "the file")
    if not isinstance(fitted, dict):
        raise _FormatError("fitted must be a JSON object.")
    n_estimators = _field(fitted, "n_estimators_", "fitted")
    n_iter = _field(fitted, "n_iter_", "fitted")
    best = _field(fitted, "best_iteration_", "fitted")
    if type(n_estimators) is not int or n_estimators != arrays["tree_starts"].shape[0]:
        raise _FormatError(f"fitted.n_estimators_ is {n_estimators!r} but the file holds "
                           f"{arrays['tree_starts'].shape[0]} trees.")
    if type(n_iter) is not int or n_iter < n_estimators:
        raise _FormatError(f"fitted.n_iter_ must be an integer >= n_estimators_, got {n_iter!r}.")
    if best is not None and (type(best) is not int or not 1 <= best <= n_iter):
        raise _FormatError(f"fitted.best_iteration_ must be null or an integer in [1, n_iter_], got {best!r}.")

    ranker.n_features_in_ = n_features
    if names is not None:
        ranker.feature_names_in_ = np.asarray(names, dtype=object)  # as scikit-learn's validate_data stores them
    ranker.n_estimators_ = n_estimators
    ranker.n_iter_ = n_iter
    ranker.best_iteration_ = best
    ranker.train_score_ = _decode_floats(_field(fitted, "train_score_", "fitted"), "fitted.train_score_")
    ranker.validation_score_ = _decode_floats(_field(fitted, "validation_score_", "fitted"),
                                              "fitted.validation_score_")
    if "position_bias_" in fitted:
        ranker.position_bias_ = _decode_position_bias(fitted["position_bias_"])
    if "fitted_on_queries" in fitted:
        if type(fitted["fitted_on_queries"]) is not bool:
            raise _FormatError("fitted.fitted_on_queries must be true or false.")
        ranker._fitted_on_queries = fitted["fitted_on_queries"]
    ranker._set_trees(arrays)
    return ranker


def _decode_position_bias(rows):
    where = "fitted.position_bias_"
    _check_list(rows, where)
    if len(rows) != 2:
        raise _FormatError(f"{where} must hold two lists (clicked, unclicked), got {len(rows)}.")
    decoded = [_decode_floats(row, f"{where}[{i}]") for i, row in enumerate(rows)]
    if decoded[0].shape != decoded[1].shape:
        raise _FormatError(f"{where} must hold two lists of the same length.")
    if not np.all(np.isfinite(decoded[0])) or not np.all(np.isfinite(decoded[1])):
        raise _FormatError(f"{where} holds a non-finite bias.")
    return np.vstack(decoded)


def _decode_params(params, cls):
    if not isinstance(params, dict):
        raise _FormatError("params must be a JSON object.")
    defaults = cls().get_params(deep=False)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        # Parameters do not change what the trees predict, so a newer writer's extra ones are only reported.
        warnings.warn(f"the model file sets parameters this lambdamart {__version__} does not have: {unknown}; "
                      f"they are ignored (predictions do not depend on them).", UserWarning, stacklevel=4)
    decoded = {}
    for name in set(params) & set(defaults):
        value = params[name]
        if isinstance(value, list):
            value = _decode_floats(value, f"params.{name}")
        elif isinstance(defaults[name], float) and value in ("inf", "-inf"):
            value = float(value)
        elif isinstance(value, dict):
            raise _FormatError(f"params.{name} is a JSON object; parameters are numbers, strings, null or lists.")
        decoded[name] = value
    return {**EARLIER_DEFAULTS, **decoded}


# Parameters added after fits were first saved (model files, checkpoints, pickles), with the value that describes a
# fit saved without them: its trees were grown leaf-wise, and continuing it should grow the same kind.
EARLIER_DEFAULTS = {"grow_policy": "leafwise"}


def _check_list(values, where):
    if not isinstance(values, list):
        raise _FormatError(f"{where} must be a JSON list, got {type(values).__name__}.")


def _decode_ints(values, where):
    _check_list(values, where)
    if not set(map(type, values)) <= {int}:
        raise _FormatError(f"{where} must hold only integers.")
    try:
        return np.array(values, dtype=np.int64).reshape(-1)
    except OverflowError:
        raise _FormatError(f"{where} holds an integer out of range.") from None


def _decode_bools(values, where):
    _check_list(values, where)
    if not set(map(type, values)) <= {bool}:
        raise _FormatError(f"{where} must hold only true/false.")
    return np.array(values, dtype=np.bool_).reshape(-1)


def _decode_floats(values, where):
    _check_list(values, where)
    kinds = set(map(type, values))
    try:
        if kinds <= {float, int}:
            return np.array(values, dtype=np.float64).reshape(-1)
        if not kinds <= {float, int, str, type(None)}:
            raise _FormatError(f"{where} must hold only numbers, \"inf\", \"-inf\" or null.")
        out = np.empty(len(values))
        for i, v in enumerate(values):
            if v is None:
                out[i] = np.nan
            elif isinstance(v, str):
                if v not in ("inf", "-inf"):
                    raise _FormatError(f"{where}[{i}] is the string {v!r}; only \"inf\" and \"-inf\" are allowed.")
                out[i] = float(v)
            else:
                out[i] = v
        return out
    except OverflowError:
        raise _FormatError(f"{where} holds a number too large for float64.") from None


def _decode_tree_field(name, values):
    where = f"trees.{name}"
    if name in _INT_FIELDS:
        return _decode_ints(values, where)
    if name in _BOOL_FIELDS:
        return _decode_bools(values, where)
    return _decode_floats(values, where)


def check_trees(a, n_features, what="the imported trees"):
    """:func:`_check_trees` for node arrays that come from elsewhere (an imported model, a checkpoint): a problem
    raises ValueError naming ``what``."""
    try:
        return _check_trees(a, n_features)
    except _FormatError as e:
        raise ValueError(f"{what} are inconsistent: {e}") from None


def _check_trees(a, n_features):
    """Check that the node arrays form proper trees over ``n_features`` features; return them in model dtypes.

    What predict relies on: every split's feature is a column of X, every child index is a node of the same tree
    and comes after its parent (so walking down always ends at a leaf), every leaf has a finite value.
    """
    n_nodes = a["feature"].shape[0]
    for name in NODE_DTYPES:
        if a[name].shape[0] != n_nodes:
            raise _FormatError(f"trees.{name} has {a[name].shape[0]} entries but trees.feature has {n_nodes}; "
                               f"every node array must have one entry per node.")
    starts = a["tree_starts"]
    n_trees = starts.shape[0]
    if n_nodes >= np.iinfo(np.int32).max:
        raise _FormatError(f"the file holds {n_nodes} nodes, more than a model can index.")
    if n_trees == 0:
        if n_nodes:
            raise _FormatError("trees.tree_starts is empty but the file holds nodes.")
    else:
        if starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= n_nodes:
            raise _FormatError("trees.tree_starts must start at 0 and increase strictly, each start a node index.")

    node = np.arange(n_nodes, dtype=np.int64)
    tree_end = np.append(starts[1:], n_nodes)[np.repeat(np.arange(n_trees), np.diff(np.append(starts, n_nodes)))]
    feature, left, right = a["feature"], a["left"], a["right"]
    leaf = left == -1
    split = ~leaf
    if np.any(right[leaf] != -1) or np.any(feature[leaf] != -1):
        raise _FormatError("a leaf (left == -1) must have right == -1 and feature == -1.")
    if np.any((feature[split] < 0) | (feature[split] >= n_features)):
        raise _FormatError(f"a split's feature index is outside [0, {n_features - 1}] (n_features_in is "
                           f"{n_features}).")
    for name, child in (("left", left), ("right", right)):
        if np.any((child[split] <= node[split]) | (child[split] >= tree_end[split])):
            raise _FormatError(f"a split's {name} child index is out of range: children must be nodes of the same "
                               f"tree that come after their parent.")
    parents = np.bincount(np.concatenate((left[split], right[split])), minlength=n_nodes)
    is_root = np.zeros(n_nodes, dtype=bool)
    is_root[starts] = True
    if np.any(parents[is_root] != 0) or np.any(parents[~is_root] != 1):
        raise _FormatError("the nodes do not form trees: every node but a tree's root must have exactly one "
                           "parent.")
    if not np.all(np.isfinite(a["value"][leaf])):
        raise _FormatError("a leaf value is NaN or infinite.")
    if np.any(np.isnan(a["threshold"][split])):
        raise _FormatError("a split threshold is null (NaN); only leaves have no threshold.")
    if not np.all(np.isfinite(a["gain"][split])):
        raise _FormatError("a split gain is NaN or infinite.")
    if np.any(a["count"] < 0):
        raise _FormatError("a node count is negative.")

    out = {name: np.ascontiguousarray(a[name], dtype=dtype) for name, dtype in NODE_DTYPES.items()}
    out["threshold"][leaf] = np.nan  # a leaf has no threshold, whatever the file wrote there
    out["tree_starts"] = np.ascontiguousarray(starts, dtype=np.int64)
    return out
