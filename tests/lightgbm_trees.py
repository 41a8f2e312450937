"""LightGBM models as lambdamart flat trees, for comparing with LightGBM's own numbers (TreeSHAP tests, benchmark).

Only what those comparisons need: numeric splits with ``decision_type "<="`` whose missing values are NaN (sent to
``default_left``) or not special (``missing_type "None"``: LightGBM turns NaN into 0.0, so it goes where 0.0 goes).
Anything else (categorical splits, ``zero_as_missing``, several trees per iteration) raises.
"""

import numpy as np

from lambdamart import LambdaMARTRanker
from lambdamart._engine.tree import NODE_DTYPES, concatenate_trees


def lightgbm_trees(booster):
    """The flat node arrays (``concatenate_trees``' dict) of a LightGBM Booster, and its feature count."""
    model = booster.dump_model()
    if model["num_tree_per_iteration"] != 1:
        raise ValueError("only models with one tree per iteration convert")
    return concatenate_trees([_tree(info["tree_structure"]) for info in model["tree_info"]]), \
        model["max_feature_idx"] + 1


def lightgbm_as_ranker(booster):
    """A LambdaMARTRanker holding the trees of a LightGBM Booster: it predicts what the booster predicts."""
    trees, n_features = lightgbm_trees(booster)
    ranker = LambdaMARTRanker(n_jobs=1)
    ranker._trees = trees
    ranker.n_features_in_ = n_features
    ranker.n_estimators_ = trees["tree_starts"].shape[0]
    return ranker


def _tree(root):
    """One tree's node arrays from its dumped structure, in pre-order (children after their parent)."""
    nodes = {name: [] for name in NODE_DTYPES}
    pending = [(root, -1, False)]  # (dumped node, parent index, is the parent's left child)
    while pending:
        node, parent, is_left = pending.pop()
        index = len(nodes["feature"])
        if parent >= 0:
            nodes["left" if is_left else "right"][parent] = index
        if "leaf_value" in node:
            _append(nodes, feature=-1, threshold=np.nan, missing_left=False, left=-1, right=-1,
                    value=node["leaf_value"], gain=0.0, count=node.get("leaf_count", 1))
            continue
        if node["decision_type"] != "<=":
            raise ValueError(f"decision_type {node['decision_type']!r} does not convert")
        threshold = float(node["threshold"])
        if node["missing_type"] == "NaN":
            missing_left = node["default_left"]
        elif node["missing_type"] == "None":
            missing_left = 0.0 <= threshold
        else:
            raise ValueError(f"missing_type {node['missing_type']!r} does not convert")
        _append(nodes, feature=node["split_feature"], threshold=threshold, missing_left=missing_left, left=-1,
                right=-1, value=0.0, gain=node["split_gain"], count=node["internal_count"])
        pending.append((node["right_child"], index, False))
        pending.append((node["left_child"], index, True))
    return {name: np.asarray(values, dtype=NODE_DTYPES[name]) for name, values in nodes.items()}


def _append(nodes, **fields):
    for name, value in fields.items():
        nodes[name].append(value)
