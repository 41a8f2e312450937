"""lambdamart: gradient-boosted LambdaMART, scikit-learn native and numba fast.

Public modules: :mod:`lambdamart.ranker` (:class:`LambdaMARTRanker`), :mod:`lambdamart.model_io`
(:func:`load_model`), :mod:`lambdamart.metrics`, :mod:`lambdamart.evaluation` (significance tests),
:mod:`lambdamart.trec` (qrels and run files), :mod:`lambdamart.scoring`, :mod:`lambdamart.datasets`,
:mod:`lambdamart.exceptions` and :mod:`lambdamart.cli`. Everything in a module or subpackage whose name starts with
an underscore is private: the engine (``_engine``), the objectives (``_objectives``) and their helpers.
"""

from ._version import __version__
from .exceptions import InconsistentVersionWarning
from .model_io import load_model
from .ranker import LambdaMARTRanker

__all__ = ["InconsistentVersionWarning", "LambdaMARTRanker", "load_model", "__version__"]
