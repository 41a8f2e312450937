"""lambdamart.evaluation: the paired tests equal scipy's on the same values, the randomization test equals an exact
enumeration, Holm and Bonferroni on worked examples, and comparing rankers end to end."""

import itertools

import numpy as np
import pytest
from scipy import stats

from lambdamart import evaluation as E
from lambdamart import metrics as M


def paired(n=30, shift=0.05, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random(n)
    return a, np.clip(a + rng.normal(shift, 0.1, n), 0, 1)


def test_t_test_equals_scipy():
    a, b = paired()
    result = E.paired_test(a, b, test="t", confidence=0.9)
    expected = stats.ttest_rel(b, a)
    assert result.p_value == pytest.approx(expected.pvalue, rel=1e-12)
    assert result.statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert result.interval == pytest.approx(tuple(expected.confidence_interval(0.9)), rel=1e-12)
    d = b - a
    assert result.difference == pytest.approx(d.mean()) and result.mean_b - result.mean_a == pytest.approx(d.mean())
    assert result.effect_size == pytest.approx(d.mean() / d.std(ddof=1))
    assert result.n_queries == 30 and result.p_value_uncorrected == result.p_value and result.correction is None


def test_wilcoxon_and_sign_tests_equal_scipy():
    a, b = paired(seed=1)
    b[:3] = a[:3]  # zero differences are dropped by both
    d = b - a
    wilcoxon = E.paired_test(a, b, test="wilcoxon")
    assert wilcoxon.p_value == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-12)
    assert wilcoxon.statistic == stats.wilcoxon(d).statistic
    sign = E.paired_test(a, b, test="sign")
    wins, losses = (d > 0).sum(), (d < 0).sum()
    assert sign.statistic == wins
    assert sign.p_value == pytest.approx(stats.binomtest(wins, wins + losses).pvalue, rel=1e-12)


def test_bootstrap_equals_scipy_with_the_same_seed():
    a, b = paired(seed=2)
    result = E.paired_test(a, b, test="bootstrap", n_resamples=2000, random_state=7, confidence=0.9)
    expected = stats.bootstrap((b - a,), np.mean, n_resamples=2000, confidence_level=0.9, method="percentile",
                               random_state=np.random.default_rng(7))
    assert result.interval == pytest.approx((expected.confidence_interval.low, expected.confidence_interval.high))
    means = expected.bootstrap_distribution
    assert result.p_value == pytest.approx(min(1, 2 * min((means <= 0).mean(), (means >= 0).mean())))
    # p < 1 - confidence exactly when the interval excludes 0.
    assert (result.p_value < 0.1) == (not result.interval[0] <= 0 <= result.interval[1])


def exact_randomization_p(d):
    """Fraction of the 2**n sign flips whose |mean| reaches the observed |mean| (two-sided)."""
    observed = abs(d.mean())
    flips = np.array(list(itertools.product([1, -1], repeat=d.size)))
    return np.mean(np.abs((flips * d).mean(axis=1)) >= observed - 1e-12)


def test_randomization_test_small_case_is_exact():
    a, b = paired(n=10, shift=0.06, seed=3)
    result = E.paired_test(a, b, test="randomization", n_resamples=1024)  # 2**10: every sign flip
    assert result.p_value == pytest.approx(exact_randomization_p(b - a), abs=1e-12)


@pytest.mark.parametrize("seed", [4, 5])
def test_randomization_test_is_within_its_monte_carlo_error(seed):
    a, b = paired(n=14, shift=0.04, seed=seed)
    exact = exact_randomization_p(b - a)
    n = 4000
    result = E.paired_test(a, b, test="randomization", n_resamples=n, random_state=seed)
    # Two one-sided estimates doubled: standard error at most 2 * sqrt(p/2 (1 - p/2) / n); 4 of them is generous.
    assert abs(result.p_value - exact) <= 4 * 2 * np.sqrt(exact / 2 * (1 - exact / 2) / n) + 2 / n


def test_identical_systems_and_constant_differences():
    a = np.linspace(0, 1, 8)
    for test in E.TESTS:
        same = E.paired_test(a, a, test=test)
        assert same.p_value == 1.0 and same.difference == 0 and np.isnan(same.effect_size)
    a = np.arange(8) / 8  # exact in binary, so every difference is exactly 0.5
    shifted = E.paired_test(a, a + 0.5, test="t")
    assert shifted.p_value == 0.0 and shifted.interval == (0.5, 0.5) and np.isnan(shifted.effect_size)


def test_nan_queries_are_left_out_and_bad_input():
    a, b = paired(n=6)
    a[0] = np.nan
    assert E.paired_test(a, b).n_queries == 5
    with pytest.raises(ValueError, match="unknown test 'wilcoxn'. Did you mean 'wilcoxon'"):
        E.paired_test(a, b, test="wilcoxn")
    with pytest.raises(ValueError, match="same length"):
        E.paired_test(a, b[:3])
    with pytest.raises(ValueError, match="at least 2 queries"):
        E.paired_test([0.5], [0.4])
    for confidence in (95, True, np.nan, "0.95"):
        with pytest.raises(ValueError, match="confidence"):
            E.paired_test(a, b, confidence=confidence)
    # A level or a count held in a numpy scalar is as good as a Python number.
    assert E.paired_test(a, b, confidence=np.float32(0.75)).interval == E.paired_test(a, b, confidence=0.75).interval
    assert E.paired_test(a, b, test="bootstrap", n_resamples=np.int32(50), random_state=0).n_queries == 5
    with pytest.raises(ValueError, match="n_resamples"):
        E.paired_test(a, b, test="bootstrap", n_resamples=True)
    with pytest.raises(ValueError, match="infinite values"):
        E.paired_test(np.r_[np.inf, a[1:]], b)
    with pytest.raises(ValueError, match="n_resamples must be a positive integer up to 10,000,000"):
        E.paired_test(a, b, test="randomization", n_resamples=10**12)


@pytest.mark.parametrize("test", ["randomization", "bootstrap"])
def test_resamples_drawn_in_batches_equal_scipy_drawing_them_at_once(test):
    """Many queries: scipy draws the resamples in batches of ~1M values (resamples x queries), with the same
    random numbers, so the same p-value and interval as all at once."""
    a, b = paired(seed=3, n=500)
    result = E.paired_test(a, b, test=test, n_resamples=5000, random_state=11)  # batches of 2000 resamples
    if test == "randomization":
        expected = stats.permutation_test((b - a,), np.mean, permutation_type="samples", n_resamples=5000,
                                          random_state=np.random.default_rng(11))
        assert result.p_value == expected.pvalue
    else:
        expected = stats.bootstrap((b - a,), np.mean, n_resamples=5000, confidence_level=0.95,
                                   method="percentile", random_state=np.random.default_rng(11))
        assert result.interval == (expected.confidence_interval.low, expected.confidence_interval.high)


def test_holm_and_bonferroni():
    p = [0.01, 0.04, 0.03, 0.5]
    np.testing.assert_allclose(E.correct_p_values(p, "bonferroni"), [0.04, 0.16, 0.12, 1.0])
    # Holm: sorted 0.01*4, 0.03*3, 0.04*2 -> made non-decreasing, 0.5*1.
    np.testing.assert_allclose(E.correct_p_values(p, "holm"), [0.04, 0.09, 0.09, 0.5])
    assert (E.correct_p_values(p) <= E.correct_p_values(p, "bonferroni")).all()
    with pytest.raises(ValueError, match="holm"):
        E.correct_p_values(p, "sidak")


def ranking_data(seed=0, n_queries=40):
    rng = np.random.default_rng(seed)
    qid = np.repeat(np.arange(n_queries), 20)
    y = rng.integers(0, 3, qid.size) * (rng.random(qid.size) < 0.5)
    noise = rng.normal(size=(3, qid.size))
    return y, qid, {"weak": noise[0] + 0.2 * y, "strong": noise[1] + 1.5 * y, "same": noise[2] + 0.2 * y}


def test_compare_uses_the_metrics_per_query_values():
    y, qid, scores = ranking_data()
    result = E.compare(y, scores["weak"], scores["strong"], qid, metric="map", test="t")
    a = M.mean_average_precision(y, scores["weak"], qid, reduce=None)
    b = M.mean_average_precision(y, scores["strong"], qid, reduce=None)
    assert result.p_value == pytest.approx(stats.ttest_rel(b, a).pvalue)
    assert result.metric == "map" and result.significant() and result.difference > 0
    # A trec_eval name, a function with parameters, and gMAP (compared in log scale).
    p10 = E.compare(y, scores["weak"], scores["strong"], qid, metric="P_10", metric_params={"ties": "input"})
    assert p10.mean_a == pytest.approx(M.precision_at_k(y, scores["weak"], qid, k=10, ties="input"))
    by_function = E.compare(y, scores["weak"], scores["strong"], qid, metric=M.ndcg, metric_params={"k": 5})
    assert by_function.mean_b == pytest.approx(M.ndcg(y, scores["strong"], qid, k=5))
    gmap = E.compare(y, scores["weak"], scores["strong"], qid, metric="gm_map")
    assert np.exp(gmap.mean_a) == pytest.approx(M.geometric_mean_average_precision(y, scores["weak"], qid))


def test_compare_to_baseline_corrects_for_the_number_of_systems():
    y, qid, scores = ranking_data(1)
    systems = {"strong": scores["strong"], "same": scores["same"]}
    results = E.compare_to_baseline(y, scores["weak"], systems, qid, metric="ndcg@10", test="wilcoxon")
    assert list(results) == ["strong", "same"]
    raw = [r.p_value_uncorrected for r in results.values()]
    np.testing.assert_allclose([r.p_value for r in results.values()], E.correct_p_values(raw, "holm"))
    assert results["strong"].significant() and not results["same"].significant()
    assert all(r.correction == "holm" for r in results.values())
    plain = E.compare_to_baseline(y, scores["weak"], systems, qid, metric="ndcg@10", test="wilcoxon",
                                  correction=None)
    assert [r.p_value for r in plain.values()] == raw
    with pytest.raises(TypeError, match="mapping"):
        E.compare_to_baseline(y, scores["weak"], [scores["strong"]], qid)


@pytest.mark.parametrize("name, function, kwargs", [
    ("NDCG@10", M.ndcg, {"k": 10}), ("ndcg_cut_10", M.ndcg, {"k": 10, "gain": "linear"}),
    ("P_5", M.precision_at_k, {"k": 5}), ("recall_100", M.recall_at_k, {"k": 100}), ("Rprec", M.r_precision, {}),
    ("gm_map", M.geometric_mean_average_precision, {}), ("set_F", M.f_measure, {}), ("f@10", M.f_measure, {"k": 10}),
    ("recip_rank", M.mean_reciprocal_rank, {}), ("success_1", M.hits_at_k, {"k": 1}),
    ("gmap", M.geometric_mean_average_precision, {}),
])
def test_parse_metric(name, function, kwargs):
    assert E.parse_metric(name) == (function, kwargs)


def test_parse_metric_errors():
    with pytest.raises(ValueError, match="Did you mean 'ndcg'"):
        E.parse_metric("ndgc@10")
    with pytest.raises(ValueError, match="rprec takes no @k"):
        E.parse_metric("rprec@5")
    with pytest.raises(ValueError, match="positive integer"):
        E.parse_metric("map@0")
    with pytest.raises(ValueError, match="positive integer"):  # a digit to str.isdigit(), not to int()
        E.parse_metric("ndcg@\u00b2")
