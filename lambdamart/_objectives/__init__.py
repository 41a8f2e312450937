"""The objective layer: ranking losses that turn scores into gradients λ and weights w, query by query.

:func:`make_objective` is the only entry the estimator uses; it knows the objectives by the names in
:data:`OBJECTIVES`. Each objective is one class (a subclass of :class:`~.base.Objective`) and one numba kernel.
"""

from .base import Objective, TrainingQueries
from .fidelity import FRank
from .lambdaloss import LambdaLoss
from .lambdarank import LambdaRank, LambdaRankMAP
from .listwise import ListMLE, ListNet
from .pairwise import RankNet
from .pointwise import Pointwise
from .xendcg import XENDCG
from .yetirank import YetiRank

#: Every objective by its ``objective=`` name, in the order the documentation lists them.
OBJECTIVES = {cls.name: cls for cls in (LambdaRank, LambdaRankMAP, RankNet, ListNet, ListMLE, Pointwise, XENDCG,
                                        FRank, LambdaLoss, YetiRank)}


def make_objective(name, queries, params, rng):
    """The objective ``name`` for the training ``queries``, configured from the estimator's ``params``.

    Parameters
    ----------
    name : str
        A key of :data:`OBJECTIVES`.
    queries : TrainingQueries
        The training rows, query by query.
    params : dict
        The estimator's parameters.
    rng : numpy.random.RandomState
        The fit's random state.

    Returns
    -------
    Objective
    """
    try:
        cls = OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"unknown objective {name!r}; choose one of {sorted(OBJECTIVES)}.") from None
    return cls(queries, params, rng)


__all__ = ["OBJECTIVES", "Objective", "TrainingQueries", "make_objective"]
