"""lambdamart: gradient-boosted LambdaMART, scikit-learn native and numba fast.

Public modules: :mod:`lambdamart.ranker` (:class:`LambdaMARTRanker`), :mod:`lambdamart.model_io`
(:func:`load_model`, :func:`import_model`), :mod:`lambdamart.metrics`, :mod:`lambdamart.evaluation` (significance
tests), :mod:`lambdamart.trec` (qrels and run files), :mod:`lambdamart.explain` (one query's ranking explained),
:mod:`lambdamart.scoring`, :mod:`lambdamart.datasets`, :mod:`lambdamart.dask` (training on a Dask cluster),
:mod:`lambdamart.exceptions` and :mod:`lambdamart.cli`.
Everything in a module or subpackage whose name starts with an underscore is private: the engine (``_engine``), the
objectives (``_objectives``), the other libraries' model formats (``_exchange``) and their helpers.
"""

from ._version import __version__
from .exceptions import InconsistentVersionWarning
from .model_io import import_model, load_model
from .ranker import LambdaMARTRanker

__all__ = ["InconsistentVersionWarning", "LambdaMARTRanker", "import_model", "load_model", "__version__"]
