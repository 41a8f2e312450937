"""Serving a LightGBM or XGBoost model through ``lambdamart.import_model``: single-query latency, ours vs theirs.

    python benchmarks/serving.py [--queries 400] [--rounds 100] [--calls 2000]

Trains LightGBM's and XGBoost's rankers with the benchmark's settings (``libraries.py``: 31 leaves, learning rate
0.1, ``--rounds`` trees) on ``make_ranking_data(--queries)``, imports each with ``lambdamart.import_model``, checks
that the imported ranker's scores equal the library's (1e-12 for LightGBM, 1e-6 of the score scale for XGBoost)
and times one query of 100 documents per call on one thread: ``LambdaMARTRanker.predict`` on the imported model
against ``Booster.predict(X, num_threads=1)`` (LightGBM) and ``Booster.inplace_predict(X)`` with ``nthread=1``
(XGBoost), the paths ``compare.py`` serves with. All in this process, calls interleaved round-robin so load
changes hit every path alike; prints p50, p99 and mean. The first call (numba's cache load) is not timed.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from libraries import LIBRARIES, benchmark_settings  # noqa: E402

DOCS_PER_CALL = 100


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=400, help="queries of make_ranking_data (default 400)")
    parser.add_argument("--rounds", type=int, default=100, help="trees per model (default 100)")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per path (default 2000)")
    parser.add_argument("--threads", type=int, default=2, help="threads for training (default 2)")
    args = parser.parse_args(argv)

    import lambdamart
    from lambdamart.datasets import make_ranking_data

    X, y, qid = make_ranking_data(args.queries, random_state=0)
    order = np.argsort(qid, kind="stable")
    X, y, qid = X[order], y[order], qid[order]
    settings = benchmark_settings(args.rounds, args.threads)
    paths = {}
    for name in ("lightgbm", "xgboost"):
        lib = LIBRARIES[name]
        model = lib.make(settings)
        lib.fit(model, X, y, qid)
        theirs = lib.serve(model)
        ours = lambdamart.import_model(model).set_params(n_jobs=1).predict
        scale = max(1.0, float(np.abs(theirs(X)).max()))
        error = float(np.abs(ours(X) - theirs(X)).max())
        assert error <= (1e-12 if name == "lightgbm" else 1e-6 * scale), (name, error)
        paths[f"{name}: {lib.serve_path.split(' (')[0]}"] = theirs
        paths[f"{name} imported: LambdaMARTRanker.predict(X), n_jobs=1"] = ours
        print(f"{name}: {model.n_estimators} trees, max |ours - theirs| = {error:.2g}", flush=True)

    starts = (np.arange(args.calls) * DOCS_PER_CALL) % (X.shape[0] - DOCS_PER_CALL + 1)
    batches = [np.ascontiguousarray(X[s:s + DOCS_PER_CALL]) for s in starts]
    for predict in paths.values():
        predict(batches[0])  # first call: numba loads its cache, libraries set up
    latencies = {name: np.empty(args.calls) for name in paths}
    for i, batch in enumerate(batches):
        for name, predict in paths.items():
            start = time.perf_counter_ns()
            predict(batch)
            latencies[name][i] = (time.perf_counter_ns() - start) * 1e-3

    print(f"\none query of {DOCS_PER_CALL} documents x {X.shape[1]} features, {args.calls} calls per path "
          f"(microseconds)")
    print(f"{'path':<62} {'p50':>8} {'p99':>8} {'mean':>8}")
    for name, t in latencies.items():
        print(f"{name:<62} {np.percentile(t, 50):8.0f} {np.percentile(t, 99):8.0f} {t.mean():8.0f}")


if __name__ == "__main__":
    main()
