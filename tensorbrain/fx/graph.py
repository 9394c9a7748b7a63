"""``tb.fx.graph`` (``torch.fx.graph``): the :class:`Graph` of :class:`~tensorbrain.fx.Node` s
and :class:`CodeGen`, which turns it into the Python source of a ``forward``.

The nodes form a doubly linked list around a sentinel (inserting and erasing are O(1), and a
loop over ``graph.nodes`` may erase the node it is on), and names are made unique the way
torch's are (``relu``, ``relu_1``...), so the printed graph and code read like torch's.
"""
from __future__ import annotations

import builtins
import contextlib
import inspect
import keyword
import math
import operator
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Iterator

import numpy as np

from .node import Argument, Node, Target, _side_effectful_functions, map_arg

# ***** operators printed as Python expressions *****
_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**",
           operator.matmul: "@", operator.and_: "&", operator.or_: "|", operator.xor: "^",
           operator.lshift: "<<", operator.rshift: ">>", operator.lt: "<", operator.le: "<=",
           operator.gt: ">", operator.ge: ">=", operator.eq: "==", operator.ne: "!="}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}


class _Namespace:
    """Unique, legal Python names: ``relu``, ``relu_1``, ...; keywords and builtins avoided."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._count: dict[str, int] = defaultdict(int)

    def create_name(self, candidate: str) -> str:
        candidate = re.sub(r"[^0-9a-zA-Z_]+", "_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        m = re.match(r"(.*)_(\d+)$", candidate)
        base, num = (candidate, None) if m is None else (m.group(1), int(m.group(2)))
        name = base if num is None else f"{base}_{num}"
        n = num or self._count[base]
        while name in self._used or keyword.iskeyword(name) or name in builtins.__dict__ \
                or name in ("self", "torch"):
            n += 1
            name = f"{base}_{n}"
        self._used.add(name)
        self._count[base] = n
        return name

    def forget(self, name: str) -> None:
        self._used.discard(name)


def _snake_case(s: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s).lower()


def _target_to_str(target: Target) -> str:
    op = target.__name__ if callable(target) else str(target)
    if op.startswith("__") and op.endswith("__"):
        op = op[2:-2]
    return _snake_case(op)


@dataclass
class PythonCode:
    """The generated source and the globals it runs in (torch's ``PythonCode``).

    Attributes:
        src: the source of ``forward``.
        globals: the names the source refers to.
    """

    src: str
    globals: dict[str, Any]


class CodeGen:
    """Turns a graph into the source of a ``forward(self, ...)`` (torch's ``fx.graph.CodeGen``).

    Subclasses change the signature or the returned value through :meth:`gen_fn_def`,
    :meth:`generate_output` and :meth:`process_inputs` / :meth:`process_outputs`, as torch's.
    """

    def gen_fn_def(self, free_vars: list[str], maybe_return_annotation: str) -> str:
        """The ``def`` line.

        Args:
            free_vars: the parameters, ``self`` first.
            maybe_return_annotation: a ``" -> T"`` suffix or empty.
        """
        return f"def forward({', '.join(free_vars)}){maybe_return_annotation}:"

    def generate_output(self, output_args: Argument) -> str:
        """The ``return`` line.

        Args:
            output_args: the output node's argument, already formatted.
        """
        return f"return {output_args}"

    def process_inputs(self, *args: Any) -> Any:
        """Turn the caller's inputs into the placeholders' values (identity here)."""
        return args

    def process_outputs(self, outputs: Any) -> Any:
        """Turn the graph's output into what the caller gets (identity here)."""
        return outputs

    def _gen_python_code(self, nodes: list[Node], root_module: str) -> PythonCode:
        globals_: dict[str, Any] = {"torch": _torch_module(), "inf": math.inf, "nan": math.nan,
                                    "device": _torch_module().device}
        names: dict[int, str] = {}

        def add_global(hint: str, obj: Any) -> str:
            if id(obj) in names:
                return names[id(obj)]
            if getattr(builtins, hint, None) is obj:
                return hint
            name, i = hint, 0
            while name in globals_ and globals_[name] is not obj:
                i += 1
                name = f"{hint}_{i}"
            globals_[name] = obj
            names[id(obj)] = name
            return name

        def fmt(a: Argument) -> str:
            if isinstance(a, Node):
                return a.name
            if isinstance(a, tuple):
                inner = ", ".join(fmt(e) for e in a)
                if hasattr(a, "_fields"):
                    return f"{add_global(type(a).__name__, type(a))}({inner})"
                return f"({inner},)" if len(a) == 1 else f"({inner})"
            if isinstance(a, list):
                return "[" + ", ".join(fmt(e) for e in a) + "]"
            if isinstance(a, dict):
                return "{" + ", ".join(f"{k!r}: {fmt(v)}" for k, v in a.items()) + "}"
            if isinstance(a, slice):
                return f"slice({fmt(a.start)}, {fmt(a.stop)}, {fmt(a.step)})"
            if a is Ellipsis:
                return "..."
            if isinstance(a, float) and not math.isfinite(a):
                return f"float('{a}')"
            if a is None or isinstance(a, (bool, int, float, str, complex)):
                return repr(a)
            if isinstance(a, np.dtype) and hasattr(_torch_module(), str(a)):
                return f"torch.{a}"
            if isinstance(a, _torch_module().device):
                return f"device({str(a)!r})"
            return add_global(_snake_case(type(a).__name__), a)

        def call_args(args: tuple, kwargs: dict) -> str:
            parts = [fmt(a) for a in args] + [f"{k} = {fmt(v)}" for k, v in kwargs.items()]
            return ", ".join(parts)

        def attr_path(base: str, target: str) -> str:
            for e in target.split("."):
                base = f"{base}.{e}" if e.isidentifier() else f'getattr({base}, "{e}")'
            return base

        free_vars = [root_module]
        body: list[str] = []
        for node in nodes:
            if node.op == "placeholder":
                default = f" = {fmt(node.args[0])}" if node.args else ""
                free_vars.append(f"{node.target}{default}")
                if node.target.lstrip("*") != node.name:
                    body.append(f"{node.name} = {node.target.lstrip('*')}")
            elif node.op == "get_attr":
                body.append(f"{node.name} = {attr_path(root_module, node.target)}")
            elif node.op == "call_module":
                body.append(f"{node.name} = {attr_path(root_module, node.target)}"
                            f"({call_args(node.args, node.kwargs)})")
            elif node.op == "call_method":
                obj, *rest = node.args
                body.append(f"{node.name} = {fmt(obj)}.{node.target}"
                            f"({call_args(tuple(rest), node.kwargs)})")
            elif node.op == "call_function":
                body.append(f"{node.name} = {self._call_function(node, fmt, call_args, add_global)}")
            elif node.op == "output":
                body.append(self.generate_output(fmt(node.args[0])))
        if not body or not body[-1].startswith("return"):
            body.append("pass")
        src = self.gen_fn_def(free_vars, "") + "\n" + "".join(f"    {b}\n" for b in body)
        return PythonCode("\n\n\n" + src, globals_)

    @staticmethod
    def _call_function(node: Node, fmt, call_args, add_global) -> str:
        t: Any = node.target
        a = node.args
        if t in _BINARY and len(a) == 2 and not node.kwargs:
            return f"{fmt(a[0])} {_BINARY[t]} {fmt(a[1])}"
        if t in _UNARY and len(a) == 1 and not node.kwargs:
            return f"{_UNARY[t]}{fmt(a[0])}"
        if t is operator.getitem and len(a) == 2:
            return f"{fmt(a[0])}[{fmt(a[1])}]"
        if t is builtins.getattr and len(a) == 2 and isinstance(a[1], str) \
                and a[1].isidentifier():
            return f"{fmt(a[0])}.{a[1]}"
        from ._names import public_name
        name = public_name(t)
        if name is None:
            short: str = getattr(t, "__name__", "fn")
            mod: str = getattr(t, "__module__", None) or ""
            hint = short if getattr(builtins, short, None) is t or not mod else f"{mod}_{short}"
            name = add_global(re.sub(r"[^0-9a-zA-Z_]+", "_", hint).strip("_"), t)
        return f"{name}({call_args(a, node.kwargs)})"


def _torch_module() -> Any:
    import tensorbrain
    return tensorbrain



class _NodeList:
    """``graph.nodes``: iterable (forwards or ``reversed``) while nodes are erased or added."""

    def __init__(self, graph: Graph, direction: str = "_next") -> None:
        self._graph, self._dir = graph, direction

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        cur = getattr(root, self._dir)
        while cur is not root:
            nxt = getattr(cur, self._dir)
            if not cur._erased:
                yield cur
            cur = nxt

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._graph, "_prev" if self._dir == "_next" else "_next"))


class Graph:
    """A function as a list of :class:`~tensorbrain.fx.Node` s (torch's ``fx.Graph``).

    Build one by hand (``placeholder``, ``call_function``, ``call_module``, ``call_method``,
    ``get_attr``, ``output``) or get it from :func:`tensorbrain.fx.symbolic_trace`; edit it
    with ``inserting_before/after``, ``erase_node``, ``node.replace_all_uses_with``; run it
    inside a :class:`~tensorbrain.fx.GraphModule`.

    Args:
        owning_module: the GraphModule that holds the graph, if any.
        tracer_cls: the tracer class that made it (kept for torch's signature).
        tracer_extras: kept for torch's signature.

    Example:
        >>> import operator, tensorbrain as tb
        >>> g = tb.fx.Graph()
        >>> x = g.placeholder("x")
        >>> y = g.call_function(operator.add, (x, 1))
        >>> _ = g.output(y)
        >>> print(g)
        graph():
            %x : [num_users=1] = placeholder[target=x]
            %add : [num_users=1] = call_function[target=operator.add](args = (%x, 1), kwargs = {})
            return add
    """

    def __init__(self, owning_module=None, tracer_cls=None, tracer_extras=None) -> None:
        self._root = Node(self, "", "root", "", (), {})
        self._len = 0
        self._namespace = _Namespace()
        self._insert = self._root.prepend
        self.owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras
        self._codegen = CodeGen()

    @property
    def nodes(self) -> _NodeList:
        """The nodes in order (``len``, iteration, ``reversed``)."""
        return _NodeList(self)

    def find_nodes(self, *, op: str, target: Target = None, sort: bool = True) -> list[Node]:
        """The nodes with this ``op`` (and ``target``, when given).

        Args:
            op: the node kind.
            target: the target to match.
            sort: kept for torch's signature (the result is in graph order).
        """
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    # ***** making nodes *****
    def create_node(self, op: str, target: Target, args: tuple | None = None,
                    kwargs: dict | None = None, name: str | None = None,
                    type_expr: Any = None) -> Node:
        """Insert a node at the current insertion point.

        Args:
            op: the node kind.
            target: what it calls or reads.
            args: positional arguments (Nodes and constants).
            kwargs: keyword arguments.
            name: the name to start from (made unique).
            type_expr: an annotation for the value.

        Returns:
            The node.
        """
        node = Node(self, self._namespace.create_name(name or _target_to_str(target)), op,
                    target, tuple(args or ()), dict(kwargs or {}), type_expr)
        from .traceback import _current_annotations
        if _current_annotations:
            node.meta["custom"] = dict(_current_annotations)
        self._insert(node)
        self._len += 1
        return node

    def placeholder(self, name: str, type_expr: Any = None,
                    default_value: Any = inspect.Signature.empty) -> Node:
        """An input of the function.

        Args:
            name: the parameter name.
            type_expr: its annotation.
            default_value: its default (``inspect.Signature.empty`` or omitted: none).
        """
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any = None) -> Node:
        """Read an attribute (parameter, buffer, tensor) of the owning module.

        Args:
            qualified_name: the dotted path (``"layer1.0.weight"``).
            type_expr: its annotation.
        """
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args: tuple | None = None,
                    kwargs: dict | None = None, type_expr: Any = None) -> Node:
        """Call a sub-module of the owning module.

        Args:
            module_name: its dotted path.
            args: positional arguments.
            kwargs: keyword arguments.
            type_expr: the result's annotation.
        """
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args: tuple | None = None,
                    kwargs: dict | None = None, type_expr: Any = None) -> Node:
        """Call a method of ``args[0]``.

        Args:
            method_name: the method (``"view"``).
            args: the object, then the positional arguments.
            kwargs: keyword arguments.
            type_expr: the result's annotation.
        """
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function: Callable, args: tuple | None = None,
                      kwargs: dict | None = None, type_expr: Any = None) -> Node:
        """Call a free function (``torch.relu``, ``operator.add``...).

        Args:
            the_function: the function.
            args: positional arguments.
            kwargs: keyword arguments.
            type_expr: the result's annotation.
        """
        return self.create_node("call_function", the_function, args, kwargs,
                                type_expr=type_expr)

    def output(self, result: Argument, type_expr: Any = None) -> Node:
        """The function's return value.

        Args:
            result: a Node or a structure of them.
            type_expr: its annotation.
        """
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Argument] = lambda x: x
                  ) -> Node:
        """A copy of ``node`` (from any graph) at the insertion point.

        Args:
            node: the node to copy.
            arg_transform: maps each Node argument to its counterpart in this graph.
        """
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        new = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        new.meta = dict(node.meta)
        return new

    def graph_copy(self, g: Graph, val_map: dict, return_output_node: bool = False):
        """Copy every node of ``g`` except its output into this graph.

        Args:
            g: the source graph.
            val_map: filled with source node -> new node (may be pre-seeded).
            return_output_node: return the copied output node too.

        Returns:
            The value the output of ``g`` maps to (and the output node when asked).
        """
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                out = map_arg(node.args[0], lambda n: val_map[n])
                return (out, node) if return_output_node else out
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    # ***** editing *****
    @contextlib.contextmanager
    def inserting_before(self, n: Node | None = None):
        """New nodes go just before ``n`` (the start of the graph when None) in the block."""
        old = self._insert
        self._insert = n.prepend if n is not None else self._root.append
        try:
            yield
        finally:
            self._insert = old

    @contextlib.contextmanager
    def inserting_after(self, n: Node | None = None):
        """New nodes go just after ``n`` (the end of the graph when None), in order."""
        old = self._insert
        anchor = [n if n is not None else self._root._prev]

        def insert(x: Node) -> None:
            anchor[0].append(x)
            anchor[0] = x
        self._insert = insert
        try:
            yield
        finally:
            self._insert = old

    def erase_node(self, to_erase: Node) -> None:
        """Remove a node that nothing reads.

        Args:
            to_erase: the node.

        Raises:
            RuntimeError: the node still has users.
        """
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had "
                               f"{len(to_erase.users)} users in the graph: {to_erase.users}!")
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        if to_erase._erased:
            return
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        to_erase._update_args_kwargs((), {})
        self._namespace.forget(to_erase.name)

    def eliminate_dead_code(self, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
        """Erase the nodes nobody reads that have no side effects (last to first).

        Args:
            is_impure_node: decides impurity instead of ``Node.is_impure``.

        Returns:
            Whether anything was erased.
        """
        changed = False
        impure = is_impure_node or (lambda n: n.is_impure())
        for node in reversed(self.nodes):
            if not node.users and not impure(node):
                self.erase_node(node)
                changed = True
        return changed

    def lint(self) -> None:
        """Check the graph: names unique, arguments defined before use and in this graph,
        targets of ``get_attr`` / ``call_module`` present in the owning module.

        Raises:
            RuntimeError: naming the first problem.
        """
        seen: set[Node] = set()
        names: set[str] = set()
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            if node.name in names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            names.add(node.name)
            for arg in node.all_input_nodes:
                if arg not in seen:
                    raise RuntimeError(f"Argument '{arg}' of Node '{node}' was used before it "
                                       f"has been defined! Please check that Nodes in the graph "
                                       f"are topologically ordered")
            seen.add(node)
            if self.owning_module is not None and node.op in ("get_attr", "call_module"):
                obj: Any = self.owning_module
                for part in node.target.split("."):
                    if not hasattr(obj, part):
                        raise RuntimeError(f"Node {node} target {node.target} references "
                                           f"nonexistent attribute {part} of {obj}")
                    obj = getattr(obj, part)

    # ***** code and printing *****
    def set_codegen(self, codegen: CodeGen) -> None:
        """Use ``codegen`` to make the source (torch's ``set_codegen``)."""
        self._codegen = codegen

    def python_code(self, root_module: str, *, verbose: bool = False, **kwargs: Any
                    ) -> PythonCode:
        """The source of ``forward`` and its globals.

        Args:
            root_module: the name of the module parameter (``"self"``).
            verbose: kept for torch's signature.
        """
        return self._codegen._gen_python_code(list(self.nodes), root_module)

    def print_tabular(self) -> None:
        """Print the nodes as a table: opcode, name, target, args, kwargs."""
        from .node import _target_name
        rows = [["opcode", "name", "target", "args", "kwargs"]]
        rows += [[n.op, n.name, _target_name(n.target) if n.op == "call_function"
                  else str(n.target), str(n.args), str(n.kwargs)] for n in self.nodes]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        rows.insert(1, ["-" * w for w in widths])
        print("\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                        for r in rows))

    def __str__(self) -> str:
        lines = [n.format_node() for n in self.nodes]
        return "graph():" + "".join(f"\n    {ln}" for ln in lines)

    def __deepcopy__(self, memo: dict) -> Graph:
        g = Graph(tracer_cls=self._tracer_cls)
        memo[id(self)] = g
        out = g.graph_copy(self, {}, return_output_node=True)
        if out is not None:
            value, node = out
            g.output(value, node.type)
        g._codegen = self._codegen
        return g


__all__ = ["CodeGen", "Graph", "PythonCode", "_side_effectful_functions"]
