"""lambdamart: gradient-boosted LambdaMART, scikit-learn native and numba fast."""

__version__ = "0.1.0"

from .model_io import InconsistentVersionWarning, load_model  # noqa: E402
from .ranker import LambdaMARTRanker  # noqa: E402

__all__ = ["InconsistentVersionWarning", "LambdaMARTRanker", "load_model", "__version__"]
