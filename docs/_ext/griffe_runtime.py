"""A griffe extension for the docs site: the API reference shows what users reach at run time.

griffe reads the source without importing it, which misses most of TensorBrain's surface:

* ``tb.add``, ``tb.sum``, ... and ``Tensor.add``, ``Tensor.sum`` are the op table's functions
  bound to other names (``add = E.add`` in the generated ``tensorbrain/_ops/generated.py`` and
  ``functions.py``), ``Tensor``'s methods are spread over its base classes (``TensorBase``,
  ``TableMethods``, ``Adapters``, ``LegacyMethods``), ``tb.zeros_like`` is made by a factory,
  and the op table's docstrings are set at import (``_ops/docs_math.py``, ``docs_shape.py``);
* re-exports griffe cannot follow: a name given by a module ``__getattr__``
  (``tb.nn.DataParallel``, ``DistributedSampler``), a function named like its submodule
  (``tb.nn.parallel.replicate``), a ``*`` list in ``__all__`` (``tb.nn``'s modules);
* ``tensorbrain`` itself has no ``__all__``, so griffe counts its imports as private.

This extension imports each module of the API reference (the ``api/`` pages of mkdocs.yml) and
makes griffe's module agree with it: every public function or class the module exports
(``__all__``, or for ``tensorbrain`` its public names) is shown, from the source when griffe
can follow it there, else as a function built from the live object's signature and docstring.
The Tensor class gets the methods of its bases. A static function whose docstring is
set at import gets that docstring. A function named like a submodule of its package
(``tb.tensor``, ``tb.nn.parallel.replicate``) cannot be shown beside it: the submodule keeps
the name. The source files are not changed.
"""
import importlib
import inspect
import pathlib
import re
import sys

import griffe

_HERE = pathlib.Path(__file__).resolve().parent
ROOT = _HERE.parents[1]
sys.path.insert(0, str(_HERE))
from griffe_doctests import _rewrite, strip_roles  # noqa: E402  (what DoctestExamples does)

_KINDS = {inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
          inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
          inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
          inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
          inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword}


def api_modules():
    """The modules of mkdocs.yml's API reference pages."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return re.findall(r"^\s*- (tensorbrain[\w.]*): api/", text, re.M)


def _ours(obj):
    return ((inspect.isfunction(obj) or inspect.isclass(obj))
            and (getattr(obj, "__module__", None) or "").startswith("tensorbrain"))


def _exported(module, name):
    """The names a module's page shows: ``__all__``, else its public functions and classes."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if n[0] != "_" and _ours(getattr(module, n))]
    return [n for n in names if _ours(getattr(module, n, None))]


class RuntimeMembers(griffe.Extension):
    """Adds and unhides what the API reference's modules export at run time (see above)."""

    def on_package(self, *, pkg, loader, **kwargs):  # noqa: ARG002 (griffe's hook signature)
        if pkg.name != "tensorbrain":
            return
        sys.path.insert(0, str(ROOT))
        self.parser = pkg.docstring.parser if pkg.docstring else griffe.Parser.google
        self.options = pkg.docstring.parser_options if pkg.docstring else {}
        self.hidden = []
        for mname in api_modules():
            module = importlib.import_module(mname)
            gmod = pkg if mname == "tensorbrain" else pkg.get_member(mname.split(".", 1)[1])
            for name in _exported(module, mname):
                self._show(gmod, name, getattr(module, name))
        self._tensor_methods(pkg)

    # ***** one exported name *****
    def _show(self, gmod, name, obj):
        member = gmod.members.get(name)
        if member is not None and not member.is_alias and member.is_module:
            # a function named like its submodule (``tb.tensor``, ``nn.parallel.replicate``):
            # the submodule keeps the name, or every path through it would break
            self.hidden.append(f"{gmod.path}.{name}")
            return
        target = self._target(member)
        if target is not None and target.kind.value in ("function", "class"):
            if member.is_alias:
                member.public = True
            self._fill_docstring(target, obj)
            return
        if inspect.isfunction(obj):   # made at import (zeros_like), or unresolvable
            func = self._function(name, obj, gmod)
            func.public = True         # the module imports the name: griffe would hide it
            gmod.set_member(name, func)
        else:                          # a class griffe cannot follow: point at its definition
            alias = griffe.Alias(name, f"{obj.__module__}.{obj.__qualname__}", parent=gmod)
            alias.public = True
            gmod.set_member(name, alias)

    @staticmethod
    def _target(member):
        if member is None or not member.is_alias:
            return member
        try:
            return member.final_target
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None

    def _fill_docstring(self, target, obj):
        """A static function whose docstring is set at import (the op table's), or completed at
        import (the collectives' shared Args, ``distributed/_collectives.py``), gets it."""
        doc = inspect.getdoc(obj)
        if not doc or target.kind.value != "function":
            return
        static = target.docstring.value.rstrip() if target.docstring is not None else None
        if static is None or any(d != static and d.startswith(static)
                                 for d in (doc, strip_roles(doc))):
            target.docstring = self._docstring(doc, target)

    def _docstring(self, text, parent):
        text = strip_roles(_rewrite(text) if ">>>" in text else text)
        return griffe.Docstring(text, parent=parent, parser=self.parser,
                                parser_options=self.options)

    def _function(self, name, fn, parent, as_method=False):
        """A griffe Function from a live function: its signature and docstring. As a method, an
        op's first parameter (the tensor) becomes ``self`` and leaves the Args section."""
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            params = []
        doc = inspect.getdoc(fn) or ""
        if as_method and params and params[0].name != "self":
            first = params[0].name
            doc = re.sub(rf"^    {re.escape(first)}: .*\n(?:^        .*\n)*", "", doc, count=1,
                         flags=re.M)
            params[0] = params[0].replace(name="self")
        parameters = griffe.Parameters(*[
            griffe.Parameter(p.name, kind=_KINDS[p.kind],
                             default=None if p.default is p.empty else repr(p.default))
            for p in params])
        func = griffe.Function(name, parameters=parameters, parent=parent)
        if doc:
            func.docstring = self._docstring(doc, func)
        return func

    # ***** the Tensor class *****
    def _tensor_methods(self, pkg):
        """The methods Tensor inherits from its bases (TensorBase, the op table's TableMethods,
        Adapters, LegacyMethods), shown on its page as its own."""
        from tensorbrain import Tensor
        gcls = pkg.get_member("tensor.Tensor")
        for name in dir(Tensor):
            if name[0] == "_" or name in gcls.members:
                continue
            value = inspect.getattr_static(Tensor, name)
            if isinstance(value, property):
                attr = griffe.Attribute(name, parent=gcls)
                attr.labels.add("property")
                if value.__doc__:
                    attr.docstring = self._docstring(inspect.cleandoc(value.__doc__), attr)
                gcls.set_member(name, attr)
            elif inspect.isfunction(value):
                gcls.set_member(name, self._function(name, value, gcls, as_method=True))
