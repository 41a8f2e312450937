"""XGBoost's JSON model (``Booster.save_model("model.json")``) written and read, and its JSON tree dump written.

XGBoost casts every input to float32 and sends ``x < split_condition`` (a float32) to the left child, NaN to the
side ``default_left`` says. Our rule is ``x <= t`` in float64. The mappings:

* export, ``t`` finite or -inf: ``c = nextafter_f32(m, +inf)`` where m is the largest float32 <= t. For every
  float32 x, ``x < c`` iff ``x <= m`` iff ``x <= t``, so float32 data go exactly our way. A float64 value that is not
  a float32 is rounded by XGBoost first and may go the other way when it lies between m and t.
* export, ``t = +inf`` (every non-missing value left, NaN right: the split of a feature's last bin): ``c = +inf``,
  so every finite value goes left; ``x = +inf`` alone goes right, where we send it left. No float32 c has
  ``+inf < c``; the exact alternative, ``c = -inf`` with the children exchanged, is not read alike across XGBoost
  (3.2 sends finite values to "yes" at such a node when it predicts a few rows at a time, and shap's
  ``TreeExplainer`` does the same), so an input of +inf is the only difference, and only at such splits.
* import: the float64 boundary between c's float32 predecessor p and c is their midpoint; XGBoost rounds a float64
  x to nearest (ties to even), so ``float32(x) < c`` iff ``x <= mid`` when p's last mantissa bit is even and
  ``x < mid`` otherwise. Our threshold is mid or the double just below it: float32 and float64 inputs both go
  exactly XGBoost's way. ``c = -inf`` (every non-missing value goes right, which XGBoost does not write) is read as
  threshold +inf with the children exchanged.

Leaf values are float32 in XGBoost (and summed in float32), so an exported model predicts like ours to ~1e-6.
``base_score`` is written as 0 (the trees are the whole model) and read back as a one-leaf tree.
"""

import json

import numpy as np

from .._engine.tree import split_trees
from .nodes import ForeignModel, feature_label, flat_trees, leaf_node_arrays

F32 = np.float32
_F32_MAX = float(np.finfo(np.float32).max)
# XGBoost counts features in 32 bits (bst_feature_t).
_MAX_FEATURES = 2**32 - 1
_ABOVE_F32_MAX = 2.0 ** 128  # the float64 image of "the float32 after FLT_MAX" when rounding to float32
_NO_PARENT = 2147483647
# Objectives whose predict is the raw sum of base_score and the leaves (no sigmoid, exp or softmax on top).
_RAW_OBJECTIVES = {"rank:ndcg", "rank:map", "rank:pairwise", "reg:squarederror", "reg:linear", "reg:absoluteerror",
                   "reg:pseudohubererror"}


# ---------------------------------------------------------------- thresholds


def float32_at_most(t):
    """The largest float32 <= t, elementwise (float64 array in, float32 array out)."""
    with np.errstate(over="ignore"):
        f = np.asarray(t, dtype=np.float64).astype(F32)
    above = f.astype(np.float64) > t
    f[above] = np.nextafter(f[above], F32(-np.inf))
    return f


def export_conditions(t):
    """XGBoost ``split_condition`` c for our thresholds t < +inf: for float32 x, ``x < c`` iff ``x <= t``."""
    return np.nextafter(float32_at_most(t), F32(np.inf))


def import_thresholds(c):
    """Our float64 thresholds for XGBoost split conditions c (float32): ``x <= t`` iff ``float32(x) < c``, for
    float32 and float64 x alike (XGBoost rounds float64 to nearest, ties to even).

    ``c = -inf`` (no value goes left) gives -inf here; the reader exchanges such a split's children instead.
    """
    c = np.asarray(c, dtype=F32)
    below = np.nextafter(c, F32(-np.inf))  # p, the float32 just below c
    p64 = np.where(below == -np.inf, -_ABOVE_F32_MAX, below.astype(np.float64))
    c64 = np.where(c == np.inf, _ABOVE_F32_MAX, c.astype(np.float64))
    mid = (p64 + c64) / 2  # exact: two adjacent float32 values need 25 bits
    even = (below.view(np.uint32) & 1) == 0  # ties round to the float32 with an even last bit (-inf counts even)
    t = np.where(even, mid, np.nextafter(mid, -np.inf))
    return np.where(c == -np.inf, -np.inf, t)


def _split_conditions(tree):
    """XGBoost's ``split_condition`` of every split node of ``tree`` (0 at leaves): ``export_conditions`` of the
    finite thresholds, +inf for +inf."""
    split = tree["left"] >= 0
    unbounded = split & (tree["threshold"] == np.inf)
    c = export_conditions(np.where(split & ~unbounded, tree["threshold"], 0.0))
    c[unbounded] = np.inf
    return c


def _f32_list(values):
    """float32 values as the shortest decimal that parses back to them (XGBoost reads them as float32)."""
    return [float(np.format_float_positional(v, unique=True, trim="-")) if np.isfinite(v) else float(v)
            for v in np.asarray(values, dtype=F32)]


# ---------------------------------------------------------------- the JSON model


def write_model(trees, n_features, feature_names):
    """XGBoost JSON model of the flat tree arrays ``trees`` (``xgboost.Booster().load_model(path)`` loads it).

    Parameters
    ----------
    trees : dict
        Flat node arrays of a fitted ranker (``ranker._trees``).
    n_features : int
    feature_names : sequence of str or None

    Returns
    -------
    str
    """
    refused = [str(n) for n in (feature_names if feature_names is not None else []) if set(str(n)) & set("[]<")]
    if refused:
        raise ValueError(f"XGBoost refuses feature names with '[', ']' or '<' (e.g. {refused[0]!r}) when it "
                         f"predicts; rename those columns before fitting, or export format='lightgbm' or 'onnx'.")
    xgb_trees = []
    for i, tree in enumerate(split_trees(trees)):
        split = tree["left"] >= 0
        left, right = tree["left"], tree["right"]
        c = _split_conditions(tree)
        n = split.shape[0]
        parents = np.full(n, _NO_PARENT, dtype=np.int64)
        parents[left[split]] = np.flatnonzero(split)
        parents[right[split]] = np.flatnonzero(split)
        value = np.where(split, 0.0, tree["value"])
        xgb_trees.append({
            "base_weights": _f32_list(value),
            "categories": [], "categories_nodes": [], "categories_segments": [], "categories_sizes": [],
            "default_left": (split & tree["missing_left"]).astype(int).tolist(),
            "id": i,
            "left_children": left.tolist(),
            "loss_changes": _f32_list(np.where(split, tree["gain"], 0.0)),
            "parents": parents.tolist(),
            "right_children": right.tolist(),
            "split_conditions": _f32_list(np.where(split, c, value)),
            "split_indices": np.where(split, tree["feature"], 0).tolist(),
            "split_type": [0] * n,
            "sum_hessian": _f32_list(tree["count"]),
            "tree_param": {"num_deleted": "0", "num_feature": str(n_features), "num_nodes": str(n),
                           "size_leaf_vector": "1"},
        })
    names = [] if feature_names is None else [str(n) for n in feature_names]
    document = {"learner": {
        "attributes": {},
        "feature_names": names,
        "feature_types": ["float"] * len(names),
        "gradient_booster": {"model": {
            "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": str(len(xgb_trees))},
            "iteration_indptr": list(range(len(xgb_trees) + 1)),
            "tree_info": [0] * len(xgb_trees),
            "trees": xgb_trees}, "name": "gbtree"},
        # base_score 0 and no boost_from_average: the margin is exactly the sum of the leaves.
        "learner_model_param": {"base_score": "0", "boost_from_average": "0", "num_class": "0",
                                "num_feature": str(n_features), "num_target": "1"},
        "objective": {"name": "rank:ndcg", "lambdarank_param": {
            "lambdarank_num_pair_per_sample": "4294967295", "lambdarank_pair_method": "topk",
            "lambdarank_unbiased": "0", "lambdarank_bias_norm": "1", "ndcg_exp_gain": "1",
            "lambdarank_normalization": "1", "lambdarank_score_normalization": "1"}}},
        "version": [2, 1, 0]}
    # XGBoost's JSON reader accepts Infinity / -Infinity (and writes them itself), and reads names as UTF-8: a
    # \uXXXX escape would stay in the name as those six characters.
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- the tree dump


def write_dump(trees, n_features, feature_names):
    """XGBoost's JSON tree dump (``Booster.get_dump(dump_format="json")`` as one JSON array) of ``trees``.

    The format the Elasticsearch and OpenSearch learning-to-rank plugins read as ``model/xgboost+json``: per node
    ``nodeid``, ``depth``, ``split`` (the feature's name), ``split_condition``, ``yes``, ``no``, ``missing`` and
    ``children`` (the "yes" child first), or ``nodeid`` and ``leaf``. No ``gain``/``cover``: the plugins reject
    fields they do not know. "yes" is taken when ``x < split_condition`` in float32, so thresholds follow
    the model's (:func:`write_model`); strict JSON has no infinities, so a +inf condition is written as
    3.4028235e38, the largest float32 (``x`` = that value then goes right too, as +inf does).

    Parameters
    ----------
    trees : dict
        Flat node arrays of a fitted ranker (``ranker._trees``).
    n_features : int
    feature_names : sequence of str or None
        The names written as ``split``; None writes XGBoost's ``f0``, ``f1``, ...

    Returns
    -------
    str
    """
    names = [f"f{i}" for i in range(n_features)] if feature_names is None else [str(n) for n in feature_names]
    dumped = []
    for tree in split_trees(trees):
        tree["condition"] = _f32_list(np.minimum(_split_conditions(tree), F32(_F32_MAX)))
        tree["leaf"] = _f32_list(tree["value"])
        try:
            dumped.append(json.dumps(_dump_node(tree, names, 0, 0), allow_nan=False, ensure_ascii=False))
        except RecursionError:  # the dump nests a level per depth; Python's json stops near 1000 levels
            raise ValueError(f"tree {len(dumped)} is too deep for the JSON tree dump, which nests one object per "
                             f"level; export format='xgboost', 'lightgbm' or 'onnx' instead.") from None
    return "[\n" + ",\n".join(dumped) + "\n]\n"


def _dump_node(tree, names, i, depth):
    if tree["left"][i] < 0:
        return {"nodeid": int(i), "leaf": tree["leaf"][i]}
    yes, no = int(tree["left"][i]), int(tree["right"][i])
    return {"nodeid": int(i), "depth": depth, "split": names[tree["feature"][i]],
            "split_condition": tree["condition"][i], "yes": yes, "no": no,
            "missing": yes if tree["missing_left"][i] else no,
            "children": [_dump_node(tree, names, yes, depth + 1), _dump_node(tree, names, no, depth + 1)]}


# ---------------------------------------------------------------- reading


def read_model(raw, where):
    """An XGBoost JSON model as flat tree arrays (see :class:`~.nodes.ForeignModel`); ``base_score`` becomes a
    one-leaf tree at the end.

    Parameters
    ----------
    raw : bytes
        The model file's content.
    where : str
        How error messages name the source.

    Returns
    -------
    ForeignModel
    """
    where = f"cannot import {where} (XGBoost JSON model)"
    try:
        document = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{where}: it is not UTF-8 JSON. A UBJSON model (.ubj) must be saved as JSON first: "
                         f"booster.save_model('model.json').") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: it is not valid JSON ({e}); the file may be truncated, or be a UBJSON model "
                         f"(.ubj), which must be saved as JSON first: booster.save_model('model.json').") from None
    except RecursionError:
        raise ValueError(f"{where}: it nests JSON too deeply.") from None
    if isinstance(document, list):
        raise ValueError(f"{where}: it is a JSON tree dump (get_dump), which lacks the number of features and "
                         f"base_score; import the model saved with booster.save_model('model.json').")
    if isinstance(document, dict) and document.get("format") == "lambdamart-model":
        raise ValueError(f"{where}: it is a lambdamart model file; load it with lambdamart.load_model.")
    try:
        learner = document["learner"]
        params = learner["learner_model_param"]
        booster = learner["gradient_booster"]
        objective = learner.get("objective", {}).get("name", "")
        n_features = _integer(params["num_feature"], "num_feature", where)
        n_class = _integer(params.get("num_class", "0"), "num_class", where)
        n_target = _integer(params.get("num_target", "1"), "num_target", where)
        base_score = params.get("base_score", "0")
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{where}: it lacks XGBoost's learner entries ({e!r}); it is not an XGBoost JSON model or "
                         f"is incomplete.") from None
    if not 1 <= n_features <= _MAX_FEATURES:
        raise ValueError(f"{where}: its num_feature is {n_features}, which no model has (1 to {_MAX_FEATURES}); "
                         f"the file is damaged.")
    if n_class > 1 or n_target > 1:
        raise ValueError(f"{where}: it has num_class={n_class}, num_target={n_target}; a LambdaMARTRanker has one "
                         f"output, so only single-output models (ranking, regression) can be imported, not "
                         f"multiclass or multi-target ones.")
    if not isinstance(objective, str) or objective not in _RAW_OBJECTIVES:
        raise ValueError(f"{where}: its objective {objective!r} transforms the sum of the trees in predict (or is "
                         f"not one this importer knows), and a LambdaMARTRanker predicts the raw sum. Objectives "
                         f"that can be imported: {sorted(_RAW_OBJECTIVES)}.")
    if not isinstance(booster, dict) or booster.get("name") != "gbtree":
        name = booster.get("name") if isinstance(booster, dict) else booster
        raise ValueError(f"{where}: its booster is {name!r}; only 'gbtree' models (not dart or gblinear) can be "
                         f"imported.")
    names = learner.get("feature_names") or None
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        # XGBoost refuses to load such a file too
        raise ValueError(f"{where}: its feature_names entry is not a list of strings; the file is damaged.")
    if names is not None and len(names) != n_features:
        names = None
    bias = _base_score(base_score, where)
    try:
        model = booster["model"]
        raw_trees = model["trees"]
        tree_info = model.get("tree_info", [])
        n_trees = _integer(model["gbtree_model_param"]["num_trees"], "num_trees", where)
    except (KeyError, TypeError) as e:
        raise ValueError(f"{where}: its tree list is missing ({e!r}); the file is incomplete or edited.") from None
    if not isinstance(raw_trees, list) or not isinstance(tree_info, list) or n_trees != len(raw_trees):
        raise ValueError(f"{where}: its trees and tree_info must be lists and num_trees the number of trees; the file "
                         f"is incomplete or edited.")
    if any(g != 0 for g in tree_info):
        raise ValueError(f"{where}: its trees belong to several output groups; only single-output models can be "
                         f"imported.")
    trees = [_read_tree(t, i, n_features, names, where) for i, t in enumerate(raw_trees)]
    if bias != 0.0:
        base = leaf_node_arrays(1)
        base["value"][0] = bias
        trees.append(base)
    return ForeignModel(flat_trees(trees, where), n_features, names, "xgboost")


def _integer(value, key, where):
    """An integer entry (XGBoost writes them as strings, e.g. "5"); else ValueError naming ``key``."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinity
        raise ValueError(f"{where}: its {key} {value!r} is not an integer; the file is damaged.") from None


def _node_array(tree, key, dtype, default, where):
    """``tree[key]`` as a 1-d array of ``dtype`` (``default`` when absent and not None); ValueError naming ``key``
    when it is missing, not a list, or holds an entry ``dtype`` cannot hold."""
    if key not in tree and default is None:
        raise ValueError(f"{where}: it has no {key}; the file is incomplete.")
    try:
        a = np.asarray(tree.get(key, default), dtype=dtype)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond int64, an infinity
        a = None
    if a is None or a.ndim != 1:
        raise ValueError(f"{where}: its {key} is not a list of numbers in range; the file is corrupt.")
    return a


def _base_score(text, where):
    """XGBoost 3 stores base_score as "[5E-1]" (one entry per target), older versions as "5E-1"."""
    values = str(text).strip().strip("[]").split(",")
    try:
        scores = [float(F32(float(v))) for v in values if v.strip()]
    except ValueError:
        scores = None
    if not scores or len(scores) != 1 or not np.isfinite(scores[0]):
        raise ValueError(f"{where}: its base_score {text!r} is not one finite number.")
    return scores[0]


def _read_tree(tree, index, n_features, names, where):
    where = f"{where}, tree {index}"
    if not isinstance(tree, dict):
        raise ValueError(f"{where}: it is not a JSON object; the file is corrupt.")
    left = _node_array(tree, "left_children", np.int64, None, where)
    n = left.shape[0]
    right = _node_array(tree, "right_children", np.int64, None, where)
    feature = _node_array(tree, "split_indices", np.int64, None, where)
    cond = _node_array(tree, "split_conditions", np.float64, None, where)
    default_left = _node_array(tree, "default_left", np.int64, None, where) != 0
    split_type = _node_array(tree, "split_type", np.int64, [0] * n, where)
    gain = _node_array(tree, "loss_changes", np.float64, [0.0] * n, where)
    tree_param = tree.get("tree_param", {})
    if not isinstance(tree_param, dict):
        raise ValueError(f"{where}: its tree_param is not a JSON object; the file is corrupt.")
    leaf_size = _integer(tree_param.get("size_leaf_vector", "1"), "size_leaf_vector", where)
    if n == 0 or any(a.shape != (n,) for a in (right, feature, cond, default_left, split_type, gain)):
        raise ValueError(f"{where}: its node arrays differ in length or are empty; the file is corrupt.")
    if leaf_size > 1:
        raise ValueError(f"{where}: it has vector leaves (multi-target); only one output can be imported.")
    split = left >= 0
    if np.any(split_type[split] != 0):
        f = int(feature[np.argmax(split & (split_type != 0))])
        raise ValueError(f"{where}: it splits {feature_label(f, names)} by category; a LambdaMARTRanker splits "
                         f"only on numeric thresholds. Refit with enable_categorical=False (numeric codes).")
    if np.any(split & ((feature < 0) | (feature >= n_features))):
        raise ValueError(f"{where}: a split_indices entry is outside [0, {n_features - 1}].")
    if np.any(split & np.isnan(cond)):
        raise ValueError(f"{where}: a split_condition is NaN.")
    nodes = leaf_node_arrays(n)
    nodes["feature"][split] = feature[split]
    # c = -inf sends every non-missing value right ("no"): our +inf threshold with the children exchanged.
    swap = split & (cond == -np.inf)
    nodes["threshold"][split] = np.where(swap[split], np.inf, import_thresholds(F32(cond[split])))
    nodes["missing_left"][split] = (default_left != swap)[split]
    nodes["left"][split] = np.where(swap, right, left)[split]
    nodes["right"][split] = np.where(swap, left, right)[split]
    nodes["value"][~split] = cond[~split].astype(F32)  # leaves hold float32 values
    nodes["gain"][split] = np.nan_to_num(gain[split])
    return nodes
