"""The objective layer's contract: what every ranking objective receives, and what it must fill.

An objective turns the current scores of the training rows into gradients λ and positive second-order weights w,
one query at a time: the boosting loop asks, the objective answers, and neither knows how the other works. Rows are
laid out query by query (see ``lambdamart._queries``), query ``q`` owning rows ``offsets[q]:offsets[q + 1]``.
Objectives are pure functions of the scores except for their own state (random tie-breaks, position biases), so the
loop may ask for any subset of queries, on any machine that holds them.

To add an objective: write its kernel and a subclass of :class:`Objective` with a ``name``, and list the class in
``lambdamart._objectives.OBJECTIVES``.
"""

import warnings
from dataclasses import dataclass

import numpy as np

from .._jit import inner_kernel, kernel


@dataclass(frozen=True)
class TrainingQueries:
    """The training rows as an objective sees them, laid out query by query.

    Attributes
    ----------
    labels : ndarray of float64, shape (n_rows,)
        Relevance label of every row.
    gains : ndarray of float64, shape (n_rows,)
        The label gains (2**label - 1, the label, or a table lookup; see ``lambdamart._gains``).
    offsets : ndarray of int64, shape (n_queries + 1,)
        Query ``q`` owns rows ``offsets[q]:offsets[q + 1]``.
    sample_weight : ndarray of float64, shape (n_rows,) or (0,)
        Row weights that multiply λ and w; empty for none.
    position : ndarray of int64, shape (n_rows,) or (0,)
        Displayed rank of every row (1 for the top) for Unbiased LambdaMART; empty for none.
    """

    labels: np.ndarray
    gains: np.ndarray
    offsets: np.ndarray
    sample_weight: np.ndarray
    position: np.ndarray

    @property
    def n_queries(self):
        """Number of queries."""
        return self.offsets.shape[0] - 1


# Pairs an all-pairs objective may look at per round before the fit warns: about a second of one core.
_MANY_PAIRS = 10**8


def warn_if_all_pairs_are_many(query_sizes, name, remedy):
    """Warn when an objective over every pair of a query's documents has more than ``_MANY_PAIRS`` pairs a round.

    Its cost grows with the square of a query's size: a forgotten ``qid`` (every row one query) would run for days.
    """
    sizes = np.asarray(query_sizes, dtype=np.float64)
    pairs = float(np.sum(sizes * (sizes - 1.0) / 2.0))
    if pairs > _MANY_PAIRS:
        warnings.warn(f"objective={name!r} looks at every pair of documents of a query: {pairs:,.0f} pairs a round "
                      f"here (the largest query has {int(sizes.max()):,} documents), a cost that grows with the "
                      f"square of a query's size. {remedy} If the queries should be smaller, check qid.",
                      UserWarning, stacklevel=5)


class Objective:
    """A ranking loss: fills λ and w of the rows of the queries it is asked for.

    Parameters
    ----------
    queries : TrainingQueries
        The training rows, query by query.
    params : dict
        The estimator's parameters (``get_params()``); each objective reads those it uses.
    rng : numpy.random.RandomState
        The fit's random state, for objectives that draw random numbers every round.
    """

    #: The ``objective=`` string that selects this class.
    name = None
    #: Whether ``fit(..., position=...)`` (Unbiased LambdaMART) works with this objective.
    supports_position = False

    def __init__(self, queries, params, rng):
        if queries.position.shape[0] and not self.supports_position:
            supported = ", ".join(repr(c.name) for c in _subclasses() if c.supports_position)
            raise ValueError(f"position (Unbiased LambdaMART) works with objective {supported}, not "
                             f"{self.name!r}.")
        self.queries = queries
        self.params = params
        self.rng = rng

    @classmethod
    def warn_about_cost(cls, query_sizes, params):
        """Warn when a fit on queries of ``query_sizes`` documents would be slow with this objective (by default,
        never). The estimators call it once per fit, before the rounds (a Dask fit on the client, where the warning
        is seen, with every worker's queries)."""

    def gradients(self, scores, query_indices, grad, hess):
        """Write λ (``grad``) and w (``hess``) of the rows of ``query_indices`` for the training ``scores``.

        Rows of other queries are left as they are.
        """
        raise NotImplementedError

    def state(self):
        """What this objective learned during the fit (name to array, copied), e.g. ``position_bias``.

        The estimator exposes each entry as the fitted attribute ``name_`` and saves it in checkpoints; a continued
        fit hands it back to :meth:`restore`.
        """
        return {}

    def restore(self, state):
        """Take up the learned ``state`` of an earlier fit on the same queries (``warm_start``, checkpoints)."""


def _subclasses(cls=Objective):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@inner_kernel
def scaled_exponentials(scores, start, stop, sigma):
    """exp(σ(s - s_top)) of rows ``start:stop``, s_top the highest of their scores: each in (0, 1], none overflows.

    With them a pair's logistic terms take a division instead of an exponential (:func:`logistic_pair`), which is
    most of the cost of the objectives that take every pair of a query. LambdaRank computes the same e over its
    queries sorted by score, vectorised (``lambdarank._exp_below_top``), and shares :func:`logistic_pair`.
    """
    if stop <= start:
        return np.ones(0)
    return np.exp(sigma * (scores[start:stop] - scores[start:stop].max()))


@inner_kernel
def logistic_pair(e_high, e_low, sigma, delta):
    """(ρ, 1 - ρ) with ρ = 1 / (1 + exp(σΔ)), Δ = s_high - s_low, from the two documents' scaled exponentials
    (:func:`scaled_exponentials`); from Δ itself where both underflowed to 0 (scores over ~745/σ below the top)."""
    total = e_high + e_low
    if total > 0.0:
        return e_low / total, e_high / total
    return 1.0 / (1.0 + np.exp(sigma * delta)), 1.0 / (1.0 + np.exp(-sigma * delta))


@inner_kernel
def add_pair(grad, hess, high, low, lam, w):
    """Add one pair's λ and w to its two documents: λ pushes ``high`` (the higher label) up and ``low`` down."""
    grad[high] -= lam
    grad[low] += lam
    hess[high] += w
    hess[low] += w


@kernel
def apply_sample_weight(sample_weight, start, stop, grad, hess):
    """Multiply the λ and w of rows ``start:stop`` by their sample weights (none when ``sample_weight`` is empty)."""
    if sample_weight.shape[0] > 0:
        for i in range(start, stop):
            grad[i] *= sample_weight[i]
            hess[i] *= sample_weight[i]
