"""``tb.fx.graph_module`` (``torch.fx.graph_module``): :class:`GraphModule`, a Module whose
``forward`` is the Python source generated from a :class:`~tensorbrain.fx.Graph`.

Each GraphModule gets a class of its own (as torch's), so ``recompile()`` can set
``forward`` on it without touching other instances. The generated source is registered with
``linecache``, so tracebacks and ``inspect.getsource`` show the lines that ran.
"""
from __future__ import annotations

import copy
import itertools
import linecache
from typing import Any

from ..nn import Module
from .graph import CodeGen, Graph

_counter = itertools.count()


def _get_attr(model: Any, attr_name: str) -> Any:
    for part in attr_name.split("."):
        model = getattr(model, part)
    return model


def _assign_attr(from_obj: Any, to_module: Module, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        to_module = t
    _set(to_module, field, from_obj)


def _copy_attr(from_module: Module, to_module: Module, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if t is f or t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    _set(to_module, field, getattr(from_module, field),
         persistent=field not in getattr(from_module, "_non_persistent_buffers_set", ()))


def _set(module: Module, field: str, value: Any, persistent: bool = True) -> None:
    import tensorbrain
    if isinstance(value, tensorbrain.Tensor) and not isinstance(value, tensorbrain.nn.Parameter):
        module.register_buffer(field, value, persistent=persistent)
    else:
        setattr(module, field, value)


class GraphModule(Module):
    """A Module that runs a :class:`~tensorbrain.fx.Graph` (torch's ``fx.GraphModule``).

    Args:
        root: the module the graph's ``get_attr`` / ``call_module`` targets are copied from
            (with their paths), or a dict of path -> object.
        graph: the graph; it is compiled into ``forward`` at once.
        class_name: the class name shown in ``repr`` and the generated code.

    Attributes:
        graph: the graph (assigning one recompiles).
        code: the generated source of ``forward``.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> GraphModule:
        for base in cls.__mro__:
            if base.__qualname__.split(".")[-1] != "GraphModuleImpl":
                cls = base
                break

        class GraphModuleImpl(cls):   # type: ignore[valid-type, misc]
            pass
        return super().__new__(GraphModuleImpl)

    def __init__(self, root: Module | dict[str, Any], graph: Graph,
                 class_name: str = "GraphModule") -> None:
        super().__init__()
        type(self).__name__ = class_name
        if isinstance(root, Module):
            self.training = getattr(root, "training", True)
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"Node {node} referenced target {node.target} but "
                                           f"that target was not provided in ``root``!")
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise RuntimeError(f"Unsupported type {root} passed for root!")
        self.meta = dict(getattr(root, "meta", {}) or {})
        self._tracer_cls = graph._tracer_cls
        self.graph = graph

    @property
    def graph(self) -> Graph:
        """The graph; assigning one makes this module its owner and recompiles."""
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g: Graph) -> None:
        if not isinstance(g, Graph):
            raise TypeError(f"Expected a Graph instance, but got {type(g)}")
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self) -> str:
        """The Python source of ``forward`` generated from the graph."""
        return self.__dict__["_code"]

    def recompile(self):
        """Generate ``forward`` again from ``graph`` (after editing the graph).

        Returns:
            The graph's :class:`~tensorbrain.fx.graph.PythonCode`.
        """
        python_code = self.graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        filename = f"<eval_with_key>.{next(_counter)}"
        linecache.cache[filename] = (len(python_code.src), None,
                                     python_code.src.splitlines(True), filename)
        namespace = dict(python_code.globals)
        exec(compile(python_code.src, filename, "exec"), namespace)
        forward = namespace["forward"]
        codegen = self.graph._codegen
        if type(codegen).process_inputs is not CodeGen.process_inputs or \
                type(codegen).process_outputs is not CodeGen.process_outputs:
            inner = forward

            def forward(self, *args):   # a CodeGen subclass reshapes inputs and outputs
                return codegen.process_outputs(inner(self, *codegen.process_inputs(*args)))
        type(self).forward = forward
        return python_code

    def print_readable(self, print_output: bool = True, **kwargs: Any) -> str:
        """The generated code as a class definition (printed unless ``print_output=False``).

        Args:
            print_output: print it as well as returning it.
        """
        body = "".join(f"    {ln}\n" for ln in self.code.strip("\n").splitlines())
        text = f"class {type(self).__name__}(torch.nn.Module):\n{body}"
        if print_output:
            print(text)
        return text

    def add_submodule(self, target: str, m: Module) -> bool:
        """Install ``m`` at the dotted path ``target``, making empty parents as needed.

        Args:
            target: the path.
            m: the module.

        Returns:
            False when a part of the path is an attribute that is not a Module.
        """
        *prefix, field = target.split(".")
        mod: Module = self
        for item in prefix:
            sub = getattr(mod, item, None)
            if sub is None:
                sub = Module()
                setattr(mod, item, sub)
            if not isinstance(sub, Module):
                return False
            mod = sub
        setattr(mod, field, m)
        return True

    def delete_submodule(self, target: str) -> bool:
        """Remove the sub-module at ``target``.

        Args:
            target: the path.

        Returns:
            False when there is no sub-module there.
        """
        *prefix, field = target.split(".")
        mod: Any = self
        for item in prefix:
            mod = getattr(mod, item, None)
            if not isinstance(mod, Module):
                return False
        if field not in mod._modules:
            return False
        del mod._modules[field]
        return True

    def delete_all_unused_submodules(self) -> None:
        """Remove the sub-modules no ``call_module`` or ``get_attr`` node refers to."""
        used: set[str] = set()
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                parts = node.target.split(".")
                used.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                if node.op == "call_module":
                    sub = self.get_submodule(node.target)
                    used.update(f"{node.target}.{n}" for n, _ in sub.named_modules() if n)
        for name, _ in reversed(list(self.named_modules())):
            if name and name not in used:
                self.delete_submodule(name)

    def __deepcopy__(self, memo: dict) -> GraphModule:
        res = Module()
        memo[id(self)] = res
        state = {k: v for k, v in self.__dict__.items() if k not in ("_graph", "_code")}
        res.__dict__ = copy.deepcopy(state, memo)
        out = GraphModule(res, copy.deepcopy(self.graph, memo), type(self).__name__)
        out.__dict__.update({k: v for k, v in res.__dict__.items()
                             if k not in ("_modules", "_parameters", "_buffers")})
        return out

    def __copy__(self) -> GraphModule:
        out = GraphModule(self, self.graph, type(self).__name__)
        out.meta = dict(self.meta)
        return out

    def __str__(self) -> str:
        return "\n".join([super().__repr__(), self.code])


__all__ = ["GraphModule"]
