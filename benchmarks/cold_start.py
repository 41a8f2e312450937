"""The first run: numba compilation with an empty kernel cache, in fresh processes.

Every kernel of ``lambdamart`` is compiled on its first call and cached on disk (``cache=True``); a CI job, a
container image or a notebook kernel without that cache pays the compilation again. This script measures it the
way such a user meets it, each case in a fresh Python process whose ``NUMBA_CACHE_DIR`` is an empty directory:

- ``tiny fit``: importing lambdamart, then the first ``fit`` of a 3-round model on 20 generated queries, then its
  first ``predict``;
- ``demo``: ``python -m lambdamart demo`` (the README's first command after installation), run cold and then again
  with the cache it filled; the difference is its compilation;
- both also with ``LAMBDAMART_COMPILE_AHEAD=0``: everything compiled in the one process, without the helper process
  that compiles the tree-growth kernels alongside the fit (``lambdamart._jit.compile_ahead``);
- per kernel: the compilation time numba's event recorder attributes to each kernel in the tiny fit and predict
  without the helper (its own time, callees excluded; numba's library functions counted with the kernel that needed
  them).

Usage::

    python benchmarks/compare.py ...            # the speed report; this one is separate:
    python benchmarks/cold_start.py [--skip-demo] [--output benchmarks/COLD_START.md]

Times are wall seconds on this machine; the report records the load average, which moves them a lot on 2 cores.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from context import display_path, load_average, run_header
from report import _header

HERE = Path(__file__).resolve().parent

# Run in the child: times the import, the first fit and the first predict, and sums numba's compile events per
# kernel (its own time: the time of nested compilations is subtracted from the kernel that triggered them).
_TINY_FIT = r"""
import collections, json, sys, time
from numba.core import event
started = time.perf_counter()
with event.install_recorder("numba:compile") as recorder:
    import lambdamart
    from lambdamart.datasets import make_ranking_data
    imported = time.perf_counter()
    X, y, qid = make_ranking_data(20, random_state=0)
    fit_start = time.perf_counter()
    model = lambdamart.LambdaMARTRanker(n_estimators=3).fit(X, y, qid)
    fitted = time.perf_counter()
    model.predict(X[:50])
    predicted = time.perf_counter()
own = collections.Counter()
stack = []
for when, item in recorder.buffer:
    dispatcher = item.data.get("dispatcher")
    name = "?" if dispatcher is None else dispatcher.py_func.__module__ + "." + dispatcher.py_func.__name__
    if item.is_start:
        stack.append([name, when, 0.0])
        continue
    name, began, nested = stack.pop()
    took = when - began
    if stack:
        stack[-1][2] += took
    if not name.startswith("lambdamart."):  # numba's own library code: charge the kernel that asked for it
        name = next((entry[0] for entry in reversed(stack) if entry[0].startswith("lambdamart.")), name)
    own[name] += took - nested
json.dump({"import": imported - started, "fit": fitted - fit_start, "predict": predicted - fitted,
           "kernels": own.most_common()}, sys.stdout)
"""


def _fresh_cache_env(cache_dir, helper):
    return dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), PYTHONDONTWRITEBYTECODE="1",
                LAMBDAMART_COMPILE_AHEAD="1" if helper else "0")


def tiny_fit(helper=True):
    """Import, first fit and first predict times, and compile time per kernel of this process, with an empty cache;
    ``helper=False`` compiles everything in the one process."""
    with tempfile.TemporaryDirectory() as cache:
        done = subprocess.run([sys.executable, "-c", _TINY_FIT], capture_output=True, text=True,
                              env=_fresh_cache_env(cache, helper), check=True)
    return json.loads(done.stdout)


def demo(helper=True):
    """Wall time of ``lambdamart demo`` with an empty cache, then again with the cache it filled."""
    times = []
    with tempfile.TemporaryDirectory() as cache:
        for _ in range(2):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "lambdamart", "demo"], capture_output=True, text=True,
                           env=_fresh_cache_env(cache, helper), check=True)
            times.append(time.perf_counter() - start)
    return {"cold": times[0], "warm": times[1]}


def render(meta, tiny, demo_times, top=25):
    """The markdown report; ``tiny`` and ``demo_times`` map True / False (with the helper process or without) to
    the measurements."""
    lines = _header("# First run: numba compilation with an empty cache", meta)
    lines += ["", "Each case in a fresh process whose `NUMBA_CACHE_DIR` is an empty directory (wall seconds); by "
              "default a helper process compiles the tree-growth kernels while the fit compiles the others, "
              "`LAMBDAMART_COMPILE_AHEAD=0` compiles everything in the fitting process.", "",
              "| case | default | `LAMBDAMART_COMPILE_AHEAD=0` |", "|---|---|---|"]

    def row(label, value):
        return f"| {label} | {value(True):.1f} | {value(False):.1f} |"

    lines += [row("import lambdamart", lambda h: tiny[h]["import"]),
              row("first fit, 3 rounds on 20 queries (compiles the fit's kernels)", lambda h: tiny[h]["fit"]),
              row("first predict after it", lambda h: tiny[h]["predict"])]
    if demo_times is not None:
        lines += [row("`lambdamart demo`, empty cache", lambda h: demo_times[h]["cold"]),
                  row("`lambdamart demo`, cache filled by the run above", lambda h: demo_times[h]["warm"]),
                  row("the demo's compilation (difference)",
                      lambda h: demo_times[h]["cold"] - demo_times[h]["warm"])]
    kernels = tiny[False]["kernels"]
    lines += ["", f"Compilation per kernel in the tiny fit and predict, all in one process "
              f"(`LAMBDAMART_COMPILE_AHEAD=0`; own time; numba's library code counted with the kernel that needed "
              f"it), the {min(top, len(kernels))} largest of {len(kernels)}, {sum(t for _, t in kernels):.1f} s in "
              f"all:", "", "| kernel | seconds |", "|---|---|"]
    lines += [f"| `{name.removeprefix('lambdamart.')}` | {seconds:.2f} |" for name, seconds in kernels[:top]]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-demo", action="store_true", help="only the tiny fit (the demo takes minutes)")
    parser.add_argument("--output", type=Path, default=HERE / "COLD_START.md")
    args = parser.parse_args(argv)
    command = "python benchmarks/cold_start.py" + (" --skip-demo" if args.skip_demo else "")
    if args.output != HERE / "COLD_START.md":
        command += f" --output {display_path(args.output)}"
    meta = run_header(command)
    # Each case with and without the helper one right after the other: the machine's speed drifts over minutes.
    tiny = {helper: tiny_fit(helper) for helper in (True, False)}
    demo_times = None if args.skip_demo else {helper: demo(helper) for helper in (True, False)}
    meta["load_after"] = load_average()
    report = render(meta, tiny, demo_times)
    args.output.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
