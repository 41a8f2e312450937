"""Training state: what a fit needs to go on exactly where an earlier one stopped, in memory and on disk.

A fit ends (or pauses at a checkpoint) with a :class:`TrainingState`. ``warm_start`` continues from the one in
memory; ``checkpoint_dir`` writes it to a file every ``checkpoint_every`` rounds, from which a later fit (after a
crash) continues. Because the training scores are rebuilt from the trees and every draw comes from the saved
random state, a continued fit grows bit for bit the trees an uninterrupted one grows.

A checkpoint file is an ``.npz`` archive read with ``allow_pickle=False`` (loading one cannot run code): the trees
in bin space, the bin thresholds, the objective's learned arrays, and a JSON header with the parameters, the
random states and the early-stopping record.
"""

import hashlib
import io
import json
import re
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._engine.grower import GrownTree
from ._engine.tree import NODE_DTYPES, join_trees
from ._files import write_atomically
from ._model_format import EARLIER_DEFAULTS, check_trees, encode_param
from ._version import __version__

FORMAT = "lambdamart-checkpoint"
FORMAT_VERSION = 1

# Parameters a continued fit may change: they do not change the trees of the rounds (n_estimators only adds more).
RESUMABLE_CHANGES = frozenset({"n_estimators", "verbose", "n_jobs", "warm_start", "checkpoint_dir",
                               "checkpoint_every", "client", "importance_type"})

_NAME = re.compile(r"round-(\d{6,})\.npz")
_KEEP = 2  # the newest checkpoint and the one before it (in case the newest is damaged after it was written)
_GROWN_FIELDS = ("feature", "split_bin", "missing_left", "left", "right", "value", "gain", "count")
# As the growers make them: other dtypes would make numba compile the tree kernels again.
_GROWN_DTYPES = dict(feature=np.int32, split_bin=np.int32, missing_left=np.bool_, left=np.int32, right=np.int32,
                     value=np.float64, gain=np.float64, count=np.int64)


@dataclass
class TrainingState:
    """Everything a fit needs to continue another one's rounds.

    Attributes
    ----------
    start_rng, end_rng : tuple
        ``RandomState.get_state()`` before the fit's first draw (validation split, binning sample) and after its
        last round.
    trees : list of GrownTree
        Every tree grown, in bin space, early stopping or not.
    record : dict
        The rounds' learning curves and early-stopping state (``_Rounds.record()``).
    thresholds, threshold_offsets : ndarray
        The bin thresholds of every feature.
    objective : dict of str to ndarray
        What the objective learned (``Objective.state()``: position biases).
    n_features, n_rows : int
        Width and training rows of the data.
    init_trees : dict of ndarray or None
        The flat trees of ``fit(init_model=...)``, the starting scores.
    fingerprint : str
        A digest of the binned training and validation data, labels, weights and positions (``data_fingerprint``;
        "" when not computed): a checkpoint continues the fit of the same data only.
    feature_names : ndarray of str or None
        The column names of the training data, when it had them.
    """

    start_rng: tuple
    end_rng: tuple
    trees: list
    record: dict
    thresholds: np.ndarray
    threshold_offsets: np.ndarray
    objective: dict = field(default_factory=dict)
    n_features: int = 0
    n_rows: int = 0
    init_trees: dict | None = None
    fingerprint: str = ""
    feature_names: np.ndarray | None = None


# Digests written before 0.2 hashed each array whole, in one process, and carry no prefix; they are checked that
# way still (``check_same_data``).
DIGEST_PREFIX = "queries:"


def query_digest_sum(tag, codes, offsets, *row_arrays):
    """The sum modulo 2**128 of a digest of every query of one data set (``tag``, an int, tells the sets apart).

    A query's digest covers its rows' binned features (``codes``, features x rows, queries laid out by
    ``offsets``) and their entries of ``row_arrays`` (label gains, sample weights, positions; None or empty
    ones are absent). A sum does not depend on where each query is held, so the shards of a Dask fit add theirs
    up to what a local fit of the same data computes, whatever the chunks and workers.
    """
    rows = [np.asarray(a, dtype=np.float64) for a in row_arrays if a is not None and a.shape[0] > 0]
    person = int(tag).to_bytes(8, "little")
    total = 0
    # A Python loop, as hashlib is not callable from numba; it runs only with warm_start or checkpoint_dir, and took
    # 0.3 s at 570k rows in 5,000 queries, 1.3 s at 1M rows in 100,000.
    for q in range(offsets.shape[0] - 1):
        start, stop = offsets[q], offsets[q + 1]
        digest = hashlib.blake2b(np.ascontiguousarray(codes[:, start:stop]).tobytes(), digest_size=16,
                                 person=person)
        for a in rows:
            digest.update(a[start:stop].tobytes())
        total += int.from_bytes(digest.digest(), "little")
    return total % 2**128


def data_fingerprint(sums):
    """The data digest of a fit from the :func:`query_digest_sum` of each of its sets (or shards)."""
    return f"{DIGEST_PREFIX}{sum(sums) % 2**128:032x}"


def check_same_data(recorded, digest, legacy=None):
    """Refuse to continue a fit whose data digest ``recorded`` is not ``digest`` (these data's).

    ``legacy()`` computes these data's digest the pre-0.2 way, for a ``recorded`` one of that kind; without it,
    such a digest is not checked (the sizes are).
    """
    if not recorded:
        return
    if not recorded.startswith(DIGEST_PREFIX):
        if legacy is None:
            return
        digest = legacy()
    if recorded != digest:
        raise ValueError("the data differ from those of the fit being continued (a digest of its binned training and "
                         "validation data is kept with it); continue on the same data, or set warm_start=False to "
                         "fit these afresh.")


def fingerprint(*arrays):
    """A digest of the bytes of ``arrays`` (None entries skipped), as fits before 0.2 kept (``check_same_data``)."""
    digest = hashlib.blake2b(digest_size=16)
    for a in arrays:
        if a is not None:
            a = np.ascontiguousarray(a)
            digest.update(f"{a.dtype.str}{a.shape}".encode())
            digest.update(memoryview(a).cast("B"))
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------------------- writing


class Checkpoints:
    """The checkpoint files of one fit in ``directory``: ``round-NNNNNN.npz``, the newest two kept.

    Parameters
    ----------
    directory : str or os.PathLike
        Created if missing.
    every : int
        Write after every ``every``-th round (the fit also writes one at its end).
    params : dict
        The estimator's parameters (``get_params``), saved in every file and checked by :func:`check_compatible`.
    fresh : bool
        The fit starts afresh: the directory's checkpoints of an earlier fit are deleted now, so that none of them
        can pass for this fit's.
    """

    def __init__(self, directory, every, params, fresh):
        self.directory = Path(directory)
        self.every = every
        self.params = params
        self.directory.mkdir(parents=True, exist_ok=True)
        if fresh:
            for old in _checkpoint_files(self.directory):
                old.unlink(missing_ok=True)

    def due(self, n_rounds):
        """Whether a checkpoint is due after ``n_rounds`` rounds."""
        return n_rounds % self.every == 0

    def write(self, state):
        """Write ``state`` atomically as the newest checkpoint, then delete all but the newest two."""
        path = self.directory / f"round-{len(state.trees):06d}.npz"
        write_atomically(path, _encode(state, self.params))
        for old in _checkpoint_files(self.directory)[:-_KEEP]:
            old.unlink(missing_ok=True)
        return path


def _encode(state, params):
    trees = state.trees
    arrays = {f"tree_{name}": (np.concatenate([getattr(t, name) for t in trees]).astype(_GROWN_DTYPES[name])
                               if trees else np.zeros(0, _GROWN_DTYPES[name]))
              for name in _GROWN_FIELDS}
    arrays["tree_sizes"] = np.array([t.feature.shape[0] for t in trees], dtype=np.int64)
    arrays["thresholds"] = state.thresholds
    arrays["threshold_offsets"] = state.threshold_offsets
    for which in ("start_rng", "end_rng"):
        arrays[f"{which}_key"] = np.asarray(getattr(state, which)[1], dtype=np.uint32)
    for name, value in state.objective.items():
        arrays[f"objective_{name}"] = np.asarray(value)
    if state.init_trees is not None:
        for name, value in state.init_trees.items():
            arrays[f"init_{name}"] = value
    header = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "lambdamart_version": __version__,
        "params": encode_params(params),
        "feature_names": None if state.feature_names is None else [str(n) for n in state.feature_names],
        "rounds": len(trees), "record": _encode_record(state.record),
        "rng": {which: [int(s) for s in getattr(state, which)[2:4]] + [float(getattr(state, which)[4])]
                for which in ("start_rng", "end_rng")},
        "n_features": int(state.n_features), "n_rows": int(state.n_rows), "fingerprint": state.fingerprint,
    }
    arrays["header"] = np.array(json.dumps(header))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def encode_params(params):
    """The parameters as the model file encodes them; a random state object counts as None (its state is saved)."""
    return {name: None if isinstance(value, (np.random.RandomState, np.random.Generator))
            else encode_param(name, value) for name, value in params.items() if name != "client"}


def _encode_record(record):
    out = dict(record)
    out["best_score"] = None if not np.isfinite(record["best_score"]) else float(record["best_score"])
    out["train_score"] = [float(v) for v in record["train_score"]]
    out["valid_score"] = [float(v) for v in record["valid_score"]]
    return out


# ------------------------------------------------------------------------------------------------------- reading


@dataclass
class Checkpoint:
    """A checkpoint read back: the state, the parameters it was written with, and where it came from."""

    path: Path
    state: TrainingState
    params: dict


def read_latest(directory):
    """The newest readable checkpoint in ``directory``, or None when it holds none.

    A damaged newest file (a disk error after it was written) is skipped with a warning for the one before it.
    """
    damaged = []
    for path in reversed(_checkpoint_files(Path(directory))):
        try:
            checkpoint = read(path)
        except ValueError as error:
            damaged.append(str(error))
            continue
        if damaged:
            warnings.warn(f"skipped damaged checkpoints ({'; '.join(damaged)}); continuing from {path}.",
                          UserWarning, stacklevel=3)
        return checkpoint
    if damaged:
        raise ValueError(f"no checkpoint in {directory} can be read: {'; '.join(damaged)}")
    return None


def read(path):
    """Read one checkpoint file (see the module docstring); a ValueError says what is wrong with it."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        header = json.loads(str(arrays.pop("header")))
        if not isinstance(header, dict) or header.get("format") != FORMAT \
                or header.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"not a {FORMAT} file of version {FORMAT_VERSION}")
        _check_header(header)
        sizes = arrays.pop("tree_sizes")
        bounds = np.concatenate(([0], np.cumsum(sizes)))
        columns = {name: arrays.pop(f"tree_{name}") for name in _GROWN_FIELDS}
        empty = np.zeros(0, dtype=np.int64)
        trees = [GrownTree(**{name: columns[name][a:b] for name in _GROWN_FIELDS}, node_start=empty,
                           node_stop=empty) for a, b in zip(bounds[:-1], bounds[1:])]
        rng = {which: ("MT19937", arrays.pop(f"{which}_key"), *header["rng"][which][:2],
                       header["rng"][which][2]) for which in ("start_rng", "end_rng")}
        record = dict(header["record"])
        if record["best_score"] is None:
            record["best_score"] = -np.inf
        init = {name[5:]: arrays.pop(name) for name in list(arrays) if name.startswith("init_")}
        objective = {name[10:]: arrays.pop(name) for name in list(arrays) if name.startswith("objective_")}
        state = TrainingState(start_rng=rng["start_rng"], end_rng=rng["end_rng"], trees=trees, record=record,
                              thresholds=arrays["thresholds"], threshold_offsets=arrays["threshold_offsets"],
                              objective=objective, n_features=header["n_features"], n_rows=header["n_rows"],
                              init_trees=init or None, fingerprint=header["fingerprint"],
                              feature_names=None if header["feature_names"] is None
                              else np.asarray(header["feature_names"], dtype=object))
        if len(trees) != header["rounds"] or (init and set(init) != set(NODE_DTYPES) | {"tree_starts"}):
            raise ValueError("its parts do not agree")
        _check_arrays(state, columns, sizes)
        checkpoint = Checkpoint(path=Path(path), state=state, params=header["params"])
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, TypeError, IndexError, ValueError) as error:
        if "allow_pickle" in str(error):  # numpy's advice to load it unsafely: not for a file meant to hold none
            error = "it holds pickled Python objects, which no checkpoint does (it was not written by lambdamart)"
        raise ValueError(f"cannot read the checkpoint {path}: {error}") from None
    return checkpoint


# A checkpoint is read back into numba kernels that index arrays by the numbers in it, unchecked: a damaged or
# edited file must fail here, not read out of bounds later.

def _check_header(header):
    """Raise a ValueError when the header's entries do not have the types :func:`_encode` writes."""
    def integer(value, low):
        return isinstance(value, int) and not isinstance(value, bool) and value >= low

    record, rng, names = header["record"], header["rng"], header["feature_names"]
    if not (integer(header["n_features"], 1) and integer(header["n_rows"], 1) and integer(header["rounds"], 0)
            and isinstance(header["params"], dict) and isinstance(header["fingerprint"], str)):
        raise ValueError("its header's sizes, parameters or digest are not what lambdamart writes")
    if not (isinstance(record, dict) and isinstance(record["stopped"], bool) and integer(record["best_iter"], 0)
            and all(isinstance(record[k], list) and all(isinstance(v, (int, float)) for v in record[k])
                    for k in ("train_score", "valid_score"))
            and (record["best_score"] is None or isinstance(record["best_score"], (int, float)))):
        raise ValueError("its early-stopping record is not what lambdamart writes")
    if not (isinstance(rng, dict) and all(isinstance(rng[k], list) and len(rng[k]) == 3 and integer(rng[k][0], 0)
                                          and rng[k][0] <= 624 and integer(rng[k][1], 0)
                                          and isinstance(rng[k][2], (int, float)) for k in ("start_rng", "end_rng"))):
        raise ValueError("its random states are not what lambdamart writes")
    if names is not None and not (isinstance(names, list) and len(names) == header["n_features"]
                                  and all(isinstance(n, str) for n in names)):
        raise ValueError("its feature names do not match its number of features")


def _check_arrays(state, columns, sizes):
    """Raise a ValueError when the arrays of ``state`` (read from a file) are not the dtypes, shapes and ranges
    that a fit writes."""
    n_features = state.n_features
    thresholds, offsets = state.thresholds, state.threshold_offsets
    if not (thresholds.dtype == np.float64 and thresholds.ndim == 1 and offsets.dtype == np.int64
            and offsets.shape == (n_features + 1,) and offsets[0] == 0 and np.all(np.diff(offsets) >= 0)
            and offsets[-1] == thresholds.shape[0]):
        raise ValueError("its bin thresholds do not match its number of features")
    for which in (state.start_rng, state.end_rng):
        if which[1].dtype != np.uint32 or which[1].shape != (624,):
            raise ValueError("its random states are not what lambdamart writes")
    if any(columns[name].dtype != _GROWN_DTYPES[name] or columns[name].ndim != 1 for name in _GROWN_FIELDS) \
            or sizes.dtype != np.int64 or np.any(sizes < 1) or sizes.sum() != columns["feature"].shape[0]:
        raise ValueError("its trees are not the arrays a fit writes")
    if state.trees:
        # The trees in a model's flat layout (absolute child indices; each split's bin stands in for its
        # threshold), whose structure the model reader checks.
        flat, starts = join_trees(state.trees, _GROWN_FIELDS, getattr)
        flat["tree_starts"] = starts
        split = flat["feature"] >= 0
        flat["threshold"] = np.where(split, flat["split_bin"], np.nan)
        check_trees(flat, n_features, "its trees")
        split_bin, feature = flat["split_bin"][split], flat["feature"][split]
        if np.any((split_bin < 0) | (split_bin > np.diff(offsets)[feature])):  # a feature has thresholds + 1 bins
            raise ValueError("a split's bin is outside its feature's bins")
    if state.init_trees is not None:
        check_trees(state.init_trees, n_features, "its init_model trees")
    for name, value in state.objective.items():
        if value.dtype != np.float64 or not np.all(np.isfinite(value)):
            raise ValueError(f"its objective's {name} is not finite floats")


def check_compatible(earlier, params, source):
    """Raise a ValueError naming the parameters that differ between ``params`` and ``earlier``, those of the fit
    to continue (as :func:`encode_params` gives them), which ``source`` names for the message."""
    mine = encode_params(params)
    if earlier:  # saved by an earlier version: a parameter it did not know had its then behaviour
        earlier = {**EARLIER_DEFAULTS, **earlier}
    differ = sorted(name for name, value in mine.items()
                    if name not in RESUMABLE_CHANGES and value != earlier.get(name, value))
    if differ:
        shown = ", ".join(f"{n}={earlier.get(n)!r} there, {params[n]!r} here" for n in differ)
        raise ValueError(f"{source} comes from a fit with other parameters ({shown}); continue with the same "
                         f"parameters, or set warm_start=False (or choose another checkpoint_dir) to fit afresh.")


def _checkpoint_files(directory):
    """The checkpoint files of ``directory``, oldest round first."""
    if not directory.is_dir():
        return []
    return sorted((p for p in directory.iterdir() if _NAME.fullmatch(p.name)), key=_round)


def _round(path):
    return int(_NAME.fullmatch(path.name).group(1))
