"""Fixtures shared by the test files. Plain helper functions (data builders, the same-model assertion, the
command-line runner) are in helpers.py.

``data`` and ``model`` are the standard small data set and a FAST model of it. A file that needs another data set
defines its own ``data`` fixture, which then replaces this one in that file (its docstring says what it holds).
"""

import pytest
import sklearn
from helpers import fit, make_data


@pytest.fixture(scope="module")
def data():
    """(X, y, qid): 20 queries of 4 to 16 documents, 4 features, graded labels 0..3 driven mostly by feature 0."""
    return make_data()


@pytest.fixture(scope="module")
def model(data):
    """A ranker with helpers.FAST parameters fitted on ``data``."""
    X, y, qid = data
    return fit(X, y, qid)


@pytest.fixture
def routing():
    """scikit-learn's metadata routing switched on (so that qid reaches fit and the scorers) for one test."""
    with sklearn.config_context(enable_metadata_routing=True):
        yield
