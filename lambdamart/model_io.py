"""The safe model file: a fitted ``LambdaMARTRanker`` as JSON that loads without pickle.

:meth:`LambdaMARTRanker.save_model` writes it and :func:`load_model` reads it back into a ranker that predicts bit
for bit the same. Loading parses JSON and builds numpy arrays, nothing else: no pickle, no imports, no code from
the file. Every array is checked for type, length and index range before the predict kernel may see it, so a
truncated, tampered or foreign file raises a ``ValueError`` instead of reading out of bounds or looping forever.

Format, version 1
-----------------
One UTF-8 JSON object (strict JSON: no ``NaN`` or ``Infinity`` literals)::

    {
      "format": "lambdamart-model",
      "format_version": 1,
      "lambdamart_version": "0.1.0",        # the writer; informative only
      "params": {"n_estimators": 100, ...},  # LambdaMARTRanker.get_params()
      "n_features_in": 136,
      "feature_names_in": ["f0", ...],       # or null when fit saw no column names
      "fitted": {"n_estimators_": 100, "n_iter_": 100, "best_iteration_": null,
                 "train_score_": [...], "validation_score_": [...],
                 "position_bias_": [[...], [...]],   # only for Unbiased LambdaMART
                 "fitted_on_queries": true},         # score() then needs qid
      "trees": {
        "tree_starts": [0, 61, ...],         # first node of each tree
        "feature":      [...],               # split feature, -1 at a leaf
        "threshold":    [...],               # x <= threshold goes left; null at a leaf
        "missing_left": [...],               # true: NaN goes left
        "left":         [...],               # absolute node indices, -1 at a leaf
        "right":        [...],
        "value":        [...],               # leaf score (learning rate applied); 0 at a split
        "gain":         [...],               # split gain (feature importances); 0 at a leaf
        "count":        [...]                # training rows that reached the node
      }
    }

The ``trees`` lists run over all nodes of all trees; tree ``t`` holds nodes ``tree_starts[t]`` up to the next
start, and its first node is its root. A row's score is the sum over trees of the ``value`` of the leaf it
reaches. Children always come after their parent within the same tree, and every node but a root has exactly one
parent. Floats are written with Python's shortest round-trip ``repr``, so they read back exactly; non-finite
floats, which strict JSON cannot spell, are the strings ``"inf"`` and ``"-inf"`` and ``null`` (NaN).

A reader accepts only ``format_version`` values it knows; a change to what the trees mean gets a new version.
Entries of ``fitted`` that do not change predictions (``position_bias_``, ``fitted_on_queries``) are optional: a
reader that does not know one ignores it.
"""

import numbers
import os
from collections import Counter

import numpy as np

from ._exchange import read_foreign
from ._model_format import FORMAT, FORMAT_VERSION, check_trees, read_model
from .ranker import LambdaMARTRanker


def load_model(path: str | os.PathLike) -> LambdaMARTRanker:
    """Load a ranker written by :meth:`LambdaMARTRanker.save_model`, without pickle.

    Parameters
    ----------
    path : str or os.PathLike
        A model file written by ``save_model`` (any lambdamart version whose format version this one reads).

    Returns
    -------
    LambdaMARTRanker
        A fitted ranker that predicts exactly as the saved one did.

    Raises
    ------
    ValueError
        If the file is not a lambdamart model file, was written in a format version this lambdamart does not
        read, or is truncated or inconsistent (e.g. a child index out of range or arrays of different lengths).
    """
    return read_model(path, LambdaMARTRanker)


def import_model(source) -> LambdaMARTRanker:
    """A LightGBM or XGBoost model as a fitted :class:`LambdaMARTRanker` that predicts the same scores.

    The trees are read into lambdamart's own arrays, so ``predict`` (and ``save_model``, ``export_model``) are
    lambdamart's: the same scores as the other library's ``predict``, usually served faster. LightGBM models agree
    to ~1e-12 (both compare and sum in float64). XGBoost models agree to ~1e-6: XGBoost keeps leaves in float32 and
    sums in float32; its thresholds are converted so that float32 and float64 inputs go the way XGBoost sends
    them (it rounds float64 inputs to float32 first), and its ``base_score`` becomes a last one-leaf tree.
    Imported models predict with every tree in the file, as the library's ``Booster.predict`` does by default.

    Parameters
    ----------
    source : str, os.PathLike, or a LightGBM/XGBoost model object
        The path of a LightGBM text model (``Booster.save_model("model.txt")``) or of an XGBoost JSON model
        (``Booster.save_model("model.json")``), told apart by content; or a fitted ``lightgbm.Booster``,
        ``lightgbm.LGBMModel``, ``xgboost.Booster`` or ``xgboost.XGBModel``. An ``XGBModel`` gives the trees its
        own ``predict`` uses (up to ``best_iteration`` after early stopping); a ``Booster`` or a file gives all of
        them, as ``Booster.predict`` does, and NaN is the missing value (an ``XGBModel`` with another ``missing``
        is refused; for a ``Booster`` the missing value is the DMatrix's, which the model does not record).

    Returns
    -------
    LambdaMARTRanker
        Fitted: ``n_features_in_``, ``feature_names_in_`` (when the model has real feature names, not LightGBM's
        ``Column_0`` ... or none), ``n_estimators_`` and ``n_iter_`` (the number of trees), no learning curves.
        Its parameters are the defaults except ``n_estimators``; they matter only if it is fitted again.

    Raises
    ------
    ValueError
        If the file is neither format, is truncated or corrupt, repeats a feature name (``load_model`` would refuse
        the saved ranker), or holds what a LambdaMARTRanker cannot predict exactly: categorical splits, linear
        trees, LightGBM's zero-as-missing splits, several outputs (multiclass), predictions transformed by the
        objective (e.g. ``binary``), DART or linear boosters.
    TypeError
        If ``source`` is neither a path nor a LightGBM/XGBoost model object.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            raw = f.read()
        where = repr(os.fspath(source))
    else:
        raw, where = _model_object_bytes(source), f"the {type(source).__name__} object"
    model = read_foreign(raw, where)
    names = model.feature_names
    repeated = [] if names is None else [name for name, k in Counter(names).items() if k > 1]
    if repeated:  # load_model refuses repeated names: the imported ranker could be saved but not loaded back
        raise ValueError(f"cannot import {where}: its feature names repeat {repeated[0]!r}, and a LambdaMARTRanker's "
                         f"feature names must be distinct. Give the features distinct names (rename the columns and "
                         f"refit, or edit the names in the model file) and import again.")
    trees = check_trees(model.trees, model.n_features)
    n_trees = int(trees["tree_starts"].shape[0])
    ranker = LambdaMARTRanker(n_estimators=max(n_trees, 1))
    ranker.n_features_in_ = model.n_features
    if names is not None:
        ranker.feature_names_in_ = np.asarray(names, dtype=object)
    ranker.n_estimators_ = n_trees
    ranker.n_iter_ = n_trees
    ranker.best_iteration_ = None
    ranker.train_score_ = np.zeros(0)
    ranker.validation_score_ = np.zeros(0)
    ranker._set_trees(trees)
    return ranker


def _model_object_bytes(model):
    """The model file of a LightGBM or XGBoost model object, without importing either library."""
    library = type(model).__module__.split(".")[0]
    if library == "lightgbm":
        booster = getattr(model, "booster_", model) if not hasattr(model, "model_to_string") else model
        if hasattr(booster, "model_to_string"):
            return booster.model_to_string().encode("utf-8")
    if library == "xgboost":
        booster = model
        if hasattr(model, "get_booster"):  # the scikit-learn wrapper: the trees and the missing value its predict uses
            missing = getattr(model, "missing", np.nan)
            if missing is not None and not (isinstance(missing, numbers.Real) and np.isnan(missing)):
                raise ValueError(f"cannot import the {type(model).__name__}: it treats {missing!r} as missing "
                                 f"(missing={missing!r}), which splits on values cannot reproduce; refit with "
                                 f"missing=np.nan (its default).")
            booster = model.get_booster()
            try:
                best = model.best_iteration  # set by early stopping; its predict stops there
            except AttributeError:
                best = None
            if best is not None and best + 1 < booster.num_boosted_rounds():
                booster = booster[:best + 1]
        if hasattr(booster, "save_raw"):
            return bytes(booster.save_raw(raw_format="json"))
    raise TypeError(f"source must be a path to a LightGBM text model or XGBoost JSON model, or a fitted "
                    f"lightgbm.Booster/LGBMModel or xgboost.Booster/XGBModel (a scikit-learn wrapper must be "
                    f"fitted first); got {type(model).__name__}.")


__all__ = ["FORMAT", "FORMAT_VERSION", "import_model", "load_model"]
