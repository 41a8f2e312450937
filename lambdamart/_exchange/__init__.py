"""Other libraries' model formats: LightGBM's text model, XGBoost's JSON model and tree dump, and ONNX.

One module per format. Writers take the fitted flat tree arrays (``ranker._trees``, see :mod:`lambdamart._engine.tree`)
with the number of features and the feature names (or None) and return the file's content; the LightGBM and XGBoost
readers take a file's content and return :class:`~.nodes.ForeignModel` (flat tree arrays in pre-order, the number of
features and the names). Every mapping keeps our split rule: ``x <= threshold`` goes left, NaN goes where
``missing_left`` says (docs/design.md, "Exchanging models with other libraries").
"""

from . import lightgbm_text, onnx_graph, xgboost_json
from .nodes import ForeignModel

# format name -> writer(trees, n_features, feature_names) -> str or bytes
WRITERS = {
    "lightgbm": lightgbm_text.write,
    "xgboost": xgboost_json.write_model,
    "xgboost-dump": xgboost_json.write_dump,
    "onnx": onnx_graph.write,
}


def read_foreign(raw, where):
    """The model in ``raw`` (bytes of a LightGBM text model or an XGBoost JSON model, told apart by content).

    ``where`` names the source in error messages. Raises ValueError for anything else, and for models whose
    predictions a LambdaMARTRanker cannot reproduce (categorical splits, linear trees, several outputs, ...).
    """
    head = raw[:4096].lstrip()
    if head.startswith(b"tree\n") or head.startswith(b"tree\r\n"):
        return lightgbm_text.read(raw.decode("utf-8", errors="replace"), where)
    if head.startswith(b"{") or head.startswith(b"["):
        return xgboost_json.read_model(raw, where)
    if head.startswith(b"\x80"):
        raise ValueError(f"cannot import {where}: it looks like a pickle. import_model reads LightGBM text models and "
                         f"XGBoost JSON models; pass the unpickled Booster or LGBMModel/XGBModel object instead, and "
                         f"unpickle only from a source you trust.")
    raise ValueError(f"cannot import {where}: it is neither a LightGBM text model (first line 'tree') nor an XGBoost "
                     f"JSON model. Save LightGBM models with Booster.save_model('model.txt') and XGBoost models "
                     f"with Booster.save_model('model.json').")


__all__ = ["ForeignModel", "WRITERS", "read_foreign"]
