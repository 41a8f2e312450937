"""How the package's numba kernels are compiled: :func:`kernel` and :func:`inner_kernel`, ``njit(cache=True)``
without the wrappers a kernel never uses.

numba gives every function it compiles two wrappers of its own: a CPython entry point (unboxing the arguments,
boxing the result, raising errors) and a C-callable one, for use as a first-class function value. No kernel here
is used as a function value, and a kernel that only other kernels call is never entered from Python, where each
call is compiled straight into its caller: such a kernel is an :func:`inner_kernel`, built without either
wrapper. With an empty cache, ``lambdamart demo`` compiled for 19.2 s instead of 22.2 s and a first tiny fit took
13.6 s instead of 14.7 (``benchmarks/cold_start.py``, two runs each way, interleaved; docs/design.md, Compilation).

:func:`compile_ahead` compiles a kernel in a helper process while this one compiles others, for a first run with an
empty cache.
"""

import functools
import hashlib
import importlib
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

from numba import njit, typeof
from numba.core import config
from numba.core.registry import CPUDispatcher

# numba's disk cache keeps a kernel's compilation while the kernel's own source file is unchanged, but the machine
# code also holds every kernel, intrinsic and global constant it called from other files: after an edit there, the
# cache would serve the old code (wrong results, or a crash when a signature changed). So every kernel's cache is
# also stamped with a digest of the sources kernels are compiled from: the package's private modules (kernels,
# lanes, sort, thread helpers), never its public, pure-Python ones (ranker, metrics, cli, ...), whose edits must not
# cost a recompilation. An installed release never changes its files, so its cache stays valid.
_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def kernel_sources_digest():
    """BLAKE2 digest of the source files kernels are compiled from: every private module of the package (``_*.py``
    at its top and everything in its ``_*`` subpackages)."""
    digest = hashlib.blake2b(digest_size=16)
    files = [*_PACKAGE.glob("_*.py"), *(f for d in _PACKAGE.glob("_*/") for f in d.rglob("*.py"))]
    for path in sorted(files):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _stamp_cache(dispatcher):
    """Stamp ``dispatcher``'s disk cache with :func:`kernel_sources_digest` as well as its own file's stamp."""
    try:
        cache_file = dispatcher._cache._cache_file
        cache_file._source_stamp = (cache_file._source_stamp, kernel_sources_digest())
    except (AttributeError, OSError):  # numba's cache internals are not a public API; no sources to read
        pass
    return dispatcher


def kernel(function=None, **options):
    """``numba.njit(cache=True, **options)`` without the C-callable wrapper; as ``@kernel`` or
    ``@kernel(parallel=True)``."""
    def decorate(py_function):
        return _stamp_cache(njit(cache=True, no_cfunc_wrapper=True, **options)(py_function))
    return decorate if function is None else decorate(function)


class _InnerDispatcher(CPUDispatcher):
    """The dispatcher of an :func:`inner_kernel`: its compilations serve the kernels that call it, and a call from
    Python is a ``TypeError`` (numba's own table of Python entry points would hold a null pointer for them)."""

    def add_overload(self, cres):
        # Kept for the callers (they link its code), left out of the table Python calls look up.
        self.overloads[tuple(cres.signature.args)] = cres

    def _compile_for_args(self, *args, **kws):
        raise TypeError(f"{self.py_func.__qualname__} runs only inside other kernels: call the kernel that uses it "
                        f"(or its .py_func, to run it as Python)")


def inner_kernel(function=None, **options):
    """A kernel called only from other kernels: compiled into its callers, with no entry point from Python (a call
    from Python raises ``TypeError``); as ``@inner_kernel`` or ``@inner_kernel(error_model="numpy")``."""
    def decorate(py_function):
        if config.DISABLE_JIT:  # as numba.njit: the plain function
            return py_function
        dispatcher = _InnerDispatcher(py_func=py_function, locals={},
                                      targetoptions=dict(options, nopython=True, no_cpython_wrapper=True,
                                                         no_cfunc_wrapper=True))
        dispatcher.enable_caching()
        return _stamp_cache(dispatcher)
    return decorate if function is None else decorate(function)


# ------------------------------------------------------------------------------- compiling in a second process
# With an empty cache a first fit spends most of its time compiling, on one core: numba compiles under a global
# lock, one function at a time. The kernels that grow the trees share none with the objectives' (neither layer
# imports the other), so a second Python process compiles them into the same disk cache while this one compiles the
# objective's; this one then waits for it and loads them from the cache. A first tiny fit took ~5 s less and the
# demo's compilation ~7 s less (benchmarks/COLD_START.md, which measures both ways; docs/design.md, Compilation).
# Two processes never compile one function at once: numba's cache is safe for that only when they compile the same
# signature.

# Set to "0" to compile everything in the fitting process.
COMPILE_AHEAD_VARIABLE = "LAMBDAMART_COMPILE_AHEAD"
# Seconds to wait for a helper before stopping it and compiling here: far more than a compilation takes.
_HELPER_TIMEOUT = 300.0
# Run by the helper: the parent's import path first, so that it compiles the same source files (the cache is keyed
# by them), then the kernel for the argument types it was sent. Those are pickled apart: unpickling them imports
# lambdamart, which the helper can do only once it has the path.
# A Ctrl-C in the terminal reaches the helper too: it carries on, as the fit does (its round ends first).
_HELPER_CODE = ("import pickle, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "job = pickle.load(sys.stdin.buffer); sys.path[:0] = job['path']; "
                "from lambdamart._jit import _compile_job; _compile_job(job['kernel'])")
# Helpers still running, by (kernel, argument types): fits on several threads share one.
_HELPERS = {}
_HELPERS_LOCK = threading.Lock()


def _is_cached(dispatcher, signature):
    """Whether numba's disk cache holds ``dispatcher``'s compilation for the argument types ``signature``; None when
    that cannot be told (no disk cache, or a numba whose cache is organised otherwise)."""
    try:
        cache = dispatcher._cache
        return cache._index_key(signature, dispatcher.targetctx.codegen()) in cache._cache_file._load_index()
    except Exception:  # numba's cache internals are not a public API: without them, no helper
        return None


def _can_start_helpers():
    # sys.executable is not a Python interpreter in a frozen application or an embedding one (uWSGI, say).
    interpreter = os.path.basename(sys.executable or "").lower()
    return (os.environ.get(COMPILE_AHEAD_VARIABLE, "1") != "0" and not config.DISABLE_JIT
            and not getattr(sys, "frozen", False) and interpreter.startswith("python"))


def compile_ahead(dispatcher, args):
    """Start compiling the kernel ``dispatcher`` for the types of ``args`` in a helper process, unless it is compiled
    or in numba's disk cache already; returns the helper (for :func:`wait_for_helper`) or None.

    The helper writes into the disk cache, from where a call of the kernel after :func:`wait_for_helper` loads the
    compilation. The caller must not compile any kernel the helper compiles until then. Nothing starts when the JIT
    is disabled, in a frozen application, or when the environment variable ``LAMBDAMART_COMPILE_AHEAD`` is ``0``.
    """
    if not _can_start_helpers():
        return None
    signature = tuple(typeof(arg) for arg in args)
    if signature in dispatcher.overloads:
        return None
    key = (dispatcher, signature)
    with _HELPERS_LOCK:
        helper = _HELPERS.get(key)
        if helper is not None and helper.poll() is None:
            return helper
        if _is_cached(dispatcher, signature) is not False:
            return None
        try:
            kernel_job = pickle.dumps((dispatcher.py_func.__module__, dispatcher.py_func.__name__, signature))
        except Exception:  # types that do not travel: compile here
            return None
        try:
            job = {"path": [p for p in sys.path if p], "kernel": kernel_job}
            # The cache directory as this process uses it, also when set in numba.config rather than the environment.
            env = dict(os.environ, NUMBA_CACHE_DIR=config.CACHE_DIR) if config.CACHE_DIR else None
            helper = subprocess.Popen([sys.executable, "-c", _HELPER_CODE], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            with helper.stdin:
                pickle.dump(job, helper.stdin)
        except OSError:  # no process to start: compile here
            return None
        _HELPERS[key] = helper
    return helper


def wait_for_helper(helper):
    """Wait until the helper of :func:`compile_ahead` (or None) has finished; stop it if it takes unreasonably long.

    Waiting costs less than compiling here: the helper started on the same work earlier. If it failed, the kernel is
    compiled in this process on its first call, as without a helper.
    """
    if helper is None:
        return
    try:
        helper.wait(_HELPER_TIMEOUT)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()


def _compile_job(kernel_job):
    """The helper's work: compile the kernel ``kernel_job`` names for its argument types (into the disk cache)."""
    module, name, signature = pickle.loads(kernel_job)
    getattr(importlib.import_module(module), name).compile(signature)
