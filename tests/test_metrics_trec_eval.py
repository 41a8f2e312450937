"""The IR metrics (F-measure, gMAP, R-precision, precision-recall curves) against trec_eval through pytrec_eval and
ir_measures, against brute force over tie orders, and their edge cases."""

import itertools

import numpy as np
import pytest

from lambdamart import metrics as M
from lambdamart import trec

pytrec_eval = pytest.importorskip("pytrec_eval")

TOL = 1e-9
LEVELS = [f"{level:.2f}" for level in np.linspace(0, 1, 11)]


def random_collection(seed, n_queries=25, min_docs=10, max_docs=40, ties=True):
    """Labels 0-3 (some queries without a relevant document), scores with many ties or none, string doc ids."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(min_docs, max_docs + 1, n_queries)
    qid = np.repeat([f"q{q}" for q in range(n_queries)], sizes)
    n = qid.size
    y = rng.integers(0, 4, n) * (rng.random(n) < rng.uniform(0, 0.6, n_queries).repeat(sizes))
    y[qid == "q0"] = 0  # at least one query without a relevant document
    score = rng.integers(0, 8, n).astype(float) if ties else rng.permutation(n) + rng.random(n)
    docno = np.array([f"d{rng.integers(10**6):06d}-{i}" for i in range(n)])
    order = rng.permutation(n)  # rows in no particular order
    return y[order], score[order], qid[order], docno[order]


def trec_eval(y, score, qid, docno, measures):
    qrels, run = {}, {}
    for q, d, label, s in zip(qid.tolist(), docno.tolist(), y.tolist(), score.tolist()):
        qrels.setdefault(q, {})[d] = int(label)
        run.setdefault(q, {})[d] = float(s)
    return pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)


def per_query(result, measure):
    return np.array([result[q][measure] for q in sorted(result)])


@pytest.mark.parametrize("seed, ties", [(0, True), (1, True), (2, False), (3, True)])
def test_new_metrics_equal_trec_eval(seed, ties):
    y, score, qid, docno = random_collection(seed, ties=ties)
    result = trec_eval(y, score, qid, docno, {"set_F", "gm_map", "iprec_at_recall", "Rprec", "P.5,10", "recall.5,10",
                                              "map"})
    # trec_eval's order: score descending, ties by docno descending; to_arrays lays the rows out so.
    a = trec.to_arrays(trec.to_qrels(y, qid, docno), trec.to_run(score, qid, docno))
    assert a.query_ids.tolist() == sorted(result)
    kw = dict(ties="input", reduce=None)
    checks = {
        "set_F": M.f_measure(a.y, a.score, a.qid, empty=0.0, **kw),
        "Rprec": M.r_precision(a.y, a.score, a.qid, empty=0.0, **kw),
        "map": M.mean_average_precision(a.y, a.score, a.qid, empty=0.0, **kw),
        "gm_map": np.log(M.geometric_mean_average_precision(a.y, a.score, a.qid, empty=0.0, **kw)),
        "P_5": M.precision_at_k(a.y, a.score, a.qid, k=5, **kw),  # every query has >= 10 documents: no padding
        "P_10": M.precision_at_k(a.y, a.score, a.qid, k=10, **kw),
        "recall_5": M.recall_at_k(a.y, a.score, a.qid, k=5, empty=0.0, **kw),
        "recall_10": M.recall_at_k(a.y, a.score, a.qid, k=10, empty=0.0, **kw),
    }
    curve = M.precision_recall_curve(a.y, a.score, a.qid, empty=0.0, **kw)
    for i, level in enumerate(LEVELS):
        checks[f"iprec_at_recall_{level}"] = curve.precision[:, i]
    for measure, ours in checks.items():
        np.testing.assert_allclose(ours, per_query(result, measure), rtol=0, atol=TOL, err_msg=measure)
    # The means: gMAP as trec_eval aggregates it, the curve averaged over queries.
    gm = pytrec_eval.compute_aggregated_measure("gm_map", list(per_query(result, "gm_map")))
    assert abs(M.geometric_mean_average_precision(a.y, a.score, a.qid, ties="input", empty=0.0) - gm) <= TOL
    mean_curve = M.precision_recall_curve(a.y, a.score, a.qid, ties="input", empty=0.0).precision
    expected = [per_query(result, f"iprec_at_recall_{level}").mean() for level in LEVELS]
    np.testing.assert_allclose(mean_curve, expected, rtol=0, atol=TOL)
    if not ties:  # without ties the default "average" ranks as trec_eval does too
        np.testing.assert_allclose(M.f_measure(y, score, qid, empty=0.0, reduce=None), per_query(result, "set_F"),
                                   rtol=0, atol=TOL)


@pytest.mark.parametrize("beta", [0.5, 2.0, 3.0])
def test_f_beta_is_trec_evals_set_F_with_parameter_beta_squared(beta):
    y, score, qid, docno = random_collection(4)
    result = trec_eval(y, score, qid, docno, {f"set_F.{beta * beta:g}"})
    a = trec.to_arrays(trec.to_qrels(y, qid, docno), trec.to_run(score, qid, docno))
    ours = M.f_measure(a.y, a.score, a.qid, beta=beta, ties="input", empty=0.0, reduce=None)
    np.testing.assert_allclose(ours, per_query(result, "set_F"), rtol=0, atol=TOL)


def test_ir_measures_agrees():
    ir_measures = pytest.importorskip("ir_measures")
    y, score, qid, docno = random_collection(5)
    qrels = [ir_measures.Qrel(q, d, int(label)) for q, d, label in zip(qid, docno, y)]
    run = [ir_measures.ScoredDoc(q, d, float(s)) for q, d, s in zip(qid, docno, score)]
    measures = [ir_measures.SetF, ir_measures.Rprec, ir_measures.P @ 10, ir_measures.R @ 10,
                ir_measures.IPrec @ 0.3]
    got = ir_measures.calc_aggregate(measures, qrels, run)
    a = trec.to_arrays(trec.to_qrels(y, qid, docno), trec.to_run(score, qid, docno))
    kw = dict(ties="input")
    assert abs(got[ir_measures.SetF] - M.f_measure(a.y, a.score, a.qid, empty=0.0, **kw)) <= TOL
    assert abs(got[ir_measures.Rprec] - M.r_precision(a.y, a.score, a.qid, empty=0.0, **kw)) <= TOL
    assert abs(got[ir_measures.P @ 10] - M.precision_at_k(a.y, a.score, a.qid, k=10, **kw)) <= TOL
    assert abs(got[ir_measures.R @ 10] - M.recall_at_k(a.y, a.score, a.qid, k=10, empty=0.0, **kw)) <= TOL
    curve = M.precision_recall_curve(a.y, a.score, a.qid, recall_levels=[0.3], empty=0.0, **kw)
    assert abs(got[ir_measures.IPrec @ 0.3] - curve.precision[0]) <= TOL


def test_trec_eval_breaks_ties_by_docno_descending():
    # The convention the tests above rely on, checked directly: two documents tied, the larger docno ranks first.
    result = trec_eval(np.array([1, 0]), np.array([1.0, 1.0]), np.array(["q", "q"]), np.array(["a", "b"]), {"P.1"})
    assert result["q"]["P_1"] == 0.0  # "b" (not relevant) first
    run = trec.to_run([1.0, 1.0], ["q", "q"], ["a", "b"])
    assert run.docno.tolist() == ["b", "a"] and run.rank.tolist() == [1, 2]


# ---------------------------------------------------------------------------------------------- ties and edge cases


def _all_orders(y, score, metric, **kwargs):
    """Mean of ``metric`` with ties="input" over every order of the rows (so over every order of each tie group)."""
    values = [metric(y[list(p)], score[list(p)], ties="input", **kwargs) for p in itertools.permutations(range(len(y)))]
    return np.mean(values, axis=0)


@pytest.mark.parametrize("k", [None, 1, 2, 4])
def test_f_measure_average_ties_is_the_mean_over_orders(k):
    y = np.array([1, 0, 2, 0, 1, 0])
    score = np.array([1.0, 1.0, 1.0, 0.5, 0.5, 0.0])
    for beta in (1.0, 0.5):
        expected = _all_orders(y, score, M.f_measure, k=k, beta=beta)
        assert abs(M.f_measure(y, score, k=k, beta=beta) - expected) < 1e-12


def test_r_precision_average_ties_is_the_mean_over_orders():
    y = np.array([1, 0, 2, 0, 1, 0])
    score = np.array([1.0, 1.0, 0.5, 0.5, 0.5, 0.0])
    assert abs(M.r_precision(y, score) - _all_orders(y, score, M.r_precision)) < 1e-12


def test_worked_examples():
    # Ranking: rel, non, rel, non, non; R = 2 (+ nothing unretrieved).
    y = np.array([1, 0, 1, 0, 0])
    score = np.array([5.0, 4, 3, 2, 1])
    assert M.f_measure(y, score, k=3) == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert M.f_measure(y, score) == pytest.approx(2 * 2 / (2 + 5))
    assert M.r_precision(y, score) == 0.5
    curve = M.precision_recall_curve(y, score, ties="input")
    np.testing.assert_allclose(curve.query_recall[0], [0.5, 0.5, 1, 1, 1])
    np.testing.assert_allclose(curve.query_precision[0], [1, 0.5, 2 / 3, 0.5, 0.4])
    np.testing.assert_allclose(curve.precision, [1] * 6 + [2 / 3] * 5)  # 0.5 needs 1 relevant (floor(1 + 0.9))
    # AP = (1 + 2/3) / 2; gMAP of one query is its AP.
    assert M.geometric_mean_average_precision(y, score) == pytest.approx(5 / 6)


def test_gmap_floor_and_reduce():
    y = np.array([1, 0, 0, 1, 0, 1])
    score = np.array([0.0, 1.0, 2.0, 3.0, 2.0, 1.0])
    qid = np.array([1, 1, 1, 2, 2, 2])
    ap = M.mean_average_precision(y, score, qid, reduce=None)
    per_query = M.geometric_mean_average_precision(y, score, qid, reduce=None)
    np.testing.assert_allclose(per_query, np.maximum(ap, 1e-5))
    assert M.geometric_mean_average_precision(y, score, qid) == pytest.approx(np.sqrt(ap.prod()))
    # A query without relevant documents: AP = empty, then the floor.
    y0 = np.array([0, 0, 0, 1, 0, 1])
    assert M.geometric_mean_average_precision(y0, score, qid, empty=0.0, reduce=None)[0] == 1e-5
    assert M.geometric_mean_average_precision(y0, score, qid, empty=0.0, floor=0.0) == 0.0
    skipped = M.geometric_mean_average_precision(y0, score, qid, empty="skip", reduce=None)
    assert np.isnan(skipped[0]) and skipped[1] == pytest.approx(5 / 6)  # ranks 1 and 3 relevant
    assert M.geometric_mean_average_precision(y0, score, qid, empty="skip") == pytest.approx(5 / 6)
    with pytest.raises(ValueError, match="floor"):
        M.geometric_mean_average_precision(y, score, qid, floor=-1)


def test_empty_queries_and_short_lists():
    y = np.array([0, 0, 1, 1])
    score = np.array([1.0, 2.0, 1.0, 2.0])
    qid = np.array([1, 1, 2, 2])
    for metric in (M.f_measure, M.r_precision):
        assert metric(y, score, qid, reduce=None)[0] == 1.0
        assert metric(y, score, qid, empty=0.0, reduce=None)[0] == 0.0
        assert np.isnan(metric(y, score, qid, empty="skip", reduce=None)[0])
    curve = M.precision_recall_curve(y, score, qid, empty="skip", reduce=None)
    assert np.isnan(curve.precision[0]).all() and (curve.precision[1] == 1).all()
    assert np.isnan(curve.query_recall[0]).all()
    assert (M.precision_recall_curve(y, score, qid, empty="skip").precision == 1).all()
    assert curve.query_ids.tolist() == [1, 2]


def test_curve_with_average_ties_has_a_point_per_tie_group_and_honours_k():
    y = np.array([1, 0, 1, 0, 1])
    score = np.array([3.0, 3.0, 2.0, 2.0, 1.0])
    curve = M.precision_recall_curve(y, score)
    np.testing.assert_allclose(curve.query_recall[0], [1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(curve.query_precision[0], [0.5, 0.5, 0.6])
    cut = M.precision_recall_curve(y, score, k=3)
    np.testing.assert_allclose(cut.query_recall[0], [1 / 3, 0.5])  # the second group straddles k = 3
    np.testing.assert_allclose(cut.query_precision[0], [0.5, 0.5])
    assert cut.precision[-1] == 0.0  # recall 1 is never reached in the top 3


def test_bad_arguments():
    y, score = np.array([1, 0]), np.array([1.0, 0.0])
    with pytest.raises(ValueError, match="beta must be > 0"):
        M.f_measure(y, score, beta=0)
    with pytest.raises(ValueError, match="at most 1e100"):  # beta**2 overflowed and F became `empty`
        M.f_measure(y, score, beta=1e160)
    with pytest.raises(ValueError, match="recall_levels"):
        M.precision_recall_curve(y, score, recall_levels=[0.5, 1.5])
    with pytest.raises(TypeError, match="k must be an integer"):
        M.f_measure(y, score, k=1.5)


# ---------------------------------------------------------------------------------------------- incomplete runs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_evaluate_run_equals_trec_eval_on_runs_that_miss_documents(seed):
    """A real run: truncated at a depth of its own per query, unjudged documents retrieved, judged relevant ones
    missed, a query only in the qrels and one only in the run, tied scores."""
    from lambdamart.evaluation import evaluate_run

    rng = np.random.default_rng(seed)
    y, score, qid, docno = random_collection(seed + 10, n_queries=20, min_docs=15, max_docs=50)
    qrels = trec.to_qrels(y, qid, docno)
    depth = {q: int(rng.integers(3, 30)) for q in np.unique(qid)}
    run_rows = np.array([rng.random() < 0.8 for _ in qid])  # some judged documents never retrieved
    extra = 60  # retrieved but never judged, one query the qrels do not have
    run_qid = np.r_[qid[run_rows], rng.choice(np.unique(qid), extra - 5), ["only-in-run"] * 5]
    run_doc = np.r_[docno[run_rows], [f"unjudged{i}" for i in range(extra)]]
    run_score = np.r_[score[run_rows], rng.integers(0, 8, extra).astype(float)]
    full = trec.to_run(run_score, run_qid, run_doc)
    keep = full.rank <= np.array([depth.get(q, 10) for q in full.qid])
    run = trec.Run(full.qid[keep], full.docno[keep], full.rank[keep], full.score[keep], full.name[keep],
                   full.iteration[keep])
    assert trec.to_arrays(qrels, run).missing_relevant.sum() > 0  # the case this test is about

    measures = {"map": "map", "gm_map": "gm_map", "map@10": "map_cut_10", "P_5": "P_5", "P_10": "P_10",
                "recall_5": "recall_5", "recall_20": "recall_20", "Rprec": "Rprec", "set_F": "set_F",
                "ndcg_cut_10": "ndcg_cut_10", "ndcg_cut_5": "ndcg_cut_5", "recip_rank": "recip_rank",
                "success_1": "success_1", "set_recall": "set_recall", "set_P": "set_P"}
    qrels_dict, run_dict = {}, {}
    for q, d, rel in zip(qrels.qid.tolist(), qrels.docno.tolist(), qrels.relevance.tolist()):
        qrels_dict.setdefault(q, {})[d] = rel
    for q, d, s in zip(run.qid.tolist(), run.docno.tolist(), run.score.tolist()):
        run_dict.setdefault(q, {})[d] = s
    result = pytrec_eval.RelevanceEvaluator(qrels_dict, {"map", "gm_map", "map_cut.10", "P.5,10", "recall.5,20",
                                                         "Rprec", "set_F", "ndcg_cut.5,10", "recip_rank",
                                                         "success.1", "set_recall", "set_P"}).evaluate(run_dict)
    ours = evaluate_run(qrels, run, list(measures))
    assert ours.query_ids.tolist() == sorted(result)
    for name, theirs in measures.items():
        expected = per_query(result, theirs)
        got = np.log(ours.values[name]) if name == "gm_map" else ours.values[name]
        np.testing.assert_allclose(got, expected, rtol=0, atol=TOL, err_msg=name)
    gm = pytrec_eval.compute_aggregated_measure("gm_map", list(per_query(result, "gm_map")))
    assert abs(ours.mean("gm_map") - gm) <= TOL and ours.mean("map") == pytest.approx(per_query(result, "map").mean())
