"""What surviving faults costs: checkpoints, resuming, and a Dask fit that loses a worker.

    python benchmarks/faults.py [--queries N] [--rounds R] [--workers W]

Three measurements on ``make_ranking_data(N)`` (MSLR-shaped, about 95 rows per query), each fit in this process
after a warm-up fit so numba compilation is not counted:

1. a local fit of R rounds without and with ``checkpoint_dir`` (``checkpoint_every=10``): the seconds added by the
   checkpoints and the size of the last one;
2. resuming from the checkpoint of round R − 10: the seconds to rebuild the scores from R − 10 trees and grow the
   last 10 rounds, against the seconds those 10 rounds take in the uninterrupted fit (from its profile);
3. a Dask fit on a LocalCluster of W worker processes, without a fault and with one worker killed (``os._exit``)
   after round R / 3: total seconds of each and the fit's own ``fit_profile_["recovery"]`` (placing the rows on
   the workers left and rebuilding their scores).

Figures are wall-clock seconds of one run each; load on the machine changes them (say it when quoting).
"""

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lambdamart import LambdaMARTRanker  # noqa: E402
from lambdamart.datasets import make_ranking_data  # noqa: E402


def timed_fit(model, *args, **kwargs):
    start = time.perf_counter()
    model.fit(*args, **kwargs)
    return time.perf_counter() - start


def local(X, y, qid, rounds):
    params = dict(n_estimators=rounds, random_state=0)
    LambdaMARTRanker(n_estimators=2).fit(X[:5000], y[:5000], qid[:5000])  # compile
    folder = Path(tempfile.mkdtemp())
    try:
        plain = timed_fit(LambdaMARTRanker(**params), X, y, qid)
        checkpointed = LambdaMARTRanker(**params, checkpoint_dir=folder, checkpoint_every=10)
        with_checkpoints = timed_fit(checkpointed, X, y, qid)
        last = max(folder.glob("round-*.npz"))
        size = last.stat().st_size
        last.unlink()  # resume from the one before
        resumed = LambdaMARTRanker(**params, checkpoint_dir=folder, checkpoint_every=10, warm_start=True)
        resume_seconds = timed_fit(resumed, X, y, qid)
        same = all(np.array_equal(resumed._trees[k], checkpointed._trees[k], equal_nan=True)
                   for k in resumed._trees)
        per_round = checkpointed.fit_profile_["total"] / rounds
    finally:
        shutil.rmtree(folder)
    print(f"local fit of {rounds} rounds: {plain:.2f} s without checkpoints, {with_checkpoints:.2f} s with one every "
          f"10 rounds (+{100 * (with_checkpoints / plain - 1):.1f} %); last checkpoint {size / 1e6:.2f} MB")
    print(f"resume from round {rounds - 10}: {resume_seconds:.2f} s (the last 10 rounds take about "
          f"{10 * per_round:.2f} s of an uninterrupted fit); same model: {same}")


def dask(X, y, qid, rounds, n_workers):
    import dask.array as da
    import distributed

    from lambdamart.dask import DaskLambdaMARTRanker
    from lambdamart.dask import _workers as cluster_workers

    chunk = -(-X.shape[0] // n_workers)
    inputs = (da.from_array(X, chunks=(chunk, -1)), da.from_array(y, chunks=chunk), da.from_array(qid, chunks=chunk))
    params = dict(n_estimators=rounds, random_state=0)
    kill_after = None
    for kill in (False, True):
        with distributed.LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1,
                                      dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
            DaskLambdaMARTRanker(client=client, n_estimators=2).fit(*inputs)  # compile on every worker
            model = DaskLambdaMARTRanker(client=client, **params)
            thread = threading.Thread(target=model.fit, args=inputs)
            start = time.perf_counter()
            thread.start()
            if kill:  # a third of the way through the rounds, as the fault-free fit went
                time.sleep(kill_after)
                try:
                    client.run(os._exit, 1, workers=[sorted(cluster_workers(client))[0]])
                except Exception:  # the worker dies before it answers
                    pass
            thread.join()
            seconds = time.perf_counter() - start
        profile = model.fit_profile_
        if not kill:
            kill_after = profile["regroup"] + profile["binning"] + profile["boosting"] / 3
        print(f"Dask fit on {n_workers} workers{', one killed' if kill else ''}: {seconds:.2f} s (boosting "
              f"{profile['boosting']:.2f} s), recoveries {profile['recoveries']}, recovery {profile['recovery']:.2f} s",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args()
    X, y, qid = make_ranking_data(args.queries, random_state=0)
    print(f"make_ranking_data({args.queries}): {X.shape[0]:,} rows x {X.shape[1]} features; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    local(X, y, qid, args.rounds)
    dask(X, y, qid, args.rounds, args.workers)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
