"""Reading LETOR/SVMlight files into dask arrays, in parallel on a cluster's workers (``lambdamart.dask.read_letor``).

Every file is parsed by :func:`lambdamart.datasets.load_letor` inside a task, so the rules, dtypes and located error
messages are that function's; this module only decides the common width, the blocks and the query ids of a set of
files. Paths are resolved (globs expanded) where ``read_letor`` is called and opened where the tasks run: on a
cluster they must name the same files on the client and on every worker (a shared filesystem).
"""

import glob
import numbers
import os

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize

from .datasets import load_letor, scan_letor

__all__ = ["read_letor"]


def read_letor(paths, *, n_features=None, dtype=np.float32, blocksize=None, zero_based="auto"):
    """Read LETOR/SVMlight files into dask arrays ``(X, y, qid)``, each file parsed by a task on the cluster.

    The files are those :func:`lambdamart.datasets.load_letor` reads (``qid:`` fields, or query sizes in a
    ``FILE.query`` side file; ``.gz`` and ``.bz2`` too), and the rows come in file order, then line order. Calling
    ``read_letor`` runs one quick pass per file (a task each, :func:`lambdamart.datasets.scan_letor`) that counts
    its rows and finds its feature indices, so that every block has the same columns and known row counts; the
    files are parsed when the arrays are computed. With a ``distributed.Client`` active, both happen on its
    workers. The three arrays have the same row chunks: one or more per file, of known sizes.

    Parameters
    ----------
    paths : str, os.PathLike or list of them
        A file, a glob pattern (``"data/*.txt"``, expanded in sorted order; a matched ``FILE.query`` is dropped
        when ``FILE`` is matched too, as it is that file's query sizes), or a list of files and patterns. Patterns
        are expanded here and the files opened by the workers: they must see the same files at the same paths
        (relative paths are taken in each process's working directory, so absolute ones are safest on a cluster).
    n_features : int, optional
        Number of columns of ``X``. By default the largest feature index over all files decides; a file with an
        index beyond ``n_features`` raises ``load_letor``'s error naming the line.
    dtype : numpy dtype, default=np.float32
        Dtype of ``X`` (float32 or float64 are what the rankers keep).
    blocksize : int, optional
        Rows per block: a file with more rows is cut into blocks of ``blocksize`` rows (the last one shorter),
        the blocks of ``X``, ``y`` and ``qid`` alike. By default each file is one block. A file is still parsed
        whole by one task; blocks spread its rows over the cluster for what comes next.
    zero_based : bool or "auto", default="auto"
        Whether feature indices start at 0. "auto" decides once for all the files, like
        :func:`sklearn.datasets.load_svmlight_files`: 0-based when index 0 occurs in any of them, else 1-based
        (for one file this is ``load_letor``'s rule).

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features), of ``dtype``
        Dense features; absent entries are 0, ``nan`` in the file stays ``nan``.
    y : dask.array.Array of float64, shape (n_samples,)
        Relevance labels.
    qid : dask.array.Array of int64, shape (n_samples,)
        Query id of each row. Files with ``qid:`` fields keep their ids as written (the same id in two files is one
        query). Files with ``.query`` side files number their queries 0, 1, ... consecutively over the set, in
        file order, as ``load_letor`` numbers one file's; mixing both kinds raises ``ValueError``.

    Raises
    ------
    FileNotFoundError
        A path does not exist, or a pattern matches no file.
    ValueError
        As :func:`lambdamart.datasets.load_letor`, with the same messages (file and line): raised here when the
        quick pass finds it (empty files, malformed feature tokens, a file wider than ``n_features``), otherwise
        when the arrays are computed.
    """
    files = _expand(paths)
    if n_features is not None and (isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral)
                                   or n_features < 0):
        raise ValueError(f"n_features must be a non-negative integer or None, got {n_features!r}.")
    if blocksize is not None and (isinstance(blocksize, bool) or not isinstance(blocksize, numbers.Integral)
                                  or blocksize < 1):
        raise ValueError(f"blocksize must be a positive integer (rows per block) or None, got {blocksize!r}.")
    if zero_based not in (True, False, "auto"):
        raise ValueError(f'zero_based must be True, False or "auto", got {zero_based!r}.')
    dtype = np.dtype(dtype)

    scans = dask.compute(*[dask.delayed(_scan)(path, dtype, zero_based, dask_key_name=_key("scan", path, zero_based))
                           for path in files])
    if zero_based == "auto":
        zero_based = any(lowest == 0 for _, lowest, _, _, _ in scans)
    if n_features is None:
        n_features = max((highest + (1 if zero_based else 0) for _, _, highest, _, _ in scans
                          if highest is not None), default=0)
    else:
        n_features = int(n_features)
        too_wide = [dask.delayed(load_letor)(path, n_features=n_features, dtype=dtype, zero_based=zero_based,
                                             dask_key_name=_key("check", path, n_features, zero_based))
                    for path, (_, _, highest, _, _) in zip(files, scans)
                    if highest is not None and highest + (1 if zero_based else 0) > n_features]
        if too_wide:
            dask.compute(too_wide[0])  # raises load_letor's error naming the line
    with_qid = [path for path, scan in zip(files, scans) if scan[3]]
    if with_qid and len(with_qid) < len(files):
        without = next(path for path, scan in zip(files, scans) if not scan[3])
        raise ValueError(f"{with_qid[0]} has qid: fields but {without} has none (its query sizes are in a .query "
                         "file); read_letor numbers .query files' queries 0, 1, ..., which could clash with the "
                         "written ids. Read the two kinds separately.")

    X_blocks, y_blocks, qid_blocks = [], [], []
    first_query = 0
    for path, scan in zip(files, scans):
        n_rows, _, _, has_qid, n_queries = scan
        first = None if has_qid else first_query
        part = dask.delayed(_read, nout=3)(path, n_features, dtype, zero_based, first,
                                           dask_key_name=_key("file", path, scan, n_features, dtype, zero_based, first))
        if not has_qid:
            first_query += n_queries
        step = n_rows if blocksize is None else blocksize
        for start in range(0, n_rows, step):
            stop = min(start + step, n_rows)
            if start == 0 and stop == n_rows:
                X_part, y_part, qid_part = part
            else:
                X_part, y_part, qid_part = dask.delayed(_rows, nout=3)(
                    part, start, stop, dask_key_name=_key("rows", part.key, start, stop))
            X_blocks.append(da.from_delayed(X_part, shape=(stop - start, n_features), dtype=dtype))
            y_blocks.append(da.from_delayed(y_part, shape=(stop - start,), dtype=np.float64))
            qid_blocks.append(da.from_delayed(qid_part, shape=(stop - start,), dtype=np.int64))
    return da.concatenate(X_blocks), da.concatenate(y_blocks), da.concatenate(qid_blocks)


def _key(step, *args):
    """A task's name: ``read_letor-<step>-<hash of its arguments>`` (the dashboard groups tasks by the prefix)."""
    return f"read_letor-{step}-{tokenize(*args)}"


def _expand(paths):
    """The files named by ``paths`` (a path, a glob pattern, or a list of them), in order, as strings."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    elif not isinstance(paths, (list, tuple)):
        raise TypeError(f"paths must be a str, an os.PathLike or a list of them, got {type(paths).__name__}.")
    if not paths:
        raise ValueError("paths is empty: give at least one file or pattern.")
    files = []
    for path in paths:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"paths must hold str or os.PathLike, got {type(path).__name__}.")
        path = os.fsdecode(os.fspath(path))
        if not glob.has_magic(path) or os.path.exists(path):
            files.append(path)  # a missing file is reported by the task that reads it, in load_letor's words
            continue
        matched = sorted(glob.glob(path))
        if not matched:
            raise FileNotFoundError(f"no LETOR data file matches {path!r}")
        found = set(matched)
        files.extend(m for m in matched if not (m.endswith(".query") and m[:-len(".query")] in found))
    return files


def _scan(path, dtype, zero_based):
    """``scan_letor``'s answer and the number of queries of a ``.query`` file (None with qid: fields).

    Whatever the quick pass finds wrong, ``load_letor`` is asked to read the file, so that the error raised is the
    one it gives (it checks the lines in its own order).
    """
    try:
        n_rows, lowest, highest, has_qid = scan_letor(path)
        if n_rows == 0:
            raise ValueError(f"{path}: no data rows")
    except ValueError:
        load_letor(path, dtype=dtype, zero_based=zero_based)
        raise  # pragma: no cover - load_letor rejects whatever the scan rejects
    n_queries = None
    if not has_qid:
        query_file = path + ".query"
        if not os.path.exists(query_file):
            load_letor(path, dtype=dtype, zero_based=zero_based)  # raises: no qid: fields and no query file
        with open(query_file, "rb") as f:
            n_queries = sum(1 for line in f if line.strip())  # load_letor checks the sizes when it reads the file
    return n_rows, lowest, highest, has_qid, n_queries


def _read(path, n_features, dtype, zero_based, first_query):
    """One file as ``load_letor`` reads it; a ``.query`` file's queries numbered from ``first_query``."""
    X, y, qid = load_letor(path, n_features=n_features, dtype=dtype, zero_based=zero_based)
    if first_query is not None:
        qid = qid + first_query
    return X, y, qid


def _rows(part, start, stop):
    """Rows ``start:stop`` of a file's arrays (copies, so the whole file's arrays can be released)."""
    X, y, qid = part
    return X[start:stop].copy(), y[start:stop].copy(), qid[start:stop].copy()
