"""``tb.fx.proxy`` (``torch.fx.proxy``): :class:`Proxy`, the stand-in value a traced program
computes with, and the tracer base that turns each use of one into a graph node.

Operators (``x + 1``, ``x[0]``, ``-x``), attribute reads (``x.shape``) and method calls
(``x.view(-1)``) on a Proxy record nodes; using one as a truth value (``if x.sum() > 0``) raises
:class:`TraceError`, as in torch: symbolic tracing sees one path through the program.
"""
from __future__ import annotations

import builtins
import dis
import inspect
import operator
from typing import Any
from collections.abc import Callable

import numpy as np

from .graph import Graph
from .node import Argument, Node, Target, map_aggregate


class TraceError(ValueError):
    """A program cannot be traced symbolically (control flow on a traced value...)."""


#: Constants a node argument may hold as they are.
_BASE_TYPES = (str, int, float, bool, complex, type(None), type(Ellipsis), range, np.dtype)


class TracerBase:
    """What makes nodes from traced operations: :meth:`create_proxy` and :meth:`create_arg`.

    Attributes:
        graph: the graph nodes are added to.
    """

    graph: Graph

    def create_node(self, kind: str, target: Target, args: tuple, kwargs: dict,
                    name: str | None = None, type_expr: Any = None) -> Node:
        """Add a node to :attr:`graph` (subclasses may annotate it).

        Args:
            kind: the node kind.
            target: what it calls or reads.
            args: positional arguments (already made graph arguments).
            kwargs: keyword arguments.
            name: the name to start from.
            type_expr: an annotation.
        """
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node: Node) -> Proxy:
        """The Proxy that stands for ``node``'s value."""
        return Proxy(node, self)

    def create_proxy(self, kind: str, target: Target, args: tuple, kwargs: dict,
                     name: str | None = None, type_expr: Any = None,
                     proxy_factory_fn: Callable[[Node], Proxy] | None = None) -> Proxy:
        """Record an operation and return the Proxy of its result.

        Args:
            kind: the node kind.
            target: what it calls or reads.
            args: positional arguments (Proxies, tensors, constants).
            kwargs: keyword arguments.
            name: the name to start from.
            type_expr: an annotation.
            proxy_factory_fn: makes the Proxy instead of :meth:`proxy`.
        """
        node = self.create_node(kind, target, self.create_arg(tuple(args)),
                                self.create_arg(dict(kwargs)), name, type_expr)
        return proxy_factory_fn(node) if proxy_factory_fn is not None else self.proxy(node)

    def create_arg(self, a: Any) -> Argument:
        """Turn a traced value into a graph argument (a Proxy becomes its Node).

        Args:
            a: the value.

        Raises:
            NotImplementedError: a value that cannot be a graph argument.
        """
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, (tuple, list, dict, slice)):
            return map_aggregate(a, lambda x: x if isinstance(x, (tuple, list, dict, slice))
                                 else self.create_arg(x))
        if isinstance(a, Node) or isinstance(a, _BASE_TYPES):
            return a
        import tensorbrain
        if isinstance(a, (tensorbrain.device, tensorbrain.Size)) or callable(a) and \
                not isinstance(a, tensorbrain.Tensor):
            return a
        raise NotImplementedError(f"argument of type: {type(a)}")

    def to_bool(self, obj: Proxy) -> bool:
        """A Proxy used as a truth value: control flow cannot be traced."""
        raise TraceError("symbolically traced variables cannot be used as inputs to control "
                         "flow")

    def iter(self, obj: Proxy):
        """A Proxy iterated over (other than ``a, b = proxy``): its length is unknown."""
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the "
                         "Proxy is used in a loop or as a *args or **kwargs function argument. "
                         "See the torch.fx docs on pytorch.org for a more detailed "
                         "explanation of what types of control flow can be traced, and check "
                         "out the Proxy docstring for help troubleshooting Proxy iteration "
                         "errors")

    def keys(self, obj: Proxy):
        """``**proxy``: records ``proxy.keys()``."""
        return Attribute(obj, "keys")()


class GraphAppendingTracer(TracerBase):
    """A tracer that only appends to ``graph``: for building a graph from Proxies by hand.

    Args:
        graph: the graph to append to.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.scope = None
        self.module_stack: dict = {}
        self.node_name_to_scope: dict = {}


class Proxy:
    """A value of a traced program: each use of it records a node (torch's ``fx.Proxy``).

    Args:
        node: the node whose value this stands for.
        tracer: the tracer to record with (a :class:`GraphAppendingTracer` on the node's graph
            when None).

    Example:
        >>> import tensorbrain as tb
        >>> g = tb.fx.Graph()
        >>> x = tb.fx.Proxy(g.placeholder("x"))
        >>> y = (x + 1).relu()
        >>> _ = g.output(y.node)
        >>> [n.op for n in g.nodes]
        ['placeholder', 'call_function', 'call_method', 'output']
    """

    def __init__(self, node: Node, tracer: TracerBase | None = None) -> None:
        self.node = node
        self.tracer = tracer if tracer is not None else GraphAppendingTracer(node.graph)

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, k: str) -> Attribute:
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)   # copy/pickle protocol probes are not traced values
        return Attribute(self, k)

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self):
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        if caller is not None:
            for inst in dis.get_instructions(caller.f_code):
                if inst.offset >= caller.f_lasti:
                    if inst.opname == "UNPACK_SEQUENCE":
                        return (self[i] for i in range(inst.argval))
                    break
        return self.tracer.iter(self)

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __len__(self) -> int:
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want "
                           "this call to be recorded, please call torch.fx.wrap('len') at "
                           "module scope")

    def keys(self):
        """``**proxy`` records ``proxy.keys()``."""
        return self.tracer.keys(self)

    __hash__ = object.__hash__   # kept: the __eq__ set below records a node


class Attribute(Proxy):
    """``proxy.name``: a ``getattr`` node made on first use, or a method call when called."""

    def __init__(self, root: Proxy, attr: str) -> None:
        self.root, self.attr, self.tracer = root, attr, root.tracer
        self._node: Node | None = None

    @property
    def node(self) -> Node:   # type: ignore[override]
        """The ``getattr`` node, recorded the first time it is needed."""
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", builtins.getattr,
                                                  (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


# ***** operators: each records a call of the ``operator`` function *****
def _binary(fn: Callable, reflected: bool = False) -> Callable:
    if reflected:
        def method(self, other):
            return self.tracer.create_proxy("call_function", fn, (other, self), {})
    else:
        def method(self, other):
            return self.tracer.create_proxy("call_function", fn, (self, other), {})
    return method


def _unary(fn: Callable) -> Callable:
    def method(self):
        return self.tracer.create_proxy("call_function", fn, (self,), {})
    return method


_REFLECTABLE = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
                "floordiv": operator.floordiv, "truediv": operator.truediv,
                "mod": operator.mod, "pow": operator.pow, "lshift": operator.lshift,
                "rshift": operator.rshift, "and": operator.and_, "or": operator.or_,
                "xor": operator.xor, "matmul": operator.matmul}
_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "gt": operator.gt,
            "le": operator.le, "ge": operator.ge}
for _name, _fn in {**_REFLECTABLE, **_COMPARE, "getitem": operator.getitem}.items():
    setattr(Proxy, f"__{_name}__", _binary(_fn))
for _name, _fn in _REFLECTABLE.items():
    setattr(Proxy, f"__r{_name}__", _binary(_fn, reflected=True))
_UNARY: dict[str, Callable] = {"neg": operator.neg, "pos": operator.pos,
                               "invert": operator.invert, "abs": operator.abs}
for _uname, _ufn in _UNARY.items():
    setattr(Proxy, f"__{_uname}__", _unary(_ufn))


def _find_proxy(args: tuple, kwargs: dict) -> Proxy | None:
    """The first Proxy among (nested) arguments, or None."""
    found: list[Proxy] = []

    def look(x: Any) -> Any:
        if not found and isinstance(x, Proxy):
            found.append(x)
        return x
    map_aggregate((args, kwargs), look)
    return found[0] if found else None


__all__ = ["Attribute", "GraphAppendingTracer", "Proxy", "TraceError", "TracerBase"]
