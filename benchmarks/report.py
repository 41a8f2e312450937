"""The markdown report: the header, one section per dataset, and the notes on how everything is measured.

Rendering only: every figure comes from the workers' results and the run's metadata, gathered by compare.py.
"""

import numpy as np
from dask_run import WARMUP_QUERIES, WARMUP_ROUNDS
from data import NDCG_CUTOFFS
from draws import paired_difference
from folds import BASELINE, CONVENTIONS, CUTOFFS, PROTOCOLS, SIGNIFICANCE, compare_with_baseline
from libraries import LIBRARIES, REFERENCE, XGB_MIN_CHILD_WEIGHT
from worker import (
    PREDICT_REPEATS,
    REPEATED_FIT_VALUES,
    SERVING_CALLS,
    SERVING_DOCS,
    SERVING_ROWS,
    TINY_ROUNDS,
    TINY_ROWS,
)


def _md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _sec(x):
    return "–" if x is None else f"{x:.2f} s" if x >= 1 else f"{x * 1000:.0f} ms" if x >= 0.01 else \
        f"{x * 1000:.2f} ms"


def _us(x):
    return f"{x * 1e6:.0f} µs"


def _mb(x):
    return f"{x / 2**20:.0f} MB" if x >= 2**20 else f"{x / 2**10:.0f} kB"


def _ratio(ours, ref):
    return "–" if ours is None or ref in (None, 0) else f"{ours / ref:.2f}×"


def render_report(meta, sections, libraries, skipped, draws=()):
    parts = [
        *_header("# Benchmark: " + " vs ".join(LIBRARIES[n].estimator for n in libraries), meta),
        "  (other work on a shared machine makes every figure noisier; multi-threaded runs suffer most)",
        f"- Settings: {meta['settings']['rounds']} rounds, learning rate 0.1, 31 leaves, min 20 rows per leaf, "
        f"255 bins, truncation 30, {meta['settings']['threads']} threads",
    ]
    parts += [f"- Skipped: {note}" for note in skipped]
    parts += ["", "Constructor arguments, exactly as run:", ""]
    parts += [f"- `{LIBRARIES[n].estimator}({_kwargs(LIBRARIES[n].params(meta['settings']))})`" for n in libraries]
    if len(sections) > 1:
        parts += ["", *_summary_table(sections, libraries)]
    if draws:
        parts += ["", *_draws_table(draws, libraries)]
    for section in sections:
        parts += ["", *render_section(section, libraries)]
    parts += ["", render_notes()]
    return "\n".join(parts) + "\n"


def _header(title, meta):
    """The title and what every report says about its run."""
    return [title, "", f"- Date: {meta['date']}", f"- Command: `{meta['command']}`", f"- Machine: {meta['machine']}",
            "- Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
            f"- lambdamart checkout: {meta['revision']}",
            f"- Load average (1 min) before / after the run: {meta['load_before']} / {meta['load_after']}"]


def _kwargs(params):
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def render_section(section, libraries):
    s = section["shape"]
    out = [f"## {section['name']}: {s['train_rows']:,} training rows × {s['features']} features "
           f"({s['train_queries']:,} queries), {s['test_rows']:,} test rows ({s['test_queries']:,} queries)",
           "", f"Data: {section['source']}; {_mb(s['data_bytes'])} of arrays (float32 features) in every worker.", ""]
    fits = section["fit"]
    if fits:
        out += [_training_table(fits, libraries), "", _ratio_table(fits, section["serve"], libraries), ""]
    if section["serve"]:
        out += [_serving_table(section["serve"], libraries, section.get("serve_control")), ""]
        out += _import_check(section)
    if section.get("profile"):
        out += _profile_table(section["profile"], fits.get("lambdamart"))
    if section.get("objectives"):
        out += _objectives_lines(section["objectives"], fits.get(REFERENCE))
    if section.get("dask"):
        out += _dask_lines(section["dask"], libraries)
    if fits.get("lambdamart") and fits.get(REFERENCE):
        out += _targets(fits, section["serve"])
    for error in section["errors"]:
        out += ["", "**Failed:**", "", "```", error, "```"]
    return out


def _fit_cell(r):
    """The fit time, with every run's when there were several (the fastest counts)."""
    fit = _sec(r["fit_s"])
    if len(r["fit_runs"]) > 1:
        fit += " (fastest of " + ", ".join(_sec(t) for t in r["fit_runs"]) + ")"
    return fit


def _summary_table(sections, libraries):
    """One line per dataset: lambdamart's fit time and peak memory as ratios to each other library's, and NDCG@10."""
    others = [n for n in libraries if n != "lambdamart"]
    header = ["dataset", "training rows", *[f"fit vs {n}" for n in others], *[f"peak RSS vs {n}" for n in others],
              *[f"NDCG@10 {n}" for n in libraries], "serving p50 / p99", "host control p99"]
    rows = []
    for section in sections:
        fits = section["fit"]
        ours = fits.get("lambdamart")
        serve, control = section.get("serve", {}).get("lambdamart"), section.get("serve_control")
        rows.append([section["name"], f"{section['shape']['train_rows']:,}",
                     *[_ratio(ours and ours["fit_s"], fits.get(n, {}).get("fit_s")) for n in others],
                     *[_ratio(ours and ours["peak_rss"], fits.get(n, {}).get("peak_rss")) for n in others],
                     *[f"{_ndcg(fits[n], 10):.4f}" if n in fits else "–" for n in libraries],
                     f"{_us(serve['p50_s'])} / {_us(serve['p99_s'])}" if serve else "–",
                     _us(control["p99_s"]) if control else "–"])
    return ["## Summary: lambdamart's fit time and peak memory over each library's, per dataset", "",
            "Serving: lambdamart's latency for one 100-document query; the host control is the same calls by a "
            "loop that only reads the rows, for as long (see the serving tables).", "", _md_table(header, rows)]


def _draws_table(draws, libraries):
    """Mean NDCG@10 per library over draws of the data, and ours minus each other library's, paired by draw."""
    others = [n for n in libraries if n != "lambdamart"]
    header = ["dataset", "draws", *[f"NDCG@10 {n} (mean)" for n in libraries],
              *[f"lambdamart − {n} (mean ± s.e.; t-test p)" for n in others]]
    rows = []
    for part in draws:
        scores = part["ndcg10"]
        cells = []
        for n in others:
            if "lambdamart" in scores and n in scores:
                mean, se, p = paired_difference(scores["lambdamart"], scores[n])
                cells.append(f"{mean:+.4f} ± {se:.4f}; p {p:.2g}")
            else:
                cells.append("–")
        rows.append([part["name"], part["draws"], *[f"{np.mean(scores[n]):.4f}" if n in scores else "–"
                                                    for n in libraries], *cells])
    errors = [f"- {part['name']}: {error}" for part in draws for error in part["errors"]]
    return ["## NDCG@10 over draws of the data (make_ranking_data with random_state 0, 1, ...; draw 0 is the data "
            "timed below)", "",
            "One draw of the training queries moves NDCG@10 about as much as the libraries differ, so every "
            "library is also fitted on several draws (in the parent process, after the timed runs; quality only) "
            "and the difference is averaged over them. The summary's NDCG@10 columns are draw 0.", "",
            _md_table(header, rows), *(["", "**Failed:**", "", *errors] if errors else [])]


def _training_table(fits, libraries):
    header = ["library", "import", "first-call overhead (tiny fit)", "fit", "fit CPU (all threads)",
              "first fit in fresh process", "predict (test split)", "rows/s", "peak RSS", "RSS over data",
              "model pickle", *[f"NDCG@{k}" for k in NDCG_CUTOFFS]]
    rows = []
    for name in (n for n in libraries if n in fits):
        r = fits[name]
        fit = _fit_cell(r)
        rows.append([name, _sec(r["import_s"]), _sec(r["first_call_s"]), fit, _sec(r["fit_cpu_s"]),
                     _sec(_first_fit(r)), _sec(r["predict_s"]), f"{r['rows_per_s']:,.0f}", _mb(r["peak_rss"]),
                     _mb(r["peak_rss"] - r["rss_after_load"]), _mb(r["model_bytes"]),
                     *[f"{_ndcg(r, k):.4f}" for k in NDCG_CUTOFFS]])
    return "### Training and batch prediction\n\n" + _md_table(header, rows)


def _ratio_table(fits, serves, libraries):
    ref = fits.get(REFERENCE)
    if ref is None:
        return f"(no ratios: {REFERENCE} did not run)"
    ref_serve = serves.get(REFERENCE, {})
    header = ["library", "fit", "fit CPU", "first fit", "predict rows/s", "peak RSS", "RSS over data", "serving p50",
              "serving p99", *[f"NDCG@{k} (Δ)" for k in NDCG_CUTOFFS]]
    rows = []
    for name in (n for n in libraries if n in fits):
        r, sv = fits[name], serves.get(name, {})
        ndcgs = [f"{_ratio(_ndcg(r, k), _ndcg(ref, k))} ({_ndcg(r, k) - _ndcg(ref, k):+.4f})" for k in NDCG_CUTOFFS]
        rows.append([name, _ratio(r["fit_s"], ref["fit_s"]), _ratio(r["fit_cpu_s"], ref["fit_cpu_s"]),
                     _ratio(_first_fit(r), _first_fit(ref)),
                     _ratio(r["rows_per_s"], ref["rows_per_s"]), _ratio(r["peak_rss"], ref["peak_rss"]),
                     _ratio(_overhead(r), _overhead(ref)), _ratio(sv.get("p50_s"), ref_serve.get("p50_s")),
                     _ratio(sv.get("p99_s"), ref_serve.get("p99_s")), *ndcgs])
    return (f"### Ratios to {REFERENCE} (times, memory: lower is better; rows/s, NDCG: higher is better)\n\n"
            + _md_table(header, rows))


def _ndcg(r, k):
    return r["ndcg"][k]


def _first_fit(r):
    return r["import_s"] + r["first_call_s"] + r["first_fit_s"]


def _overhead(r):
    return r["peak_rss"] - r["rss_after_load"]


def _serving_table(serves, libraries, control=None):
    header = ["library", "call", "import", "unpickle", "first predict", "p50", "p99", "mean"]
    rows = [[name, LIBRARIES[name].serve_path, _sec(serves[name]["import_s"]),
             _sec(serves[name]["unpickle_s"]), _sec(serves[name]["first_predict_s"]), _us(serves[name]["p50_s"]),
             _us(serves[name]["p99_s"]), _us(serves[name]["mean_s"])] for name in libraries if name in serves]
    if control:
        rows.append(["*host control*", "a numba loop: sums the query's rows, then arithmetic for lambdamart's p50",
                     "", "", "", _us(control["p50_s"]), _us(control["p99_s"]), _us(control["mean_s"])])
    return (f"### Serving: one query of {SERVING_DOCS} documents per call, {SERVING_CALLS:,} calls, model unpickled "
            "in a fresh process\n\n" + _md_table(header, rows))


def _import_check(section):
    serve = section["serve"].get("lambdamart")
    if not serve or "numba_after_import" not in serve:
        return []
    state = serve["numba_after_import"]
    verdict = "nothing compiled or loaded" if state["signatures"] == 0 else \
        f"{state['signatures']} signatures present (something compiles or loads at import)"
    lines = [f"`import lambdamart` in the serving process took {_sec(serve['import_s'])}; afterwards its "
             f"{state['kernels']} numba kernels had {state['signatures']} signatures: {verdict}. "
             f"Kernels compiled in the whole serving process: {serve['numba']['compiled']}."]
    warm, fit = section.get("warmup"), section["fit"].get("lambdamart")
    if warm and fit:
        lines[0] += (f" The warm-up process compiled {_compiled(warm['numba'])} (none when the cache was already "
                     f"warm); the timed fit process compiled {_compiled(fit['numba'])}.")
    return lines + [""]


def _compiled(state):
    if not state["compiled"]:
        return "nothing"
    return f"{state['compiled']} signatures ({', '.join(state['compiled_names'])})"


# The stages of LambdaMARTRanker.fit_profile_ as the report names them; a stage the estimator adds later shows
# under its own key.
PROFILE_STAGES = {
    "binning": "binning (thresholds, codes, histogram layout)",
    "gradients": "gradients (the objective's λ and w)",
    "tree_growth": "tree growth (histograms, split finding, partition)",
    "score_update": "score update",
    "validation": "validation (binning the eval set, scoring it every round, per-round NDCG)",
}


def _profile_table(profile, fit):
    stages = dict(profile["stages"])
    total = stages.pop("total")
    other = total - sum(stages.values())
    rows = [[PROFILE_STAGES.get(stage, stage), _sec(sec), f"{100 * sec / total:.1f} %"]
            for stage, sec in sorted(stages.items(), key=lambda kv: -kv[1])]
    rows.append(["other (input checks, query grouping, objective set-up, Python loop, tree records)", _sec(other),
                 f"{100 * other / total:.1f} %"])
    rows.append(["**fit total (profile run)**", _sec(total), "100 %"])
    lines = ["### Where LambdaMARTRanker's fit time goes (`--profile`)", "",
             "A separate process fits once more with the test split as `eval_set` (early_stopping=False) so that "
             "validation shows; the times are the fitted ranker's own `fit_profile_`. "
             f"Without the eval_set the fit is the rest: about {_sec(total - stages.get('validation', 0))}"
             + (f" (timed fit above: {_sec(fit['fit_s'])})." if fit else "."), "",
             _md_table(["stage", "time", "share"], rows), ""]
    if profile["numba"]["compiled"]:
        lines += [f"Warning: the profile process compiled {_compiled(profile['numba'])}; that time is in it.", ""]
    return lines


def _objectives_lines(objectives, reference_fit=None):
    """Each objective's fit time (and its ratio to the reference library's fit in the same run) and NDCG@10."""
    if "skipped" in objectives:
        return [f"Objectives (`--objectives`): {objectives['skipped']}", ""]
    reference_s = reference_fit["fit_s"] if reference_fit else None
    rows = [[name, _fit_cell(r), _ratio(r["fit_s"], reference_s), f"{r['ndcg10']:.4f}"]
            for name, r in objectives["results"].items()]
    header = ["objective", "fit", f"fit vs {REFERENCE}", "NDCG@10"]
    return ["### LambdaMARTRanker objectives", "", _md_table(header, rows), ""]


def _bytes(x):
    return f"{x / 2**30:.2f} GB" if x >= 2**30 else f"{x / 2**20:.1f} MB" if x >= 2**20 else f"{x / 2**10:.1f} kB"


def _dask_lines(dask, libraries):
    """The ``--dask N`` section: every library's Dask ranker on one LocalCluster, and our costs per tree."""
    if "skipped" in dask:
        return [f"Dask (`--dask`): skipped; {dask['skipped']}", ""]
    n, fits, chunks = dask["workers"], dask["fit"], dask["chunks"]
    repeat = max((len(r["fit_runs"]) for r in fits.values()), default=1)
    lines = [f"### Dask: {n} workers (`--dask {n}`)", "",
             f"`distributed.LocalCluster(n_workers={n}, processes=True, threads_per_worker=1)`; one client process "
             "fits each library's Dask ranker on it, one library after another. **Fit is the wall time of `fit` on "
             "the client, with the cluster already started and every input already persisted on the workers** "
             "(scattered chunk by chunk before anything is timed). Beforehand every library fitted a "
             f"{WARMUP_ROUNDS}-round warm-up model on the first {WARMUP_QUERIES} queries of every chunk "
             f"({dask['warmup_rows']:,} rows), so our numba kernels are loaded on every worker and each library's "
             "start-up is paid outside the timing"
             + (f"; each library then fitted {repeat} times, interleaved, and the fastest fit is shown. "
                if repeat > 1 else ". "),
             "",
             f"Same rows for every library: the training split in {len(chunks)} chunks of "
             f"{', '.join(f'{c:,}' for c in chunks)} rows, cut at query boundaries, rows sorted by query id, chunk "
             "*i* on worker *i*. Partitioning by query is what LightGBM needs (every query inside one chunk, `group` "
             "= the sizes of each chunk's queries) and what XGBoost needs (`qid` sorted within a chunk, with "
             "`allow_group_split=True`: its default wants dask DataFrames and reshuffles the rows into one "
             "partition per query, and no query is split here anyway); it is fair "
             "to ours, which accepts rows in any order and chunking but is given the same chunks: it regroups the "
             "rows by query itself, and that shuffle, the binning sample it gathers to the client and its bin "
             "thresholds are inside its fit time, as LightGBM's Dataset construction and network set-up and "
             "XGBoost's quantile sketch are inside theirs. Every library runs one thread per worker process. NDCG: "
             "each library's own `predict` on the test split as a dask array, computed, and scored with "
             "`lambdamart.metrics.ndcg` as above.", ""]
    ref = fits.get(REFERENCE)
    header = ["library", "estimator", "inputs", "fit", f"fit / {REFERENCE}", "predict (test split)",
              *[f"NDCG@{k}" for k in NDCG_CUTOFFS]]
    rows = []
    for name in (n for n in libraries if n in fits):
        r = fits[name]
        fit = _fit_cell(r)
        rows.append([name, f"`{r['estimator']}`", r["inputs"], fit, _ratio(r["fit_s"], ref and ref["fit_s"]),
                     _sec(r["predict_s"]), *[f"{_ndcg(r, k):.4f}" for k in NDCG_CUTOFFS]])
    lines += [_md_table(header, rows), "", "Constructor arguments (and `client`), exactly as run:", ""]
    lines += [f"- `{fits[name]['estimator'].rsplit('.', 1)[1]}({_kwargs(fits[name]['params'])})`"
              for name in libraries if name in fits]
    if dask.get("ours"):
        lines += ["", *_dask_costs(dask["ours"], n)]
    return lines + [""]


# DaskLambdaMARTRanker.fit_profile_: the stages it times and the traffic it counts (absent ones are computed).
DASK_PROFILE_STAGES = ("regroup", "binning", "boosting")


def _dask_costs(c, n_workers):
    """Our calls and histogram traffic per tree: measured where the estimator counts them, computed elsewhere."""
    trees, profile = c["trees"], c.get("profile") or {}
    splits = c["splits"] / trees
    boosting = profile.get("boosting")
    per_tree = (boosting if boosting is not None else c["fit_s"]) / trees
    per_tree_how = ("**measured**: `fit_profile_['boosting']` / trees (the fit without regrouping and binning)"
                    if boosting is not None else "**measured**: fit (above) / trees")
    block = c["total_bins"] / n_workers * 20  # Σλ and Σw as float64, the count as int32
    traffic = splits * (n_workers - 1) * block * n_workers  # every worker sends every peer its block, per node
    rows = [["trees; splits per tree (mean)", f"{trees}; {splits:.1f}", "fitted model"]]
    stages = [f"{stage} {_sec(profile[stage])}" for stage in DASK_PROFILE_STAGES if stage in profile]
    if stages:
        rows.append(["fit stages", ", ".join(stages) + (f"; total {_sec(profile['total'])}" if "total" in profile
                                                        else ""),
                     "**measured**: `fit_profile_` of the fastest fit"])
    if "round_trips" in profile:
        rows.append(["client ↔ all workers calls per tree", f"{profile['round_trips'] / trees:.2f}",
                     "**measured**: `fit_profile_['round_trips']` / trees (one per round, plus the fit's few "
                     "set-up calls)"])
    rows += [
        [f"one no-op actor call to all {n_workers} workers", _sec(c["round_trip_s"]),
         "**measured**: median of 200 calls of a trivial actor method on every worker, issued together and "
         "awaited together (as the fit starts a round)"],
        ["fit time per tree", _sec(per_tree), per_tree_how],
    ]
    if "exchanges" in profile:
        rows.append(["worker ↔ worker exchanges per tree", f"{profile['exchanges'] / trees:.1f}",
                     "**measured**: `fit_profile_['exchanges']` / trees (each: every worker sends a part to every "
                     "other and waits for theirs)"])
    rows += [
        ["histogram block per worker per exchange", _bytes(block),
         f"**computed**: {c['total_bins']:,} bins ({c['bins_how']}) / {n_workers} workers × (2 float64 + 1 int32)"],
        ["histogram bytes between workers per tree", _bytes(traffic),
         f"**computed**: splits × {n_workers} workers × {n_workers - 1} peers × block (at most: the root sends "
         "one, and a split whose children are not searched, a symmetric tree's last level, none)"],
    ]
    if "histogram_bytes" in profile:
        rows.append(["histogram bytes between workers per tree, as counted",
                     _bytes(profile["histogram_bytes"] / trees),
                     "**measured**: `fit_profile_['histogram_bytes']` / trees (array bytes, before framing)"])
    sample = c["sample_rows"] * c["features"] * c["itemsize"]
    rows.append(["binning sample to the client (once per fit)", _bytes(sample),
                 f"**computed**: {c['sample_rows']:,} rows × {c['features']} features × {c['itemsize']} bytes"])
    return ["#### Ours on the cluster: calls and traffic per tree", "",
            "The client makes one call per round (the round's draws out; the tree, the random state and the NDCG "
            "sums back). The workers' actors grow the tree among themselves: for each node every worker sends every "
            "peer that peer's block of features of its histogram (a reduce-scatter on the workers' own "
            "worker-to-worker streams), then the workers swap their best splits (a few hundred bytes). No "
            "histogram reaches the client.", "",
            _md_table(["figure", "value", "how"], rows), ""]


def _targets(fits, serves):
    """The targets of issue 5, computed for this run (reported, never asserted)."""
    ours, ref = fits["lambdamart"], fits[REFERENCE]
    checks = [
        ("fit time ≤ 1.0× LightGBM (target 0.7×)", ours["fit_s"] / ref["fit_s"], lambda v: v <= 1.0, "{:.2f}×"),
        ("NDCG@10 ≥ LightGBM − 0.003", _ndcg(ours, 10) - _ndcg(ref, 10), lambda v: v >= -0.003, "{:+.4f}"),
        ("predict rows/s ≥ LightGBM", ours["rows_per_s"] / ref["rows_per_s"], lambda v: v >= 1.0, "{:.2f}×"),
        ("peak RSS ≤ 1.5× LightGBM", ours["peak_rss"] / ref["peak_rss"], lambda v: v <= 1.5, "{:.2f}×"),
        ("import + JIT load of a first fit ≤ 3 s (warm cache)", ours["import_s"] + ours["first_call_s"],
         lambda v: v <= 3.0, "{:.2f} s"),
    ]
    if "lambdamart" in serves and REFERENCE in serves:
        for q in ("p50", "p99"):
            checks.append((f"serving {q} ≤ LightGBM", serves["lambdamart"][f"{q}_s"] / serves[REFERENCE][f"{q}_s"],
                           lambda v: v <= 1.0, "{:.2f}×"))
    rows = [[what, fmt.format(value), "met" if ok(value) else "**not met**"] for what, value, ok, fmt in checks]
    return ["### Targets of issue 5 on this data (reported, not asserted)", "",
            _md_table(["target", "this run", ""], rows), ""]


def render_notes():
    return f"""## How this is measured, and what was decided for fairness

- Same rows for everyone: float32 features, rows grouped by query id (XGBoost requires sorted qid; LightGBM gets the
  sizes of consecutive queries as `group`, the others `qid`). The split is by query: no query straddles train and
  test. Every library builds its own bins from the same numpy array inside `fit` (LightGBM's Dataset, XGBoost's
  quantile sketch, our binning), so fit time includes that.
- Each library runs in fresh processes: a fit worker (import, a tiny {TINY_ROUNDS}-round fit on {TINY_ROWS} rows,
  the timed fit, batch predict) and a serving worker. For lambdamart a warm-up process runs first so the numba
  cache on disk is warm; the tiny fit then measures what loading cached kernels costs ("first-call overhead"), and
  "first fit in fresh process" = import + tiny fit + the first full fit. On training sets of fewer than
  {REPEATED_FIT_VALUES:,} feature values the timed fit is the worker's second full fit (a repeated fit, as in a
  grid search): the first also loads the kernels the tiny fit did not reach, lambdamart's threaded ones (a tiny
  fit runs on one thread), a noticeable share of a small fit; on larger ones the fit runs once. The tiny fit runs
  for every library, so the columns mean the same for all. Fit is timed once per process; with `--repeat N` every
  library is fitted N times, the libraries interleaved, and the fastest run is reported (its other figures come
  from the same process).
  "Fit CPU" is the process's CPU time during fit, all threads summed: other work on the machine inflates it less
  than wall time (spinning thread pools still count).
- Batch predict: one untimed call, then the best of {PREDICT_REPEATS}; rows/s is test rows over that time. Each
  library predicts with the thread count of the benchmark.
- Peak RSS is the worker's high-water mark at the end (VmHWM from /proc/self/status: on Linux `ru_maxrss` of a
  freshly exec'd child starts at its parent's peak, which here holds the whole dataset, so it would be wrong).
  "RSS over data" subtracts the peak measured right after the worker loaded the data (before importing the
  library), so it is the library's import plus training and prediction overhead.
- NDCG@k is `lambdamart.metrics.ndcg` on each library's test scores: gain 2^label − 1, a query without relevant
  documents counts 1, tied scores averaged over their orders (so no library gains from row order on ties).
- XGBoost has no minimum row count per leaf: `min_child_weight={XGB_MIN_CHILD_WEIGHT}` (the minimum hessian sum
  LightGBM and lambdamart also use by default) stands in, and no leaf-size floor applies to it. `reg_lambda=0`
  matches the others (XGBoost's default is 1). `max_depth=0` with `grow_policy="lossguide"` grows leaf-wise to
  31 leaves. Truncation 30 is emulated with `lambdarank_pair_method="topk"`, `lambdarank_num_pair_per_sample=30`;
  that is close to, not the same as, LightGBM's truncation level.
- CatBoost trains YetiRank, `CatBoostRanker`'s default loss, on its symmetric trees: `depth=5`, the fewest levels
  that hold 31 leaves (as ours take by default). Its minimum rows per leaf applies only to its other tree kinds and
  YetiRank has no truncation level, so neither setting reaches it; its L2 penalty for YetiRank is 0 by default, as
  the others'. Its own regularisers (random split strength, MVS row sampling) stay at its defaults.
- Serving: each library's leanest documented single-query path on one thread (named in the table); LightGBM and
  XGBoost are called through their Booster, which skips their sklearn wrappers' input checks, while ours goes
  through `LambdaMARTRanker.predict` with its scikit-learn validation and CatBoost's through its `predict`. The
  {SERVING_CALLS:,} calls score blocks of {SERVING_DOCS} consecutive rows among the first {SERVING_ROWS:,} test rows,
  cycling (a service scores features it has just computed, in cache); the first call after unpickling is timed
  apart and not in the percentiles. The *host control* row is the machine's share of the tail: in its own process,
  the same calls on the same rows, each reading all of its query's values and then only doing arithmetic, as long
  as lambdamart's median call. A virtual machine's guest is stalled now and then (timer ticks, the hypervisor's
  handling of pages not touched for a while); a call of a given length catches such a stall with some probability,
  whatever it computes, so a p99 near the control's is the host's, not the model's.
- The profile is `LambdaMARTRanker.fit_profile_`: the estimator times each stage of its own fit (numba kernels
  return only when their work is done); finer splits inside tree growth are not measured.
"""


# ------------------------------------------------------------------------------------------------ --letor-folds


def render_folds_report(meta, result, errors):
    """The ``--letor-folds`` report: quality of every system on the five folds, in both conventions, tested
    query by query against our default."""
    folds = result["folds"]
    parts = [
        *_header("# Ranking quality on the five LETOR 4.0 folds: LambdaMARTRanker vs LightGBM, XGBoost and "
                 "CatBoost", meta),
        "",
        _md_table(["fold", "train", "validation", "test", "training rows × features (queries)",
                   "validation queries", "test rows (queries)"],
                  [[f["name"], *f["parts"], f"{f['train_rows']:,} × {f['features']} ({f['train_queries']})",
                    f["valid_queries"], f"{f['test_rows']:,} ({f['test_queries']})"] for f in folds]),
        "",
        "Protocols: **fixed** — every library with the benchmark's settings (100 rounds, learning rate 0.1, 31 "
        "leaves, 20 rows per leaf, 255 bins, truncation 30); **early stopping** — learning rate 0.05, up to "
        f"{result['settings']['early_stopping']['rounds']} rounds, stopped by NDCG@10 on the fold's validation part "
        "after 50 rounds without improvement, the best round kept. Ours is the default `LambdaMARTRanker` with "
        "those settings (`lambdamart`) and the same with each other objective (`lambdamart:NAME`).",
        "",
        "Metrics over the test queries of all five folds together (each query once), computed by "
        "`lambdamart.metrics` from every library's test scores: gain 2^label − 1, tied scores averaged. "
        "**LightGBM's convention**: a query without a relevant document scores 1, NDCG@k of a shorter query uses "
        "all its documents. **LETOR 4.0's** (the official script's): both count 0. Δ is the mean per-query "
        f"difference in NDCG@10 (LightGBM's convention) from `{BASELINE}`, with the p-values of a paired t-test and "
        f"a Wilcoxon signed-rank test (scipy) over those queries; **bold** when both are below {SIGNIFICANCE}.",
    ]
    for protocol in PROTOCOLS:
        systems = result["metrics"].get(protocol, {})
        if not systems:
            continue
        baseline = systems.get(BASELINE)
        title = "Fixed settings" if protocol == "fixed" else "Early stopping"
        header = ["system", *[f"{m} ({'LightGBM' if c == 'lightgbm' else 'LETOR'})" for c in CONVENTIONS
                              for m in (*(f"NDCG@{k}" for k in CUTOFFS), "MAP")],
                  f"Δ NDCG@10 vs {BASELINE} (t-test p / Wilcoxon p; wins–losses)", "fit, 5 folds", "trees (mean)"]
        rows = []
        for system, scored in sorted(systems.items(), key=lambda kv: -kv[1]["mean"][("lightgbm", "NDCG@10")]):
            cells = [f"{scored['mean'][(c, m)]:.4f}" for c in CONVENTIONS
                     for m in (*(f"NDCG@{k}" for k in CUTOFFS), "MAP")]
            if baseline is None or system == BASELINE:
                delta = "–"
            else:
                cmp = compare_with_baseline(scored["queries"][("lightgbm", "NDCG@10")],
                                            baseline["queries"][("lightgbm", "NDCG@10")])
                delta = (f"{cmp.mean_difference:+.4f} ({cmp.t_test_p:.2g} / {cmp.wilcoxon_p:.2g}; "
                         f"{cmp.wins}–{cmp.losses})")
                if max(cmp.t_test_p, cmp.wilcoxon_p) < SIGNIFICANCE:
                    delta = f"**{delta}**"
            runs = [r for r in result["runs"] if r["protocol"] == protocol and r["variant"] == system]
            rows.append([f"`{system}`", *cells, delta, _sec(sum(r["fit_s"] for r in runs)),
                         f"{np.mean([r['trees'] for r in runs]):.0f}" if runs else "–"])
        parts += ["", f"## {title}", "", _md_table(header, rows), "",
                  "NDCG@10 (LightGBM's convention) per fold:", "",
                  _md_table(["system", *(f["name"] for f in folds), "mean"],
                            [[f"`{system}`", *(f"{v:.4f}" for v in s["fold_ndcg10"]),
                              f"{s['mean'][('lightgbm', 'NDCG@10')]:.4f}"]
                             for system, s in sorted(systems.items(),
                                                     key=lambda kv: -kv[1]["mean"][("lightgbm", "NDCG@10")])])]
    parts += ["", "Constructor arguments (fixed protocol; the early-stopping protocol sets the learning rate, the "
              "rounds and these):", ""]
    parts += [f"- `{LIBRARIES[n].estimator}({_kwargs(p)})`; early stopping: "
              + (_kwargs(result["early_stopping_params"][n]) or "`lightgbm.early_stopping(50, first_metric_only=True)`"
                 " callback, `eval_at=[10]`") for n, p in result["params"].items()]
    parts += ["", "Fit times are each library's in one fresh process per library, one fit after another, after a "
              "warm-up fit (numba cache, thread pools); on data this small they are mostly fixed costs."]
    for error in errors:
        parts += ["", "**Failed:**", "", "```", error, "```"]
    return "\n".join(parts) + "\n"
