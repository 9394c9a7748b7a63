"""Docstring coverage of tensorbrain's public API, so that it stays documented.

An AST walk over tensorbrain/ (no imports, so optional dependencies do not matter) finds every
public callable: module-level functions and classes, and the methods of public classes, skipping
names that start with "_" (dunders included), modules or packages whose name starts with "_",
and forward/extra_repr (documented at the class level, as torch does). It computes:

* the share of public callables with a docstring (goal: >= 90%), and
* the share of documented callables that take parameters whose docstring has an ``Args:``
  section (goal: >= 50%).

The same two goals hold at run time for what the API reference's modules export (most of it is
defined in private modules or made at import, which the AST walk does not see), and every op of
the op table (``tb.add``, ``Tensor.add``, ...) has Args, Returns and an Example.

Run ``python tests/test_docstrings.py`` to print both figures and the undocumented names.
"""

import ast
import importlib
import inspect
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1] / "tensorbrain"
DOCUMENTED_GOAL = 0.90
ARGS_GOAL = 0.50
EXEMPT_METHODS = {"forward", "extra_repr"}
# Files left out of the goals below while their docstrings are being completed elsewhere (they
# are still counted in the printed figures, ``python tests/test_docstrings.py``). Empty: the
# whole tree is held to the goals; add a glob here only for a file under active rewrite.
PENDING = []


def pending_files(root=None):
    """The files of ``PENDING`` under ``root`` (default: tensorbrain/)."""
    root = ROOT if root is None else root
    return [p for pattern in PENDING for p in root.glob(pattern)]


def _is_private_path(path, root=ROOT):
    parts = path.relative_to(root.parent).with_suffix("").parts
    return any(p.startswith("_") and p != "__init__" for p in parts)


def _has_params(node):
    """True when a function (or a class's __init__) takes parameters besides self/cls."""
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == "__init__"), None)
        return init is not None and _has_params(init)
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return bool(names or a.vararg or a.kwarg)


def _is_overload_or_property_setter(node):
    for d in node.decorator_list:
        if isinstance(d, ast.Name) and d.id == "overload":
            return True
        if isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter"):
            return True
    return False


def public_callables(root=ROOT):
    """Yields (qualified name, node) for every public function, class and method under root."""
    for path in sorted(root.rglob("*.py")):
        if _is_private_path(path, root):
            continue
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not node.name.startswith("_") and not _is_overload_or_property_setter(node):
                    yield f"{module}.{node.name}", node, path
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                yield f"{module}.{node.name}", node, path
                for sub in node.body:
                    if (isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and not sub.name.startswith("_")
                            and sub.name not in EXEMPT_METHODS
                            and not _is_overload_or_property_setter(sub)):
                        yield f"{module}.{node.name}.{sub.name}", sub, path


def coverage(root=ROOT, exclude=()):
    """Returns (documented share, Args share, undocumented names, documented-without-Args names)."""
    exclude = {pathlib.Path(p).resolve() for p in exclude}
    total = documented = with_params = with_args = 0
    missing, no_args = [], []
    for name, node, path in public_callables(root):
        if path.resolve() in exclude:
            continue
        total += 1
        doc = ast.get_docstring(node)
        if not doc:
            missing.append(name)
            continue
        documented += 1
        if _has_params(node):
            with_params += 1
            if "Args:" in doc or "Arguments:" in doc:
                with_args += 1
            else:
                no_args.append(name)
    return (documented / max(total, 1), with_args / max(with_params, 1), missing, no_args,
            total, with_params)


def test_public_api_is_documented():
    doc_share, _, missing, _, total, _ = coverage(exclude=pending_files())
    assert doc_share >= DOCUMENTED_GOAL, (
        f"{doc_share:.1%} of {total} public callables have a docstring (goal "
        f"{DOCUMENTED_GOAL:.0%}); undocumented: {', '.join(missing[:40])}")


def test_documented_callables_with_parameters_have_args_sections():
    _, args_share, _, no_args, _, with_params = coverage(exclude=pending_files())
    assert args_share >= ARGS_GOAL, (
        f"{args_share:.1%} of {with_params} documented callables with parameters have an Args: "
        f"section (goal {ARGS_GOAL:.0%}); without one: {', '.join(no_args[:40])}")


def test_checker_sees_private_and_public_names(tmp_path):
    pkg = tmp_path / "tensorbrain"
    (pkg / "_private").mkdir(parents=True)
    (pkg / "_private" / "x.py").write_text("def f(a):\n    pass\n")
    (pkg / "m.py").write_text(
        'def f(a):\n    """F.\n\n    Args:\n        a: a.\n    """\n'
        "def _g(a):\n    pass\n"
        'class C:\n    """C."""\n    def forward(self, x):\n        pass\n'
        "    def h(self):\n        pass\n")
    doc_share, args_share, missing, _, total, with_params = coverage(pkg)
    assert total == 3 and missing == ["tensorbrain.m.C.h"]
    assert with_params == 1 and args_share == 1.0


# ***** what a user reaches at run time: the API reference's modules, and the op table *****
# The AST walk above sees only what is written in public modules; most of what users call is
# defined in private ones (tensorbrain/_ops, _factories, _store, ...) and re-exported, or made at
# import (the op table's tb.add/Tensor.add, the in-place methods, zeros_like). These checks
# import the modules the docs site's API reference renders (mkdocs.yml) and look at the objects.

def api_modules():
    """The modules of the docs site's API reference pages (mkdocs.yml's nav)."""
    text = (ROOT.parent / "mkdocs.yml").read_text(encoding="utf-8")
    return re.findall(r"^\s*- (tensorbrain[\w.]*): api/", text, re.M)


def runtime_public_callables():
    """Yields (qualified name, object, docstring) for every public function and class the API
    reference modules export (``__all__``, else their public names) that tensorbrain defines,
    and the public methods and properties those classes define; each object once. A method's
    docstring is ``inspect.getdoc``'s: an override documented in its base class counts, as
    ``help()`` shows it."""
    seen = set()
    for mname in api_modules():
        module = importlib.import_module(mname)
        names = getattr(module, "__all__", None) or [n for n in dir(module) if n[0] != "_"]
        for name in names:
            obj = getattr(module, name, None)
            if (inspect.ismodule(obj) or not callable(obj) or id(obj) in seen
                    or not (getattr(obj, "__module__", None) or "").startswith("tensorbrain")):
                continue
            seen.add(id(obj))
            yield f"{mname}.{name}", obj, inspect.getdoc(obj)
            if not inspect.isclass(obj):
                continue
            for attr, value in vars(obj).items():
                if attr[0] == "_" or attr in EXEMPT_METHODS or id(value) in seen:
                    continue
                if isinstance(value, property):
                    seen.add(id(value))
                    yield f"{mname}.{name}.{attr}", value, value.__doc__
                elif inspect.isfunction(getattr(value, "__func__", value)):
                    seen.add(id(value))
                    yield f"{mname}.{name}.{attr}", value, inspect.getdoc(getattr(obj, attr))


def runtime_coverage():
    """Returns (documented share, Args share, undocumented names, total, with parameters)."""
    total = documented = with_params = with_args = 0
    missing = []
    for name, obj, doc in runtime_public_callables():
        total += 1
        if not (doc or "").strip():
            missing.append(name)
            continue
        documented += 1
        if isinstance(obj, property):
            continue
        try:
            params = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
        except (TypeError, ValueError):
            continue
        if params:
            with_params += 1
            with_args += "Args:" in doc or "Arguments:" in doc
    return (documented / max(total, 1), with_args / max(with_params, 1), missing, total,
            with_params)


def test_what_users_reach_at_run_time_is_documented():
    doc_share, args_share, missing, total, with_params = runtime_coverage()
    assert total > 800   # the walk finds the API (Tensor's methods, tb.*, nn, distributed...)
    assert doc_share >= DOCUMENTED_GOAL, (
        f"{doc_share:.1%} of {total} public callables reached at run time have a docstring "
        f"(goal {DOCUMENTED_GOAL:.0%}); undocumented: {', '.join(missing[:40])}")
    assert args_share >= ARGS_GOAL, (
        f"{args_share:.1%} of {with_params} documented callables with parameters have Args:")


def test_every_op_of_the_op_table_is_documented():
    # tb.<op> and Tensor.<op> are made from the op table; their docstrings are in the ops'
    # modules or in _ops/docs_math.py and _ops/docs_shape.py (see there)
    import tensorbrain  # noqa: F401  (imports the table, which sets the docstrings)
    from tensorbrain._ops import docs_math, docs_shape, table
    for name, (op, _) in table.OPS.items():
        doc = op.__doc__ or ""
        for section in ("Args:", "Returns:", "Example:"):
            assert section in doc, f"op {name!r}: its docstring has no {section} section"
    for name, doc in {**docs_math.DOCS, **docs_shape.DOCS}.items():
        # an entry shadowed by a docstring in the op's module would be a stale second copy
        assert table.OPS[name][0].__doc__ is doc, (
            f"op {name!r} has a docstring in its module; delete its entry in _ops/docs_*.py")


if __name__ == "__main__":
    import sys
    # run as a script, tests/ is sys.path[0]: its multiprocessing/ folder would hide the stdlib's
    sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != ROOT.parent / "tests"]
    sys.path.insert(0, str(ROOT.parent))
    for label, excl in (("all files", ()), ("without PENDING", pending_files())):
        d, a, missing, no_args, total, wp = coverage(exclude=excl)
        print(f"{label}: {total} public callables, {d:.1%} documented; {wp} documented with "
              f"parameters, {a:.1%} of them with Args:")
    d, a, missing, no_args, total, wp = coverage()
    print(f"undocumented ({len(missing)}):")
    for m in missing:
        print("  ", m)
    d, a, missing, total, wp = runtime_coverage()
    print(f"at run time (the API reference's modules): {total} public callables, {d:.1%} "
          f"documented; {wp} documented with parameters, {a:.1%} of them with Args:")
    for m in missing:
        print("  ", m)


def test_a_fresh_import_gives_the_ops_their_docstrings():
    """``import tensorbrain`` alone (no test having imported the op table) documents tb.add and
    Tensor.add: the docstrings of _ops/docs_math.py are set when the table is imported."""
    import subprocess
    import sys
    code = ("import tensorbrain as tb; "
            "print(bool(tb.add.__doc__), bool(tb.Tensor.add.__doc__), bool(tb.reshape.__doc__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["True", "True", "True"], out
