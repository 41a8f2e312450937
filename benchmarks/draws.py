"""``--sizes``: NDCG@10 over several draws of the data at every size but 3M (quality only).

On 26 generated training queries (the 3k-row size) NDCG@10 moves from one draw of the data to the next by as much
as the libraries differ, so one draw cannot tell whether we rank within 0.003 of LightGBM. Every library therefore
also trains on ``SWEEP_QUALITY_DRAWS`` draws of each size (``make_ranking_data`` with ``random_state`` 0, 1, ...;
draw 0 is the data the timed runs use), and the report gives each library's mean NDCG@10 and the mean paired
difference from ours, with its standard error and a paired t-test over the draws. At 570k rows one draw's
difference also moves by thousandths (one gave -0.0039 where four averaged -0.0014), around the 0.003 checked.

The fits run in the parent process after every timed worker has finished: nothing measured here is a time.
"""

import sys

import numpy as np
from data import SWEEP_QUALITY_DRAWS, SWEEP_TRAIN_QUERIES, ndcg_on_test, sweep_dataset
from libraries import LIBRARIES


def quality_over_draws(libraries, settings):
    """Per size in ``SWEEP_QUALITY_DRAWS``: ``{"name", "draws", "ndcg10": {library: [one NDCG@10 per draw]},
    "errors"}``. A library that fails on a draw is left out of that size, with the error recorded."""
    results = []
    for size, n_draws in SWEEP_QUALITY_DRAWS.items():
        name = f"sweep {size}"
        scores, errors = {library: [] for library in libraries}, []
        for draw in range(n_draws):
            arrays = sweep_dataset(SWEEP_TRAIN_QUERIES[size], name, random_state=draw)["arrays"]
            for library in [lib for lib in libraries if lib in scores]:
                print(f"[{name}] quality over draws: {library}, draw {draw + 1} of {n_draws} ...", file=sys.stderr,
                      flush=True)
                adapter = LIBRARIES[library]
                try:
                    model = adapter.make(settings)
                    adapter.fit(model, arrays["X_train"], arrays["y_train"], arrays["qid_train"])
                    scores[library].append(ndcg_on_test(np.asarray(model.predict(arrays["X_test"])), arrays)[10])
                except Exception as err:  # reported, as the timed runs' failures are
                    errors.append(f"{library}, draw {draw}: {type(err).__name__}: {err}")
                    del scores[library]
        results.append({"name": name, "draws": n_draws, "ndcg10": scores, "errors": errors})
    return results


def paired_difference(ours, theirs):
    """Mean of ``ours - theirs`` over the draws, its standard error and a paired t-test's p (NaN for one draw)."""
    from scipy.stats import ttest_rel

    difference = np.asarray(ours) - np.asarray(theirs)
    if difference.shape[0] < 2:
        return float(difference.mean()), float("nan"), float("nan")
    standard_error = difference.std(ddof=1) / np.sqrt(difference.shape[0])
    return float(difference.mean()), float(standard_error), float(ttest_rel(ours, theirs).pvalue)
