"""Writes ``generated.py`` and ``functions.py`` (in ``tensorbrain/_ops``) from the op table.

Run ``python tensorbrain/_ops/generate.py``.

The op table (``table.py``, ``OPS``) says which ops are ``tb.*`` functions (``f``), Tensor methods
(``m``) and which have an in-place form ``Tensor.<name>_`` (``i``). This script turns it into
ordinary Python definitions, committed, so that grep and an editor find every one of them:

* ``generated.py``, ``class TableMethods``: ``add = E.add`` for each method (the op itself is
  the method, so ``t.add(u)`` costs what ``tb.add(t, u)`` costs) and ``log_ =
  _inplace_form("log_", E.log)`` for each in-place form; ``tensorbrain.tensor.Tensor`` inherits it;
* ``functions.py``, the ``tb.*`` functions, ``add = E.add``, which ``tensorbrain/__init__.py``
  star-imports.

The table is read with ``ast`` and the script imports nothing of TensorBrain, so it runs even
when the file it replaces is stale or broken (``python -m tensorbrain._ops.generate`` works too,
but imports the package first). ``--check`` exits 1 when the committed file differs from what the
table gives; ``tests/test_tensor.py::test_generated_table_methods_are_current`` does the same in
CI. After adding an op to ``OPS`` (or merging a branch that did), run the script and commit the
table and both files.
"""
from __future__ import annotations

import ast
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
TABLE = HERE / "table.py"
OUTPUTS = {"methods": HERE / "generated.py", "functions": HERE / "functions.py"}

_GENERATED = """GENERATED from ``tensorbrain/_ops/table.py`` by ``python tensorbrain/_ops/generate.py``: do not
edit by hand. Add or change an entry of ``OPS`` in ``table.py``, then rerun the generator;
``tests/test_tensor.py::test_generated_table_methods_are_current`` fails while this file is stale.
"""
_HEADERS = {
    "methods": '''"""The op table's Tensor methods, as ordinary definitions.

''' + _GENERATED + '''
``TableMethods`` is a base class of ``tensorbrain.tensor.Tensor``: a table method is the op
itself (the tensor is its first argument), an in-place form (``log_ = _inplace_form("log_",
E.log)``) runs the op through ``TensorBase._inplace``.
"""
from __future__ import annotations

''',
    "functions": '''"""The op table's ``tb.*`` functions, as ordinary definitions (``tb.add`` is ``add`` here).

''' + _GENERATED + '''
``tensorbrain/__init__.py`` star-imports this module (``__all__``).
"""
from __future__ import annotations

''',
}

_MAKER = '''

def _inplace_form(name: str, op):
    """The in-place method ``name`` (``log_``) of ``op`` (``E.log``): ``self`` becomes
    ``op(self, ...)``, through ``TensorBase._inplace`` (autograd's version check included)."""
    def method(self, *args, **kwargs):
        return self._inplace(name, lambda s: op(s, *args, **kwargs), *args, *kwargs.values())
    base = name[:-1]
    method.__name__, method.__qualname__ = name, f"TableMethods.{name}"
    method.__doc__ = f"""In-place ``{base}`` (``torch.Tensor.{name}``): ``self`` becomes
    ``self.{base}(...)``.

    Args:
        *args: ``{base}``'s arguments after the tensor.
        **kwargs: ``{base}``'s keyword arguments.

    Returns:
        Tensor: self (``RuntimeError`` for an in-place write autograd cannot allow).
    """
    return method


'''


def read_table(path: pathlib.Path = TABLE) -> tuple[list[str], list[tuple[str, str, str, str]]]:
    """``(import lines, entries)`` of the op table; an entry is ``(name, op reference, where,
    section)``, the reference as written (``E.add``), the section the banner comment above it.

    Args:
        path: the table module.

    Raises:
        ValueError: an entry that is not ``"name": (Module.attr, "where")``.
    """
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    imports = [ast.get_source_segment(source, node) or "" for node in tree.body
               if isinstance(node, ast.ImportFrom) and node.module != "__future__"]
    table = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "OPS" for t in node.targets))
    if not isinstance(table, ast.Dict):
        raise ValueError("table.OPS must be a dict literal")
    banners = {i + 1: m.group(1) for i, line in enumerate(lines)
               for m in [re.match(r"\s*# \*+ (.+?) \*+", line)] if m}
    entries = []
    for key, value in zip(table.keys, table.values):
        ok = isinstance(key, ast.Constant) and isinstance(value, ast.Tuple) and \
            len(value.elts) == 2 and isinstance(value.elts[0], ast.Attribute) and \
            isinstance(value.elts[1], ast.Constant)
        if not ok:
            raise ValueError(f"table.py line {getattr(key, 'lineno', '?')}: an entry must be "
                             '"name": (module.op, "where")')
        assert isinstance(key, ast.Constant) and isinstance(value, ast.Tuple)
        section = max((n for n in banners if n <= key.lineno), default=None)
        entries.append((str(key.value), ast.unparse(value.elts[0]),
                        str(value.elts[1].value),  # type: ignore[attr-defined]
                        banners[section] if section else "ops"))
    return imports, entries


def render(path: pathlib.Path = TABLE) -> dict[str, str]:
    """``{"methods": text of generated.py, "functions": text of functions.py}`` for the table.

    Args:
        path: the table module.
    """
    imports, entries = read_table(path)
    used = {ref.split(".")[0] for _, ref, where, _ in entries if "m" in where or "i" in where}
    methods = [_HEADERS["methods"], "\n".join(_used(imports, used)), "\n", _MAKER,
               "class TableMethods:\n",
               '    """The op table\'s Tensor methods (see the module docstring).\n\n',
               "    Requires, from ``TensorBase``: ``_inplace(name, result_fn, *others)``.\n",
               '    """\n\n    __slots__ = ()\n']
    section = None
    for name, ref, where, sec in entries:
        if "m" not in where:
            continue
        if sec != section:
            methods.append(f"\n    # ***** {sec} *****\n")
            section = sec
        methods.append(f"    {name} = {ref}\n")
    methods.append("\n    # ***** in-place forms *****\n")
    methods.extend(f'    {name}_ = _inplace_form("{name}_", {ref})\n'
                   for name, ref, where, _ in entries if "i" in where)
    functions = [(n, ref) for n, ref, where, _ in entries if "f" in where]
    used = {ref.split(".")[0] for _, ref in functions}
    text = [_HEADERS["functions"], "\n".join(_used(imports, used)), "\n\n",
            _wrap_list("__all__ = [" + ", ".join(f'"{n}"' for n, _ in functions) + "]\n"),
            "\n"]
    text.extend(f"{name} = {ref}\n" for name, ref in functions)
    return {"methods": "".join(methods), "functions": "".join(text)}


def _used(imports: list[str], aliases: set[str]) -> list[str]:
    """The import lines (``from . import x as X``) that bind one of ``aliases``."""
    return [line for line in imports if line.rsplit(" ", 1)[-1] in aliases]


def _wrap_list(line: str, width: int = 100) -> str:
    """``__all__ = [...]`` broken into lines of at most ``width`` characters."""
    head, items = line.split("[", 1)
    names = items.rstrip("]\n").split(", ")
    rows, row = [], head + "["
    for i, n in enumerate(names):
        piece = n + ("," if i < len(names) - 1 else "]")
        if len(row) + len(piece) + 1 > width:
            rows.append(row.rstrip())
            row = "           " + piece + " "
        else:
            row += piece + " "
    rows.append(row.rstrip())
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the generated files (or, with ``--check``, report whether they are current).

    Args:
        argv: the command-line arguments; None for ``sys.argv[1:]``.

    Returns:
        int: the exit status (1: ``--check`` found a file stale).
    """
    args = sys.argv[1:] if argv is None else argv
    stale = 0
    for kind, text in render().items():
        out = OUTPUTS[kind]
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if text == current:
            continue
        if "--check" in args:
            print(f"{out} is stale: run python tensorbrain/_ops/generate.py")
            stale = 1
        else:
            out.write_text(text, encoding="utf-8")
            print(f"wrote {out}")
    return stale


if __name__ == "__main__":
    sys.exit(main())
