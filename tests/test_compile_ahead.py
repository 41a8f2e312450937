"""Compiling kernels in a helper process (``lambdamart._jit.compile_ahead``), with an empty numba cache.

Each test runs in a fresh interpreter whose ``NUMBA_CACHE_DIR`` is an empty directory, as a first run meets it.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from lambdamart._jit import COMPILE_AHEAD_VARIABLE

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no compilation without the JIT")


def _run_fresh(code, tmp_path):
    """Run ``code`` in a fresh interpreter with an empty kernel cache; return its stdout."""
    cache = tmp_path / "numba_cache"
    cache.mkdir()
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    env.pop(COMPILE_AHEAD_VARIABLE, None)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_helper_compiles_a_kernel_into_the_cache_this_process_loads(tmp_path):
    (tmp_path / "ahead_kernels.py").write_text(textwrap.dedent("""
        from lambdamart._jit import kernel

        @kernel
        def twice(x):
            return 2 * x
    """))
    out = _run_fresh("""
        import os
        import numba
        import numpy as np
        from lambdamart import _jit
        from ahead_kernels import twice

        def compiled_here(arg):  # times twice was compiled in this process for the type of arg
            return twice.stats.cache_misses.get((numba.typeof(arg),), 0)

        x = np.ones(3)
        helper = _jit.compile_ahead(twice, (x,))
        assert helper is not None
        assert _jit.compile_ahead(twice, (x,)) is helper  # one helper per kernel and types while it runs
        _jit.wait_for_helper(helper)
        assert helper.returncode == 0
        assert twice(x).tolist() == [2.0, 2.0, 2.0]
        assert twice.stats.cache_hits.get((numba.typeof(x),), 0) == 1 and compiled_here(x) == 0
        assert _jit.compile_ahead(twice, (x,)) is None  # compiled now: nothing to do

        # A helper that fails changes nothing: the kernel compiles here on its first call.
        _jit._HELPER_CODE = "import sys; sys.exit(3)"
        n = np.arange(3)
        helper = _jit.compile_ahead(twice, (n,))
        _jit.wait_for_helper(helper)
        assert helper.returncode == 3
        assert twice(n).tolist() == [0, 2, 4]
        assert compiled_here(n) == 1

        # Switched off by the environment variable.
        os.environ[_jit.COMPILE_AHEAD_VARIABLE] = "0"
        assert _jit.compile_ahead(twice, (np.ones(3, dtype=np.float32),)) is None
        print("ok")
    """, tmp_path)
    assert out.strip() == "ok"


def test_a_first_fit_loads_the_growth_kernels_its_helper_compiled(tmp_path):
    out = _run_fresh("""
        from lambdamart import LambdaMARTRanker
        from lambdamart._engine.grower import grow_tree
        from lambdamart._engine.symmetric import grow_symmetric_tree
        from lambdamart.datasets import make_ranking_data

        X, y, qid = make_ranking_data(5, random_state=0)
        for policy, grow in (("symmetric", grow_symmetric_tree), ("leafwise", grow_tree)):
            LambdaMARTRanker(n_estimators=2, grow_policy=policy).fit(X, y, qid)
            print(sum(grow.stats.cache_hits.values()), sum(grow.stats.cache_misses.values()))
    """, tmp_path)
    assert out.split() == ["1", "0"] * 2


def test_a_fit_compiles_no_string_formatting_into_its_kernels(tmp_path):
    # An array expression such as `a[:, :3] -= b[:, :3]` in a kernel compiles numba's broadcasting with its error
    # messages, whose string formatting took ~3.5 s of a first fit (docs/design.md, Compilation): loops instead.
    out = _run_fresh("""
        import os
        os.environ["LAMBDAMART_COMPILE_AHEAD"] = "0"  # every compilation in this process, where it is recorded
        from numba.core import event
        from lambdamart import LambdaMARTRanker
        from lambdamart.datasets import make_ranking_data

        X, y, qid = make_ranking_data(5, random_state=0)
        with event.install_recorder("numba:compile") as recorder:
            for policy in ("symmetric", "leafwise"):
                LambdaMARTRanker(n_estimators=2, grow_policy=policy).fit(X, y, qid).predict(X)
        compiled = {item.data["dispatcher"].py_func.__module__ for _, item in recorder.buffer
                    if item.data.get("dispatcher") is not None}
        print(sorted(m for m in compiled if "unicode" in m) or "none", "lambdamart._engine.grower" in compiled)
    """, tmp_path)
    assert out.split() == ["none", "True"]


def test_an_edit_to_any_kernel_source_invalidates_every_cached_kernel(tmp_path):
    # numba checks a cached kernel against its own file only; kernels compile in code from other files (here
    # base.py's apply_sample_weight is stamped by _sort.py too). A copy of the package, edited between fresh runs.
    import shutil

    import lambdamart

    shutil.copytree(os.path.dirname(lambdamart.__file__), tmp_path / "lambdamart",
                    ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "numba_cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(tmp_path))
    code = textwrap.dedent("""
        import os
        import numpy as np
        import lambdamart
        from lambdamart._objectives.base import apply_sample_weight

        assert lambdamart.__file__.startswith(os.environ["PYTHONPATH"])  # the copy
        w, grad, hess = np.full(4, 2.0), np.ones(4), np.ones(4)
        apply_sample_weight(w, 0, 4, grad, hess)
        print(sum(apply_sample_weight.stats.cache_hits.values()), sum(apply_sample_weight.stats.cache_misses.values()))
    """)

    def hits_and_misses():
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert hits_and_misses() == ["0", "1"]  # compiled into the empty cache
    assert hits_and_misses() == ["1", "0"]  # loaded from it
    with open(tmp_path / "lambdamart" / "_sort.py", "a") as source:  # another file kernels compile from
        source.write("\n# edited\n")
    assert hits_and_misses() == ["0", "1"]
    with open(tmp_path / "lambdamart" / "ranker.py", "a") as source:  # no kernel compiles from it
        source.write("\n# edited\n")
    assert hits_and_misses() == ["1", "0"]
