"""LightGBM's text model format (``Booster.save_model`` / ``model_to_string``), written and read.

Every split is written with missing type NaN (``decision_type`` bits 2-3 = 2) and ``default_left`` from
``missing_left``: LightGBM then sends NaN to the default side and compares every other value as ``x <= threshold``
in float64, exactly our rule (missing type None would turn NaN into 0.0 first). Thresholds and leaf values are
written with 17 significant digits, which LightGBM parses back to the same doubles; a +inf threshold is written
``inf``, which LightGBM reads as +inf, so ``x = +inf`` goes left as in our trees.

LightGBM's predict reads any |x| <= 1e-35 (``kZeroThreshold``, 1e-35 as float32) as 0.0. For our thresholds
outside [-1e-35, 1e-35) that changes nothing. A threshold inside is not rare: training values {-1, 1} give exactly
0.0. Tiny nonzero inputs on the far side of such a threshold from 0.0 then go the other way in LightGBM: at t = 0.0,
x = 1e-36 goes right in ours and left in LightGBM (as 0.0 <= 0.0); at t in [-1e-35, 0), x in [-1e-35, t] goes left
in ours and right in LightGBM. No threshold LightGBM reads can part them from 0.0. Export does not warn: real
features rarely hold nonzero values that small, while 0.0 thresholds are common.

Reading accepts numeric splits with missing type NaN or None (None: LightGBM compares NaN as 0.0, which is our
``missing_left = 0.0 <= threshold``); missing type Zero, categorical splits, linear trees, several trees per
iteration and objectives whose predictions are transformed raise ValueError. LightGBM learns thresholds of
±kZeroThreshold (splits between 0 and the rest); with tiny inputs read as 0.0, a threshold t in [0, K] becomes K
(every |x| <= K goes left, as 0.0 <= t does) and one in [-K, 0) becomes the double below -K, so that every input
goes exactly LightGBM's way.
"""

import numpy as np

from .._engine.tree import split_trees
from .nodes import ForeignModel, feature_label, flat_trees, leaf_node_arrays

_DEFAULT_LEFT = 2
_MISSING_NAN = 2 << 2
# LightGBM's predict reads every input with |x| <= kZeroThreshold (1e-35f) as 0.0 (it keeps only larger values when
# it converts a row), so such values meet a threshold as 0.0.
ZERO_THRESHOLD = float(np.float32(1e-35))
# Objectives whose Booster.predict is the raw sum of leaves (no sigmoid, exp or softmax on top).
_RAW_OBJECTIVES = {"lambdarank", "rank_xendcg", "regression", "regression_l1", "huber", "fair", "quantile", "mape",
                   "custom", "none"}


def _number(x):
    """17 significant digits: parsed back to the same double (LightGBM's own parser is exact)."""
    x = float(x)
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def _join(values, fmt=str):
    return " ".join(fmt(v) for v in values)


def write(trees, n_features, feature_names):
    """LightGBM text model of the flat tree arrays ``trees`` (``Booster(model_file=...)`` loads it).

    Parameters
    ----------
    trees : dict
        Flat node arrays of a fitted ranker (``ranker._trees``).
    n_features : int
    feature_names : sequence of str or None
        Names written to ``feature_names`` (whitespace, which the format cannot hold, becomes "_"); None writes
        LightGBM's default names ``Column_0`` ...

    Returns
    -------
    str
    """
    names = _lightgbm_names(n_features, feature_names)
    header = ["tree", "version=v4", "num_class=1", "num_tree_per_iteration=1", "label_index=0",
              f"max_feature_idx={n_features - 1}", "objective=lambdarank", f"feature_names={' '.join(names)}",
              f"feature_infos={' '.join(['none'] * n_features)}", ""]
    blocks = [_tree_block(i, t) for i, t in enumerate(split_trees(trees))]
    return "\n".join(header) + "\n" + "".join(blocks) + "end of trees\n\npandas_categorical:null\n"


def _lightgbm_names(n_features, feature_names):
    if feature_names is None:
        return [f"Column_{i}" for i in range(n_features)]
    names = ["_".join(str(n).split()) or "_" for n in feature_names]
    if len(set(names)) != len(names):
        raise ValueError("the feature names repeat once whitespace is replaced by '_' (LightGBM's text format "
                         "separates names by spaces); rename the columns and refit, or export without names.")
    return names


def _tree_block(index, tree):
    split = tree["left"] >= 0
    if not split.any():
        lines = ["num_leaves=1", "num_cat=0", "split_feature=", "split_gain=", "threshold=", "decision_type=",
                 "left_child=", "right_child=", f"leaf_value={_number(tree['value'][0])}",
                 f"leaf_count={int(tree['count'][0])}", "internal_value=", "internal_count="]
    else:
        # LightGBM numbers internal nodes and leaves separately; a child that is a leaf is written as ~leaf.
        internal = np.flatnonzero(split)
        leaves = np.flatnonzero(~split)
        code = np.empty(split.shape[0], dtype=np.int64)
        code[internal] = np.arange(internal.shape[0])
        code[leaves] = ~np.arange(leaves.shape[0])
        decision = _MISSING_NAN | np.where(tree["missing_left"][internal], _DEFAULT_LEFT, 0)
        lines = [f"num_leaves={leaves.shape[0]}", "num_cat=0",
                 f"split_feature={_join(tree['feature'][internal])}",
                 f"split_gain={_join(tree['gain'][internal], _number)}",
                 f"threshold={_join(tree['threshold'][internal], _number)}",
                 f"decision_type={_join(decision)}",
                 f"left_child={_join(code[tree['left'][internal]])}",
                 f"right_child={_join(code[tree['right'][internal]])}",
                 f"leaf_value={_join(tree['value'][leaves], _number)}",
                 f"leaf_count={_join(tree['count'][leaves])}",
                 f"internal_value={_join(_internal_values(tree)[internal], _number)}",
                 f"internal_count={_join(tree['count'][internal])}"]
    lines += ["is_linear=0", "shrinkage=1"]
    return f"Tree={index}\n" + "\n".join(lines) + "\n\n\n"


def _internal_values(tree):
    """Each node's row-weighted mean leaf value (what LightGBM stores as internal_value); children follow parents,
    so one backward pass sums subtrees."""
    n = tree["left"].shape[0]
    count = np.maximum(tree["count"].astype(np.float64), 0.0)
    total = np.where(tree["left"] < 0, tree["value"] * count, 0.0)
    rows = np.where(tree["left"] < 0, count, 0.0)
    for i in range(n - 1, -1, -1):
        if tree["left"][i] >= 0:
            for child in (tree["left"][i], tree["right"][i]):
                total[i] += total[child]
                rows[i] += rows[child]
    return np.divide(total, rows, out=np.zeros(n), where=rows > 0)


# ---------------------------------------------------------------- reading


def read(text, where):
    """A LightGBM text model as flat tree arrays (see :class:`~.nodes.ForeignModel`).

    Parameters
    ----------
    text : str
        The model file's content.
    where : str
        How error messages name the source.

    Returns
    -------
    ForeignModel
    """
    where = f"cannot import {where} (LightGBM text model)"
    if "end of trees" not in text:
        raise ValueError(f"{where}: it has no 'end of trees' line, so it is truncated or not a LightGBM model.")
    body = text[:text.index("end of trees")]
    first_tree = body.find("\nTree=")
    header = _key_values(body if first_tree < 0 else body[:first_tree])
    blocks = [] if first_tree < 0 else body[first_tree + 1:].split("\nTree=")

    n_class = _int(header.get("num_class", "1"), "num_class", where)
    per_iteration = _int(header.get("num_tree_per_iteration", "1"), "num_tree_per_iteration", where)
    if n_class != 1 or per_iteration != 1:
        raise ValueError(f"{where}: it has num_class={n_class} and num_tree_per_iteration={per_iteration}; a "
                         f"LambdaMARTRanker has one output, so only single-output models (ranking, regression) "
                         f"can be imported, not multiclass ones.")
    objective = header.get("objective", "none").split()
    if objective and objective[0] not in _RAW_OBJECTIVES:
        raise ValueError(f"{where}: its objective {objective[0]!r} transforms the sum of the trees in predict (e.g. "
                         f"a sigmoid), and a LambdaMARTRanker predicts the raw sum. Only objectives whose predict "
                         f"is the raw sum can be imported: {sorted(_RAW_OBJECTIVES)}.")
    if "sqrt" in objective[1:]:
        raise ValueError(f"{where}: it was fitted with reg_sqrt=True, so its predict squares the sum of the trees, "
                         f"and a LambdaMARTRanker predicts the raw sum.")
    if "average_output" in header:
        raise ValueError(f"{where}: it averages its trees (random-forest mode), and a LambdaMARTRanker sums them.")
    if "max_feature_idx" not in header:
        raise ValueError(f"{where}: it has no max_feature_idx line; the file is incomplete.")
    n_features = _int(header["max_feature_idx"], "max_feature_idx", where) + 1
    if n_features < 1:
        raise ValueError(f"{where}: max_feature_idx must be >= 0.")
    # Separated by ' ' alone, as LightGBM reads them (it keeps other whitespace, e.g. U+00A0, inside a name).
    names = [n for n in header.get("feature_names", "").split(" ") if n]
    if len(names) != n_features:
        raise ValueError(f"{where}: its feature_names line holds {len(names)} names for max_feature_idx + 1 = "
                         f"{n_features} features (LightGBM refuses such a file too); the file is truncated or edited.")
    if names == [f"Column_{i}" for i in range(n_features)]:
        names = None  # LightGBM's generated names: the model was fitted without column names
    if "tree_sizes" in header and len(header["tree_sizes"].split()) != len(blocks):
        raise ValueError(f"{where}: its tree_sizes line lists {len(header['tree_sizes'].split())} trees but the file "
                         f"holds {len(blocks)}; the file is truncated or edited.")
    trees = [_read_tree(block, i, n_features, names, where) for i, block in enumerate(blocks)]
    return ForeignModel(flat_trees(trees, where), n_features, names, "lightgbm")


def lightgbm_view_of_threshold(t):
    """Our thresholds for LightGBM thresholds t, given that LightGBM's predict reads |x| <= K as 0.0 (K the float32
    1e-35): t in [0, K] sends x <= K left, t in [-K, 0) sends x < -K left; other thresholds are unchanged."""
    k = ZERO_THRESHOLD
    t = np.where((t >= 0) & (t <= k), k, t)
    return np.where((t >= -k) & (t < 0), np.nextafter(-k, -np.inf), t)


def _key_values(text):
    out = {}
    # Lines end at "\n" only and values keep their whitespace, as LightGBM reads them: a feature name may hold
    # characters str.splitlines and str.strip treat as line ends or spaces (U+2028, U+00A0).
    for line in text.split("\n"):
        key, sep, value = line.rstrip("\r").partition("=")
        key = key.strip()
        if key:
            out[key] = value if sep else ""
    return out


def _int(value, key, where):
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{where}: {key}={value!r} is not an integer.") from None


def _array(values, key, dtype, n, where):
    parts = values.get(key, "").split()
    try:
        a = np.array([float(p) for p in parts], dtype=np.float64) if dtype is float else np.array(
            [int(p) for p in parts], dtype=np.int64)
    except (ValueError, OverflowError):  # OverflowError: an integer beyond int64
        raise ValueError(f"{where}: {key} holds a value that is not a number or is out of range; the file is "
                         f"corrupt.") from None
    if a.shape[0] != n:
        raise ValueError(f"{where}: {key} has {a.shape[0]} entries, expected {n}; the file is truncated or edited.")
    return a


def _read_tree(block, index, n_features, names, where):
    where = f"{where}, tree {index}"
    values = _key_values(block.partition("\n")[2])
    if "num_leaves" not in values or "leaf_value" not in values:
        raise ValueError(f"{where}: it lacks num_leaves or leaf_value; the file is truncated or edited.")
    n_leaves = _int(values["num_leaves"], "num_leaves", where)
    if n_leaves < 1:
        raise ValueError(f"{where}: num_leaves must be >= 1.")
    if values.get("is_linear", "0").strip() not in ("", "0"):
        raise ValueError(f"{where}: it is a linear tree (linear_tree=True), whose leaves fit a linear model of the "
                         f"features; a LambdaMARTRanker's leaves hold constants. Refit with linear_tree=False.")
    n_split = n_leaves - 1
    leaf_value = _array(values, "leaf_value", float, n_leaves, where)
    nodes = leaf_node_arrays(n_split + n_leaves)  # internal nodes first, then leaf j at n_split + j
    nodes["value"][n_split:] = leaf_value
    if "leaf_count" in values:
        nodes["count"][n_split:] = _array(values, "leaf_count", int, n_leaves, where)
    if n_split == 0:
        return nodes
    feature = _array(values, "split_feature", int, n_split, where)
    decision = _array(values, "decision_type", int, n_split, where)
    categorical = (decision & 1) != 0
    if categorical.any() or _int(values.get("num_cat", "0") or "0", "num_cat", where) > 0:
        f = int(feature[np.argmax(categorical)]) if categorical.any() else int(feature[0])
        raise ValueError(f"{where}: it splits {feature_label(f, names)} by category; a LambdaMARTRanker splits only "
                         f"on numeric thresholds. Refit without categorical_feature (e.g. one-hot or ordinal "
                         f"codes as numbers).")
    if np.any((feature < 0) | (feature >= n_features)):
        raise ValueError(f"{where}: a split_feature is outside [0, {n_features - 1}].")
    missing_type = (decision >> 2) & 3
    if np.any(missing_type == 1):
        f = int(feature[np.argmax(missing_type == 1)])
        raise ValueError(f"{where}: it treats zero as missing for {feature_label(f, names)} (missing type Zero, "
                         f"from zero_as_missing=True or sparse input), which a threshold split cannot reproduce: "
                         f"values near 0 (|x| <= 1e-35) follow the default side. Refit with zero_as_missing=False "
                         f"and dense input, or with NaN for missing values.")
    if np.any(missing_type > 2):
        raise ValueError(f"{where}: a decision_type has an unknown missing type.")
    threshold = _array(values, "threshold", float, n_split, where)
    children = [_array(values, key, int, n_split, where) for key in ("left_child", "right_child")]
    # Missing type None: LightGBM compares NaN as 0.0, i.e. NaN goes left exactly when 0.0 <= threshold.
    missing_left = np.where(missing_type == 2, (decision & _DEFAULT_LEFT) != 0, 0.0 <= threshold)
    nodes["feature"][:n_split] = feature
    nodes["threshold"][:n_split] = lightgbm_view_of_threshold(threshold)
    nodes["missing_left"][:n_split] = missing_left
    for name, child in zip(("left", "right"), children):
        if np.any((child >= n_split) | (child < -n_leaves)):
            raise ValueError(f"{where}: {name}_child holds an index out of range; the file is corrupt.")
        nodes[name][:n_split] = np.where(child >= 0, child, n_split + ~child)
    if "split_gain" in values:
        nodes["gain"][:n_split] = _array(values, "split_gain", float, n_split, where)
    if "internal_count" in values:
        nodes["count"][:n_split] = _array(values, "internal_count", int, n_split, where)
    return nodes
