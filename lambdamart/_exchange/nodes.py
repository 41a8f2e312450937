"""Node bookkeeping shared by the formats: trees read from another library renumbered into our flat arrays."""

from typing import NamedTuple

import numpy as np

from .._engine.tree import NODE_DTYPES, concatenate_trees


class ForeignModel(NamedTuple):
    """A model read from another library's file."""

    trees: dict  # flat node arrays (NODE_DTYPES fields and tree_starts), children after parents
    n_features: int
    feature_names: list | None  # None when the file holds only generated names ("Column_0", "f0", none at all)
    format: str  # "lightgbm" or "xgboost", for messages


def preorder_tree(tree, where):
    """One tree's node arrays (``NODE_DTYPES`` fields, local child indices, root at 0) renumbered in pre-order.

    Nodes no path from the root reaches (XGBoost's deleted nodes) are dropped. Raises ValueError when the child
    indices do not form a tree (an index out of range, a node reached twice).
    """
    left, right = tree["left"], tree["right"]
    n = left.shape[0]
    order, seen, stack = [], np.zeros(n, dtype=bool), [0]
    while stack:
        i = stack.pop()
        if not 0 <= i < n or seen[i]:
            raise ValueError(f"{where}: its child indices do not form a tree (node {i} is out of range or has two "
                             f"parents); the file is corrupt.")
        seen[i] = True
        order.append(i)
        if left[i] >= 0:
            stack.append(int(right[i]))
            stack.append(int(left[i]))  # popped first: left subtrees come before right ones
    order = np.asarray(order, dtype=np.int64)
    new_index = np.full(n, -1, dtype=np.int64)
    new_index[order] = np.arange(order.shape[0])
    out = {name: np.asarray(tree[name])[order] for name in NODE_DTYPES}
    for name in ("left", "right"):
        out[name] = np.where(out[name] >= 0, new_index[np.maximum(out[name], 0)], -1)
    return out


def leaf_node_arrays(n):
    """Node arrays of ``n`` nodes initialised as leaves (to be filled in by a reader)."""
    return dict(feature=np.full(n, -1, dtype=np.int64), threshold=np.full(n, np.nan), missing_left=np.zeros(n, bool),
                left=np.full(n, -1, dtype=np.int64), right=np.full(n, -1, dtype=np.int64), value=np.zeros(n),
                gain=np.zeros(n), count=np.zeros(n, dtype=np.int64))


def flat_trees(trees, where):
    """Flat ensemble arrays of per-tree node arrays (local indices, root at 0), each renumbered in pre-order."""
    return concatenate_trees([preorder_tree(t, f"{where}, tree {i}") for i, t in enumerate(trees)])


def feature_label(index, names):
    """How messages name a feature: its name when there is one, else its column index."""
    return f"feature {names[index]!r} (column {index})" if names else f"feature column {index}"
