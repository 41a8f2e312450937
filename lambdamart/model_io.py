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
                 "position_bias_": [[...], [...]]},  # only for Unbiased LambdaMART
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
Entries of ``fitted`` that do not change predictions (``position_bias_``) are optional: a reader that does not know
one ignores it.
"""

import os

from ._model_format import FORMAT, FORMAT_VERSION, read_model
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


__all__ = ["FORMAT", "FORMAT_VERSION", "load_model"]
