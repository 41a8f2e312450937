"""Every use of a scikit-learn private API, in one place.

scikit-learn keeps these names stable in practice but promises nothing about them, so the supported range is
declared in ``pyproject.toml`` (``scikit-learn>=1.7,<1.10``) and ``.ci/run`` runs a part of the suite against the
oldest declared versions. When a new scikit-learn moves one of them, this module is the only one to change.
"""

from sklearn.metrics import make_scorer

# Parameter constraints in scikit-learn's own declarative form: BaseEstimator._validate_params reads these objects,
# and writing our own validator would only repeat scikit-learn's messages.
from sklearn.utils._param_validation import Interval, StrOptions

# Sample-weight checks (shape, finiteness, non-negativity) with scikit-learn's messages.
from sklearn.utils.validation import _check_sample_weight as check_sample_weight

# The feature names a fit keeps of a DataFrame (its columns when all are strings; TypeError when mixed): the Dask
# ranker applies the rule validate_data applies in a local fit.
from sklearn.utils.validation import _get_feature_names as feature_names_of

# The scorer class make_scorer returns (private: sklearn.metrics._scorer._Scorer), subclassed because its
# set_score_request replaces every earlier request: adding sample_weight to a ranking scorer dropped its qid.
_Scorer = type(make_scorer(lambda y_true, y_pred: 0.0))


class QidScorer(_Scorer):
    """A scorer of :func:`sklearn.metrics.make_scorer` whose ``set_score_request`` keeps ``qid`` requested unless
    told otherwise (``qid=False``)."""

    def set_score_request(self, **kwargs):
        """Request metadata for scoring, ``qid=True`` included unless given.

        Parameters
        ----------
        **kwargs
            ``name=True/False/alias``, as :meth:`sklearn.metrics.make_scorer`'s ``set_score_request``.

        Returns
        -------
        self
        """
        kwargs.setdefault("qid", True)
        return super().set_score_request(**kwargs)


def validate_params(estimator):
    """Check ``estimator``'s parameters against its ``_parameter_constraints`` (scikit-learn's messages).

    ``BaseEstimator._validate_params`` is what ``fit`` calls; the model file reader and the command line call it too,
    to reject bad parameters before any work.
    """
    estimator._validate_params()


__all__ = ["Interval", "QidScorer", "StrOptions", "check_sample_weight", "feature_names_of", "validate_params"]
