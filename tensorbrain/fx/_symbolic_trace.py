"""``tb.fx.symbolic_trace`` and :class:`Tracer`: run a module's ``forward`` once on
:class:`~tensorbrain.fx.Proxy` values and record what it does as a graph.

torch intercepts calls like ``torch.relu(proxy)`` with ``__torch_function__``; TensorBrain has
no such dispatch, so for the length of a trace the :class:`_Patcher` swaps in recording
versions of the public functions of ``tb``, ``tb.nn.functional``, ``tb.linalg``, ``tb.fft`` and
``tb.special`` (and of those names and ``math``'s bound in the traced code's globals, and of
the functions given to :func:`wrap`), of ``Module.__call__`` (sub-modules become
``call_module`` nodes or are traced through) and ``Module.__getattr__`` (parameters and buffers
become ``get_attr`` nodes), and makes ``Tensor``'s operators step aside for a Proxy operand.
A recording function calls the real one unless a Proxy is among its arguments; everything is
restored when the trace ends, so ops run at full speed outside tracing.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import math
import types
from typing import Any
from collections.abc import Callable

from ._names import _NAMESPACES, _public_table, public_name  # noqa: F401
from .graph import Graph
from .graph_module import GraphModule
from .node import Argument
from .proxy import _REFLECTABLE, _COMPARE, Proxy, TraceError, TracerBase, _find_proxy

_wrapped_globals: dict[tuple[int, str], dict] = {}
_is_fx_tracing_flag = False


def is_fx_tracing() -> bool:
    """Whether a symbolic trace is running (torch's ``fx._symbolic_trace.is_fx_tracing``)."""
    return _is_fx_tracing_flag


def wrap(fn_or_name: str | Callable) -> str | Callable:
    """Record calls of a module-level function as one ``call_function`` node instead of
    tracing through it (torch's ``fx.wrap``): call it at the top level of the module that
    defines or imports the function, with the function or its name.

    Args:
        fn_or_name: the function, or its name in the caller's globals (``"len"`` works too).

    Returns:
        ``fn_or_name``, so it can be used as a decorator.

    Raises:
        NotImplementedError: called inside a function rather than at module level.
    """
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    if caller is None or caller.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    name = fn_or_name if isinstance(fn_or_name, str) else getattr(fn_or_name, "__name__", None)
    if not isinstance(name, str) or name == "<lambda>":
        raise NotImplementedError("wrap must be given a function with a name, or the name of "
                                  "one (not a lambda)")
    _wrapped_globals[(id(caller.f_globals), name)] = caller.f_globals
    return fn_or_name


def _recording(orig: Callable) -> Callable:
    """``orig``, recorded as a ``call_function`` node when a Proxy is among its arguments."""
    if getattr(orig, "__fx_orig__", None) is not None:
        return orig

    @functools.wraps(orig)
    def recording(*args, **kwargs):
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            return proxy.tracer.create_proxy("call_function", orig, args, kwargs)
        return orig(*args, **kwargs)
    recording.__fx_orig__ = orig  # type: ignore[attr-defined]
    return recording


def _yield_to_proxy(orig: Callable) -> Callable:
    """A Tensor operator that returns NotImplemented for a Proxy operand, so Python asks the
    Proxy's reflected operator (``tensor + proxy`` records ``operator.add``)."""
    def op(self, other, *rest):
        return NotImplemented if isinstance(other, Proxy) else orig(self, other, *rest)
    return op


class _Patcher:
    """Attribute and dict-entry swaps undone in reverse order on exit."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setattr(self, obj: Any, name: str, value: Any) -> None:
        had = name in vars(obj)
        old = vars(obj).get(name)
        setattr(obj, name, value)
        self._undo.append(lambda: setattr(obj, name, old) if had else delattr(obj, name))

    def setitem(self, d: dict, name: str, value: Any) -> None:
        had, old = name in d, d.get(name)

        def undo() -> None:
            if had:
                d[name] = old
            else:
                d.pop(name, None)
        d[name] = value
        self._undo.append(undo)

    def patch_globals(self, g: dict, ids: dict[int, Callable]) -> None:
        """Record the functions of ``ids`` where ``g`` binds them by name."""
        for name, value in list(g.items()):
            if id(value) in ids and ids[id(value)] is value:
                self.setitem(g, name, _recording(value))

    def __enter__(self) -> _Patcher:
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._undo:
            self._undo.pop()()


class Tracer(TracerBase):
    """Records a module's ``forward`` (or a function) as a :class:`~tensorbrain.fx.Graph`
    (torch's ``fx.Tracer``). Subclass it and override :meth:`is_leaf_module` to choose which
    sub-modules stay ``call_module`` nodes, or :meth:`create_node` / :meth:`create_proxy` to
    annotate nodes.

    Args:
        autowrap_modules: modules whose functions, bound by name in the traced code's globals,
            are recorded as calls (``math`` by default: ``sqrt(proxy)``).
        autowrap_functions: functions recorded as calls in the same way.
        param_shapes_constant: read parameters' ``shape`` / ``size()`` as constants.

    Attributes:
        root: the module traced (an empty Module when a function is traced).
        graph: the graph being built.
    """

    def __init__(self, autowrap_modules: tuple = (math,), autowrap_functions: tuple = (),
                 param_shapes_constant: bool = False) -> None:
        self._autowrap_ids: dict[int, Callable] = {
            id(v): v for m in autowrap_modules for k, v in vars(m).items()
            if not k.startswith("_") and callable(v)}
        self._autowrap_ids.update((id(f), f) for f in autowrap_functions)
        self.param_shapes_constant = param_shapes_constant
        self.scope = None
        self.module_stack: dict = {}
        self.node_name_to_scope: dict = {}

    # ***** what becomes a node *****
    def is_leaf_module(self, m: Any, module_qualified_name: str) -> bool:
        """Whether ``m`` is recorded as one ``call_module`` node (TensorBrain's and torch's own
        layers, except ``Sequential``) instead of traced through.

        Args:
            m: the module called.
            module_qualified_name: its path in the root module.
        """
        from ..nn import Sequential
        mod = type(m).__module__
        return (mod.startswith("tensorbrain.nn") or mod.startswith("torch.nn")) and \
            not isinstance(m, Sequential)

    def path_of_module(self, mod: Any) -> str:
        """The dotted path of ``mod`` in the root module.

        Raises:
            NameError: ``mod`` is not a sub-module of the root.
        """
        path = self._module_paths.get(id(mod))
        if path is None:
            raise NameError("module is not installed as a submodule")
        return path

    def call_module(self, m: Any, forward: Callable, args: tuple, kwargs: dict) -> Any:
        """A sub-module called during the trace: a ``call_module`` node for a leaf, else
        its ``forward`` traced through.

        Args:
            m: the module.
            forward: calls it for real (used when tracing through).
            args: positional arguments.
            kwargs: keyword arguments.
        """
        path = self.path_of_module(m)
        if not self.is_leaf_module(m, path):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", path, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict) -> Any:
        """A module attribute read during the trace: a parameter or buffer of the root
        becomes a ``get_attr`` Proxy (one per attribute), anything else is itself.

        Args:
            attr: the attribute name.
            attr_val: its value.
            parameter_proxy_cache: path -> Proxy, shared over the trace.
        """
        path = self._tensor_paths.get(id(attr_val))
        if path is None:
            return attr_val
        if path not in parameter_proxy_cache:
            parameter_proxy_cache[path] = self.create_proxy("get_attr", path, (), {})
        return parameter_proxy_cache[path]

    def create_arg(self, a: Any) -> Argument:
        """As :meth:`TracerBase.create_arg`; a parameter, buffer or sub-module of the root
        becomes a ``get_attr`` node, another tensor a constant attribute of the root
        (``_tensor_constant0``...).

        Args:
            a: the value.
        """
        import tensorbrain
        if isinstance(a, tensorbrain.Tensor):
            path = self._tensor_paths.get(id(a))
            if path is None:
                path = f"_tensor_constant{self._n_constants}"
                self._n_constants += 1
                self.root.__dict__[path] = a
                self._tensor_paths[id(a)] = path
            return self.create_node("get_attr", path, (), {})
        if isinstance(a, tensorbrain.nn.Module):
            path = self._module_paths.get(id(a))
            if path is None:
                raise NotImplementedError(f"argument of type: {type(a)} (a module that is not "
                                          f"a sub-module of the traced one)")
            return self.create_node("get_attr", path, (), {})
        return super().create_arg(a)

    # ***** the trace *****
    def trace(self, root: Any, concrete_args: dict[str, Any] | None = None) -> Graph:
        """Run ``root`` once on Proxies and return the graph of what it did.

        Args:
            root: a Module (its ``forward`` is traced) or a function.
            concrete_args: argument values to specialise on instead of making inputs (they
                stay parameters of the generated ``forward``, with this value as default).

        Returns:
            The graph (``self.graph``); ``self.root`` holds the module it refers to.

        Raises:
            TraceError: the program uses a traced value for control flow, ``len``...
        """
        global _is_fx_tracing_flag
        import tensorbrain
        from ..nn import Module
        if isinstance(root, Module):
            self.root, fn = root, root.forward
        elif callable(root):
            self.root, fn = Module(), root
        else:
            raise TypeError(f"symbolic_trace expects a Module or a function, got "
                            f"{type(root).__name__}")
        self.graph = Graph(tracer_cls=type(self))
        self._module_paths = {id(m): n for n, m in self.root.named_modules()}
        self._tensor_paths = {id(t): n for n, t in self.root.named_parameters()}
        for n, t in self.root.named_buffers():
            self._tensor_paths.setdefault(id(t), n)
        self._n_constants = 0
        self._holds = [m for m in self.root.modules()]   # keep ids valid for the trace
        args = self._placeholders(fn, concrete_args or {})
        was_tracing, _is_fx_tracing_flag = _is_fx_tracing_flag, True
        try:
            with _Patcher() as patcher:
                self._patch(patcher, fn)
                result = fn(*args[0], **args[1])
                self.create_node("output", "output", (self.create_arg(result),), {},
                                 type_expr=getattr(fn, "__annotations__", {}).get("return"))
        finally:
            _is_fx_tracing_flag = was_tracing
        del tensorbrain
        return self.graph

    def _placeholders(self, fn: Callable, concrete: dict) -> tuple[list, dict]:
        args: list = []
        kwargs: dict = {}
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError(f"symbolic_trace: *args / **kwargs parameters ('{p.name}') "
                                 f"are not supported; give the inputs as named parameters")
            if p.name in concrete:
                self.graph.placeholder(p.name, default_value=concrete[p.name])
                value = concrete[p.name]
            else:
                default = inspect.Signature.empty if p.default is p.empty else p.default
                value = self.proxy(self.graph.placeholder(
                    p.name, p.annotation if p.annotation is not p.empty else None,
                    default_value=default))
            if p.kind is p.KEYWORD_ONLY:
                kwargs[p.name] = value
            else:
                args.append(value)
        return args, kwargs

    def _patch(self, patcher: _Patcher, fn: Callable) -> None:
        import importlib

        import tensorbrain
        from ..nn import Module
        table = {k: v for k, (_, v) in _public_table().items()}
        for module, _ in _NAMESPACES:
            ns = importlib.import_module(module)
            for name, value in list(vars(ns).items()):
                if id(value) in table and table[id(value)] is value:
                    patcher.setattr(ns, name, _recording(value))
        ids = {**table, **self._autowrap_ids}
        patcher.patch_globals(getattr(fn, "__globals__", {}), ids)
        for (_, name), g in _wrapped_globals.items():
            orig = g.get(name, getattr(builtins, name, None))
            if orig is not None:
                patcher.setitem(g, name, _recording(orig))
        for op in (*_REFLECTABLE, *_COMPARE):
            for name in (f"__{op}__", f"__r{op}__"):
                if name in vars(tensorbrain.Tensor):
                    patcher.setattr(tensorbrain.Tensor, name,
                                    _yield_to_proxy(vars(tensorbrain.Tensor)[name]))
        orig_call, orig_getattr = Module.__call__, Module.__getattr__
        tracer, patched_globals = self, {id(getattr(fn, "__globals__", None))}
        cache: dict[str, Proxy] = {}

        def module_call(mod, *args, **kwargs):
            g = getattr(getattr(mod, "forward", None), "__globals__", None)
            if g is not None and id(g) not in patched_globals:
                patched_globals.add(id(g))
                patcher.patch_globals(g, ids)
            return tracer.call_module(mod, lambda *a, **k: orig_call(mod, *a, **k),
                                      args, kwargs)

        def module_getattr(mod, attr):
            return tracer.getattr(attr, orig_getattr(mod, attr), cache)
        patcher.setattr(Module, "__call__", module_call)
        patcher.setattr(Module, "__getattr__", module_getattr)


def symbolic_trace(root: Any, concrete_args: dict[str, Any] | None = None):
    """Trace ``root`` into a :class:`~tensorbrain.fx.GraphModule` (torch's
    ``fx.symbolic_trace``): calling the result computes what ``root`` does, for inputs that
    take the same path through its Python control flow.

    Args:
        root: a Module or a function.
        concrete_args: argument values to specialise on (see :meth:`Tracer.trace`).

    Returns:
        A GraphModule with ``.graph`` and ``.code``.

    Raises:
        TraceError: ``root`` branches on a traced value, calls ``len`` on one...

    Example:
        >>> import tensorbrain as tb
        >>> class Net(tb.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = tb.nn.Linear(4, 2)
        ...     def forward(self, x):
        ...         return tb.relu(self.fc(x)) + 1
        >>> gm = tb.fx.symbolic_trace(Net())
        >>> [(n.op, n.name) for n in gm.graph.nodes]
        [('placeholder', 'x'), ('call_module', 'fc'), ('call_function', 'relu'), ('call_function', 'add'), ('output', 'output')]
        >>> print(gm.code.strip())
        def forward(self, x):
            fc = self.fc(x)
            relu = torch.relu(fc)
            add = relu + 1
            return add
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(tracer.root, type(root)) and \
        not isinstance(root, types.FunctionType) else getattr(root, "__name__", "GraphModule")
    return GraphModule(tracer.root, graph, name)


__all__ = ["Tracer", "is_fx_tracing", "public_name", "symbolic_trace", "wrap"]
