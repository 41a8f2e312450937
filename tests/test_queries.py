"""Query grouping and label gains shared by the metrics and the ranker."""

import numpy as np
import pytest

from lambdamart._gains import MAX_EXPONENTIAL_LABEL, check_labels, label_gains
from lambdamart._queries import group_from_sizes, group_queries


def test_group_queries_is_stable_and_sorted_by_id():
    qid = np.array([7, 3, 7, 3, 5, 7])
    g = group_queries(qid, 6)
    assert list(g.ids) == [3, 5, 7]
    assert list(g.offsets) == [0, 2, 3, 6]
    assert list(g.order) == [1, 3, 4, 0, 2, 5]  # rows keep their relative order inside a query
    values = np.arange(6.0)
    assert np.array_equal(g.restore(g.take(values)), values)


def test_sorted_input_needs_no_permutation():
    g = group_queries(np.array([1, 1, 2, 2, 2]), 5)
    assert g.order is None
    assert list(g.sizes) == [2, 3]


def test_no_qid_is_one_query():
    g = group_queries(None, 4)
    assert g.n_queries == 1 and list(g.offsets) == [0, 4]


def test_string_ids():
    g = group_queries(np.array(["b", "a", "b"]), 3)
    assert list(g.ids) == ["a", "b"] and list(g.order) == [1, 0, 2]


@pytest.mark.parametrize(
    "qid, match",
    [
        (np.zeros(3), "3 entries but there are 4 rows"),
        (np.zeros((4, 1)), "one-dimensional"),
        (np.array([0.0, np.nan, 1.0, 1.0]), "NaN"),
        (np.array([1, "a", 2, "b"], dtype=object), "mixes types"),
    ],
)
def test_bad_qid(qid, match):
    with pytest.raises(ValueError, match=match):
        group_queries(qid, 4)


def test_group_sizes():
    g = group_from_sizes([2, 3], 5)
    assert list(g.offsets) == [0, 2, 5] and g.order is None


@pytest.mark.parametrize(
    "group, match", [([2, 2], "sum to 4 but there are 5"), ([5, 0], "positive"), ([2.5, 2.5], "whole numbers"),
                     ([], "non-empty")]
)
def test_bad_group_sizes(group, match):
    with pytest.raises(ValueError, match=match):
        group_from_sizes(group, 5)


def test_gains():
    y = np.array([0.0, 1.0, 3.0])
    assert list(label_gains(y, "exponential")) == [0.0, 1.0, 7.0]
    assert list(label_gains(y, "linear")) == [0.0, 1.0, 3.0]
    assert list(label_gains(y, [0.0, 10.0, 20.0, 30.0])) == [0.0, 10.0, 30.0]


def test_exponential_gain_is_exact_up_to_its_limit_and_refuses_beyond():
    top = np.array([float(MAX_EXPONENTIAL_LABEL)])
    assert label_gains(top)[0] == 2.0**MAX_EXPONENTIAL_LABEL - 1
    with pytest.raises(ValueError, match="gain='linear'"):
        label_gains(top + 1)


@pytest.mark.parametrize(
    "y, gain, match",
    [
        ([0.0, 1.5], [0.0, 1.0, 2.0], "integers"),
        ([0.0, 3.0], [0.0, 1.0, 2.0], "integers in \\[0, 2\\]"),
        ([0.0], "cubic", "gain must be"),
        ([0.0], [np.inf], "finite"),
    ],
)
def test_bad_gains(y, gain, match):
    with pytest.raises(ValueError, match=match):
        label_gains(np.array(y), gain)


@pytest.mark.parametrize("y, match", [([0.0, np.nan], "NaN"), ([0.0, -1.0], "negative"), ([0, np.inf], "infinite")])
def test_bad_labels(y, match):
    with pytest.raises(ValueError, match=match):
        check_labels(np.array(y))


def test_labels_must_be_numeric():
    with pytest.raises(TypeError, match="numeric"):
        check_labels(np.array(["a", "b"]))
