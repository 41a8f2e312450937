"""How far MQ2008's NDCG@10 moves under changes that mean nothing: each system refitted at ten histogram sizes.

    python benchmarks/noise.py [--output benchmarks/NOISE.md] [--threads 2] [--bins 246 ... 255]

MQ2008's five folds hold 784 test queries with about 19 documents each, and small changes of a model's input move
its mean NDCG@10 by more than many differences the factor study (``factors.py``) measures between settings. Here
every system of the factor study that matters for issue 15 (our default and its best objectives at 100 rounds,
LightGBM, XGBoost) fits the five folds under both of its protocols once per histogram bin count from 246 to 255.
Fewer bins only move the thresholds of the features with more distinct values than that; no user would call the
resulting models different. The report gives, per system, the mean, the standard deviation and the range of its
NDCG@10 over the bin counts, its value at the benchmark's 255, and against XGBoost (the stronger peer) the mean
difference over the bin counts with the number of bin counts at which the system scores at least as well.
Quality only: no timing here means anything.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from context import display_path, load_average, run_header
from data import letor_folds
from factors import MQ2008, VARIANTS, _sets, evaluate
from folds import PROTOCOL_TITLES, PROTOCOLS
from libraries import LIBRARIES, installed
from report import _header, _md_table

HERE = Path(__file__).resolve().parent
BINS = tuple(range(246, 256))
PEER = "XGBoost rank:ndcg (benchmark settings)"
SYSTEMS = {
    "default": VARIANTS["default"],
    "half Newton step (XGBoost's doubled w)": VARIANTS["half Newton step (XGBoost's doubled w)"],
    **{f'objective="{name}"': ("lambdamart", {"objective": name}, None) for name in ("frank", "xendcg", "listnet")},
    "LightGBM lambdarank": VARIANTS["LightGBM lambdarank"],
    PEER: VARIANTS[PEER],
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=HERE / "NOISE.md")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bins", type=int, nargs="+", default=list(BINS), help="the histogram bin counts")
    args = parser.parse_args(argv)
    if not MQ2008.is_dir():
        raise SystemExit(f"noise.py: {display_path(MQ2008)} is not there")
    present, _ = installed(list(LIBRARIES))
    systems = {name: spec for name, spec in SYSTEMS.items() if spec[0] in present}
    command = "python benchmarks/noise.py" + (f" --output {display_path(args.output)}"
                                              if args.output != HERE / "NOISE.md" else "")
    if list(args.bins) != list(BINS):
        command += " --bins " + " ".join(map(str, args.bins))
    meta = run_header(command)
    sets = [_sets(f["train"], f["train"], f["valid"], f["test"]) for f in letor_folds(MQ2008)]
    # protocol -> system -> mean NDCG@10 over the test queries, one per bin count
    means = {}
    for protocol in PROTOCOLS:
        for name, spec in systems.items():
            print(f"[{protocol}] {name} ...", file=sys.stderr, flush=True)
            means.setdefault(protocol, {})[name] = np.array(
                [evaluate(spec, protocol, sets, args.threads, bins=bins).mean() for bins in args.bins])
    meta["load_after"] = load_average()
    report = render(meta, means, list(args.bins))
    args.output.write_text(report)
    print(report)
    return 0


def render(meta, means, bins):
    parts = [*_header("# Noise floor: MQ2008's NDCG@10 at ten histogram sizes", meta), "",
             f"Mean NDCG@10 (LightGBM's convention) over MQ2008's 784 test queries, for each of {len(bins)} bin "
             f"counts ({bins[0]}-{bins[-1]}); the module docstring of `benchmarks/noise.py` says why. \"vs XGBoost\" "
             "pairs the two systems at each bin count."]
    for protocol, by_system in means.items():
        peer = by_system.get(PEER)
        rows = []
        for name, values in by_system.items():
            row = [name, f"{values.mean():.4f}", f"{values.std(ddof=1):.4f}", f"{values.min():.4f}",
                   f"{values.max():.4f}", f"{values[bins.index(255)]:.4f}" if 255 in bins else "-"]
            if peer is None or name == PEER:
                row += ["-", "-"]
            else:
                row += [f"{(values - peer).mean():+.4f}", f"{int((values >= peer).sum())} of {len(bins)}"]
            rows.append(row)
        header = ["system", "mean", "SD", "min", "max", "at 255 bins", "vs XGBoost: mean difference",
                  "at least XGBoost's"]
        parts += ["", f"## {PROTOCOL_TITLES[protocol]}", "", _md_table(header, rows)]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(main())
