"""``tb.fx.interpreter`` (``torch.fx.interpreter``): :class:`Interpreter` runs a GraphModule
node by node (override one method per node kind to observe or change what runs), and
:class:`Transformer` does the same on Proxies to build a new GraphModule.
"""
from __future__ import annotations

from typing import Any
from collections.abc import Iterator

from .graph import Graph
from .graph_module import GraphModule
from .node import Argument, Node, Target, map_aggregate, map_arg
from .proxy import GraphAppendingTracer, Proxy


class Interpreter:
    """Run a GraphModule one node at a time (torch's ``fx.Interpreter``).

    Args:
        module: the GraphModule (or any Module with a ``graph``) to run.
        garbage_collect_values: drop each value after its last use.
        graph: run this graph instead of ``module.graph``.

    Example:
        >>> import tensorbrain as tb
        >>> gm = tb.fx.symbolic_trace(lambda x: tb.relu(x) * 2)
        >>> tb.fx.Interpreter(gm).run(tb.tensor([-1.0, 3.0])).tolist()
        [0.0, 6.0]
    """

    def __init__(self, module: Any, garbage_collect_values: bool = True,
                 graph: Graph | None = None) -> None:
        self.module = module
        self.submodules = dict(module.named_modules())
        self.graph = graph if graph is not None else module.graph
        self.env: dict[Node, Any] = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        self.user_to_last_uses: dict[Node, list[Node]] = {}
        if garbage_collect_values:
            seen: set[Node] = set()
            for node in reversed(self.graph.nodes):
                for n in node.all_input_nodes:
                    if n not in seen:
                        seen.add(n)
                        self.user_to_last_uses.setdefault(node, []).append(n)

    def run(self, *args: Any, initial_env: dict[Node, Any] | None = None,
            enable_io_processing: bool = True) -> Any:
        """Run the graph on ``args`` and return its output.

        Args:
            *args: the inputs, in placeholder order.
            initial_env: values for some nodes, which are then not run.
            enable_io_processing: pass inputs and outputs through the graph's CodeGen.
        """
        self.env = dict(initial_env or {})
        if enable_io_processing:
            args = self.graph._codegen.process_inputs(*args)
        self.args_iter: Iterator[Any] = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                if self.extra_traceback and not getattr(e, "_fx_noted", False):
                    add_note = getattr(e, "add_note", None)   # Python >= 3.11
                    if add_note is not None:
                        add_note(f"While executing {node.format_node()}")
                    e._fx_noted = True  # type: ignore[attr-defined]
                raise
            for n in self.user_to_last_uses.get(node, []):
                self.env.pop(n, None)
            if node.op == "output":
                out = self.env[node]
                return self.graph._codegen.process_outputs(out) if enable_io_processing \
                    else out
        return None

    def run_node(self, n: Node) -> Any:
        """Run one node: fetch its arguments and call the method named after its kind."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # ***** one method per node kind *****
    def placeholder(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The next input (or the placeholder's default)."""
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but "
                               f"one was not passed in!") from None

    def get_attr(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The attribute of the module at ``target``."""
        return self.fetch_attr(target)

    def call_function(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """``target(*args, **kwargs)``."""
        return target(*args, **kwargs)

    def call_method(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """``args[0].target(*args[1:], **kwargs)``."""
        obj, *rest = args
        return getattr(obj, target)(*rest, **kwargs)

    def call_module(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The sub-module at ``target``, called."""
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The graph's result."""
        return args[0]

    # ***** helpers *****
    def fetch_attr(self, target: str) -> Any:
        """The object at the dotted path ``target`` of the module.

        Raises:
            RuntimeError: naming the missing part.
        """
        obj = self.module
        for i, part in enumerate(target.split(".")):
            if not hasattr(obj, part):
                raise RuntimeError(f"Node referenced nonexistent target "
                                   f"{'.'.join(target.split('.')[:i + 1])}")
            obj = getattr(obj, part)
        return obj

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple, dict]:
        """``n``'s arguments with each Node replaced by its value."""
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args: Argument, n: Node) -> Any:
        """``args`` with each Node replaced by its computed value."""
        def value(a: Node) -> Any:
            if a not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {a}! Run "
                                   f"Graph.lint() to diagnose such issues")
            return self.env[a]
        return map_arg(args, value)


class Transformer(Interpreter):
    """Run a GraphModule on Proxies to build a new one (torch's ``fx.Transformer``):
    override ``call_function`` & co. to return other Proxies and :meth:`transform` returns
    the rewritten GraphModule.

    Args:
        module: the GraphModule to transform.
    """

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.new_graph = Graph()
        self.new_graph.set_codegen(module.graph._codegen)
        self.tracer = GraphAppendingTracer(self.new_graph)
        self.tracer.root = module   # type: ignore[attr-defined]

    def placeholder(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        """A new placeholder of the same name (and default)."""
        import inspect
        default = args[0] if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        """A new ``get_attr`` node."""
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_function(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """A new ``call_function`` node."""
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def call_method(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """A new ``call_method`` node."""
        return self.tracer.create_proxy("call_method", target, args, kwargs)

    def call_module(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """A new ``call_module`` node."""
        return self.tracer.create_proxy("call_module", target, args, kwargs)

    def transform(self) -> GraphModule:
        """Run the transformation and return the new GraphModule."""
        result = super().run(enable_io_processing=False)
        if result is not None:
            self.new_graph.output(map_aggregate(
                result, lambda a: a.node if isinstance(a, Proxy) else a))
        return GraphModule(self.module, self.new_graph)


__all__ = ["Interpreter", "Transformer"]
