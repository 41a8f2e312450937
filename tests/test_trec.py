"""lambdamart.trec and the TREC commands: qrels and run files read and written (byte for byte), joined into metric
arrays in trec_eval's order, bad files with their line numbers, and `lambdamart evaluate --qrels/--run`,
`lambdamart compare` and `lambdamart predict --format trec`."""

import gzip

import numpy as np
import pytest
from helpers import FAST, run_cli
from sklearn.datasets import dump_svmlight_file

import lambdamart
from lambdamart import metrics as M
from lambdamart import trec
from lambdamart.datasets import load_letor, make_ranking_data

RUN_TEXT = (
    "301 Q0 FBIS3-10082 1 12.5 bm25\n"
    "301 Q0 FBIS3-10169 2 -3 bm25\n"
    "301 Q0 FT921-7107 3 1e-05 bm25\n"
    "302 Q0 LA010189-0001 1 0.100000 bm25\n"
    "302 Q0 LA010189-0002 0002 -inf bm25\n"
    "10 Q0 d1 1 7.25 other-tag\n"
)


def test_run_round_trips_byte_for_byte(tmp_path):
    for name, text in (("spaces.run", RUN_TEXT), ("tabs.run", RUN_TEXT.replace(" ", "\t"))):
        path, copy = tmp_path / name, tmp_path / f"copy-{name}"
        path.write_bytes(text.encode())
        run = trec.read_run(path)
        trec.write_run(copy, run)
        assert copy.read_bytes() == path.read_bytes(), name
    assert run.qid.tolist() == ["301"] * 3 + ["302"] * 2 + ["10"]
    assert run.score.tolist() == [12.5, -3.0, 1e-05, 0.1, -np.inf, 7.25]
    assert run.rank.tolist() == [1, 2, 3, 1, 2, 1] and run.name[-1] == "other-tag"


def test_runs_from_scores_round_trip_and_read_gzip(tmp_path):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=50) * 10.0 ** rng.integers(-8, 8, 50)
    qid = rng.integers(1, 12, 50)
    docno = [f"doc-{i}" for i in range(50)]
    trec.write_run(tmp_path / "a.run", scores, qid, docno, run_name="mine")
    text = (tmp_path / "a.run").read_text()
    run = trec.read_run(tmp_path / "a.run")
    assert sorted(run.score.tolist()) == sorted(scores.tolist())  # shortest repr: the same float64 back
    trec.write_run(tmp_path / "b.run", run)
    assert (tmp_path / "b.run").read_text() == text
    (tmp_path / "a.run.gz").write_bytes(gzip.compress(text.encode()))
    assert trec.read_run(tmp_path / "a.run.gz").docno.tolist() == run.docno.tolist()
    # Queries numerically ordered, ranks from 1 by score within each.
    assert [int(q) for q in dict.fromkeys(run.qid.tolist())] == sorted(set(qid.tolist()))
    for q in set(run.qid.tolist()):
        rows = run.qid == q
        assert run.rank[rows].tolist() == list(range(1, rows.sum() + 1))
        assert (np.diff(run.score[rows]) <= 0).all()


def test_qrels_round_trip_and_to_arrays(tmp_path):
    qrels_text = "1 0 a 2\n1 0 b 0\n1 0 c 1\n1 0 z 1\n2 0 x -1\n3 0 y 1\n"
    (tmp_path / "q.txt").write_text(qrels_text)
    qrels = trec.read_qrels(tmp_path / "q.txt")
    trec.write_qrels(tmp_path / "copy.txt", qrels)
    assert (tmp_path / "copy.txt").read_text() == qrels_text
    run = trec.to_run([1.0, 1.0, 0.5, 0.5, 3.0, 1.0], ["1", "1", "1", "1", "2", "4"], ["a", "b", "c", "d", "x", "w"])
    a = trec.to_arrays(qrels, run)
    # Query 4 has no judgements and query 3 was not retrieved: both left out, as trec_eval does.
    assert a.query_ids.tolist() == ["1", "2"]
    assert a.queries_without_judgements.tolist() == ["4"] and a.queries_not_retrieved.tolist() == ["3"]
    # trec_eval's order: score descending, ties by docno descending; unjudged d and negative x are 0.
    assert a.docno.tolist() == ["b", "a", "d", "c", "x"]
    assert a.y.tolist() == [0, 2, 0, 1, 0]
    assert a.missing_relevant.tolist() == [1, 0]  # z is relevant and not retrieved


@pytest.mark.parametrize("reader, text, message", [
    (trec.read_run, "1 Q0 a 1 0.5 r\n1 Q0 b 2 0.4\n", r"line 2: expected 6 columns \(qid Q0 docno rank score "
                                                      r"run_name\), got 5"),
    (trec.read_run, "1 Q0 a 1 0.5 r\n\n1 Q0 b 2 high r\n", "line 3: the score 'high' is not a number"),
    (trec.read_run, "1 Q0 a 1 nan r\n", "line 1: the score is NaN"),
    (trec.read_run, "1 Q0 a 1 0.5 r\n2 Q0 a 1 0.5 r\n1 Q0 a 2 0.4 r\n", r"line 3: document 'a' appears again for "
                                                                          r"query '1' \(first on line 1\)"),
    (trec.read_run, "1 Q0 a first 0.5 r\n", "line 1: the rank 'first' is not an integer"),
    (trec.read_run, "\n\n", "holds no lines"),
    (trec.read_qrels, "1 0 a 1\n1 0 b\n", r"line 2: expected 4 columns \(qid iter docno rel\), got 3"),
    (trec.read_qrels, "1 0 a 1\n1 0 b 0.5\n", "line 2: the relevance '0.5' is not an integer"),
    (trec.read_qrels, "1 0 a 1\n1 0 a 0\n", "line 2: document 'a' appears again"),
    # Texts that str.isdigit() or a strip of signs would take, and integers beyond int64.
    (trec.read_qrels, "1 0 a 1\n1 0 b --1\n", "line 2: the relevance '--1' is not an integer"),
    (trec.read_qrels, "1 0 a \u00b2\n", "line 1: the relevance '\u00b2' is not an integer"),
    (trec.read_qrels, "1 0 a 99999999999999999999\n", "line 1: the relevance '99999999999999999999' is not an "
                                                      "integer"),
    (trec.read_run, "1 Q0 a +-1 0.5 r\n", "line 1: the rank '\\+-1' is not an integer"),
    # Python's int and float read "1_0" as 10 and take other scripts' digits; trec_eval does not.
    (trec.read_qrels, "1 0 a 1\n1 0 b 1_0\n", r"line 2: the relevance '1_0' is not an integer \(ASCII digits, "
                                             r"no '_'\)"),
    (trec.read_qrels, "1 0 a \u0663\n", "line 1: the relevance '\u0663' is not an integer"),
    (trec.read_run, "1 Q0 a 1_0 0.5 r\n", "line 1: the rank '1_0' is not an integer"),
    (trec.read_run, "1 Q0 a 1 0.5 r\n1 Q0 b 2 1_5 r\n", "line 2: the score '1_5' is not a number"),
])
def test_bad_files_name_the_line(tmp_path, reader, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        reader(path)


def test_bad_arrays():
    with pytest.raises(ValueError, match="holds whitespace"):
        trec.to_run([1.0], [1], ["a b"])
    with pytest.raises(ValueError, match="row 2: document 'a' appears again"):
        trec.to_run([1.0, 2.0, 3.0], [1, 2, 1], ["a", "a", "a"])
    with pytest.raises(ValueError, match="NaN"):
        trec.to_run([np.nan], [1], ["a"])
    with pytest.raises(ValueError, match="integer relevance"):
        trec.to_qrels([0.5], [1], ["a"])
    with pytest.raises(TypeError, match="query and document ids"):
        trec.write_run("x.run", [1.0])
    with pytest.raises(ValueError, match="beyond the int64 range"):
        trec.to_qrels([1e20, 1.0], [1, 1], ["a", "b"])
    run = trec.to_run([3.0, 2.0, 1.0], [1, 1, 1], ["a", "b", "c"], depth=2)
    assert run.docno.tolist() == ["a", "b"]
    # Query ids that are integers beyond int64 are ordered as text, as any other non-integer ids.
    assert trec.to_run([1.0, 2.0], ["99999999999999999999", "1"], ["a", "b"]).qid.tolist() == \
        ["1", "99999999999999999999"]


# ---------------------------------------------------------------------------------------------- command line


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    """A generated collection: qrels of every document, a good run, a noisy one and one as noisy."""
    folder = tmp_path_factory.mktemp("trec")
    rng = np.random.default_rng(0)
    qid = np.repeat(np.arange(1, 41), 25)
    y = rng.integers(0, 3, qid.size) * (rng.random(qid.size) < 0.4)
    docno = np.array([f"D{i:05d}" for i in range(qid.size)])
    trec.write_qrels(folder / "qrels.txt", y, qid, docno)
    paths = {"qrels": folder / "qrels.txt"}
    for name, strength in (("good", 1.5), ("noisy", 0.2), ("noisy2", 0.2)):
        paths[name] = folder / f"{name}.run"
        trec.write_run(paths[name], np.round(rng.normal(size=qid.size) + strength * y, 2), qid, docno, run_name=name)
    return paths


def test_compare_prints_a_table_with_markers(collection, capsys):
    code, out, err = run_cli(capsys, "compare", "--qrels", collection["qrels"], collection["noisy"],
                             collection["good"], collection["noisy2"], "--metrics", "map,P_10,ndcg_cut_10,gm_map")
    assert code == 0, err
    lines = out.splitlines()
    assert "40 queries; * = differs from noisy.run at p < 0.05 (paired t-test, Holm correction over 2 comparisons" \
        in lines[0]
    assert lines[1].split() == ["run", "map", "P_10", "ndcg_cut_10", "gm_map"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert all(cell.endswith("*") for cell in rows["good.run"])  # far better than the baseline
    assert not any(cell.endswith("*") for cell in rows["noisy.run"] + rows["noisy2.run"])
    # The values are trec_eval's: those of the metrics in trec_eval's order and conventions.
    a = trec.to_arrays(trec.read_qrels(collection["qrels"]), trec.read_run(collection["good"]))
    assert float(rows["good.run"][0].rstrip("*")) == round(
        M.mean_average_precision(a.y, a.score, a.qid, ties="input", empty=0.0), 4)
    assert float(rows["good.run"][3].rstrip("*")) == round(
        M.geometric_mean_average_precision(a.y, a.score, a.qid, ties="input", empty=0.0), 4)


@pytest.mark.parametrize("test", ["wilcoxon", "sign", "randomization", "bootstrap"])
def test_compare_other_tests(collection, capsys, test):
    code, out, err = run_cli(capsys, "compare", "--qrels", collection["qrels"], collection["noisy"],
                             collection["good"], "--test", test, "--resamples", "500", "--correction", "none")
    assert code == 0, err
    assert "no correction" in out and out.splitlines()[-1].split()[1].endswith("*")


def test_evaluate_a_run_equals_trec_eval(collection, capsys):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    code, out, err = run_cli(capsys, "evaluate", "--qrels", collection["qrels"], "--run", collection["good"],
                             "--metrics", "map,P_10,recall_10,ndcg_cut_10,Rprec,set_F,recip_rank")
    assert code == 0, err
    ours = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}
    with open(collection["qrels"]) as q, open(collection["good"]) as r:
        evaluator = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(q), {"map", "P.10", "recall.10",
                                                                               "ndcg_cut.10", "Rprec", "set_F",
                                                                               "recip_rank"})
        with open(collection["good"]) as r:
            result = evaluator.evaluate(pytrec_eval.parse_run(r))
    for name, value in ours.items():
        assert value == pytest.approx(np.mean([v[name] for v in result.values()]), abs=1e-6), name


def test_evaluate_a_truncated_run_equals_trec_eval(collection, tmp_path, capsys):
    lines = collection["good"].read_text().splitlines()
    short = tmp_path / "short.run"
    short.write_text("".join(line + "\n" for line in lines if int(line.split()[3]) <= 5))
    code, out, err = run_cli(capsys, "evaluate", "--qrels", collection["qrels"], "--run", short, "--metrics",
                             "map,P_10,recip_rank")
    assert code == 0 and "map" in out
    # What the run misses counts as in trec_eval: precision at 10 of 5 documents divides by 10, MAP by every
    # relevant document of the qrels.
    pytrec_eval = pytest.importorskip("pytrec_eval")
    with open(collection["qrels"]) as q, open(short) as r:
        result = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(q), {"map", "P.10", "recip_rank"}).evaluate(
            pytrec_eval.parse_run(r))
    ours = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}
    for name in ("map", "P_10", "recip_rank"):
        assert ours[name] == pytest.approx(np.mean([v[name] for v in result.values()]), abs=1e-6)


@pytest.mark.parametrize("content, message", [
    ("1 Q0 D00000 1 0.5 r\n1 Q0 D00001 2 r\n", "line 2: expected 6 columns"),
    ("1 Q0 D00000 1 0.5 r\n1 Q0 D00000 2 0.4 r\n", "line 2: document 'D00000' appears again"),
    ("1 Q0 D00000 1 0.5 r\n1 Q0 D00001 2 abc r\n", "line 2: the score 'abc' is not a number"),
    ("999 Q0 D00000 1 0.5 r\n", "none of its queries is in the qrels"),
])
def test_bad_run_files_exit_1_with_the_line(collection, tmp_path, capsys, content, message):
    bad = tmp_path / "bad.run"
    bad.write_text(content)
    for argv in (["compare", "--qrels", collection["qrels"], collection["good"], bad],
                 ["evaluate", "--qrels", collection["qrels"], "--run", bad]):
        code, _, err = run_cli(capsys, *argv)
        assert code == 1 and message in err and "bad.run" in err, err


def test_trec_usage_errors(collection, tmp_path, capsys):
    cases = [
        (["compare", "--qrels", collection["qrels"], collection["good"]], 2, "at least two runs"),
        (["compare", "--qrels", collection["qrels"], collection["good"], collection["good"], "--metrics", "mapp"], 2,
         "Did you mean 'map'"),
        (["evaluate", "--qrels", collection["qrels"]], 2, "give either --model and --data"),
        (["compare", "--qrels", collection["qrels"], collection["good"], collection["good"], "--seed", "-1"], 2,
         "--seed must be"),
        (["compare", "--qrels", collection["qrels"], collection["good"], collection["good"], "--alpha", "5"], 2,
         "--alpha must be between 0 and 1"),
        (["compare", "--qrels", collection["qrels"], collection["good"], collection["good"], "--test", "t",
          "--resamples", "20000000"], 2, "--resamples must be between 1 and 10,000,000"),
        (["evaluate", "--qrels", collection["qrels"], "--run", collection["good"], "--data", "x"], 2, "give either"),
        (["compare", "--qrels", tmp_path / "none.txt", collection["good"], collection["good"]], 1,
         "--qrels file not found"),
    ]
    for argv, expected_code, message in cases:
        code, _, err = run_cli(capsys, *argv)
        assert code == expected_code and message in err, (argv, err)


def test_predict_writes_a_trec_run(tmp_path, capsys):
    X, y, qid = make_ranking_data(12, n_features=5, mean_docs_per_query=10, missing_rate=0, random_state=1)
    X[:, 0] += 1
    data = tmp_path / "data.txt"
    dump_svmlight_file(X, y, str(data), query_id=qid, zero_based=False)
    model = tmp_path / "m.json"
    X_read, y_read, qid_read = load_letor(data)
    lambdamart.LambdaMARTRanker(**FAST).fit(X_read, y_read, qid_read).save_model(model)
    code, _, err = run_cli(capsys, "predict", "--model", model, "--data", data, "--format", "trec", "--output",
                           tmp_path / "out.run", "--run-name", "lm")
    assert code == 0, err
    run = trec.read_run(tmp_path / "out.run")
    scores = lambdamart.load_model(model).predict(X_read)
    rows = run.docno.astype(int) - 1  # docno = the data line's number
    np.testing.assert_array_equal(run.score, scores[rows])
    np.testing.assert_array_equal(run.qid.astype(int), qid_read[rows])
    assert set(run.name.tolist()) == {"lm"}
    code, out, _ = run_cli(capsys, "predict", "--model", model, "--data", data, "--format", "trec", "--run-name", "lm")
    assert code == 0 and out == (tmp_path / "out.run").read_text()
