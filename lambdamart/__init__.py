"""lambdamart: gradient-boosted LambdaMART, scikit-learn native and numba fast."""

__version__ = "0.1.0"
