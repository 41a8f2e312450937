"""An ONNX graph of the trees: one ``TreeEnsemble`` node (domain ``ai.onnx.ml``, opset 5) over float64 input.

TreeEnsemble takes its thresholds as a tensor of the input's type, so with a float64 input the comparison is ours
exactly: mode BRANCH_LEQ (``x <= threshold`` is the "true" branch, our left child) and
``nodes_missing_value_tracks_true`` from ``missing_left`` for NaN; a +inf threshold stays +inf. Graph contract:
input ``X``, float64 of shape (batch, n_features), batch dynamic; output ``score``, float64 of shape (batch, 1),
the sum of the trees' leaves. The feature names, when known, are in the model's metadata (``feature_names``, a JSON
list).

TreeEnsemble lists split nodes only; leaves are separate (``leaf_weights``). A tree that is a single leaf becomes
one split whose both branches reach that leaf.
"""

import json

import numpy as np

from .._engine.tree import concatenate_trees
from .nodes import leaf_node_arrays

_BRANCH_LEQ = 0
_SUM = 1
_NO_TRANSFORM = 0
ML_OPSET = 5
ONNX_OPSET = 21
IR_VERSION = 10  # the first IR version with ai.onnx.ml opset 5 (onnx 1.16); runtimes from 2024 on read it


def write(trees, n_features, feature_names):
    """Serialized ONNX model (bytes) of the flat tree arrays ``trees``; onnxruntime runs it.

    Parameters
    ----------
    trees : dict
        Flat node arrays of a fitted ranker (``ranker._trees``).
    n_features : int
    feature_names : sequence of str or None
        Stored as metadata (``feature_names``); the input is positional.

    Returns
    -------
    bytes
    """
    import onnx  # optional dependency (the "onnx" extra)
    from onnx import TensorProto, helper, numpy_helper

    if trees["feature"].shape[0] == 0:  # no trees (an imported model of 0 rounds): one leaf of 0 scores as it does
        trees = concatenate_trees([leaf_node_arrays(1)])
    left, right, feature = trees["left"], trees["right"], trees["feature"]
    split = left >= 0
    leaf = ~split
    n_nodes = feature.shape[0]
    # Split nodes keep their order; a one-leaf tree gets a stand-in split (feature 0) reaching its leaf both ways.
    starts = trees["tree_starts"]
    single = starts[leaf[starts]]
    node_of = np.full(n_nodes, -1, dtype=np.int64)
    node_of[split] = np.arange(int(split.sum()))
    leaf_of = np.full(n_nodes, -1, dtype=np.int64)
    leaf_of[leaf] = np.arange(int(leaf.sum()))

    def target(child):
        is_leaf = leaf[child]
        return np.where(is_leaf, leaf_of[child], node_of[child]), is_leaf.astype(np.int64)

    true_ids, true_leafs = target(left[split])
    false_ids, false_leafs = target(right[split])
    n_split = int(split.sum())
    stand_in = np.arange(n_split, n_split + single.shape[0])
    node_of[single] = stand_in
    features = np.concatenate([feature[split], np.zeros(single.shape[0], dtype=np.int64)])
    thresholds = np.concatenate([trees["threshold"][split], np.zeros(single.shape[0])])
    true_ids = np.concatenate([true_ids, leaf_of[single]])
    false_ids = np.concatenate([false_ids, leaf_of[single]])
    true_leafs = np.concatenate([true_leafs, np.ones(single.shape[0], dtype=np.int64)])
    false_leafs = np.concatenate([false_leafs, np.ones(single.shape[0], dtype=np.int64)])
    tracks_true = np.concatenate([trees["missing_left"][split], np.zeros(single.shape[0], dtype=bool)])
    roots = node_of[starts]

    node = helper.make_node(
        "TreeEnsemble", ["X"], ["score"], domain="ai.onnx.ml", name="trees",
        nodes_featureids=features.tolist(),
        nodes_splits=numpy_helper.from_array(thresholds.astype(np.float64), name="nodes_splits"),
        nodes_modes=numpy_helper.from_array(np.full(features.shape[0], _BRANCH_LEQ, dtype=np.uint8),
                                            name="nodes_modes"),
        nodes_truenodeids=true_ids.tolist(), nodes_trueleafs=true_leafs.tolist(),
        nodes_falsenodeids=false_ids.tolist(), nodes_falseleafs=false_leafs.tolist(),
        nodes_missing_value_tracks_true=tracks_true.astype(np.int64).tolist(),
        leaf_targetids=[0] * int(leaf.sum()),
        leaf_weights=numpy_helper.from_array(trees["value"][leaf].astype(np.float64), name="leaf_weights"),
        tree_roots=roots.tolist(), n_targets=1, aggregate_function=_SUM, post_transform=_NO_TRANSFORM)
    graph = helper.make_graph(
        [node], "lambdamart",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, ["batch", n_features])],
        [helper.make_tensor_value_info("score", TensorProto.DOUBLE, ["batch", 1])])
    model = helper.make_model(graph, producer_name="lambdamart", ir_version=IR_VERSION,
                              opset_imports=[helper.make_opsetid("", ONNX_OPSET),
                                             helper.make_opsetid("ai.onnx.ml", ML_OPSET)],
                              doc_string="LambdaMART ranker: score = sum of the trees' leaves; rank a query's "
                                         "documents by descending score.")
    if feature_names is not None:
        helper.set_model_props(model, {"feature_names": json.dumps([str(n) for n in feature_names])})
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()
