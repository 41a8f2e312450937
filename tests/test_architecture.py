"""The package's shape: imports flow one way, the engine knows nothing of the estimator, the public API is documented.

The import graph is read from the source (every ``import`` statement, also those inside functions, since a lazy import
hides a cycle rather than removing it), so these tests need no import machinery and fail with the offending edge.
"""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import lambdamart

PACKAGE_DIR = Path(lambdamart.__file__).parent


def _module_name(path):
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path):
    """The lambdamart modules that the file at ``path`` imports (anywhere in it)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "lambdamart")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "lambdamart":
                continue
            for alias in node.names:  # ``from . import metrics`` imports a module, ``from .x import f`` a name
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in MODULES else target)
    found.discard(module)
    return found


MODULES = {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}
GRAPH = {name: _imports(path) for name, path in MODULES.items()}

# The estimator and everything built on it. Nothing below them may import them.
ESTIMATOR_LAYER = {"lambdamart", "lambdamart.ranker", "lambdamart.model_io", "lambdamart.cli", "lambdamart.__main__",
                   "lambdamart.dask", "lambdamart.explain"}


def test_the_graph_sees_the_whole_package():
    assert {"lambdamart.ranker", "lambdamart._engine.grower", "lambdamart._objectives.base"} <= set(GRAPH)
    assert "lambdamart._engine.histogram" in GRAPH["lambdamart._engine.grower"]
    assert "lambdamart._model_format" in GRAPH["lambdamart.ranker"]  # ``from . import _model_format``


def test_no_import_cycle():
    state = {}  # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(GRAPH.get(node, ())):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(("lambdamart._engine",
                                                                               "lambdamart._objectives"))))
def test_engine_and_objectives_import_nothing_above_them(module):
    """The engine and the objectives import only themselves and the shared low-level helpers (the sort, the value
    helpers, the kernel decorators). Neither may reach the estimator, validation, the model file or the public
    modules."""
    allowed_prefix = "lambdamart._engine" if module.startswith("lambdamart._engine") else "lambdamart._objectives"
    allowed = {"lambdamart._sort", "lambdamart._values", "lambdamart._jit"}
    bad = sorted(m for m in GRAPH[module] if not (m.startswith(allowed_prefix) or m in allowed))
    assert not bad, f"{module} imports {bad}"


def test_nothing_below_the_estimator_imports_it():
    for module, imported in GRAPH.items():
        if module in ESTIMATOR_LAYER:
            continue
        assert not (imported & ESTIMATOR_LAYER), f"{module} imports {sorted(imported & ESTIMATOR_LAYER)}"


def test_scikit_learn_private_names_are_used_only_in_compat():
    for module, path in MODULES.items():
        if module == "lambdamart._compat":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sklearn"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private and "._" not in node.module, f"{module} imports {node.module}: {private}"
            if isinstance(node, ast.Attribute) and node.attr in ("_metadata_request", "_param_validation",
                                                                 "_validate_params"):
                pytest.fail(f"{module} touches scikit-learn's private {node.attr}")


PUBLIC_MODULES = ["lambdamart", "lambdamart.ranker", "lambdamart.model_io", "lambdamart.metrics",
                  "lambdamart.scoring", "lambdamart.datasets", "lambdamart.exceptions", "lambdamart.cli",
                  "lambdamart.dask", "lambdamart.evaluation", "lambdamart.trec", "lambdamart.explain"]


def _public_objects():
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        yield name, module
        for attr, obj in vars(module).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != name:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{name}.{attr}", obj
                if inspect.isclass(obj):
                    for meth, member in vars(obj).items():
                        if not meth.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                            yield f"{name}.{attr}.{meth}", member


@pytest.mark.parametrize("name, obj", list(_public_objects()), ids=lambda v: v if isinstance(v, str) else "")
def test_public_api_has_numpydoc_docstrings(name, obj):
    doc = inspect.getdoc(obj.fget if isinstance(obj, property) else obj)
    assert doc and doc.strip(), f"{name} has no docstring"
    function = obj.fget if isinstance(obj, property) else obj
    if inspect.isfunction(function) and not isinstance(obj, property):
        params = [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]
        if params:
            assert "Parameters\n----------" in doc, f"{name} documents no Parameters section"
            for p in params:
                assert p.lstrip("*") in doc, f"{name} does not document its parameter {p!r}"


def test_no_comment_cites_a_file_outside_the_repository():
    root = PACKAGE_DIR.parent
    files = [*MODULES.values(), *root.glob("tests/*.py"), *root.glob("benchmarks/*"), root / "README.md"]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "DESIGN" + " §" not in text and "DESIGN" + ".md" not in text, path



def test_an_inner_kernel_called_from_python_raises_instead_of_crashing():
    """An ``_jit.inner_kernel`` has no Python entry point: a call from Python, before or after a kernel that uses it
    compiled it, is a TypeError (numba would jump to a null pointer); kernels call it, and its ``py_func`` runs as
    Python."""
    import numba

    from lambdamart._engine.split import leaf_objective

    with pytest.raises(TypeError, match="only inside other kernels"):
        leaf_objective(1.0, 2.0, 0.0)

    @numba.njit
    def caller(sum_grad, sum_hess, l2):
        return leaf_objective(sum_grad, sum_hess, l2)

    assert caller(1.0, 2.0, 0.0) == 0.5
    assert leaf_objective.overloads  # compiled for the caller, with the same argument types as below
    with pytest.raises(TypeError, match="only inside other kernels"):
        leaf_objective(1.0, 2.0, 0.0)
    assert leaf_objective.py_func(1.0, 2.0, 0.0) == 0.5
