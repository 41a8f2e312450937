"""What the report's header says about the run: the machine, the versions, the checkout, and paths.

Reports are committed, so nothing here prints a machine's absolute path: ``display_path`` shows paths relative to
the repository root.
"""

import datetime
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def display_path(path):
    """``path`` as a report shows it: relative to the repository root when it lies in the repository or next to
    it (``../shared/...``), else only its name.

    A relative ``path`` is taken from the current directory, as the command line that named it was.
    """
    path = Path(path)
    for candidate in (Path(os.path.abspath(path)), path.resolve()):  # as named, then without symlinks
        if candidate.is_relative_to(REPO):
            return candidate.relative_to(REPO).as_posix()
        if REPO.parent != REPO.parent.parent and candidate.is_relative_to(REPO.parent):  # not when that is /
            return "../" + candidate.relative_to(REPO.parent).as_posix()
    return path.name or path.as_posix()  # "/" has no name


def machine_info():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        model = platform.processor() or model
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = ""
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        memory = f", {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GB RAM"
    return f"{model}, {os.cpu_count()} logical cores ({usable} usable){memory}, {platform.platform()}"


def run_header(command, **more):
    """What a report's header records when its run starts: date, ``command``, machine, versions, checkout and load
    (``load_after`` is added when the run ends), plus ``more``."""
    return dict(date=datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"), command=command,
                machine=machine_info(), versions=versions(), revision=git_revision(), **more,
                load_before=load_average())


def load_average():
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


def versions():
    found = {"python": platform.python_version()}
    for dist in ("lambdamart", "numpy", "numba", "scikit-learn", "lightgbm", "xgboost", "catboost", "dask",
                 "distributed"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = "not installed"
    return found


def git_revision():
    """Commit of the checkout, flagged when lambdamart/ has uncommitted changes (kernels change concurrently)."""
    def git(*cmd):
        return subprocess.run(["git", "-C", str(REPO), *cmd], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown (not a git checkout)"
    dirty = git("status", "--porcelain", "--", "lambdamart")
    return commit + (" + uncommitted changes in lambdamart/" if dirty else "")
