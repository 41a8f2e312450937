"""TREC files: relevance judgements (qrels) and runs, read, written and turned into the arrays the metrics take.

A *qrels* file has four whitespace-separated columns, ``qid iter docno rel`` (``iter`` is ignored, ``rel`` an
integer; trec_eval calls a document relevant when ``rel >= 1``). A *run* file has six, ``qid Q0 docno rank score
run_name``; trec_eval ignores the rank column and orders each query's documents by score, highest first, ties by
docno in *descending* byte order. :func:`read_run` keeps every column as written (the score's and the rank's text
too), so :func:`write_run` gives back a file read from disk byte for byte when it separates columns by one space
or one tab, ends every line with a newline and has no blank lines (the files trec_eval, Anserini and this module
write); other files are written back with single separators.

:func:`to_arrays` joins a run with qrels into ``(y, score, qid, docno)`` arrays in trec_eval's order, so the
metrics of :mod:`lambdamart.metrics` with ``ties="input"`` rank the documents exactly as trec_eval does;
:func:`to_run` and :func:`write_run` go the other way, e.g. for the predictions of a ``LambdaMARTRanker``::

    from lambdamart.trec import write_run

    scores = ranker.predict(X_test)
    write_run("test.run", scores, qid_test, docno_test, run_name="lambdamart")

How trec_eval's measures map to :mod:`lambdamart.metrics` on ``a = to_arrays(qrels, run)``, always with
``ties="input"`` (the order of ``a``) and, where the metric has it, ``empty=0.0`` (trec_eval gives 0 to a query whose
qrels hold no relevant document):

- ``map``: ``mean_average_precision``; ``gm_map``: ``geometric_mean_average_precision`` (floor 1e-5);
- ``Rprec``: ``r_precision``; ``recip_rank``: ``mean_reciprocal_rank``; ``success_k``: ``hits_at_k(k=k)``;
- ``P_k``: ``precision_at_k(k=k)`` (trec_eval divides by k even when a query has fewer than k documents, the metric
  by the number there is; ``lambdamart evaluate --run`` and ``lambdamart compare`` divide by k);
- ``recall_k``: ``recall_at_k(k=k)``; ``set_P``, ``set_recall``: the same with ``k=None``;
- ``set_F``: ``f_measure(k=None)``; its parameter x is beta**2 (``set_F.0.25`` is ``beta=0.5``);
- ``ndcg_cut_k``: ``ndcg(k=k, gain="linear")``;
- ``iprec_at_recall_L``: ``precision_recall_curve(...).precision`` at level L.

trec_eval averages over the queries in both files (without ``-c``), which :func:`to_arrays` keeps. The values are
equal as long as the run retrieves every relevant document of the qrels (``missing_relevant`` all 0): the metrics
see only the rows they are given. :func:`lambdamart.evaluation.evaluate_run` applies this table and trec_eval's
denominators, so it equals trec_eval on any run.

Bad files raise ``ValueError`` naming the file and line: a wrong number of columns, a score or relevance that is
not a number, or the same document twice in a query.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ._files import write_atomically
from ._values import int64_or_none

__all__ = ["Qrels", "Run", "RankingArrays", "read_qrels", "read_run", "write_run", "write_qrels", "format_run",
           "to_arrays", "to_run", "to_qrels"]


@dataclass(frozen=True, eq=False)
class Qrels:
    """Relevance judgements, one entry per line of a qrels file, in file order.

    Attributes
    ----------
    qid : ndarray of str, shape (n,)
        Query id.
    iteration : ndarray of str, shape (n,)
        The second column (unused by evaluation; usually 0).
    docno : ndarray of str, shape (n,)
        Document id.
    relevance : ndarray of int64, shape (n,)
        Judged relevance; negative values (some collections mark spam so) count as 0 in :func:`to_arrays`.
    separator : str
        The column separator the file used, a space or a tab, reused when writing.
    """

    qid: np.ndarray
    iteration: np.ndarray
    docno: np.ndarray
    relevance: np.ndarray
    separator: str = " "


@dataclass(frozen=True, eq=False)
class Run:
    """A ranking of documents for each query, one entry per line of a run file, in file order.

    Attributes
    ----------
    qid : ndarray of str, shape (n,)
        Query id.
    docno : ndarray of str, shape (n,)
        Document id.
    rank : ndarray of int64, shape (n,)
        The rank column as written (trec_eval ignores it and ranks by score).
    score : ndarray of float64, shape (n,)
        Retrieval score; higher ranks first.
    name : ndarray of str, shape (n,)
        The run name column (the "run tag").
    iteration : ndarray of str, shape (n,)
        The second column, conventionally "Q0".
    score_text, rank_text : ndarray of str, shape (n,), or None
        The score and rank exactly as read, so that writing gives back the same bytes; None for a run made from
        arrays (then scores are written as the shortest text that reads back as the same float64).
    separator : str
        The column separator: a space or a tab.
    """

    qid: np.ndarray
    docno: np.ndarray
    rank: np.ndarray
    score: np.ndarray
    name: np.ndarray
    iteration: np.ndarray
    score_text: np.ndarray | None = None
    rank_text: np.ndarray | None = None
    separator: str = " "


@dataclass(frozen=True, eq=False)
class RankingArrays:
    """A run joined with qrels: the arrays the metrics take, plus the document ids.

    Rows are grouped by query (queries in sorted order) and, inside a query, in trec_eval's order: score
    descending, ties by docno descending. A metric with ``ties="input"`` therefore ranks as trec_eval does.

    Attributes
    ----------
    y : ndarray of float64, shape (n,)
        Relevance label of each retrieved document: its qrels relevance, 0 when unjudged or negative.
    score : ndarray of float64, shape (n,)
        The run's score.
    qid : ndarray of str, shape (n,)
        Query id.
    docno : ndarray of str, shape (n,)
        Document id.
    query_ids : ndarray of str, shape (n_queries,)
        The queries kept (in both the run and the qrels), sorted: the order of ``reduce=None`` results.
    missing_relevant : ndarray of int64, shape (n_queries,)
        Relevant documents (``rel >= 1``) of each kept query that the run did not retrieve. The metrics see only
        retrieved documents, so where this is not 0, recall-based values (recall, AP, R-precision, F, NDCG) are
        higher than trec_eval's, which counts every judged relevant document;
        :func:`lambdamart.evaluation.evaluate_run` counts them as trec_eval does.
    queries_without_judgements : ndarray of str
        Queries of the run absent from the qrels (left out, as trec_eval does).
    queries_not_retrieved : ndarray of str
        Queries of the qrels absent from the run (left out, as trec_eval does without ``-c``).
    """

    y: np.ndarray
    score: np.ndarray
    qid: np.ndarray
    docno: np.ndarray
    query_ids: np.ndarray
    missing_relevant: np.ndarray
    queries_without_judgements: np.ndarray
    queries_not_retrieved: np.ndarray


# ------------------------------------------------------------------------------------------------ reading


def _lines(path):
    """(line number, text without the newline) of every non-blank line; the separator the file uses."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 text ({error.reason}).") from None
    lines = [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not lines:
        raise ValueError(f"{path} holds no lines.")
    separator = "\t" if "\t" in lines[0][1] else " "
    return lines, separator


def _check_unique(qid, docno, what, path=None, numbers=None):
    """A document listed twice for a query: ValueError naming both lines (or rows, for arrays)."""
    keys = np.char.add(np.char.add(qid.astype(str), "\x00"), docno.astype(str))
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    repeats = np.flatnonzero(first[inverse.reshape(-1)] != np.arange(keys.size))
    if repeats.size:
        later = repeats[0]  # the earliest line that repeats an earlier one
        dup = first[inverse.reshape(-1)[later]]
        where = f"{path}, line {numbers[later]}" if path is not None else f"row {later}"
        was = f"line {numbers[dup]}" if path is not None else f"row {dup}"
        raise ValueError(f"{where}: document {str(docno[dup])!r} appears again for query {str(qid[dup])!r} (first on "
                         f"{was}); {what} may list a document once per query.")


def _columns(path, layout):
    """The columns (lists of str) of a file whose lines hold the fields of ``layout``, line numbers, separator."""
    lines, separator = _lines(path)
    n_columns = len(layout.split())
    columns = [[] for _ in range(n_columns)]
    numbers = []
    for number, line in lines:
        fields = line.split()
        if len(fields) != n_columns:
            raise ValueError(f"{path}, line {number}: expected {n_columns} columns ({layout}), got {len(fields)}: "
                             f"{line.strip()[:80]!r}.")
        for column, field in zip(columns, fields):
            column.append(field)
        numbers.append(number)
    return columns, numbers, separator


def _check_plain(path, numbers, texts, what, kind):
    """A ValueError naming the first line whose ``what`` has an underscore or a non-ASCII character.

    Python's ``int`` and ``float`` read "1_0" as 10 and take other scripts' digits; trec_eval's C parsing stops at
    them, so a file both accept would mean other numbers to each.
    """
    joined = "".join(texts)
    if joined.isascii() and "_" not in joined:  # one pass in C: the common case
        return
    bad = next(i for i, t in enumerate(texts) if not t.isascii() or "_" in t)
    raise ValueError(f"{path}, line {numbers[bad]}: the {what} {texts[bad]!r} is not {kind} (ASCII digits, no '_').")


def _integers(path, numbers, texts, what):
    """The column ``texts`` as int64; a ValueError naming the first line whose ``what`` is not an integer."""
    _check_plain(path, numbers, texts, what, "an integer")
    try:
        return np.array(texts, dtype=np.int64)
    except (ValueError, OverflowError):
        bad = next(i for i, t in enumerate(texts) if int64_or_none(t) is None)
        raise ValueError(f"{path}, line {numbers[bad]}: the {what} {texts[bad]!r} is not an integer (or not one "
                         f"between -2**63 and 2**63 - 1).") from None


def read_qrels(path: str | os.PathLike) -> Qrels:
    """Read a qrels file: ``qid iter docno rel`` per line (``.gz`` files too).

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    Qrels
        The judgements in file order.

    Raises
    ------
    ValueError
        With the line number: a line without exactly 4 columns, a relevance that is not an integer, a document
        judged twice for a query, or an empty file.
    """
    columns, numbers, separator = _columns(path, "qid iter docno rel")
    relevance = _integers(path, numbers, columns[3], "relevance")
    qid, docno = np.array(columns[0]), np.array(columns[2])
    _check_unique(qid, docno, "qrels", path, numbers)
    return Qrels(qid, np.array(columns[1]), docno, relevance, separator)


def read_run(path: str | os.PathLike) -> Run:
    """Read a run file: ``qid Q0 docno rank score run_name`` per line (``.gz`` files too).

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    Run
        The run in file order, with the score and rank texts kept for :func:`write_run`.

    Raises
    ------
    ValueError
        With the line number: a line without exactly 6 columns, a score that is not a number (or is NaN), a rank
        that is not an integer, a document listed twice for a query, or an empty file.
    """
    columns, numbers, separator = _columns(path, "qid Q0 docno rank score run_name")
    _check_plain(path, numbers, columns[4], "score", "a number")
    score = np.empty(len(numbers))
    for i, text in enumerate(columns[4]):
        try:
            score[i] = float(text)
        except ValueError:
            raise ValueError(f"{path}, line {numbers[i]}: the score {text!r} is not a number.") from None
    if np.isnan(score).any():
        bad = int(np.argmax(np.isnan(score)))
        raise ValueError(f"{path}, line {numbers[bad]}: the score is NaN; every document needs a score.")
    rank = _integers(path, numbers, columns[3], "rank")
    qid, docno = np.array(columns[0]), np.array(columns[2])
    _check_unique(qid, docno, "a run", path, numbers)
    return Run(qid, docno, rank, score, np.array(columns[5]), np.array(columns[1]), np.array(columns[4]),
               np.array(columns[3]), separator)


# ------------------------------------------------------------------------------------------------ arrays


def _ids(values, name, n=None):
    """Ids as a str array, checked to be one-dimensional and free of whitespace (they become columns)."""
    a = np.asarray(values)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one id per row), got shape {a.shape}.")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} entries but there are {n} rows; give one per row.")
    a = a.astype(str)
    spaced = [s for s in a if not s or len(s.split()) != 1 or s != s.strip()]
    if spaced:
        raise ValueError(f"{name} {spaced[0]!r} is empty or holds whitespace; TREC files separate columns by "
                         f"whitespace, so ids must be single words.")
    return a


def _trec_order(qid, score, docno):
    """Row order of trec_eval: query, then score descending, then docno descending (byte order)."""
    # lexsort sorts ascending by the last key first; descending docno = reversed order of ascending ranks.
    docno_rank = np.unique(docno, return_inverse=True)[1].reshape(-1)
    return np.lexsort((-docno_rank, -score, qid))


def to_run(scores: ArrayLike, qid: ArrayLike, docno: ArrayLike, *, run_name: str = "lambdamart",
           depth: int | None = None) -> Run:
    """A :class:`Run` from scores: each query's documents ranked in trec_eval's order, ranks from 1.

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Scores, e.g. ``LambdaMARTRanker.predict(X)``; higher ranks first. NaN is not allowed.
    qid : array-like of shape (n_samples,)
        Query id of each row (written as text).
    docno : array-like of shape (n_samples,)
        Document id of each row; unique within a query.
    run_name : str, default="lambdamart"
        The run name column.
    depth : int or None, default=None
        Keep only the top ``depth`` documents of each query (TREC runs often stop at 1000). None: all.

    Returns
    -------
    Run
        Lines grouped by query in sorted query-id order, ranked within each query.
    """
    score = np.asarray(scores)
    if score.ndim != 1 or score.dtype.kind not in "biuf":
        raise ValueError(f"scores must be a one-dimensional numeric array, got shape {score.shape} of {score.dtype}.")
    score = score.astype(np.float64)
    if np.isnan(score).any():
        raise ValueError("scores contain NaN; every document needs a score to be ranked.")
    n = score.shape[0]
    qid, docno = _ids(qid, "qid", n), _ids(docno, "docno", n)
    name = _ids([run_name], "run_name")[0]
    if depth is not None and (not isinstance(depth, (int, np.integer)) or isinstance(depth, bool) or depth < 1):
        raise ValueError(f"depth must be an integer >= 1 or None; got {depth!r}.")
    _check_unique(qid, docno, "a run")
    qid_key = _query_sort_key(qid)
    order = _trec_order(qid_key, score, docno)
    sorted_key = qid_key[order]
    starts = np.r_[0, np.flatnonzero(sorted_key[1:] != sorted_key[:-1]) + 1]
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n])) + 1
    if depth is not None:
        order, rank = order[rank <= depth], rank[rank <= depth]
    return Run(qid[order], docno[order], rank.astype(np.int64), score[order], np.full(order.size, name),
               np.full(order.size, "Q0"))


def _query_sort_key(qid):
    """Query ids ordered numerically when they all are integers (1, 2, 10), else as text."""
    numbers = [int64_or_none(q) for q in qid]
    if all(number is not None for number in numbers):
        return np.array(numbers, dtype=np.int64)
    return qid


def to_qrels(y: ArrayLike, qid: ArrayLike, docno: ArrayLike) -> Qrels:
    """:class:`Qrels` from labels: one judgement per row, grouped by query.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Integer relevance labels (graded or binary).
    qid : array-like of shape (n_samples,)
        Query id of each row.
    docno : array-like of shape (n_samples,)
        Document id of each row; unique within a query.

    Returns
    -------
    Qrels
        Judgements grouped by query in sorted query-id order, rows of a query in input order.
    """
    y = np.asarray(y)
    if y.ndim != 1 or y.dtype.kind not in "biuf" or not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
        raise ValueError("y must hold integer relevance labels (qrels have integer relevance), one per row.")
    # Compared before the cast, which would wrap larger ones around (float 2**63 is already out of range).
    if y.size and (np.any(y < -(2.0 ** 63)) or np.any(y >= 2.0 ** 63)):
        raise ValueError("y holds relevance labels beyond the int64 range of a qrels file; give graded labels "
                         "such as 0-4.")
    n = y.shape[0]
    qid, docno = _ids(qid, "qid", n), _ids(docno, "docno", n)
    _check_unique(qid, docno, "qrels")
    order = np.argsort(_query_sort_key(qid), kind="stable")
    return Qrels(qid[order], np.full(n, "0"), docno[order], y[order].astype(np.int64))


def to_arrays(qrels: Qrels, run: Run) -> RankingArrays:
    """Join a run with qrels into the arrays of :mod:`lambdamart.metrics`, in trec_eval's order.

    Only queries in both are kept (trec_eval's default). Each retrieved document gets its judged relevance as
    label (0 when unjudged or negative). Rank with ``ties="input"`` and ``empty=0.0`` to get trec_eval's values:
    e.g. ``metrics.mean_average_precision(a.y, a.score, a.qid, ties="input", empty=0.0)`` is its ``map`` when
    ``a.missing_relevant`` is all 0.

    Parameters
    ----------
    qrels : Qrels
        The judgements (:func:`read_qrels` or :func:`to_qrels`).
    run : Run
        The run (:func:`read_run` or :func:`to_run`).

    Returns
    -------
    RankingArrays
        Labels, scores, query and document ids, and what was left out.
    """
    judged = set(qrels.qid.tolist())
    retrieved = set(run.qid.tolist())
    keep = np.isin(run.qid, qrels.qid)
    qid, docno, score = run.qid[keep], run.docno[keep], run.score[keep]
    lookup = dict(zip(zip(qrels.qid.tolist(), qrels.docno.tolist()), np.maximum(qrels.relevance, 0).tolist()))
    y = np.array([lookup.get(key, 0) for key in zip(qid.tolist(), docno.tolist())], dtype=np.float64)
    order = _trec_order(qid, score, docno)
    query_ids = np.unique(qid)
    relevant = qrels.relevance >= 1
    total_relevant = dict(zip(*np.unique(qrels.qid[relevant], return_counts=True)))
    found = dict(zip(*np.unique(qid[y >= 1], return_counts=True)))
    missing = np.array([total_relevant.get(q, 0) - found.get(q, 0) for q in query_ids], dtype=np.int64)
    return RankingArrays(y[order], score[order], qid[order], docno[order], query_ids, missing,
                         np.array(sorted(retrieved - judged), dtype=str),
                         np.array(sorted(judged - retrieved), dtype=str))


# ------------------------------------------------------------------------------------------------ writing


def write_run(path: str | os.PathLike, run: Run | ArrayLike, qid: ArrayLike | None = None,
              docno: ArrayLike | None = None, *, run_name: str = "lambdamart", depth: int | None = None) -> None:
    """Write a run file (6 columns), atomically.

    Either a :class:`Run` (written as read: a file from :func:`read_run` comes back byte for byte), or scores with
    their query and document ids, ranked by :func:`to_run`::

        write_run("test.run", ranker.predict(X_test), qid_test, docno_test, run_name="lambdamart")

    Parameters
    ----------
    path : str or path-like
        The file to write (replaced if it exists).
    run : Run or array-like of shape (n_samples,)
        The run, or the scores.
    qid : array-like of shape (n_samples,), default=None
        With scores: the query id of each row. Must be None with a Run.
    docno : array-like of shape (n_samples,), default=None
        With scores: the document id of each row. Must be None with a Run.
    run_name : str, default="lambdamart"
        With scores: the run name column.
    depth : int or None, default=None
        With scores: keep the top ``depth`` documents of each query.
    """
    if isinstance(run, Run):
        if qid is not None or docno is not None:
            raise TypeError("write_run takes qid and docno only with scores; a Run holds its own.")
    else:
        if qid is None or docno is None:
            raise TypeError("write_run(path, scores, qid, docno): scores need their query and document ids.")
        run = to_run(run, qid, docno, run_name=run_name, depth=depth)
    write_atomically(path, format_run(run))


def format_run(run: Run) -> str:
    """The text of a run file: what :func:`write_run` writes.

    Parameters
    ----------
    run : Run
        The run.

    Returns
    -------
    str
        One line per entry, ``qid Q0 docno rank score run_name``, each ending with a newline.
    """
    score_text = run.score_text if run.score_text is not None else [repr(s) for s in run.score.tolist()]
    rank_text = run.rank_text if run.rank_text is not None else run.rank.astype(str)
    lines = [run.separator.join(fields) for fields in zip(run.qid.tolist(), run.iteration.tolist(),
                                                          run.docno.tolist(), list(rank_text), list(score_text),
                                                          run.name.tolist())]
    return "".join(line + "\n" for line in lines)


def write_qrels(path: str | os.PathLike, qrels: Qrels | ArrayLike, qid: ArrayLike | None = None,
                docno: ArrayLike | None = None) -> None:
    """Write a qrels file (4 columns), atomically.

    Parameters
    ----------
    path : str or path-like
        The file to write (replaced if it exists).
    qrels : Qrels or array-like of shape (n_samples,)
        The judgements, or integer relevance labels (then through :func:`to_qrels`).
    qid : array-like of shape (n_samples,), default=None
        With labels: the query id of each row. Must be None with a Qrels.
    docno : array-like of shape (n_samples,), default=None
        With labels: the document id of each row. Must be None with a Qrels.
    """
    if isinstance(qrels, Qrels):
        if qid is not None or docno is not None:
            raise TypeError("write_qrels takes qid and docno only with labels; a Qrels holds its own.")
    else:
        if qid is None or docno is None:
            raise TypeError("write_qrels(path, y, qid, docno): labels need their query and document ids.")
        qrels = to_qrels(qrels, qid, docno)
    sep = qrels.separator
    lines = [sep.join(fields) for fields in zip(qrels.qid.tolist(), qrels.iteration.tolist(), qrels.docno.tolist(),
                                                qrels.relevance.astype(str).tolist())]
    write_atomically(path, "".join(line + "\n" for line in lines))
