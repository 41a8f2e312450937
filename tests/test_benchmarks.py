"""benchmarks/compare.py keeps working: a tiny end-to-end run, and its LETOR directory layouts.

Nothing here looks at a timing (docs/design.md, "Benchmarks and measurement"); the figures live in
benchmarks/RESULTS.md.
"""

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
COMPARE = BENCHMARKS / "compare.py"


@pytest.fixture(scope="module")
def bench():
    """The benchmark's modules, imported as the script imports them: with benchmarks/ on sys.path."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        modules = ("compare", "data", "libraries", "report", "dask_run", "folds", "factors", "draws", "noise",
                   "grow_size")
        return SimpleNamespace(**{name: importlib.import_module(name) for name in modules})


@pytest.mark.slow
def test_smoke_run_writes_and_prints_the_report(bench, tmp_path):
    output = tmp_path / "RESULTS.md"
    # One thread: on a busy machine OpenMP thread pools can spend seconds in barriers even on this tiny data, and
    # this test is about the script working, not about its figures.
    proc = subprocess.run(
        [sys.executable, str(COMPARE), "--synthetic", "30", "--rounds", "3", "--threads", "1", "--profile",
         "--output", str(output)],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = output.read_text()
    assert proc.stdout.strip() == report.strip()
    for heading in ("### Training and batch prediction", "### Serving", "### Where LambdaMARTRanker's fit time goes",
                    "## How this is measured"):
        assert heading in report
    assert "| lambdamart |" in report
    assert "| *host control* |" in report  # the serving tail's floor on this machine, measured beside ours
    for library in ("lightgbm", "xgboost", "catboost"):
        if importlib.util.find_spec(library) is None:  # optional: skipped with a note
            assert f"{library} (not installed" in report
        else:
            assert f"| {library} |" in report
    if importlib.util.find_spec("lightgbm") is not None:
        assert "### Ratios to lightgbm" in report
    assert "**Failed:**" not in report
    for stage in bench.report.PROFILE_STAGES.values():  # the estimator's own fit_profile_ stages
        assert f"| {stage} |" in report
    # The report is committed: no path of the machine it ran on (the --output path here is a temporary one).
    assert str(tmp_path) not in report and str(REPO) not in report


@pytest.mark.slow
def test_dask_section_has_every_installed_library(tmp_path):
    pytest.importorskip("distributed")
    output = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, str(COMPARE), "--dask", "2", "--synthetic", "30", "--rounds", "3", "--threads", "1",
         "--output", str(output)],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = output.read_text()
    assert "**Failed:**" not in report
    section = report[report.index("### Dask: 2 workers (`--dask 2`)"):]
    end = section.find("\n### ", 1)
    section = section if end < 0 else section[:end]  # up to the next section of the report, if any
    assert "LocalCluster(n_workers=2, processes=True, threads_per_worker=1)" in section
    assert "already persisted on the workers" in section
    table = [line for line in section.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| library | estimator | inputs | fit |") and "NDCG@10" in table[0]
    estimators = {"lambdamart": "DaskLambdaMARTRanker", "lightgbm": "DaskLGBMRanker", "xgboost": "DaskXGBRanker"}
    for library, estimator in estimators.items():
        if importlib.util.find_spec(library) is None:  # optional: skipped in the whole report
            assert f"{library} (not installed" in report
            continue
        row = next(line for line in table if line.startswith(f"| {library} |"))
        assert estimator in row
        ndcg10 = float(row.rstrip(" |").rsplit("|", 1)[1])
        assert 0.0 <= ndcg10 <= 1.0
    assert "#### Ours on the cluster: calls and traffic per tree" in section
    for figure in ("client ↔ all workers calls per tree", "one no-op actor call to all 2 workers",
                   "worker ↔ worker exchanges per tree", "histogram bytes between workers per tree"):
        assert f"| {figure} |" in section
    assert str(tmp_path) not in report and str(REPO) not in report


def _ranking_files(rng, n_queries, n_features):
    sizes = rng.integers(3, 8, size=n_queries)
    qid = np.repeat(np.arange(n_queries), sizes)
    X = rng.random((qid.shape[0], n_features))
    y = rng.integers(0, 3, size=qid.shape[0]).astype(float)
    return X, y, qid, sizes


def test_lightgbm_layout_with_query_files(bench, tmp_path):
    rng = np.random.default_rng(0)
    for name, n_queries, n_features in (("rank.train", 6, 7), ("rank.test", 3, 5)):  # test file is narrower
        X, y, _, sizes = _ranking_files(rng, n_queries, n_features)
        dump_svmlight_file(X, y, str(tmp_path / name), zero_based=False)
        (tmp_path / f"{name}.query").write_text("\n".join(map(str, sizes)) + "\n")
    data = bench.data.letor_dataset(tmp_path)["arrays"]
    assert data["X_train"].shape[1] == data["X_test"].shape[1] == 7
    assert data["X_train"].dtype == np.float32
    assert np.unique(data["qid_train"]).shape[0] == 6 and np.unique(data["qid_test"]).shape[0] == 3


def test_mslr_fold_layout_is_found_from_the_root(bench, tmp_path):
    rng = np.random.default_rng(1)
    fold = tmp_path / "Fold1"
    fold.mkdir()
    for name, n_queries in (("train.txt", 5), ("test.txt", 2)):
        X, y, qid, _ = _ranking_files(rng, n_queries, 4)
        order = rng.permutation(n_queries)[qid]  # query ids out of order: the loader groups them
        dump_svmlight_file(X, y, str(fold / name), query_id=order * 10, zero_based=False)
    data = bench.data.letor_dataset(tmp_path)["arrays"]
    assert np.all(np.diff(data["qid_train"]) >= 0)
    assert data["X_test"].shape[1] == 4


def test_unknown_layout_and_library_are_clear_errors(bench, tmp_path):
    with pytest.raises(SystemExit, match="rank.train \\+ rank.test or train.txt \\+ test.txt"):
        bench.data.letor_dataset(tmp_path)
    with pytest.raises(SystemExit):
        bench.compare.parse_args(["--libraries", "lambdamart,ranklib"])


def test_size_sweep_datasets_and_summary(bench, monkeypatch):
    """--sizes: four generated datasets (a fifth, ~3M rows, with --with-3m only) and LightGBM's example when it is
    there; the report then opens with one summary line per dataset."""
    args = bench.compare.parse_args(["--sizes"])
    example = bench.data.SHARED_EXAMPLE.is_dir()
    assert len(bench.data.datasets_from_args(args)) == 4 + example
    assert len(bench.data.datasets_from_args(bench.compare.parse_args(["--sizes", "--with-3m"]))) == 5 + example
    with pytest.raises(SystemExit):
        bench.compare.parse_args(["--with-3m"])
    with pytest.raises(SystemExit):
        bench.compare.parse_args(["--sizes", "--synthetic", "10"])
    # Keep the loader quick (its rows scale with queries): 6 training queries, then max(4, 6 / 4) test queries.
    monkeypatch.setitem(bench.data.SWEEP_TRAIN_QUERIES, "3k", 6)
    monkeypatch.setattr(bench.data, "SWEEP_MIN_TEST_QUERIES", 4)
    first = bench.data.datasets_from_args(args)[0]()
    arrays = first["arrays"]
    assert first["name"] == "sweep 3k" and arrays["X_train"].shape[1] == 136
    assert np.unique(arrays["qid_train"]).tolist() == list(range(6))
    assert np.unique(arrays["qid_test"]).tolist() == list(range(6, 10))
    fit = {"fit_s": 1.0, "peak_rss": 2**30, "ndcg": {1: 0.5, 5: 0.5, 10: 0.5}}
    sections = [{"name": f"sweep {n}", "shape": {"train_rows": 1000}, "fit": {"lambdamart": fit, "lightgbm": fit}}
                for n in ("3k", "16k")]
    sections[1].update(serve={"lambdamart": {"p50_s": 50e-6, "p99_s": 180e-6}}, serve_control={"p99_s": 150e-6})
    summary = "\n".join(bench.report._summary_table(sections, ["lambdamart", "lightgbm"]))
    assert "| sweep 3k | 1,000 | 1.00× | 1.00× | 0.5000 | 0.5000 | – | – |" in summary
    assert "| sweep 16k | 1,000 | 1.00× | 1.00× | 0.5000 | 0.5000 | 50 µs / 180 µs | 150 µs |" in summary


def test_quality_over_draws_fits_every_library_on_every_draw(bench, monkeypatch):
    """--sizes also fits each library on several draws of the small sizes; the report averages the paired
    differences over the draws."""
    for size in list(bench.data.SWEEP_QUALITY_DRAWS):
        monkeypatch.delitem(bench.data.SWEEP_QUALITY_DRAWS, size)
    monkeypatch.setitem(bench.data.SWEEP_QUALITY_DRAWS, "3k", 2)
    monkeypatch.setitem(bench.data.SWEEP_TRAIN_QUERIES, "3k", 6)
    monkeypatch.setattr(bench.data, "SWEEP_MIN_TEST_QUERIES", 4)
    libraries = ["lambdamart"] + [n for n in ("lightgbm",) if importlib.util.find_spec(n) is not None]
    draws = bench.draws.quality_over_draws(libraries, bench.libraries.benchmark_settings(rounds=3, threads=1))
    assert [part["name"] for part in draws] == ["sweep 3k"] and draws[0]["errors"] == []
    assert {n: len(v) for n, v in draws[0]["ndcg10"].items()} == {n: 2 for n in libraries}
    ours = draws[0]["ndcg10"]["lambdamart"]
    assert ours[0] != ours[1]  # two different draws of the data

    mean, se, p = bench.draws.paired_difference([0.5, 0.6, 0.7], [0.4, 0.6, 0.5])
    assert mean == pytest.approx(0.1) and se == pytest.approx(0.1 / np.sqrt(3)) and 0 < p < 1
    draws = [{"name": "sweep 3k", "draws": 3, "ndcg10": {"lambdamart": [0.5, 0.6, 0.7], "lightgbm": [0.4, 0.6, 0.5]},
              "errors": ["xgboost, draw 1: ValueError: boom"]}]
    table = "\n".join(bench.report._draws_table(draws, ["lambdamart", "lightgbm", "xgboost"]))
    assert "| sweep 3k | 3 | 0.6000 | 0.5000 | – | +0.1000 ± 0.0577; p 0.23 | – |" in table
    assert "- sweep 3k: xgboost, draw 1: ValueError: boom" in table


def test_report_paths_are_relative_to_the_repository(bench):
    shared = REPO.parent / "shared" / "data"
    argv = ["--data", str(shared), f"--output={REPO / 'benchmarks' / 'X.md'}", "--rounds", "5"]
    assert bench.compare.command_line(argv) == \
        "python benchmarks/compare.py --data ../shared/data --output=benchmarks/X.md --rounds 5"
    assert bench.compare.command_line(["--out", "/nowhere/near/r.md"]).endswith("--out r.md")  # elsewhere: name


def test_group_sizes_are_runs_of_equal_query_ids(bench):
    assert bench.libraries._group_sizes(np.array([3, 3, 5, 5, 5, 9])).tolist() == [2, 3, 1]


def test_dask_chunks_keep_queries_whole(bench):
    qid = np.repeat(np.arange(7), [3, 1, 4, 2, 5, 2, 3])  # 20 rows
    bounds = bench.dask_run.query_chunks(qid, 3)
    assert bounds[0] == 0 and bounds[-1] == qid.shape[0] and len(bounds) == 4
    assert all(qid[b - 1] != qid[b] for b in bounds[1:-1])  # every cut is a query boundary
    assert bench.dask_run.query_chunks(qid[:3], 4).tolist() == [0, 3]  # one query: one chunk
    rows, tiny = bench.dask_run.warmup_rows(qid, bounds, 1)  # the first query of every chunk
    assert tiny.tolist() == [0, *np.cumsum([np.count_nonzero(qid == qid[b]) for b in bounds[:-1]])]
    assert [np.unique(qid[rows][a:b]).shape[0] for a, b in zip(tiny[:-1], tiny[1:])] == [1, 1, 1]


def test_objectives_skip_when_only_lambdarank_exists(bench, monkeypatch, capsys):
    compare = bench.compare
    # --objectives runs a fit process per objective; here only the decision and the report lines are checked.
    monkeypatch.setattr(compare, "ranker_objectives", lambda: ["lambdarank"])
    assert compare.objective_contenders() == {}
    assert "only objective='lambdarank'" in capsys.readouterr().err
    section = compare._objective_results({}, {}, arrays=None)
    assert "nothing to compare" in bench.report._objectives_lines(section)[0]
    results = {"results": {"lambdarank": {"fit_s": 1.5, "fit_runs": [1.5], "ndcg10": 0.5}}}
    assert "| lambdarank | 1.50 s | – | 0.5000 |" in "\n".join(bench.report._objectives_lines(results))
    results["results"]["lambdarank"]["fit_runs"] = [2.0, 1.5]
    table = "\n".join(bench.report._objectives_lines(results, {"fit_s": 3.0}))
    assert "| lambdarank | 1.50 s (fastest of 2.00 s, 1.50 s) | 0.50× | 0.5000 |" in table


@pytest.mark.slow
def test_objectives_fit_in_the_libraries_rounds(bench, tmp_path, monkeypatch, capsys):
    # The parent decides which objectives the workers fit; one besides the default keeps this short.
    monkeypatch.setattr(bench.compare, "ranker_objectives", lambda: ["lambdarank", "xendcg"])
    output = tmp_path / "OBJECTIVES.md"
    # Ours alone keeps it short: the ratio column's rendering is checked above, without worker processes.
    assert bench.compare.main(["--synthetic", "30", "--rounds", "3", "--threads", "1", "--objectives", "--repeat", "2",
                               "--libraries", "lambdamart", "--output", str(output)]) == 0
    report = output.read_text()
    assert "**Failed:**" not in report
    progress = capsys.readouterr().err
    # Interleaved: the second run of every contender comes after the first of each.
    assert progress.index("lambdamart:xendcg fit (run 1 of 2)") < progress.index("lambdamart fit (run 2 of 2)")
    assert "lambdamart:lambdarank fit" not in progress  # the default objective is the lambdamart fit itself
    table = report[report.index("### LambdaMARTRanker objectives"):]
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[4:6]}
    assert set(rows) == {"lambdarank", "xendcg"} and all("(fastest of" in row for row in rows.values())
    ours = next(line for line in report.splitlines() if line.startswith("| lambdamart | "))
    assert rows["lambdarank"].split(" | ")[-1].strip(" |") == ours.split(" | ")[-1].strip(" |")  # the same fit


def test_ranker_objectives_include_lambdarank(bench):
    assert "lambdarank" in bench.compare.ranker_objectives()


def _letor_parts(directory, rng, n_parts=5):
    """LETOR 4.0's five parts S1..S5: query ids k*100 + i, so every row says which part it came from."""
    for k in range(1, n_parts + 1):
        X, y, qid, _ = _ranking_files(rng, 6, 5)
        y[qid == 0] = 0  # one query without a relevant document in every part
        dump_svmlight_file(X, y, str(directory / f"S{k}.txt"), query_id=k * 100 + qid, zero_based=False)


def test_letor_folds_rotate_the_five_parts(bench, tmp_path):
    _letor_parts(tmp_path, np.random.default_rng(2))
    folds = bench.data.letor_folds(tmp_path)
    assert [f["parts"] for f in folds[:2]] == [["S1 + S2 + S3", "S4", "S5"], ["S2 + S3 + S4", "S5", "S1"]]
    for k, fold in enumerate(folds):
        parts_of = {split: set(np.unique(fold[split][2] // 100).tolist()) for split in ("train", "valid", "test")}
        assert parts_of == {"train": {k % 5 + 1, (k + 1) % 5 + 1, (k + 2) % 5 + 1}, "valid": {(k + 3) % 5 + 1},
                            "test": {(k + 4) % 5 + 1}}
        assert all(np.all(np.diff(fold[split][2]) >= 0) for split in ("train", "valid", "test"))
    # The distribution's own layout, Fold1..Fold5 with train/vali/test files, is read as it is.
    for k, fold in enumerate(folds, start=1):
        (tmp_path / "dist" / f"Fold{k}").mkdir(parents=True)
        for split, name in (("train", "train.txt"), ("valid", "vali.txt"), ("test", "test.txt")):
            X, y, qid = fold[split]
            dump_svmlight_file(X, y, str(tmp_path / "dist" / f"Fold{k}" / name), query_id=qid, zero_based=False)
    again = bench.data.letor_folds(tmp_path / "dist")
    assert again[0]["parts"] == ["Fold1/train", "Fold1/vali", "Fold1/test"]
    assert np.array_equal(again[3]["test"][2], folds[3]["test"][2])
    with pytest.raises(SystemExit, match="S1.txt..S5.txt"):
        bench.data.letor_folds(tmp_path / "dist" / "Fold1")


def test_letor_conventions_differ_on_empty_and_short_queries(bench):
    # Query 1: three documents, one relevant and ranked first; query 2: no relevant document.
    y = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    qid = np.array([1, 1, 1, 2, 2])
    metrics = bench.folds.per_query_metrics(y, np.array([3.0, 2.0, 1.0, 1.0, 0.0]), qid)
    assert metrics[("lightgbm", "NDCG@1")].tolist() == [1.0, 1.0]
    assert metrics[("lightgbm", "NDCG@5")].tolist() == [1.0, 1.0]  # a short query: all its documents
    assert metrics[("letor", "NDCG@1")].tolist() == [1.0, 0.0]
    assert metrics[("letor", "NDCG@5")].tolist() == [0.0, 0.0]  # fewer than 5 documents: 0
    assert metrics[("lightgbm", "MAP")].tolist() == [1.0, 1.0] and metrics[("letor", "MAP")].tolist() == [1.0, 0.0]


def test_paired_comparison_is_scipys(bench):
    from scipy import stats

    rng = np.random.default_rng(3)
    a, b = rng.random(50), rng.random(50)
    result = bench.folds.compare_with_baseline(a, b)
    assert result.t_test_p == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert result.wilcoxon_p == pytest.approx(stats.wilcoxon(a, b).pvalue)
    assert result.wins + result.losses == 50 and result.mean_difference == pytest.approx(np.mean(a - b))
    assert bench.folds.compare_with_baseline(a, a).t_test_p == 1.0  # identical systems: nothing to test


@pytest.mark.slow
def test_letor_folds_run_writes_the_quality_report(bench, tmp_path, monkeypatch, capsys):
    _letor_parts(tmp_path, np.random.default_rng(4))
    output = tmp_path / "LETOR.md"
    # The workers are processes of their own; the parent decides which objectives they fit. Two keep this short.
    monkeypatch.setattr(bench.compare, "ranker_objectives", lambda: ["lambdarank", "yetirank"])
    assert bench.compare.main(["--letor-folds", str(tmp_path), "--threads", "1", "--output", str(output)]) == 0
    report = output.read_text()
    assert "## Fixed settings" in report and "## Early stopping" in report and "**Failed:**" not in report
    for name in ("lambdamart", "lambdamart:yetirank"):
        assert report.count(f"| `{name}` |") == 4  # two tables per protocol
    for library in ("lightgbm", "xgboost", "catboost"):
        if importlib.util.find_spec(library) is not None:
            assert report.count(f"| `{library}` |") == 4
    assert str(tmp_path) not in report and report.strip() == capsys.readouterr().out.strip()
    with pytest.raises(SystemExit):
        bench.compare.parse_args(["--letor-folds", str(tmp_path), "--dask", "2"])


def test_factor_study_shuffles_within_queries_and_marks_significance(bench):
    factors = bench.factors
    rng = np.random.default_rng(5)
    qid = np.repeat([3, 7, 9], [4, 5, 6])
    X, y = rng.random((15, 2)), rng.integers(0, 3, 15).astype(float)
    Xs, ys, qs = factors._shuffled((X, y, qid), 1)
    assert np.array_equal(qs, qid) and not np.array_equal(Xs, X)
    for q in (3, 7, 9):  # the same rows in every query, in another order
        assert sorted(map(tuple, Xs[qs == q])) == sorted(map(tuple, X[qid == q]))
    baseline, better = np.full(200, 0.5), np.full(200, 0.5) + rng.uniform(0.01, 0.02, 200)
    other = next(v for v in factors.VARIANTS if v != factors.BASELINE)
    meta = dict(date="d", command="c", machine="m", versions={}, revision="r", load_before="0", load_after="0")
    report = factors.render(meta, [("fixed", {factors.BASELINE: {"data": baseline}, other: {"data": better}})],
                            ["data"])
    assert f"| {factors.BASELINE} | 0.5000 |" in report
    assert f"| {other} | **0.5" in report  # a consistent gain on 200 queries is significant


def test_factor_study_runs_only_the_dataset_groups_named(bench, monkeypatch, tmp_path):
    factors = bench.factors
    # Two small generated groups and nothing from ../shared: `--data` picks one of them.
    monkeypatch.setattr(factors, "SYNTHETIC", ((4, (0,)), (6, (0,))))
    monkeypatch.setattr(factors, "SYNTHETIC_TEST_QUERIES", 4)
    monkeypatch.setattr(factors, "MQ2008", tmp_path / "absent")
    monkeypatch.setattr(factors, "SHARED_EXAMPLE", tmp_path / "absent")
    assert list(factors.datasets(["4 queries"])) == ["make_ranking_data, 4 queries"]
    out = tmp_path / "factors.md"
    assert factors.main(["--rows", "1", "--data", "4 queries", "--threads", "1", "--output", str(out)]) == 0
    report = out.read_text()
    assert "--data '4 queries'" in report and "| make_ranking_data, 4 queries |" in report
    assert "6 queries" not in report
    with pytest.raises(SystemExit, match="--data"):
        factors.main(["--rows", "1", "--data", "absent", "--output", str(out)])


def test_noise_study_refits_at_each_bin_count_and_pairs_with_the_peer(bench):
    from lambdamart.datasets import make_ranking_data

    X, y, qid = make_ranking_data(40, n_features=6, random_state=3)
    train, test = bench.factors._split_queries((X, y, qid), 30)
    sets = [bench.factors._sets(train, train, test, test)]
    spec = ("lambdamart", {"n_estimators": 5}, None)
    coarse, fine = (bench.factors.evaluate(spec, "fixed", sets, 1, bins=b) for b in (2, 255))
    assert coarse.shape == fine.shape == (10,) and not np.array_equal(coarse, fine)
    means = {"fixed": {"default": np.array([0.70, 0.72, 0.71]), bench.noise.PEER: np.array([0.71, 0.71, 0.71])}}
    meta = dict(date="d", command="c", machine="m", versions={}, revision="r", load_before="0", load_after="0")
    report = bench.noise.render(meta, means, [253, 254, 255])
    assert "| default | 0.7100 | 0.0100 | 0.7000 | 0.7200 | 0.7100 | +0.0000 | 2 of 3 |" in report
    assert f"| {bench.noise.PEER} | 0.7100 | 0.0000 | 0.7100 | 0.7100 | 0.7100 | - | - |" in report


def test_grow_size_report_pairs_the_two_tree_kinds_per_fit_and_per_size(bench):
    rng = np.random.default_rng(0)
    base = rng.uniform(0.4, 0.8, 300)
    runs = {"fixed": [(6000, seed, 570_000, {"symmetric": base + 0.01, "leafwise": base}) for seed in (0, 1)],
            "early_stopping": [(6000, 0, 460_000, {"symmetric": base, "leafwise": base + 0.02})]}
    meta = dict(date="d", command="c", machine="m", versions={}, revision="r", load_before="0", load_after="0")
    report = bench.grow_size.render(meta, runs)
    fixed, early = report.split("## Early stopping")
    assert fixed.count("| 6,000 | ") == 3  # two fits and the size's summary
    assert "| 6,000 | 2 | +0.0100 ± 0.0000 |" in fixed
    assert "| 6,000 | 1 | -0.0200 ± 0.0000 |" in early
