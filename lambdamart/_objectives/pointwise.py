"""Squared error on the labels: a pointwise baseline on the same trees."""

from numba import prange

from .._jit import kernel
from .base import Objective, apply_sample_weight


@kernel(parallel=True)
def pointwise_gradients(scores, labels, offsets, query_indices, sample_weight, grad, hess):
    """Squared error ½(s - label)²: gradient s - label, hessian 1."""
    for k in prange(query_indices.shape[0]):
        start, stop = offsets[query_indices[k]], offsets[query_indices[k] + 1]
        for i in range(start, stop):
            grad[i] = scores[i] - labels[i]
            hess[i] = 1.0
        apply_sample_weight(sample_weight, start, stop, grad, hess)


class Pointwise(Objective):
    """Squared error ½(s - label)², a regression baseline."""

    name = "pointwise"

    def gradients(self, scores, query_indices, grad, hess):
        q = self.queries
        pointwise_gradients(scores, q.labels, q.offsets, query_indices, q.sample_weight, grad, hess)
