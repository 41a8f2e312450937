"""lambdamart.datasets: load_letor reads LETOR / SVMlight files (qid: fields or a LightGBM .query file) and locates
every malformed line; make_ranking_data generates MSLR-like data."""

import gzip
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from lambdamart.datasets import load_features, load_letor, make_ranking_data, scan_letor

SHARED_EXAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "lightgbm-lambdarank-example"


# ----------------------------------------------------------------------------------------------------------------
# load_letor
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture
def letor_data():
    rng = np.random.default_rng(0)
    X = np.round(rng.random((40, 6)), 4)  # short decimals survive the text round trip exactly
    X[X < 0.4] = 0  # sparse-ish, as LETOR files are
    X[:, 0] = np.round(rng.random(40) + 0.5, 4)  # column 0 always present, so 0- vs 1-based is never in doubt
    y = rng.integers(0, 5, size=40).astype(float)
    qid = np.repeat([3, 10, 11, 25], 10)  # ids kept as written, not renumbered
    return X, y, qid


def write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("zero_based", [True, False])
@pytest.mark.parametrize("as_str", [True, False])
def test_round_trip_with_qid(tmp_path, letor_data, zero_based, as_str):
    X, y, qid = letor_data
    path = tmp_path / "data.txt"
    dump_svmlight_file(X, y, str(path), query_id=qid, zero_based=zero_based)
    Xl, yl, ql = load_letor(str(path) if as_str else path)
    assert isinstance(Xl, np.ndarray) and Xl.flags.c_contiguous
    assert Xl.dtype == np.float32 and yl.dtype == np.float64 and ql.dtype == np.int64
    np.testing.assert_array_equal(Xl, X.astype(np.float32))
    np.testing.assert_array_equal(yl, y)
    np.testing.assert_array_equal(ql, qid)


def test_round_trip_sparse_dtype_n_features(tmp_path, letor_data):
    X, y, qid = letor_data
    path = tmp_path / "data.txt"
    dump_svmlight_file(sp.csr_matrix(X), y, str(path), query_id=qid, zero_based=False)
    Xs, ys, qs = load_letor(path, sparse=True, dtype=np.float64, n_features=9)
    assert sp.issparse(Xs) and Xs.format == "csr" and Xs.dtype == np.float64
    assert Xs.shape == (40, 9)
    np.testing.assert_array_equal(Xs.toarray()[:, :6], X)
    assert Xs[:, 6:].nnz == 0
    np.testing.assert_array_equal(ys, y)
    np.testing.assert_array_equal(qs, qid)

    Xd, _, _ = load_letor(path, dtype=np.float64, n_features=9)
    assert Xd.dtype == np.float64 and Xd.shape == (40, 9) and Xd.flags.c_contiguous
    np.testing.assert_array_equal(Xd, Xs.toarray())


def test_comments_blank_lines_and_nan(tmp_path):
    path = write(
        tmp_path / "c.txt",
        "# header comment\n2 qid:7 1:0.5 3:nan # doc a\n\n0 qid:7 2:1.5\n1 qid:9 # no features\n",
    )
    X, y, qid = load_letor(path)
    assert X.shape == (3, 3)
    np.testing.assert_array_equal(y, [2, 0, 1])
    np.testing.assert_array_equal(qid, [7, 7, 9])
    assert X[0, 0] == 0.5 and np.isnan(X[0, 2]) and X[1, 1] == 1.5 and not X[2].any()


def test_gzip_file(tmp_path, letor_data):
    X, y, qid = letor_data
    plain = tmp_path / "data.txt"
    dump_svmlight_file(X, y, str(plain), query_id=qid, zero_based=False)
    packed = tmp_path / "data.txt.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    Xl, yl, ql = load_letor(packed)
    np.testing.assert_array_equal(Xl, X.astype(np.float32))
    np.testing.assert_array_equal(ql, qid)


def test_query_file_auto_detected_and_explicit(tmp_path, letor_data):
    X, y, _ = letor_data
    path = tmp_path / "rank.train"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    write(tmp_path / "rank.train.query", "5\n20\n15\n\n")  # a trailing blank line is tolerated
    expected = np.repeat(np.arange(3), [5, 20, 15])

    Xl, yl, ql = load_letor(path)
    np.testing.assert_array_equal(Xl, X.astype(np.float32))
    np.testing.assert_array_equal(yl, y)
    np.testing.assert_array_equal(ql, expected)
    assert ql.dtype == np.int64

    other = write(tmp_path / "sizes.txt", "39\n1\n")
    _, _, ql = load_letor(str(path), query_file=other)
    np.testing.assert_array_equal(ql, np.repeat([0, 1], [39, 1]))


def test_missing_files(tmp_path, letor_data):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_letor(tmp_path / "nope.txt")
    X, y, _ = letor_data
    path = tmp_path / "rank.train"
    dump_svmlight_file(X, y, str(path))
    with pytest.raises(FileNotFoundError, match="sizes.query"):
        load_letor(path, query_file=tmp_path / "sizes.query")


def test_no_qid_and_no_query_file(tmp_path, letor_data):
    X, y, _ = letor_data
    path = tmp_path / "rank.train"
    dump_svmlight_file(X, y, str(path))
    with pytest.raises(ValueError, match=r"no qid: fields.*rank\.train\.query.*query_file="):
        load_letor(path)


def test_qid_and_explicit_query_file_is_ambiguous(tmp_path, letor_data):
    X, y, qid = letor_data
    path = tmp_path / "data.txt"
    dump_svmlight_file(X, y, str(path), query_id=qid)
    sizes = write(tmp_path / "sizes", "40\n")
    with pytest.raises(ValueError, match="ambiguous"):
        load_letor(path, query_file=sizes)


def test_empty_files(tmp_path):
    with pytest.raises(ValueError, match=r"empty\.txt: no data rows"):
        load_letor(write(tmp_path / "empty.txt", ""))
    with pytest.raises(ValueError, match=r"comments\.txt: no data rows"):
        load_letor(write(tmp_path / "comments.txt", "# only a comment\n\n   \n"))


GOOD = "1 qid:1 1:0.5 2:0.25\n0 qid:1 1:0.1 3:1\n"


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("2 qid:1 1:0.5 3:abc", r"value 'abc' of feature 3 is not a number"),
        ("x qid:1 1:0.5", r"label 'x' is not a number"),
        ("1 qid:1 1:0.5 4", r"'4' is not an index:value pair"),
        ("1 qid:1 3:0.5 2:1", r"feature indices must be increasing and unique, but 2 follows 3"),
        ("1 qid:1 2:0.5 2:1", r"feature indices must be increasing and unique, but 2 follows 2"),
        ("1 qid:1 -1:0.5", r"invalid feature index -1"),
        ("1 qid:1 1.5:0.5", r"feature index '1\.5' is not an integer"),
        ("1 qid:x 1:0.5", r"malformed query id 'qid:x'"),
        ("1 qid 1:0.5", r"malformed query id 'qid'"),
        # Python's int() and float() read 1_0 as 10: it would merge with qid:10, or raise a label or a value.
        ("1 qid:1_0 1:0.5", r"'qid:1_0' holds '_'"),
        ("1_0 qid:1 1:0.5", r"'1_0' holds '_'"),
        ("1 qid:1 1:0.5 2:2_5", r"'2:2_5' holds '_'"),
        ("1,2 qid:1 1:0.5", r"label '1,2' is not a number"),
        ("1 qid:1 99999999999:0.5", r"feature index 99999999999 is too large"),
    ],
)
def test_malformed_line_is_located(tmp_path, bad_line, message):
    path = write(tmp_path / "rank.train", "# comment line\n" + GOOD + "\n" + bad_line + "\n" + GOOD)
    with pytest.raises(ValueError, match=r"rank\.train line 5: " + message):
        load_letor(path)


def test_load_features_refuses_underscores_outside_comments(tmp_path):
    path = write(tmp_path / "rank.test", "0 1:0.5 # doc_1\n0 1:0.2_5 # doc_2\n")
    with pytest.raises(ValueError, match=r"rank\.test line 2: '1:0\.2_5' holds '_'"):
        load_features(path)
    fine = write(tmp_path / "commented.test", "0 1:0.5 # doc_1\n0 1:0.25 # doc_2\n")
    np.testing.assert_array_equal(load_features(fine), [[0.5], [0.25]])


def test_zero_index_in_one_based_file(tmp_path):
    path = write(tmp_path / "rank.train", GOOD + "1 qid:1 0:0.5\n")
    with pytest.raises(ValueError, match=r"rank\.train line 3: invalid feature index 0; indices start at 1"):
        load_letor(path, zero_based=False)


def test_too_many_features_is_located(tmp_path):
    path = write(tmp_path / "rank.train", GOOD + GOOD + "2 qid:2 1:1 7:0.5\n" + GOOD)
    with pytest.raises(ValueError, match=r"rank\.train line 5: feature index 7 is beyond n_features=4"):
        load_letor(path, n_features=4)
    assert load_letor(path, n_features=7)[0].shape == (7, 7)


def test_mixed_qid_is_located(tmp_path):
    path = write(tmp_path / "rank.train", GOOD + "1 1:0.5\n" + GOOD)
    with pytest.raises(ValueError, match=r"rank\.train line 3: no qid: field, but line 1 has one"):
        load_letor(path)


def test_non_finite_label_is_located(tmp_path):
    path = write(tmp_path / "rank.train", GOOD + "nan qid:1 1:0.5\n")
    with pytest.raises(ValueError, match=r"rank\.train line 3: label nan is not a finite number"):
        load_letor(path)


@pytest.mark.parametrize(
    "sizes, message",
    [
        ("2\n1.5\n1\n", r"sizes\.query line 2: query size '1\.5' is not a positive integer"),
        ("2\nabc\n", r"sizes\.query line 2: query size 'abc'"),
        ("2\n1_0\n", r"sizes\.query line 2: query size '1_0' is not a positive integer"),
        ("2\n2\n0\n", r"sizes\.query line 3: query size '0' is not a positive integer"),
        ("-1\n5\n", r"sizes\.query line 1: query size '-1'"),
        ("2\n1\n", r"sizes\.query: the 2 query sizes sum to 3, but .*rank\.train has 4 rows"),
        ("2\n1\n5\n", r"sum to 8, but .*has 4 rows"),
        ("", r"sizes\.query: no query sizes \(the file is empty\)"),
    ],
)
def test_bad_query_file(tmp_path, sizes, message):
    path = write(tmp_path / "rank.train", "1 1:0.5\n0 2:1\n2 1:1\n0 3:1\n")
    query = write(tmp_path / "sizes.query", sizes)
    with pytest.raises(ValueError, match=message):
        load_letor(path, query_file=query)


def test_auto_detected_query_file_errors_name_it(tmp_path):
    path = write(tmp_path / "rank.train", "1 1:0.5\n0 2:1\n")
    write(tmp_path / "rank.train.query", "3\n")
    with pytest.raises(ValueError, match=r"rank\.train\.query: the 1 query sizes sum to 3, but .* has 2 rows"):
        load_letor(path)


def test_rejects_non_path():
    with pytest.raises(TypeError, match="str or os.PathLike"):
        load_letor(123.5)


def test_warns_when_a_value_overflows_the_requested_float_dtype(tmp_path):
    path = tmp_path / "rank.txt"
    path.write_text("1 qid:1 1:0.5 2:inf\n0 qid:1 1:1e39 2:1\n2 qid:2 1:-1e300 2:3\n")
    with pytest.warns(UserWarning, match=r"rank\.txt line 2: value 1e39 of feature 1 is beyond the range of "
                                         r"float32 .*dtype=np\.float64"):
        X, _, _ = load_letor(path)
    assert X[1, 0] == np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X64, _, _ = load_letor(path, dtype=np.float64)  # no overflow; an inf written in the file is not one
        load_letor(tmp_path / "rank.txt", n_features=2, dtype=np.float64)
    assert X64[1, 0] == 1e39 and X64[0, 1] == np.inf


@pytest.mark.parametrize("dtype", [np.int32, np.float16, "U8"])
def test_a_dtype_other_than_float32_or_float64_raises(tmp_path, dtype):
    """An integer dtype truncated 0.5 to 0 and wrapped 1e39 to -2**31 with only numpy's cast warning."""
    path = tmp_path / "rank.txt"
    path.write_text("1 qid:1 1:0.5 2:1e39\n")
    for read in (load_letor, load_features):
        with pytest.raises(ValueError, match="dtype must be float32 or float64"):
            read(path, dtype=dtype)


@pytest.mark.parametrize("name, n_queries, n_rows", [("rank.train", 201, 3005), ("rank.test", 50, 768)])
def test_lightgbm_example(name, n_queries, n_rows):
    path = SHARED_EXAMPLE / name
    if not path.exists():
        pytest.skip(f"shared example data not found at {path}")
    X, y, qid = load_letor(path, n_features=300)
    assert X.shape == (n_rows, 300) and X.dtype == np.float32
    assert len(np.unique(qid)) == n_queries
    np.testing.assert_array_equal(qid, np.sort(qid))
    np.testing.assert_array_equal(np.unique(y), [0, 1, 2, 3, 4])
    sizes = np.loadtxt(str(path) + ".query", dtype=np.int64)
    np.testing.assert_array_equal(np.bincount(qid), sizes)


# ----------------------------------------------------------------------------------------------------------------
# scan_letor: rows and feature indices from a quick pass
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("zero_based", [True, False])
def test_scan_letor_sizes_a_file_as_the_readers_read_it(tmp_path, letor_data, zero_based):
    X, y, qid = letor_data
    X = X.copy()
    X[:, 4:] = 0  # the last columns are never written: the file is narrower than X
    path = tmp_path / "data.txt"
    dump_svmlight_file(X, y, str(path), query_id=qid, zero_based=zero_based)
    n_rows, low, high, has_qid = scan_letor(path)
    assert (n_rows, low, has_qid) == (40, 0 if zero_based else 1, True)
    assert load_letor(path)[0].shape == (n_rows, high + 1 if low == 0 else high) == (40, 4)
    dump_svmlight_file(X, y, str(path), zero_based=zero_based)  # no qid: fields
    assert scan_letor(str(path)) == (40, low, high, False)


def test_scan_letor_comments_blank_lines_lines_without_features_and_gzip(tmp_path):
    text = "# header\n2 qid:7 3:0.5 5:nan # doc a\n\n0 qid:7 2:1.5\n1 qid:9 # no features\n1 qid:9\n"
    assert scan_letor(write(tmp_path / "c.txt", text)) == (4, 2, 5, True)
    assert load_features(tmp_path / "c.txt").shape == (4, 5)
    with gzip.open(tmp_path / "c.txt.gz", "wt") as f:
        f.write(text)
    assert scan_letor(tmp_path / "c.txt.gz") == (4, 2, 5, True)
    assert scan_letor(write(tmp_path / "none.txt", "1 qid:1\n0 qid:1 # nothing\n")) == (2, None, None, True)
    assert scan_letor(write(tmp_path / "empty.txt", "# only a comment\n")) == (0, None, None, False)


def test_scan_letor_errors_are_load_letors(tmp_path):
    with pytest.raises(FileNotFoundError, match="LETOR data file not found"):
        scan_letor(tmp_path / "missing.txt")
    # A malformed first or last feature is caught, with the message load_letor gives (file and first bad line);
    # other faults are left to the readers.
    for bad_line, caught in [("1 qid:1 1:0.5 4", True), ("1 qid:1 x:0.5 2:1", True), ("1 qid:1 1.5:0.5", True),
                             ("2 qid:1 1:0.5 3:abc", False), ("x qid:1 1:0.5", False), ("1 qid:1 3:0.5 2:1", False)]:
        path = write(tmp_path / "rank.train", "# comment line\n" + GOOD + "\n" + bad_line + "\n" + GOOD)
        with pytest.raises(ValueError) as expected:
            load_letor(path)
        assert "line 5: " in str(expected.value)
        if caught:
            with pytest.raises(ValueError) as got:
                scan_letor(path)
            assert str(got.value) == str(expected.value), bad_line
        else:
            assert scan_letor(path)[0] == 5, bad_line


# ----------------------------------------------------------------------------------------------------------------
# make_ranking_data
# ----------------------------------------------------------------------------------------------------------------


def ndcg_at_10(y, score, qid):
    """Mean NDCG@10 (gain 2^l - 1, queries without relevant documents count as 1, ties in input order)."""
    discount = 1 / np.log2(np.arange(2, 12))
    values = []
    for q in np.unique(qid):
        rows = qid == q
        labels, s = y[rows], score[rows]
        top = labels[np.argsort(-s, kind="stable")][:10]
        ideal = np.sort(labels)[::-1][:10]
        idcg = ((2**ideal - 1) * discount[: len(ideal)]).sum()
        values.append(((2**top - 1) * discount[: len(top)]).sum() / idcg if idcg > 0 else 1.0)
    return float(np.mean(values))


@pytest.fixture(scope="module")
def synthetic():
    return make_ranking_data(2000, random_state=42)


def test_shapes_and_dtypes(synthetic):
    X, y, qid = synthetic
    assert X.ndim == 2 and X.shape == (len(y), 136) and len(qid) == len(y)
    assert X.dtype == np.float32 and X.flags.c_contiguous
    assert y.dtype == np.float64 and qid.dtype == np.int64
    assert qid[0] == 0 and qid[-1] == 1999 and np.all(np.diff(qid) >= 0)
    assert np.array_equal(np.unique(qid), np.arange(2000))
    assert set(np.unique(y)) == {0, 1, 2, 3, 4}


def test_label_skew_matches_mslr(synthetic):
    _, y, _ = synthetic
    shares = np.bincount(y.astype(np.int64), minlength=5) / len(y)
    np.testing.assert_allclose(shares, [0.52, 0.32, 0.13, 0.02, 0.01], atol=0.02)


def test_query_sizes_are_long_tailed(synthetic):
    _, _, qid = synthetic
    sizes = np.bincount(qid)
    assert sizes.min() >= 1
    assert 100 < sizes.mean() < 140  # mean_docs_per_query=120
    assert sizes.max() > 4 * sizes.mean()
    assert np.median(sizes) < sizes.mean()  # right-skewed


def test_feature_kinds_and_missing_values(synthetic):
    X, _, _ = synthetic
    nan_share = np.isnan(X).mean()
    assert 0.0005 < nan_share < 0.002  # missing_rate=0.001
    filled = np.nan_to_num(X)
    assert np.all(filled >= 0)
    is_binary = np.all((filled == 0) | (filled == 1), axis=0)
    bounded = np.all((filled > 0) & (filled < 1) | np.isnan(X), axis=0) & ~is_binary
    integer = np.all(filled == np.round(filled), axis=0) & ~is_binary
    mostly_zero = ((filled == 0).mean(axis=0) > 0.85) & ~is_binary & ~integer
    assert is_binary.sum() >= 10 and bounded.sum() >= 40 and integer.sum() >= 30 and mostly_zero.sum() >= 20
    assert filled[:, integer].max() > 100  # heavy-tailed counts


def test_deterministic_per_seed():
    a = make_ranking_data(30, n_features=12, random_state=7)
    b = make_ranking_data(30, n_features=12, random_state=7)
    c = make_ranking_data(30, n_features=12, random_state=8)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype
        np.testing.assert_array_equal(u, v)  # nan == nan here
        assert u.tobytes() == v.tobytes()
    assert a[0].shape != c[0].shape or not np.array_equal(a[0], c[0], equal_nan=True)
    gen = make_ranking_data(30, n_features=12, random_state=np.random.default_rng(7))
    np.testing.assert_array_equal(gen[0], a[0])


@pytest.mark.slow  # 3 s on idle cores, 30 to 90 s when they are shared (HistGradientBoostingRegressor's OpenMP)
def test_learnable_but_not_trivial():
    X, y, qid = make_ranking_data(400, random_state=0)
    from sklearn.ensemble import HistGradientBoostingRegressor

    train, test = qid < 300, qid >= 300
    model = HistGradientBoostingRegressor(max_iter=50, random_state=0).fit(X[train], y[train])
    learned = ndcg_at_10(y[test], model.predict(X[test]), qid[test])
    rng = np.random.default_rng(0)
    chance = np.mean([ndcg_at_10(y[test], rng.random(test.sum()), qid[test]) for _ in range(3)])
    assert learned > chance + 0.2, (learned, chance)
    assert learned < 0.85, learned


@pytest.mark.parametrize("n_features", [1, 2, 3, 4, 5, 7])
def test_few_features_still_work(n_features):
    X, y, qid = make_ranking_data(20, n_features=n_features, mean_docs_per_query=5, random_state=1)
    assert X.shape == (len(y), n_features) and len(qid) == len(y)
    assert np.isin(y, [0, 1, 2, 3, 4]).all()


def test_options():
    X, y, qid = make_ranking_data(10, n_features=8, mean_docs_per_query=0.3, missing_rate=0, random_state=0)
    np.testing.assert_array_equal(np.bincount(qid), np.ones(10))  # at least one document per query
    assert not np.isnan(X).any()
    X, y, qid = make_ranking_data(50, n_features=8, relevance_noise=0.0, missing_rate=0.5, random_state=0)
    assert 0.47 < np.isnan(X).mean() < 0.53


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(n_queries=0), "n_queries must be >= 1"),
        (dict(n_queries=2.5), "n_queries must be an integer"),
        (dict(n_queries=True), "n_queries must be an integer"),
        (dict(n_queries=5, n_features=0), "n_features must be >= 1"),
        (dict(n_queries=5, mean_docs_per_query=0), "mean_docs_per_query must be > 0"),
        (dict(n_queries=5, mean_docs_per_query=np.nan), "mean_docs_per_query must be a finite number"),
        (dict(n_queries=5, relevance_noise=-1), "relevance_noise must be >= 0"),
        (dict(n_queries=5, missing_rate=1.0), r"missing_rate must be in \[0, 1\)"),
    ],
)
def test_argument_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_ranking_data(**kwargs)
