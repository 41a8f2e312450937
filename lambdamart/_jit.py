"""How the package's numba kernels are compiled: :func:`kernel` and :func:`inner_kernel`, ``njit(cache=True)``
without the wrappers a kernel never uses.

numba gives every function it compiles two wrappers of its own: a CPython entry point (unboxing the arguments,
boxing the result, raising errors) and a C-callable one, for use as a first-class function value. No kernel here
is used as a function value, and a kernel that only other kernels call is never entered from Python, where each
call is compiled straight into its caller: such a kernel is an :func:`inner_kernel`, built without either
wrapper. With an empty cache, ``lambdamart demo`` compiled for 19.2 s instead of 22.2 s and a first tiny fit took
13.6 s instead of 14.7 (``benchmarks/cold_start.py``, two runs each way, interleaved; docs/design.md, Compilation).
"""

from numba import njit
from numba.core import config
from numba.core.registry import CPUDispatcher


def kernel(function=None, **options):
    """``numba.njit(cache=True, **options)`` without the C-callable wrapper; as ``@kernel`` or
    ``@kernel(parallel=True)``."""
    decorate = njit(cache=True, no_cfunc_wrapper=True, **options)
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
        return dispatcher
    return decorate if function is None else decorate(function)
