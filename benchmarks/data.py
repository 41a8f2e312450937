"""The datasets the benchmark runs on, their train/test split by query, and how the test split is scored.

lambdamart is imported inside the functions, never at module level: worker processes import this module too, and
they time ``import lambdamart`` themselves.
"""

from pathlib import Path

import numpy as np
from context import REPO, display_path

# LightGBM's example data, kept outside the repository (it may not be copied in); used when present.
SHARED_EXAMPLE = REPO.parent / "shared" / "data" / "lightgbm-lambdarank-example"

DEFAULT_QUERIES = 6000  # make_ranking_data(6000): ~570k training rows x 136, the shape of MSLR-WEB10K Fold 1
TRAIN_SHARE = 0.8  # of the queries, the rest is the held-out test split
NDCG_CUTOFFS = (1, 5, 10)
# (train file, test file) of the layouts we accept: LightGBM's example (sizes in .query files) and an MSLR fold.
LETOR_LAYOUTS = (("rank.train", "rank.test"), ("train.txt", "test.txt"))


# The size sweep (--sizes): make_ranking_data training query counts that hold about these many rows (~95 per
# query), from LightGBM's example's size to MSLR-WEB30K's (that one needs ~4 GB per process: --with-3m); LightGBM's
# example joins them when it is there, as it joins the default run. The test split is a quarter of the training
# queries but at least SWEEP_MIN_TEST_QUERIES: on a few dozen test queries NDCG@10 moves by ±0.02 from one draw to
# the next, far more than the differences between libraries it is there to show. The two largest are the same data
# and split as make_ranking_data(6000) and (31500) with 80 % to train.
SWEEP_TRAIN_QUERIES = {"3k": 26, "16k": 136, "135k": 1136, "570k": 4800}
SWEEP_3M_TRAIN_QUERIES = {"3M": 25200}
SWEEP_MIN_TEST_QUERIES = 1000
# NDCG@10 over several draws of the data (``draws.py``), for every size but 3M: on one draw of 26 training
# queries the difference from LightGBM moved between -0.013 and +0.005 over ten draws, and at 570k rows one draw
# gave -0.0039 where four averaged -0.0014 (fits of 10-30 s each, so three draws there).
SWEEP_QUALITY_DRAWS = {"3k": 10, "16k": 10, "135k": 3, "570k": 3}


def datasets_from_args(args):
    """Loaders (called one at a time, so only one dataset is in memory) for the datasets to run."""
    if args.data:
        return [lambda: letor_dataset(args.data)]
    if args.synthetic:
        return [lambda: synthetic_dataset(args.synthetic)]
    if args.sizes:
        sweep = {**SWEEP_TRAIN_QUERIES, **(SWEEP_3M_TRAIN_QUERIES if args.with_3m else {})}
        loaders = [lambda n=n, name=name: sweep_dataset(n, name=f"sweep {name}") for name, n in sweep.items()]
    else:
        loaders = [lambda: synthetic_dataset(DEFAULT_QUERIES)]
    if SHARED_EXAMPLE.is_dir():
        loaders.append(lambda: letor_dataset(SHARED_EXAMPLE))
    return loaders


def synthetic_dataset(n_queries, name="synthetic"):
    from lambdamart.datasets import make_ranking_data

    X, y, qid = make_ranking_data(n_queries, random_state=0)
    return _dataset(name, f"make_ranking_data({n_queries}, random_state=0), first 80 % of queries to train",
                    *_split_by_query(X, y, qid))


def sweep_dataset(n_train_queries, name, random_state=0):
    """make_ranking_data's first ``n_train_queries`` queries to train, and a test split of more queries after them
    (see SWEEP_MIN_TEST_QUERIES); ``random_state`` draws the data (the timed runs use draw 0)."""
    from lambdamart.datasets import make_ranking_data

    n_test_queries = max(SWEEP_MIN_TEST_QUERIES, round(n_train_queries / 4))
    n_queries = n_train_queries + n_test_queries
    X, y, qid = make_ranking_data(n_queries, random_state=random_state)
    train = qid < n_train_queries  # make_ranking_data numbers its queries 0, 1, ... in row order
    return _dataset(name, f"make_ranking_data({n_queries}, random_state={random_state}), the first "
                    f"{n_train_queries} queries to train, the other {n_test_queries} to test",
                    (X[train], y[train], qid[train]), (X[~train], y[~train], qid[~train]))


def letor_dataset(directory):
    from lambdamart.datasets import load_letor

    directory = Path(directory)
    if not directory.is_dir():
        raise SystemExit(f"compare.py: --data {directory}: not a directory.")
    if not any((directory / t).exists() for t, _ in LETOR_LAYOUTS) and (directory / "Fold1").is_dir():
        directory = directory / "Fold1"  # an MSLR root: take its first fold
    for train_name, test_name in LETOR_LAYOUTS:
        if (directory / train_name).exists() and (directory / test_name).exists():
            train, test = load_letor(directory / train_name), load_letor(directory / test_name)
            train, test = _same_width(train, test)
            return _dataset(directory.name, f"{display_path(directory / train_name)} / {test_name} (load_letor)",
                            train, test)
    layouts = " or ".join(f"{a} + {b}" for a, b in LETOR_LAYOUTS)
    raise SystemExit(f"compare.py: --data {directory}: expected {layouts} in the directory "
                     "(LightGBM's example layout, with .query size files, or an MSLR fold).")


def _split_by_query(X, y, qid, train_share=TRAIN_SHARE):
    """First ``train_share`` of the query ids for training, the rest for testing (generated queries are i.i.d.)."""
    queries = np.unique(qid)
    if queries.shape[0] < 2:
        raise SystemExit("compare.py: the data needs at least 2 queries to hold some out.")
    n_train = min(max(1, int(round(train_share * queries.shape[0]))), queries.shape[0] - 1)
    train = np.isin(qid, queries[:n_train])
    return (X[train], y[train], qid[train]), (X[~train], y[~train], qid[~train])


def _same_width(train, test):
    """Pad the narrower split with zero columns: in LETOR files an absent feature is 0."""
    width = max(train[0].shape[1], test[0].shape[1])
    return _padded(train, width), _padded(test, width)


def _sorted_by_query(X, y, qid):
    """Rows grouped by query id (stable): XGBoost requires it and LightGBM's group sizes assume it."""
    if np.all(qid[1:] >= qid[:-1]):
        return X, y, qid
    order = np.argsort(qid, kind="stable")
    return np.ascontiguousarray(X[order]), y[order], qid[order]


def _dataset(name, source, train, test):
    (X_tr, y_tr, q_tr), (X_te, y_te, q_te) = _sorted_by_query(*train), _sorted_by_query(*test)
    arrays = dict(X_train=np.ascontiguousarray(X_tr, dtype=np.float32), y_train=y_tr, qid_train=q_tr,
                  X_test=np.ascontiguousarray(X_te, dtype=np.float32), y_test=y_te, qid_test=q_te)
    return {"name": name, "source": source, "arrays": arrays}


def data_shape(arrays):
    """Rows, features, queries and bytes of a dataset's arrays, for the report."""
    X_tr, X_te = arrays["X_train"], arrays["X_test"]
    return dict(train_rows=X_tr.shape[0], test_rows=X_te.shape[0], features=X_tr.shape[1],
                train_queries=int(np.unique(arrays["qid_train"]).shape[0]),
                test_queries=int(np.unique(arrays["qid_test"]).shape[0]),
                data_bytes=int(sum(a.nbytes for a in arrays.values())))


def ndcg_on_test(scores, arrays):
    """NDCG@k of test-split scores for every k in ``NDCG_CUTOFFS``: one implementation judges every library."""
    from lambdamart.metrics import ndcg

    # Exponential gain, queries without a relevant document count 1, tied scores averaged (docs/design.md,
    # Metrics).
    return {k: ndcg(arrays["y_test"], scores, arrays["qid_test"], k=k, gain="exponential", empty=1.0,
                    ties="average") for k in NDCG_CUTOFFS}


# ------------------------------------------------------------------------------------------------ --letor-folds

N_FOLDS = 5


def letor_folds(directory):
    """The five standard folds of a LETOR 4.0 directory, as dicts of name, part names and train/valid/test arrays.

    Two layouts: ``Fold1`` … ``Fold5`` subdirectories holding ``train.txt``, ``vali.txt`` and ``test.txt`` (the
    distribution's layout), or the five parts ``S1.txt`` … ``S5.txt`` alone, from which fold k trains on parts k,
    k+1, k+2, validates on k+3 and tests on k+4 (mod 5), as LETOR 4.0 defines its folds. Every split has the same
    width (the widest file's) and its rows grouped by query.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise SystemExit(f"compare.py: --letor-folds {directory}: not a directory.")
    if all((directory / f"Fold{k}" / name).exists() for k in range(1, N_FOLDS + 1)
           for name in ("train.txt", "vali.txt", "test.txt")):
        files = [[[directory / f"Fold{k}" / name] for name in ("train.txt", "vali.txt", "test.txt")]
                 for k in range(1, N_FOLDS + 1)]
        return _read_folds(files, directory)
    parts = [directory / f"S{k}.txt" for k in range(1, N_FOLDS + 1)]
    if not all(p.exists() for p in parts):
        raise SystemExit(f"compare.py: --letor-folds {directory}: expected Fold1..Fold5 with train.txt, vali.txt and "
                         "test.txt, or the parts S1.txt..S5.txt (LETOR 4.0 layouts).")
    files = [[[parts[(k + j) % N_FOLDS] for j in range(3)], [parts[(k + 3) % N_FOLDS]], [parts[(k + 4) % N_FOLDS]]]
             for k in range(N_FOLDS)]
    return _read_folds(files, directory)


def _read_folds(files, directory):
    from lambdamart.datasets import load_letor

    loaded = {path: load_letor(path) for fold in files for split in fold for path in split}  # each file once
    width = max(X.shape[1] for X, _, _ in loaded.values())
    folds = []
    for k, fold in enumerate(files, start=1):
        splits = []
        for paths in fold:  # train, valid, test: each one or more files
            X, y, qid = (np.concatenate(a) for a in zip(*(_padded(loaded[path], width) for path in paths)))
            splits.append(_sorted_by_query(np.ascontiguousarray(X, dtype=np.float32), y, qid))
        parts = [" + ".join(path.relative_to(directory).with_suffix("").as_posix() for path in paths)
                 for paths in fold]
        folds.append({"name": f"Fold{k}", "parts": parts, "train": splits[0], "valid": splits[1],
                      "test": splits[2]})
    return folds


def _padded(split, width):
    """(X, y, qid) with X widened by zero columns to ``width``."""
    X = split[0]
    if X.shape[1] < width:
        X = np.hstack([X, np.zeros((X.shape[0], width - X.shape[1]), X.dtype)])
    return (X, *split[1:])
