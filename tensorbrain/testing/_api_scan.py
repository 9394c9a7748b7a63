"""Which torch names a body of Python code uses: the scanner behind ``api_coverage scan``.

It parses every ``.py`` file and the code cells of every ``.ipynb`` notebook with :mod:`ast`
(nothing is imported or run), resolves each file's ``import torch ... as`` aliases and
``from torch.x import y`` bindings, and records the torch names that each attribute chain
reaches: ``nn.Linear`` after ``import torch.nn as nn`` is ``torch.nn.Linear``,
``F.relu`` after ``from torch.nn import functional as F`` is ``torch.nn.functional.relu``. A
chain is resolved against the real torch (installed for the scan only): the walk goes through
modules (importing submodules as torch would) and stops at the first object that is not one,
so ``torch.cuda.amp.GradScaler(...).scale`` counts ``torch.cuda.amp.GradScaler``; a chain
through ``torch.Tensor`` also counts the method (``torch.Tensor.view``). Modules that are
imported count as names too (``torch.utils.tensorboard``): a missing one stops a program as
surely as a missing function.

Tensor methods are found by name, as nothing here knows types: an attribute ``x.name`` on
anything but an imported module, where ``name`` is a public attribute of ``torch.Tensor`` and
not one of the Python built-in types (``split``, ``index``, ``copy``, ``values``... are left
out as they mostly are str/list/dict calls) nor in :data:`NOT_TENSOR` (names whose other uses
dominate: ``logger.log`` is left in, ``path.rename`` is not). Counts are per repository (a name
used in 40 files of one repository counts once), so one large code base cannot outweigh the
others.

Tests are left out (a file named ``test_*.py``, ``*_test.py`` or ``conftest.py``, or under a
directory named ``test``/``tests``): they exercise a library's own internals, not what a
program calls.
"""
from __future__ import annotations

import ast
import importlib
import json
import os
import types

#: Attribute names that read as Tensor methods but, in real code, are mostly something else's.
NOT_TENSOR = frozenset({"rename", "resize", "put", "name", "names", "type"})

_BUILTIN_ATTRS = frozenset(n for t in (str, bytes, list, dict, set, tuple, int, float, complex)
                           for n in dir(t))
_SKIP_DIRS = {"test", "tests", ".git", "node_modules", "third_party", "3rdparty"}


def _is_test(path: str) -> bool:
    base = os.path.basename(path)
    return base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"


class Resolver:
    """Resolves dotted torch paths against the installed torch (cached)."""

    def __init__(self):
        import torch  # the real one: the scan needs it (the report does not)
        self.torch = torch
        self.tensor_attrs = frozenset(n for n in dir(torch.Tensor) if not n.startswith("_"))
        self.method_names = self.tensor_attrs - _BUILTIN_ATTRS - NOT_TENSOR
        self._cache: dict[str, tuple[str, ...]] = {}

    def resolve(self, chain: str) -> tuple[str, ...]:
        """The torch names a dotted chain starting at ``torch`` uses (empty when it is not one).

        Args:
            chain: e.g. ``"torch.nn.functional.relu"`` or ``"torch.Tensor.view"``.
        """
        if chain not in self._cache:
            self._cache[chain] = self._resolve(chain)
        return self._cache[chain]

    def _resolve(self, chain):
        parts = chain.split(".")
        if parts[0] != "torch":
            return ()
        obj: object = self.torch
        names = []
        for i, part in enumerate(parts[1:], start=1):
            path = ".".join(parts[:i + 1])
            if not isinstance(obj, types.ModuleType):
                if obj is self.torch.Tensor and part in self.tensor_attrs:
                    names.append(path)
                return tuple(names)
            try:
                nxt = getattr(obj, part)
            except AttributeError:
                nxt = None
            except Exception:   # a module attribute that raises on access: a name all the same
                return (*names, path)
            if nxt is None or isinstance(nxt, types.ModuleType):
                try:
                    nxt = importlib.import_module(path)
                except Exception:
                    if nxt is None:
                        return tuple(names)   # not a torch 2.13 name: not counted
            if isinstance(nxt, types.ModuleType):
                names = [path]   # the module itself is a name (an import of it must work)
            else:
                names.append(path)
            obj = nxt
        return tuple(names[-2:]) if len(names) > 1 else tuple(names)


def _notebook_source(text: str) -> str:
    cells = json.loads(text).get("cells", [])
    lines = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        for line in src.splitlines():   # shell escapes and magics are not Python
            lines.append("" if line.lstrip().startswith(("!", "%")) else line)
        lines.append("")
    return "\n".join(lines)


def _chain(node):
    """``a.b.c`` as ``["a", "b", "c"]`` when it is a pure name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


class _FileScan(ast.NodeVisitor):
    def __init__(self, resolver: Resolver):
        self.r = resolver
        self.aliases: dict[str, str] = {}   # local name -> dotted torch path
        self.imported: set[str] = set()     # names bound by an import of anything
        self.used: set[str] = set()

    def _use(self, chain: str):
        self.used.update(self.r.resolve(chain))

    def visit_Import(self, node):
        for a in node.names:
            top = a.name.split(".")[0]
            self.imported.add(a.asname or top)
            if top == "torch":
                self._use(a.name)
                if a.asname:
                    self.aliases[a.asname] = a.name
                else:
                    self.aliases["torch"] = "torch"

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        for a in node.names:
            self.imported.add(a.asname or a.name)
        if node.level or mod.split(".")[0] != "torch":
            return
        self._use(mod)
        for a in node.names:
            if a.name == "*":
                continue
            full = f"{mod}.{a.name}"
            self._use(full)
            self.aliases[a.asname or a.name] = full

    def visit_Attribute(self, node):
        parts = _chain(node)
        if parts is not None and parts[0] in self.aliases:
            self._use(".".join([self.aliases[parts[0]], *parts[1:]]))
            return   # the whole chain is done; its inner attributes are parts of it
        if parts is not None and parts[0] in self.imported:
            return   # os.path.split, re.sub, np.sum: a module's function, not a Tensor method
        if node.attr in self.r.method_names:
            self.used.add("torch.Tensor." + node.attr)
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.aliases and isinstance(node.ctx, ast.Load):
            self._use(self.aliases[node.id])


def scan_source(source: str, resolver: Resolver) -> set[str]:
    """The torch names one file's source uses (empty when it does not import torch or does not
    parse).

    Args:
        source: Python source.
        resolver: the :class:`Resolver`.
    """
    if "torch" not in source:
        return set()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    scan = _FileScan(resolver)
    scan.visit(tree)
    if not scan.aliases:   # no torch import: its attribute names say nothing about torch
        return set()
    return scan.used


def scan_tree(root: str, resolver: Resolver) -> tuple[set[str], int]:
    """The torch names used by the files under ``root``, and how many files were read.

    Args:
        root: a directory (a checkout or an unpacked snapshot).
        resolver: the :class:`Resolver`.
    """
    used: set[str] = set()
    files = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for fn in sorted(filenames):
            path = os.path.join(dirpath, fn)
            if not fn.endswith((".py", ".ipynb")) or _is_test(path):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                if fn.endswith(".ipynb"):
                    text = _notebook_source(text)
            except (OSError, ValueError):
                continue
            files += 1
            used |= scan_source(text, resolver)
    return used, files


__all__ = ["NOT_TENSOR", "Resolver", "scan_source", "scan_tree"]
