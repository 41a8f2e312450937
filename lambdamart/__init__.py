"""lambdamart: gradient-boosted LambdaMART, scikit-learn native and numba fast."""

__version__ = "0.1.0"

from .ranker import LambdaMARTRanker  # noqa: E402

__all__ = ["LambdaMARTRanker", "__version__"]
