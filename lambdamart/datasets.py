"""Ranking data: LETOR/SVMlight files and MSLR-shaped synthetic data.

:func:`load_letor` and :func:`make_ranking_data` return the same triple ``(X, y, qid)``: features, graded
relevance labels (float64) and one int64 query id per row, which is what :class:`lambdamart.LambdaMARTRanker` and
the metrics take. :func:`load_features` reads only the features of a LETOR/SVMlight file, for scoring, where
neither labels nor queries are needed. :func:`scan_letor` sizes a file (rows, feature indices) without parsing it,
so that several files can be read with one width.
"""

import numbers
import os
import re
import warnings
from array import array

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

__all__ = ["load_features", "load_letor", "make_ranking_data", "scan_letor"]


# --------------------------------------------------------------------------------------------------------------
# LETOR / SVMlight files
# --------------------------------------------------------------------------------------------------------------


def load_letor(path, *, query_file=None, n_features=None, dtype=np.float32, sparse=False, zero_based="auto"):
    """Load a learning-to-rank file in LETOR/SVMlight format.

    Each non-blank line is one document::

        <label> [qid:<query id>] <index>:<value> <index>:<value> ... [# comment]

    as in MSLR-WEB10K/30K, Yahoo! LTR, Istella, LETOR 4.0 and the files written by
    :func:`sklearn.datasets.dump_svmlight_file` with ``query_id``. Feature indices are increasing within a line;
    features that are absent are 0. Everything after ``#`` is a comment. The features are parsed by
    :func:`sklearn.datasets.load_svmlight_file` (so ``.gz`` and ``.bz2`` files work too).

    Queries come from one of two places:

    * ``qid:`` fields on every line (the query ids are kept as written, not renumbered);
    * or, for files without ``qid:`` (LightGBM/XGBoost style), a query file with one positive integer per line:
      the number of consecutive rows that belong to each query. It is ``query_file`` if given, else
      ``path + ".query"`` if that file exists. Query ids are then ``0, 1, ..., n_queries - 1``.

    Parameters
    ----------
    path : str or os.PathLike
        The data file.
    query_file : str or os.PathLike, optional
        Query sizes file for data without ``qid:``. Giving one for a file that has ``qid:`` is an error
        (the two could disagree).
    n_features : int, optional
        Number of feature columns. By default the largest index in the file decides; give it when several
        files (train/test) must have the same width, or when the last features are all zero in this file.
    dtype : {np.float32, np.float64}, default=np.float32
        Dtype of ``X``.
    sparse : bool, default=False
        Return ``X`` as a :class:`scipy.sparse.csr_matrix` instead of a dense C-contiguous array.
    zero_based : bool or "auto", default="auto"
        Whether feature indices start at 0 (passed to :func:`~sklearn.datasets.load_svmlight_file`). LETOR files
        are 1-based (index ``1`` is column 0); "auto" treats a file as 0-based only when index 0 occurs in it.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features) or csr_matrix
        Features, of ``dtype``. Missing entries are 0; ``nan`` written in the file stays ``nan``.
    y : ndarray of float64, shape (n_samples,)
        Relevance labels.
    qid : ndarray of int64, shape (n_samples,)
        Query id of each row.

    Raises
    ------
    FileNotFoundError
        The data file or an explicitly given query file does not exist.
    ValueError
        The file is empty, a line is malformed (the message names the file and the 1-based line), some lines
        have ``qid:`` and others do not, labels are not finite, the query file is missing or invalid, or its sizes
        do not add up to the number of rows.

    Examples
    --------
    >>> X, y, qid = load_letor("MSLR-WEB10K/Fold1/train.txt", n_features=136)  # doctest: +SKIP
    >>> X, y, qid = load_letor("rank.train", n_features=300)  # sizes read from rank.train.query  # doctest: +SKIP
    """
    path = _as_path(path, "path")
    if not os.path.exists(path):
        raise FileNotFoundError(f"LETOR data file not found: {path}")
    if query_file is not None:
        query_file = _as_path(query_file, "query_file")

    # One cheap pass for the query ids. sklearn can read them too (query_id=True), but it grows that array one
    # element per line by copying (quadratic: minutes on an MSLR fold), so we read features without it.
    scanned_qid, row_lines = _scan_qids(path)
    n_rows = len(row_lines)
    if n_rows == 0:
        raise ValueError(f"{path}: no data rows (the file is empty or holds only blank and comment lines).")

    X, y = _read_svmlight(path, n_features, dtype, zero_based)
    if X.shape[0] != n_rows:  # pragma: no cover - our scan mirrors sklearn's line rules
        raise RuntimeError(f"{path}: read {X.shape[0]} rows but counted {n_rows}; please report this file.")

    _warn_on_overflow(path, X, row_lines, dtype)
    y = np.asarray(y, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise ValueError(f"{path} line {row_lines[bad[0]]}: label {y[bad[0]]} is not a finite number.")

    if scanned_qid is not None:
        if query_file is not None:
            raise ValueError(
                f"{path} has qid: fields and query_file={query_file} was given too; the query ids are ambiguous. "
                "Drop query_file to use the qid: fields."
            )
        qid = scanned_qid
    else:
        qid = _qid_from_query_file(path, query_file, n_rows)

    return _as_output(X, dtype, sparse), y, qid


def load_features(path, *, n_features=None, dtype=np.float32, sparse=False, zero_based="auto"):
    """Load the features of a LETOR/SVMlight file, without labels or queries.

    For scoring a file with a trained model: the lines are those :func:`load_letor` reads,
    ``<label> [qid:<query id>] <index>:<value> ... [# comment]``, but no query information is needed, so a file
    without ``qid:`` needs no query file, and lines may have ``qid:`` or not. Each line still starts with a label
    (any number, e.g. 0 when the relevance is unknown); labels and ``qid:`` fields are skipped, not checked.

    Parameters
    ----------
    path : str or os.PathLike
        The data file (``.gz`` and ``.bz2`` files are decompressed).
    n_features : int, optional
        Number of feature columns. By default the largest index in the file decides; give the model's
        ``n_features_in_`` to get exactly its width (an index beyond it is then an error).
    dtype : {np.float32, np.float64}, default=np.float32
        Dtype of ``X``.
    sparse : bool, default=False
        Return ``X`` as a :class:`scipy.sparse.csr_matrix` instead of a dense C-contiguous array.
    zero_based : bool or "auto", default="auto"
        Whether feature indices start at 0, as in :func:`load_letor`: "auto" treats a file as 0-based only when
        index 0 occurs in it.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features) or csr_matrix
        Features, of ``dtype``, one row per data line in file order. Missing entries are 0; ``nan`` written in the
        file stays ``nan``.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        The file has no data rows, or a line is malformed (the message names the file and the 1-based line).

    See Also
    --------
    load_letor : Features, labels and query ids, for training and evaluation.

    Examples
    --------
    >>> X = load_features("MSLR-WEB10K/Fold1/test.txt", n_features=136)  # doctest: +SKIP
    >>> scores = ranker.predict(X)  # doctest: +SKIP
    """
    path = _as_path(path, "path")
    if not os.path.exists(path):
        raise FileNotFoundError(f"data file not found: {path}")
    _check_no_underscore(path)
    X, _ = _read_svmlight(path, n_features, dtype, zero_based)
    if X.shape[0] == 0:
        raise ValueError(f"{path}: no data rows (the file is empty or holds only blank and comment lines).")
    _warn_on_overflow(path, X, None, dtype)
    return _as_output(X, dtype, sparse)


def scan_letor(path):
    """Size a LETOR/SVMlight file with one quick pass: its rows and the range of its feature indices.

    Only the start and the end of each line are looked at (the label, an optional ``qid:`` field, the first and the
    last ``index:value`` pair); no value is parsed. This is what reading several files with one width needs:
    SVMlight lines list only non-zero features, so each file's width is its own largest index, and
    ``n_features`` for :func:`load_letor` or :func:`load_features` is the largest over the files.

    Parameters
    ----------
    path : str or os.PathLike
        The data file (``.gz`` and ``.bz2`` files are decompressed).

    Returns
    -------
    n_rows : int
        Number of data lines (those not blank once comments are cut), the rows :func:`load_letor` returns.
    min_index : int or None
        Smallest feature index written in the file (None when no line has a feature). A file is 0-based under
        ``zero_based="auto"`` exactly when this is 0.
    max_index : int or None
        Largest feature index written in the file (None when no line has a feature): the file needs
        ``max_index + 1`` columns when read 0-based, ``max_index`` when read 1-based.
    has_qid : bool
        Whether the first data line has a ``qid:`` field (:func:`load_letor` wants it on every line or on none;
        without, the query sizes come from ``path + ".query"``).

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        The first or last feature of a line is not an ``index:value`` pair with an integer index. The message names
        the file and the first malformed line, as :func:`load_features`'s does. Everything else (values, the order
        of indices, labels, query ids) is left to the readers, which check every line.

    Examples
    --------
    >>> n_rows, min_index, max_index, has_qid = scan_letor("MSLR-WEB10K/Fold1/train.txt")  # doctest: +SKIP
    """
    path = _as_path(path, "path")
    if not os.path.exists(path):
        raise FileNotFoundError(f"LETOR data file not found: {path}")
    n_rows = 0
    lowest = highest = None
    has_qid = False
    with _open_binary(path) as f:
        for line in f:
            hash_at = line.find(b"#")
            if hash_at >= 0:
                line = line[:hash_at]
            head = line.split(None, 3)  # label, qid or first feature, first feature or more, the rest unsplit
            if not head:
                continue
            n_rows += 1
            with_qid = len(head) > 1 and head[1].startswith(b"qid")
            if n_rows == 1:
                has_qid = with_qid
            first = 2 if with_qid else 1
            if len(head) <= first:
                continue  # no feature on this line
            try:
                low = _token_index(head[first])
                high = _token_index(line.rsplit(None, 1)[-1])
            except ValueError as err:
                raise _locate_error(path, err, None, "auto") from None
            lowest = low if lowest is None else min(lowest, low)
            highest = high if highest is None else max(highest, high)
    return n_rows, lowest, highest, has_qid


def _token_index(token):
    """The integer index of an ``index:value`` token (ValueError when it is not one)."""
    index, colon, _ = token.partition(b":")
    if not colon:
        raise ValueError(f"{token.decode(errors='replace')!r} is not an index:value pair")
    return int(index)


def _read_svmlight(path, n_features, dtype, zero_based):
    """``(X, y)`` from sklearn's reader, whose bare ValueError becomes one naming the file and the bad line."""
    kind = np.dtype(dtype)
    if kind not in (np.float32, np.float64):  # an integer dtype would truncate values and wrap large ones silently
        raise ValueError(f"dtype must be float32 or float64 (the features' values are real numbers), got {kind}.")
    try:
        return load_svmlight_file(path, n_features=n_features, dtype=dtype, zero_based=zero_based, query_id=False)
    except (ValueError, OverflowError) as err:  # sklearn says what, not where
        raise _locate_error(path, err, n_features, zero_based) from err


def _as_output(X, dtype, sparse):
    """The CSR matrix of sklearn's reader as the caller asked for it: CSR, or a dense C-contiguous array."""
    if sparse:
        return sp.csr_matrix(X)
    return np.ascontiguousarray(X.toarray(), dtype=dtype)


def _warn_on_overflow(path, X, row_lines, dtype):
    """Warn when a finite value in the file became inf in a narrow float ``dtype`` (e.g. 1e39 in float32).

    Costs nothing unless X holds an inf; then the lines with one are re-read to tell overflow from a written inf.
    ``row_lines`` holds the 1-based line number of each row; None counts them here, only when X holds an inf.
    """
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or dtype.itemsize >= 8:
        return
    inf_at = np.flatnonzero(np.isinf(X.data))
    if inf_at.size == 0:
        return
    if row_lines is None:
        row_lines = np.fromiter((lineno for lineno, _ in _data_lines(path)), dtype=np.int64)
    rows = np.unique(np.searchsorted(X.indptr, inf_at, side="right") - 1)
    suspects = set(row_lines[rows].tolist())
    for lineno, tokens in _data_lines(path):
        if lineno not in suspects:
            continue
        for token in tokens[1:]:
            index, colon, value = token.partition(b":")
            if not colon or index.startswith(b"qid"):
                continue
            number = float(value)
            with np.errstate(over="ignore"):
                overflows = np.isfinite(number) and np.isinf(dtype.type(number))
            if overflows:
                warnings.warn(
                    f"{path} line {lineno}: value {value.decode()} of feature {index.decode()} is beyond the range "
                    f"of {dtype.name} and was read as inf (other values may be too). Pass dtype=np.float64 to keep "
                    f"such values.", UserWarning, stacklevel=3)
                return


def _as_path(path, name):
    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"{name} must be a str or os.PathLike, got {type(path).__name__}.") from None
    return os.fsdecode(path)


def _open_binary(path):
    # Same compression rule as sklearn's loader, so our scans see the same lines it does.
    ext = os.path.splitext(path)[1]
    if ext == ".gz":
        import gzip

        return gzip.open(path, "rb")
    if ext == ".bz2":
        import bz2

        return bz2.open(path, "rb")
    return open(path, "rb")


def _data_lines(path):
    """Yield ``(line_number, tokens)`` for each data line, with sklearn's rules: cut at ``#``, split on whitespace."""
    with _open_binary(path) as f:
        for lineno, line in enumerate(f, 1):
            hash_at = line.find(b"#")
            if hash_at >= 0:
                line = line[:hash_at]
            tokens = line.split()
            if tokens:
                yield lineno, tokens


def _refuse_underscore(path, lineno, data):
    """Raise for a number with ``_`` in a line's data (``data``: the line without its comment).

    sklearn's reader parses numbers with Python's ``float``, which takes digit-group underscores: ``1_0`` would be
    read as 10, silently.
    """
    token = next(t for t in data.split() if b"_" in t).decode(errors="replace")
    raise ValueError(f"{path} line {lineno}: {token!r} holds '_', which no LETOR/SVMlight number does (a reader "
                     "would take 1_0 for 10); fix the line.")


def _check_no_underscore(path, chunk_size=1 << 24):
    """:func:`_refuse_underscore` for a file not otherwise scanned line by line.

    One pass over large blocks; the lines are looked at only when a block holds an ``_`` (comments may).
    """
    with _open_binary(path) as f:
        while chunk := f.read(chunk_size):
            if b"_" in chunk:
                break
        else:
            return
    for lineno, tokens in _data_lines(path):
        data = b" ".join(tokens)
        if b"_" in data:
            _refuse_underscore(path, lineno, data)


def _scan_qids(path):
    """Query ids (or None when no line has ``qid:``) and the 1-based line number of every row."""
    qids = array("q")
    lines = array("q")
    first_with = first_without = None
    with _open_binary(path) as f:
        for lineno, line in enumerate(f, 1):
            hash_at = line.find(b"#")
            if hash_at >= 0:
                line = line[:hash_at]
            # Only the label and the token after it matter here; leave the rest of the line unsplit.
            tokens = line.split(None, 2)
            if not tokens:
                continue
            if b"_" in line:
                _refuse_underscore(path, lineno, line)
            lines.append(lineno)
            if len(tokens) > 1 and tokens[1].startswith(b"qid"):
                _, colon, value = tokens[1].partition(b":")
                try:
                    # An optional sign, then ASCII digits (bytes.isdigit): int() would also take "1_0" as 10,
                    # merging two queries.
                    digits = value[1:] if value[:1] in (b"+", b"-") else value
                    if not colon or not digits.isdigit():
                        raise ValueError
                    qids.append(int(value))
                except (ValueError, OverflowError):
                    raise ValueError(
                        f"{path} line {lineno}: malformed query id {tokens[1].decode(errors='replace')!r}; "
                        "expected qid:<integer>."
                    ) from None
                if first_with is None:
                    first_with = lineno
            elif first_without is None:
                first_without = lineno
    lines = np.frombuffer(lines, dtype=np.int64)
    if first_with is None:
        return None, lines
    if first_without is not None:
        raise ValueError(
            f"{path} line {first_without}: no qid: field, but line {first_with} has one; "
            "either every line has qid:<id> or none does (and a query file gives the sizes)."
        )
    return np.frombuffer(qids, dtype=np.int64).copy(), lines


_MAX_INDEX = 2**31 - 1  # sklearn parses indices into a C int
_N_FEATURES_MSG = re.compile(r"n_features was set to (\d+), but input file contains (\d+) features")


def _locate_error(path, err, n_features, zero_based):
    """Turn sklearn's bare ValueError into one that names the file and the offending line."""
    match = _N_FEATURES_MSG.search(str(err))
    if match:
        return _locate_too_many_features(path, int(match.group(1)), int(match.group(2)), zero_based)
    for lineno, tokens in _data_lines(path):
        problem = _line_problem(tokens, zero_based)
        if problem is not None:
            return ValueError(f"{path} line {lineno}: {problem}")
    return ValueError(f"{path}: {err}")


def _line_problem(tokens, zero_based):
    """What is wrong with one tokenised line, checked in the order sklearn's parser checks, or None."""

    def text(b):
        return b.decode(errors="replace")

    try:
        float(tokens[0])
    except ValueError:
        return f"label {text(tokens[0])!r} is not a number."
    features = tokens[1:]
    if features and features[0].startswith(b"qid"):
        if b":" not in features[0]:
            return f"malformed query id {text(features[0])!r}; expected qid:<integer>."
        features = features[1:]
    prev = -1
    for token in features:
        index, colon, value = token.partition(b":")
        if not colon:
            return f"{text(token)!r} is not an index:value pair."
        try:
            idx = int(index)
        except ValueError:
            return f"feature index {text(index)!r} is not an integer (in {text(token)!r})."
        if idx > _MAX_INDEX:
            return f"feature index {idx} is too large (sklearn's reader stops at {_MAX_INDEX})."
        if idx < 0 or (zero_based is False and idx == 0):
            return f"invalid feature index {idx}; indices start at {0 if zero_based is not False else 1}."
        if idx <= prev:
            return f"feature indices must be increasing and unique, but {idx} follows {prev}."
        try:
            float(value)
        except ValueError:
            return f"value {text(value)!r} of feature {idx} is not a number."
        prev = idx
    return None


def _locate_too_many_features(path, n_features, n_found, zero_based):
    first_index = 0
    max_per_line = []
    lowest = None
    for lineno, tokens in _data_lines(path):
        indices = [int(t.partition(b":")[0]) for t in tokens[1:] if not t.startswith(b"qid")]
        if indices:
            max_per_line.append((lineno, indices[-1]))
            lowest = indices[0] if lowest is None else min(lowest, indices[0])
    # Mirror the "auto" rule: the file is 1-based unless index 0 occurs.
    if zero_based is False or (zero_based == "auto" and lowest is not None and lowest > 0):
        first_index = 1
    for lineno, idx in max_per_line:
        if idx - first_index >= n_features:
            return ValueError(
                f"{path} line {lineno}: feature index {idx} is beyond n_features={n_features} "
                f"(the file has {n_found} features; indices start at {first_index})."
            )
    return ValueError(f"{path}: n_features={n_features} but the file has {n_found} features.")  # pragma: no cover


def _qid_from_query_file(path, query_file, n_rows):
    if query_file is None:
        candidate = path + ".query"
        if not os.path.exists(candidate):
            raise ValueError(
                f"{path} has no qid: fields, and no query file was found at {candidate}. Either write "
                "qid:<id> after the label on every line, or pass query_file= (one query size per line: the number "
                "of consecutive rows in each query)."
            )
        query_file = candidate
    elif not os.path.exists(query_file):
        raise FileNotFoundError(f"query file not found: {query_file}")

    sizes = []
    with open(query_file, "rb") as f:
        for lineno, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            size = int(text) if text.isdigit() else None  # ASCII digits: int() would take "1_0" as 10
            if size is None or size <= 0:
                raise ValueError(
                    f"{query_file} line {lineno}: query size {text.decode(errors='replace')!r} is not a "
                    "positive integer."
                )
            sizes.append(size)
    if not sizes:
        raise ValueError(f"{query_file}: no query sizes (the file is empty), but {path} has {n_rows} rows.")
    sizes = np.asarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    if total != n_rows:
        raise ValueError(
            f"{query_file}: the {len(sizes)} query sizes sum to {total}, but {path} has {n_rows} rows."
        )
    return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)


# --------------------------------------------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------------------------------------------

# Share of each label in MSLR-WEB10K (rounded): 0 irrelevant ... 4 perfect.
_MSLR_LABEL_SHARES = (0.52, 0.32, 0.13, 0.02, 0.01)

# Feature kinds, assigned to columns by cycling through this pattern so the proportions are fixed
# (3 counts, 4 bounded scores, 1 flag, 2 mostly-zero per 10 columns) and the first 5 columns show every kind.
_COUNT, _BOUNDED, _BINARY, _SPARSE = range(4)
_KIND_CYCLE = (_COUNT, _BOUNDED, _BINARY, _BOUNDED, _SPARSE, _COUNT, _BOUNDED, _SPARSE, _COUNT, _BOUNDED)

_N_LATENT = 5  # hidden relevance factors the labels are made of
_SIGNAL_SHARE = 0.12  # share of columns that observe a factor directly
_COPY_SHARE = 0.25  # share of columns that are noisy copies of other columns


def make_ranking_data(
    n_queries,
    n_features=136,
    mean_docs_per_query=120,
    *,
    relevance_noise=1.0,
    missing_rate=0.001,
    random_state=None,
):
    """Generate synthetic learning-to-rank data shaped like MSLR-WEB10K.

    Documents have five hidden relevance factors (each with a per-query component, so documents of one query are
    alike). A relevance score is a nonlinear function of them (a linear term, a saturating term, an interaction
    and a one-sided term) plus a per-query offset and Gaussian noise; labels 0..4 are that score cut at global
    quantiles, so the label shares follow MSLR's skew (about 52/32/13/2/1 %); queries differ in how many relevant
    documents they have, and a few have none.

    Columns are of four kinds in fixed proportions, cycling with the column index: heavy-tailed counts
    (term-frequency-like non-negative integers, 30 %), bounded scores in [0, 1] (normalised BM25-like, 40 %),
    binary flags (10 %) and mostly-zero non-negative values (20 %). About 12 % of the columns observe one hidden
    factor through noise, about 25 % are noisy copies of those (correlated features, like one score computed on
    several document fields), and the rest are noise. Every column gets a per-query shift, as query-dependent
    features have. Which columns carry the signal depends on ``random_state``. A gradient-boosted model ranks
    this data clearly better than chance but far from perfectly.

    Parameters
    ----------
    n_queries : int
        Number of queries (>= 1).
    n_features : int, default=136
        Number of feature columns (>= 1; MSLR has 136). With fewer than five columns some factors go unobserved
        and the data is harder to learn.
    mean_docs_per_query : float, default=120
        Mean number of documents per query (> 0). Sizes are lognormal, so a few queries are many times larger
        than the mean; every query has at least one document.
    relevance_noise : float, default=1.0
        Standard deviation of the Gaussian noise added to the relevance score before it is cut into labels
        (>= 0); the noiseless part has a standard deviation of about 1.5. 0 makes the labels a deterministic
        function of the hidden factors, which the features still observe only through noise.
    missing_rate : float, default=0.001
        Expected share of feature values replaced by ``nan``, uniformly at random (in [0, 1)).
    random_state : int, numpy Generator, RandomState or None, default=None
        Seed. The same seed gives the same arrays bit for bit.

    Returns
    -------
    X : ndarray of float32, shape (n_samples, n_features)
        C-contiguous features, ``nan`` for missing values.
    y : ndarray of float64, shape (n_samples,)
        Labels in {0, 1, 2, 3, 4}.
    qid : ndarray of int64, shape (n_samples,)
        Query ids ``0 .. n_queries - 1``, sorted (each query's rows are contiguous).

    Examples
    --------
    >>> from lambdamart.datasets import make_ranking_data
    >>> X, y, qid = make_ranking_data(50, n_features=20, random_state=0)
    >>> X.shape[1], X.dtype, int(qid.max())
    (20, dtype('float32'), 49)
    """
    n_queries = _check_int(n_queries, "n_queries")
    n_features = _check_int(n_features, "n_features")
    mean_docs_per_query = _check_real(mean_docs_per_query, "mean_docs_per_query")
    if mean_docs_per_query <= 0:
        raise ValueError(f"mean_docs_per_query must be > 0, got {mean_docs_per_query}.")
    relevance_noise = _check_real(relevance_noise, "relevance_noise")
    if relevance_noise < 0:
        raise ValueError(f"relevance_noise must be >= 0, got {relevance_noise}.")
    missing_rate = _check_real(missing_rate, "missing_rate")
    if not 0 <= missing_rate < 1:
        raise ValueError(f"missing_rate must be in [0, 1), got {missing_rate}.")
    rng = np.random.default_rng(random_state)
    f32 = np.float32

    # Long-tailed query sizes: lognormal with the requested mean; sigma 0.8 puts the largest of a few thousand
    # queries near 10x the mean and the median below the mean.
    sigma = 0.8
    sizes = rng.lognormal(np.log(mean_docs_per_query) - sigma**2 / 2, sigma, size=n_queries)
    sizes = np.maximum(np.rint(sizes), 1).astype(np.int64)
    qid = np.repeat(np.arange(n_queries, dtype=np.int64), sizes)
    n = len(qid)

    def per_query(scale):
        # A value per query, broadcast to its rows.
        return (rng.standard_normal(n_queries, dtype=f32) * f32(scale))[qid]

    # Hidden factors: 30 % of the variance is shared within a query.
    latent = [
        per_query(np.sqrt(0.3)) + rng.standard_normal(n, dtype=f32) * f32(np.sqrt(0.7)) for _ in range(_N_LATENT)
    ]

    u0, u1, u2, u3, u4 = latent
    score = u0 + 0.8 * np.tanh(1.5 * u1) + 0.6 * u2 * u3 + 0.7 * np.maximum(u4, 0)
    score += per_query(0.8)  # queries differ in how much relevant material they have
    score += rng.standard_normal(n, dtype=f32) * f32(relevance_noise)
    cuts = np.quantile(score, np.cumsum(_MSLR_LABEL_SHARES)[:-1])
    y = np.searchsorted(cuts, score, side="right").astype(np.float64)
    del score

    # Column roles: signal columns first cover the strongest factors (u0 first), then copies, then noise.
    n_signal = min(n_features, max(_N_LATENT, round(_SIGNAL_SHARE * n_features)))
    n_copy = min(n_features - n_signal, round(_COPY_SHARE * n_features))
    order = rng.permutation(n_features)
    roles = np.full(n_features, 2)  # 0 signal, 1 copy, 2 noise
    roles[order[:n_signal]] = 0
    roles[order[n_signal : n_signal + n_copy]] = 1
    factor_of = np.empty(n_features, dtype=np.int64)
    factor_of[order[:n_signal]] = np.arange(n_signal) % _N_LATENT
    signal_cols = order[:n_signal]

    X = np.empty((n, n_features), dtype=f32)
    bases = {}  # pre-transform value of each signal column, for the copies
    for j in np.argsort(roles, kind="stable"):  # signal columns before the copies that need them
        if roles[j] == 0:
            noise_sd = rng.uniform(0.4, 1.0)
            base = latent[factor_of[j]] + rng.standard_normal(n, dtype=f32) * f32(noise_sd)
            bases[j] = base
        elif roles[j] == 1:
            source = bases[signal_cols[rng.integers(n_signal)]]
            rho = rng.uniform(0.6, 0.95)
            base = f32(rho) * source + rng.standard_normal(n, dtype=f32) * f32(np.sqrt(1 - rho**2))
        else:
            base = rng.standard_normal(n, dtype=f32)
        base = base + per_query(0.3)
        X[:, j] = _feature_of_kind(_KIND_CYCLE[j % len(_KIND_CYCLE)], base, rng)
    del bases, latent

    if missing_rate > 0:
        # A binomial count of distinct cells: cheap (no mask over every cell) and the share is as asked.
        n_missing = rng.binomial(X.size, missing_rate)
        X.reshape(-1)[rng.choice(X.size, size=n_missing, replace=False, shuffle=False)] = np.nan
    return X, y, qid


def _feature_of_kind(kind, base, rng):
    """Map a roughly standard-normal column to a feature of the given kind (monotone, so ranks are preserved)."""
    f32 = np.float32
    if kind == _COUNT:
        # Lognormal counts floored to integers: mostly 0-3 with a long tail, like term frequencies.
        level = rng.uniform(0.0, 1.0)
        return np.maximum(np.floor(np.exp(f32(1.2) * base + f32(level))) - 1, 0)
    if kind == _BOUNDED:
        slope = rng.uniform(0.8, 2.0)
        return 1 / (1 + np.exp(-f32(slope) * base))
    if kind == _BINARY:
        threshold = rng.uniform(0.3, 1.3)
        return (base > f32(threshold)).astype(f32)
    # Mostly zero: about 4-10 % positive values, e.g. clicks or link counts.
    threshold = rng.uniform(1.3, 1.75)
    scale = rng.lognormal(2.0, 1.0)
    return np.where(base > f32(threshold), (base - f32(threshold)) * f32(scale), f32(0))


def _check_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}.")
    return int(value)


def _check_real(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    return float(value)
