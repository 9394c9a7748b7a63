"""``tb.fx.node`` (``torch.fx.node``): one operation of a :class:`~tensorbrain.fx.Graph`.

A :class:`Node` is one of torch's six kinds (``placeholder``, ``get_attr``, ``call_function``,
``call_method``, ``call_module``, ``output``) with a ``target``, ``args`` and ``kwargs``; the
nodes it reads are kept in both directions (``all_input_nodes`` and ``users``), so rewriting a
graph (``replace_all_uses_with``, ``args = ...``) keeps the def-use links right, as torch's.
"""
from __future__ import annotations

from typing import Any
from collections.abc import Callable

#: What a node calls: a module path, a method name, or a function (torch's type alias).
Target = Any
#: A node argument: a Node, a constant, or a tuple/list/dict/slice of them (torch's alias).
Argument = Any

OPS = ("placeholder", "call_method", "call_module", "call_function", "get_attr", "output", "root")


def map_aggregate(a: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Apply ``fn`` to every leaf of ``a``, keeping tuples, lists, dicts and slices.

    Args:
        a: the argument structure.
        fn: called on each leaf.

    Returns:
        The same structure with each leaf replaced by ``fn(leaf)``.
    """
    if isinstance(a, tuple):
        t = tuple(map_aggregate(e, fn) for e in a)
        return t if not hasattr(a, "_fields") else type(a)(*t)   # a namedtuple keeps its type
    if isinstance(a, list):
        return [map_aggregate(e, fn) for e in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn),
                     map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a: Argument, fn: Callable[[Node], Argument]) -> Argument:
    """Apply ``fn`` to every :class:`Node` inside ``a`` (torch's ``fx.map_arg``).

    Args:
        a: the argument structure (``node.args``, ``node.kwargs``...).
        fn: called on each Node.

    Returns:
        The same structure with each Node replaced by ``fn(node)``.

    Example:
        >>> import tensorbrain as tb
        >>> g = tb.fx.Graph()
        >>> x = g.placeholder("x")
        >>> tb.fx.map_arg((x, [x, 2]), lambda n: n.name)
        ('x', ['x', 2])
    """
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


class Node:
    """One operation of a graph, linked to the nodes it reads and to those that read it.

    Attributes:
        graph: the owning :class:`~tensorbrain.fx.Graph`.
        name: the unique name (also the variable in the generated code).
        op: ``placeholder``, ``get_attr``, ``call_function``, ``call_method``, ``call_module``
            or ``output``.
        target: the argument name, attribute path, function, method name or module path.
        users: the nodes that read this one (a dict used as an ordered set).
        meta: free-form metadata (passes store shapes or annotations there).
        type: the annotation given at creation, if any.
    """

    def __init__(self, graph, name: str, op: str, target: Target, args: tuple,
                 kwargs: dict, return_type: Any = None) -> None:
        if op not in OPS:
            raise ValueError(f"Node op must be one of {OPS[:-1]}, got {op!r}")
        if op == "call_function" and not callable(target):
            raise ValueError(f"Node [graph = {graph}, name = '{name}'] target {target!r} has "
                             f"type {type(target).__name__} but a Callable is expected")
        if op in ("placeholder", "call_method", "call_module", "get_attr") and \
                not isinstance(target, str):
            raise ValueError(f"Node [graph = {graph}, name = '{name}'] target {target!r} has "
                             f"type {type(target).__name__} but a str is expected")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self._input_nodes: dict[Node, None] = {}
        self.users: dict[Node, None] = {}
        self.type = return_type
        self._prev = self._next = self
        self._erased = False
        self.meta: dict[str, Any] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._update_args_kwargs(args, kwargs)

    # ***** the linked list *****
    @property
    def next(self) -> Node:
        """The node after this one in the graph."""
        return self._next

    @property
    def prev(self) -> Node:
        """The node before this one in the graph."""
        return self._prev

    def prepend(self, x: Node) -> None:
        """Move or insert ``x`` just before this node.

        Args:
            x: a node of the same graph.
        """
        if x is self:
            return
        if x.graph is not self.graph:
            raise ValueError("Attempting to move a Node into a different Graph")
        x._remove_from_list()
        p = self._prev
        p._next, x._prev, x._next, self._prev = x, p, self, x

    def append(self, x: Node) -> None:
        """Move or insert ``x`` just after this node.

        Args:
            x: a node of the same graph.
        """
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        p, n = self._prev, self._next
        p._next, n._prev = n, p
        self._prev = self._next = self

    # ***** arguments and uses *****
    @property
    def args(self) -> tuple:
        """The positional arguments; assigning them updates the users of the nodes read."""
        return self._args

    @args.setter
    def args(self, a: tuple) -> None:
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self) -> dict:
        """The keyword arguments; assigning them updates the users of the nodes read."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k: dict) -> None:
        self._update_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self) -> list[Node]:
        """The nodes this one reads, in order of first appearance."""
        return list(self._input_nodes)

    def _update_args_kwargs(self, args, kwargs) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        seen: dict[Node, None] = {}

        def note(n: Node) -> Node:
            seen.setdefault(n)
            return n
        self._args = tuple(map_arg(tuple(args), note))
        self._kwargs = dict(map_arg(dict(kwargs), note))
        self._input_nodes = seen
        for n in seen:
            n.users.setdefault(self)

    def update_arg(self, idx: int, arg: Argument) -> None:
        """Set ``args[idx]`` to ``arg``.

        Args:
            idx: the position.
            arg: the new argument.
        """
        a = list(self._args)
        a[idx] = arg
        self.args = tuple(a)

    def insert_arg(self, idx: int, arg: Argument) -> None:
        """Insert ``arg`` at position ``idx`` of ``args``.

        Args:
            idx: the position.
            arg: the new argument.
        """
        a = list(self._args)
        a.insert(idx, arg)
        self.args = tuple(a)

    def update_kwarg(self, key: str, arg: Argument) -> None:
        """Set ``kwargs[key]`` to ``arg``.

        Args:
            key: the keyword.
            arg: the new argument.
        """
        self.kwargs = {**self._kwargs, key: arg}

    def replace_all_uses_with(self, replace_with: Node,
                              delete_user_cb: Callable[[Node], bool] = lambda user: True, *,
                              propagate_meta: bool = False) -> list[Node]:
        """Make every user of this node read ``replace_with`` instead.

        Args:
            replace_with: the node to read instead.
            delete_user_cb: called with each user; a user for which it returns False keeps
                reading this node.
            propagate_meta: copy this node's ``meta`` into ``replace_with`` (which must have
                none).

        Returns:
            The users that were changed.
        """
        if propagate_meta:
            if replace_with.meta:
                raise ValueError("Called node.replace_all_uses_with(replace_with, "
                                 "propagate_meta=True), but replace_with already has .meta keys")
            replace_with.meta.update(self.meta)
        changed = [u for u in list(self.users) if delete_user_cb(u)]
        for user in changed:
            user.replace_input_with(self, replace_with)
        return changed

    def replace_input_with(self, old_input: Node, new_input: Node) -> None:
        """Replace every occurrence of ``old_input`` in this node's arguments.

        Args:
            old_input: the node read now.
            new_input: the node to read instead.
        """
        def swap(n: Node) -> Node:
            return new_input if n is old_input else n
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def is_impure(self, impure_random: bool = True) -> bool:
        """Whether dead-code elimination must keep this node (placeholders, outputs, in-place
        method calls, and calls of modules or functions marked impure).

        Args:
            impure_random: accepted for torch's signature (random ops are kept either way
                only when marked impure).
        """
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            return self.target in _side_effectful_functions
        if self.op == "call_method":
            return str(self.target).endswith("_") and not str(self.target).endswith("__")
        if self.op == "call_module":
            mod = self.graph.owning_module
            sub = mod.get_submodule(self.target) if mod is not None else None
            return bool(getattr(sub, "_is_impure", False))
        return False

    # ***** printing *****
    def format_node(self, placeholder_names: list | None = None,
                    maybe_return_typename: list | None = None) -> str:
        """The node as torch prints it in ``str(graph)``."""
        if self.op == "output":
            return f"return {_fmt_ref(self._args[0])[1:] if isinstance(self._args[0], Node) else _fmt_ref(self._args[0])}"
        if self.op == "placeholder":
            default = f" = {self._args[0]!r}" if self._args else ""
            return f"%{self.name} : [num_users={len(self.users)}] = " \
                   f"placeholder[target={self.target}]{default}"
        target = _target_name(self.target) if self.op == "call_function" else self.target
        if self.op == "get_attr":
            return f"%{self.name} : [num_users={len(self.users)}] = get_attr[target={target}]"
        return (f"%{self.name} : [num_users={len(self.users)}] = {self.op}[target={target}]"
                f"(args = {_fmt_ref(self._args)}, kwargs = {_fmt_ref(self._kwargs)})")

    def __repr__(self) -> str:
        return self.name


def _fmt_ref(a: Argument) -> str:
    if isinstance(a, Node):
        return f"%{a.name}"
    if isinstance(a, tuple):
        inner = ", ".join(_fmt_ref(e) for e in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, list):
        return "[" + ", ".join(_fmt_ref(e) for e in a) + "]"
    if isinstance(a, dict):
        return "{" + ", ".join(f"{k!r}: {_fmt_ref(v)}" for k, v in a.items()) + "}"
    return repr(a)


def _target_name(target: Target) -> str:
    from ._names import public_name
    name = public_name(target)
    if name is not None:
        return name
    mod, qual = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if mod in ("_operator", "operator"):
        mod = "operator"
    return f"{mod}.{qual}" if mod and qual and mod != "builtins" else qual or repr(target)


#: Functions dead-code elimination keeps (torch's ``_side_effectful_functions``).
_side_effectful_functions: set[Callable] = set()


__all__ = ["Argument", "Node", "Target", "map_aggregate", "map_arg"]
