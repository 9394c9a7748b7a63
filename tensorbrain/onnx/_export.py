"""``tb.onnx.export``: trace a module with :mod:`tensorbrain.fx`, run the graph once on the
example inputs (each node's value gives shapes and dtypes), and write each node through the
custom symbolic registry or the op table (:mod:`._ops`) into an ONNX graph (the ``onnx``
package's protobuf), then validate it with ``onnx.checker``.
"""
from __future__ import annotations

import contextlib
import inspect
import io
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ._graph import GraphContext, Value, onnx_module
from ._ops import MODULES, OPS, P

_REGISTRY: dict[str, dict[int, Callable]] = {}
_in_export = False
_NAME = re.compile(r"^[a-zA-Z0-9-_]+::[a-zA-Z-_]+[a-zA-Z0-9-_]*$")


class OnnxExporterError(RuntimeError):
    """The export failed (torch's ``torch.onnx.OnnxExporterError``)."""


class UnsupportedOperatorError(OnnxExporterError):
    """The model uses an op the exporter has no translation for (torch's
    ``torch.onnx.errors.UnsupportedOperatorError``); the message names the op and the module."""


def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Callable,
                                opset_version: int) -> None:
    """Export ``symbolic_name`` with ``symbolic_fn(g, *inputs)`` from ``opset_version`` on
    (torch's ``torch.onnx.register_custom_op_symbolic``). Consulted before the built-in table,
    so it also replaces a built-in translation (``"aten::relu"``).

    Args:
        symbolic_name: ``"namespace::op"``: ``aten::<torch op name>`` for an op TensorBrain
            exports, or the name of a function recorded with ``tb.fx.wrap`` as
            ``"<namespace>::<function name>"`` (see docs/onnx.md).
        symbolic_fn: ``fn(g, *inputs, **kwargs)`` returning ``g.op(...)``'s Value(s).
        opset_version: the lowest opset the function serves.

    Raises:
        ValueError: ``symbolic_name`` is not ``namespace::op``.
    """
    if not isinstance(symbolic_name, str) or not _NAME.match(symbolic_name):
        raise ValueError(f"Failed to register operator {symbolic_name}. The symbolic name must "
                         f"match the format domain::name, and should start with a letter and "
                         f"contain only alphanumerical characters")
    _REGISTRY.setdefault(symbolic_name, {})[int(opset_version)] = symbolic_fn


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    """Remove what :func:`register_custom_op_symbolic` registered for this name and opset
    (nothing happens when there is none, as in torch).

    Args:
        symbolic_name: ``"namespace::op"``.
        opset_version: the opset it was registered at.
    """
    if not isinstance(symbolic_name, str) or not _NAME.match(symbolic_name):
        raise ValueError(f"Failed to unregister operator {symbolic_name}: the symbolic name must "
                         f"be domain::name")
    fns = _REGISTRY.get(symbolic_name, {})
    fns.pop(int(opset_version), None)
    if not fns:
        _REGISTRY.pop(symbolic_name, None)


def _registered(name: str, opset: int) -> Callable | None:
    fns = {v: f for v, f in _REGISTRY.get(name, {}).items() if v <= opset}
    return fns[max(fns)] if fns else None


def is_in_onnx_export() -> bool:
    """Whether an export is running (torch's ``torch.onnx.is_in_onnx_export``)."""
    return _in_export


# ***** tracing *****
@contextlib.contextmanager
def _function_attributes_recorded(m: Any) -> Iterator[None]:
    """A tb function kept as a module attribute (TransformerEncoderLayer's ``self.activation =
    F.relu``) recorded like one called by name, for the length of the block."""
    from ..fx._names import _public_table
    from ..fx._symbolic_trace import _recording
    table = _public_table()
    held: dict[str, Callable] = {}
    for k, v in vars(m).items():
        hit = table.get(id(v))
        if hit is not None and hit[1] is v:
            held[k] = hit[1]
    vars(m).update({k: _recording(v) for k, v in held.items()})
    try:
        yield
    finally:
        vars(m).update(held)


def _tracer_class() -> type:
    from ..fx import Tracer
    from ..fx.proxy import TraceError
    from . import operators

    class ExportTracer(Tracer):
        """Traces through every module (as torch's exporter inlines them) and notes on each
        node the path of the module whose ``forward`` recorded it."""

        def __init__(self) -> None:
            super().__init__(autowrap_functions=(operators.shape_as_tensor,
                                                 operators.reshape_from_tensor_shape))
            self._path = ""

        def is_leaf_module(self, m: Any, module_qualified_name: str) -> bool:
            return type(m).__module__.startswith("tensorbrain.nn") and \
                type(m).__name__ in MODULES

        def call_module(self, m: Any, forward: Callable, args: tuple, kwargs: dict) -> Any:
            prev, self._path = self._path, self.path_of_module(m)
            try:
                with _function_attributes_recorded(m):
                    return super().call_module(m, forward, args, kwargs)
            except TraceError as exc:
                raise UnsupportedOperatorError(
                    f"tb.onnx.export: module '{self._path}' ({type(m).__name__}) cannot be "
                    f"traced: {exc}. Its forward branches on tensor values; tb.onnx exports "
                    f"TensorBrain's layers of the op table (docs/onnx.md) and code that only "
                    f"calls ops") from exc
            finally:
                self._path = prev

        def create_node(self, *args: Any, **kwargs: Any) -> Any:
            node = super().create_node(*args, **kwargs)
            node.meta["tb_module_path"] = self._path
            return node
    return ExportTracer


def _example(v: Any) -> Any:
    import tensorbrain as tb
    if isinstance(v, tb.Tensor):
        return v.detach().numpy()
    if isinstance(v, (tuple, list)):
        return tuple(_example(x) for x in v)
    return v


def _run_example(gm: Any, args: tuple) -> dict:
    """Each node's value in one run of the traced graph on ``args``."""
    import tensorbrain as tb
    from ..fx import Interpreter
    values: dict = {}

    class Recorder(Interpreter):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            values[n] = out
            return out
    with tb.no_grad():
        Recorder(gm).run(*args)
    return values


def _node_key(node: Any) -> tuple[str, Any]:
    """(op name, registry name) of a call node."""
    if node.op == "call_method":
        return node.target, f"aten::{node.target}"
    target = node.target
    name = getattr(target, "__name__", str(target))
    qual = getattr(target, "_qualname", None) or getattr(target, "__tb_op_name__", None)
    if isinstance(qual, str) and "::" in qual:
        return qual, qual
    mod = getattr(target, "__module__", "") or ""
    if mod.startswith("tensorbrain") or mod in ("_operator", "operator", "builtins", "math"):
        return name, f"aten::{name}"
    return name, f"{mod.rsplit('.', 1)[-1]}::{name}"


def _flat(v: Any) -> list:
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _flat(item)]
    if isinstance(v, dict):
        return [x for item in v.values() for x in _flat(item)]
    return [v]


@contextlib.contextmanager
def _export_mode(model: Any, training: Any) -> Iterator[None]:
    global _in_export
    mode = getattr(model, "training", None)
    name = getattr(training, "name", str(training))
    if name == "TRAINING":
        raise NotImplementedError("training=TrainingMode.TRAINING is not supported by "
                                  "tb.onnx.export: it exports inference graphs (EVAL)")
    if name == "EVAL" and mode is not None:
        model.eval()
    was, _in_export = _in_export, True
    try:
        yield
    finally:
        _in_export = was
        if name == "EVAL" and mode is not None:
            model.train(mode)


def _dim_params(dynamic_axes: Any, input_names: list[str], output_names: list[str],
                ranks: dict[str, int]) -> dict[str, dict[int, str]]:
    if not dynamic_axes:
        return {}
    out: dict[str, dict[int, str]] = {}
    known = input_names + output_names
    for name, axes in dynamic_axes.items():
        if name not in known:
            raise ValueError(f"dynamic_axes names '{name}', which is neither an input nor an "
                             f"output of the exported graph (inputs: {input_names}, outputs: "
                             f"{output_names}); name them with input_names / output_names")
        if isinstance(axes, dict):
            d = {int(k): str(v) for k, v in axes.items()}
        else:
            d = {int(k): f"{name}_dynamic_axes_{i + 1}" for i, k in enumerate(axes)}
        for axis in d:
            if not -ranks[name] <= axis < ranks[name]:
                raise ValueError(f"dynamic_axes['{name}'] names axis {axis}, but '{name}' has "
                                 f"{ranks[name]} dimensions")
        out[name] = {a % ranks[name]: p for a, p in d.items()}
    return out


def _value_info(onnx: Any, name: str, example: np.ndarray, dims: dict[int, str] | None,
                static: bool) -> Any:
    from .symbolic_helper import onnx_dtype
    shape: list = []
    for i, s in enumerate(example.shape):
        shape.append(dims[i] if dims and i in dims else (int(s) if static else None))
    return onnx.helper.make_tensor_value_info(name, int(onnx_dtype(example.dtype)), shape)


def build_model(model: Any, args: tuple, kwargs: dict, *, export_params: bool = True,
                input_names: Any = None, output_names: Any = None, opset_version: int = 18,
                dynamic_axes: Any = None, do_constant_folding: bool = True,
                keep_initializers_as_inputs: bool = False, verbose: bool = False) -> Any:
    """Trace ``model`` on ``args`` / ``kwargs`` and return the checked ``onnx.ModelProto``."""
    onnx = onnx_module()
    import tensorbrain as tb
    from ..fx import GraphModule
    from ..fx.proxy import TraceError
    from ..nn import Module
    if not 13 <= opset_version <= onnx.defs.onnx_opset_version():
        raise ValueError(f"opset_version={opset_version}: tb.onnx.export writes opsets 13 to "
                         f"{onnx.defs.onnx_opset_version()} (the installed onnx's newest)")
    root = model if isinstance(model, Module) else None
    tracer = _tracer_class()()
    try:
        with _function_attributes_recorded(model):
            graph = tracer.trace(model)
    except TraceError as exc:
        raise UnsupportedOperatorError(
            f"tb.onnx.export: the forward of {type(model).__name__} cannot be traced: {exc}. "
            f"tb.onnx exports TensorBrain's layers of the op table (docs/onnx.md) and code that "
            f"only calls ops") from exc
    gm = GraphModule(tracer.root, graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    call_args = list(args)
    for n in placeholders[len(call_args):]:
        if n.name in kwargs:
            call_args.append(kwargs[n.name])
        elif n.args:
            call_args.append(n.args[0])
        else:
            raise TypeError(f"tb.onnx.export: the model's forward needs '{n.name}', which "
                            f"neither args nor kwargs gives")
    values = _run_example(gm, tuple(call_args))
    g = GraphContext(opset_version)
    env: dict = {}
    inputs: list[tuple[str, np.ndarray]] = []
    given_in = list(input_names or [])
    for n in placeholders:
        ex = _example(values[n])
        if isinstance(ex, np.ndarray):
            name = given_in[len(inputs)] if len(inputs) < len(given_in) else n.name
            g._names.add(name)
            env[n] = Value(name, ex)
            inputs.append((name, ex))
        else:
            env[n] = ex
    params: set[str] = set()
    output_vals: list = []
    for n in graph.nodes:
        if n.op == "placeholder":
            continue
        g.module_path = n.meta.get("tb_module_path", "")
        where = f"module '{g.module_path}' ({type(root.get_submodule(g.module_path)).__name__})" \
            if g.module_path and root is not None else "the model's own forward"
        if n.op == "get_attr":
            env[n] = _module_tensor(g, gm, str(n.target), export_params, params)
            continue
        if n.op == "output":
            output_vals = _flat(_map(n.args[0], env))
            break
        key, symbolic_name = _node_key(n)
        a = _map(n.args, env)
        k = _map(n.kwargs, env)
        if n.op == "call_module":
            mod = gm.get_submodule(str(n.target))
            try:
                key, extra, kw = MODULES[type(mod).__name__](mod)
            except ValueError as exc:
                raise OnnxExporterError(f"tb.onnx.export: {where}: {exc}") from exc
            symbolic_name = f"aten::{key}"
            def arg(x: Any) -> Any:
                return _module_tensor(g, gm, f"{n.target}.{x}", export_params, params) \
                    if isinstance(x, P) else x
            a = (*a, *(arg(x) for x in extra))
            k = {**k, **{name: arg(x) for name, x in kw.items()}}
        if n.op == "call_function" and key in ("getattr",) and a and \
                a[1] not in ("shape", "T", "mT"):
            env[n] = values[n]
            continue
        fn = _registered(symbolic_name, opset_version) or OPS.get(key)
        if fn is None:
            raise UnsupportedOperatorError(
                f"tb.onnx.export: no ONNX translation for '{symbolic_name}' (called in {where}, "
                f"node '{n.name}'); register one with tb.onnx.register_custom_op_symbolic"
                f"('{symbolic_name}', fn, {opset_version}) or see docs/onnx.md for the op table")
        try:
            out = fn(g, *a, **k)
        except (UnsupportedOperatorError, NotImplementedError):
            raise
        except Exception as exc:
            raise OnnxExporterError(f"tb.onnx.export: translating '{symbolic_name}' (in {where}, "
                                    f"node '{n.name}') failed: {exc}") from exc
        ex = _example(values[n])
        if isinstance(out, Value) and out.example is None:
            out.example = ex
        elif isinstance(out, (tuple, list)):
            for o, e in zip(out, ex if isinstance(ex, (tuple, list)) else ()):
                if isinstance(o, Value) and o.example is None:
                    o.example = e
        env[n] = out
        if verbose:
            print(f"tb.onnx.export: {n.format_node()} -> {out}")
    if not all(isinstance(v, Value) for v in output_vals):
        raise OnnxExporterError("tb.onnx.export: the model returns something that is not a "
                                "tensor of the graph")
    if do_constant_folding:
        _fold_batch_norm(g)
    given_out = list(output_names or [])
    out_names = [given_out[i] if i < len(given_out) else
                 ("output" if len(output_vals) == 1 else f"output_{i}")
                 for i in range(len(output_vals))]
    out_examples = [np.asarray(v.example) for v in output_vals]
    in_names = [i for i, _ in inputs]
    named: set[str] = set()
    for v, name in zip(output_vals, out_names):
        if v.name in named:      # the same tensor returned twice: a copy under the new name
            g.nodes.append(onnx.helper.make_node("Identity", [v.name], [name]))
        else:
            _rename(g, v, name, in_names)
            named.add(name)
    ranks = {**{nm: ex.ndim for nm, ex in inputs},
             **{nm: ex.ndim for nm, ex in zip(out_names, out_examples)}}
    dims = _dim_params(dynamic_axes, in_names, out_names, ranks)
    static = not dims
    graph_inputs = [_value_info(onnx, nm, ex, dims.get(nm), True) for nm, ex in inputs]
    if not export_params:
        graph_inputs += [_value_info(onnx, p, _param(gm, p), None, True) for p in sorted(params)]
    used = {i for node in g.nodes for i in node.input} | set(out_names)
    inits = {k: v for k, v in g.initializers.items() if k in used}
    if keep_initializers_as_inputs:
        graph_inputs += [_value_info(onnx, k, v, None, True) for k, v in inits.items()]
    graph_outputs = [_value_info(onnx, nm, ex, dims.get(nm), static)
                     for nm, ex in zip(out_names, out_examples)]
    proto_graph = onnx.helper.make_graph(
        g.nodes, type(model).__name__ if root is not None else getattr(model, "__name__", "main"),
        graph_inputs, graph_outputs,
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    opsets = [onnx.helper.make_opsetid("", opset_version)] + \
        [onnx.helper.make_opsetid(d, v) for d, v in g.domains.items()]
    proto = onnx.helper.make_model(proto_graph, opset_imports=opsets, producer_name="tensorbrain",
                                   producer_version=tb.__version__)
    proto.ir_version = min(proto.ir_version, 10)   # onnxruntime reads IR <= 10
    if not g.domains:
        try:
            onnx.checker.check_model(proto, full_check=True)
        except Exception as exc:   # noqa: BLE001 - onnx's checker raises several types
            raise OnnxExporterError(f"tb.onnx.export: the graph written for "
                                    f"{type(model).__name__} does not validate (onnx.checker): "
                                    f"{exc}") from exc
    return proto


def _module_tensor(g: GraphContext, gm: Any, path: str, export_params: bool,
                   params: set) -> Any:
    """The parameter / buffer at ``path`` as an initializer (a graph input without
    ``export_params``); None stays None (a layer without bias), anything else as it is."""
    import tensorbrain as tb
    t = gm
    for part in path.split("."):
        t = getattr(t, part)
    if not isinstance(t, tb.Tensor):
        return t
    params.add(path)
    if export_params:
        return g.initializer(path, t.detach().numpy())
    g._names.add(path)
    return Value(path, t.detach().numpy())


def _param(gm: Any, path: str) -> np.ndarray:
    t = gm
    for part in path.split("."):
        t = getattr(t, part)
    return t.detach().numpy()


def _map(a: Any, env: dict) -> Any:
    from ..fx import Node
    if isinstance(a, Node):
        return env[a]
    if isinstance(a, (tuple, list)):
        return type(a)(_map(x, env) for x in a) if type(a) in (tuple, list) else \
            tuple(_map(x, env) for x in a)
    if isinstance(a, dict):
        return {k: _map(v, env) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_map(a.start, env), _map(a.stop, env), _map(a.step, env))
    return a


def _rename(g: GraphContext, v: Value, name: str, inputs: list[str]) -> None:
    """Make the graph output ``v`` be called ``name`` (an Identity when ``v`` is an input or a
    parameter, which keep their names)."""
    if v.name == name:
        return
    producer = next((n for n in g.nodes if v.name in n.output), None)
    if producer is None or v.name in inputs:
        g.nodes.append(onnx_module().helper.make_node("Identity", [v.name], [name]))
    else:
        for node in g.nodes:
            node.input[:] = [name if i == v.name else i for i in node.input]
            node.output[:] = [name if o == v.name else o for o in node.output]
    v.name = name


def _fold_batch_norm(g: GraphContext) -> None:
    """Fold an inference BatchNormalization into the Conv before it (torch's exporter does the
    same): ``W' = W * s``, ``b' = (b - mean) * s + beta`` with ``s = gamma / sqrt(var + eps)``."""
    helper = onnx_module().helper
    for bn in [n for n in g.nodes if n.op_type == "BatchNormalization"]:
        conv = next((n for n in g.nodes if n.op_type == "Conv" and bn.input[0] in n.output),
                    None)
        if conv is None or sum(bn.input[0] in n.input for n in g.nodes) != 1 or \
                not all(i in g.initializers for i in list(bn.input[1:]) + list(conv.input[1:])):
            continue
        gamma, beta, mean, var = (g.initializers[i] for i in bn.input[1:])
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        w = g.initializers[conv.input[1]]
        b = g.initializers[conv.input[2]] if len(conv.input) > 2 and conv.input[2] else \
            np.zeros(w.shape[0], w.dtype)
        s = gamma / np.sqrt(var + eps)
        w2 = g.initializer(g.fresh(f"{conv.input[1]}_bn"),
                           (w * s.reshape(-1, *[1] * (w.ndim - 1))).astype(w.dtype))
        b2 = g.initializer(g.fresh(f"{conv.input[1]}_bn_bias"), ((b - mean) * s + beta)
                           .astype(w.dtype))
        attrs = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
        new = helper.make_node("Conv", [conv.input[0], w2.name, b2.name], list(bn.output),
                               name=conv.name, **attrs)
        g.nodes[g.nodes.index(conv)] = new
        g.nodes.remove(bn)


def write_model(proto: Any, f: Any) -> None:
    """Write ``proto`` to ``f`` (a path, atomically, or a binary file object)."""
    from .. import _atomic
    data = proto.SerializeToString()
    if hasattr(f, "write"):
        f.write(data)
        return
    path = os.fspath(f)

    def fill(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
    _atomic.write(path, fill)


def check_destination(f: Any) -> None:
    """Fail before tracing when ``f`` names a file in a folder that does not exist."""
    if f is None or hasattr(f, "write") or isinstance(f, io.IOBase):
        return
    folder = os.path.dirname(os.path.abspath(os.fspath(f)))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"tb.onnx.export: cannot write {os.fspath(f)!r}: the folder "
                                f"{folder!r} does not exist")


def _dynamic_shapes_to_axes(model: Any, dynamic_shapes: Any, input_names: Any) -> dict:
    """torch's ``dynamic_shapes`` (``{arg: {axis: Dim or name}}`` or a tuple per argument) as
    ``dynamic_axes``."""
    fn = getattr(model, "forward", model)
    params = [p for p in inspect.signature(fn).parameters]
    names = list(input_names or []) + params[len(input_names or []):]
    if isinstance(dynamic_shapes, dict):
        items = [(names[params.index(k)] if k in params else k, v)
                 for k, v in dynamic_shapes.items()]
    else:
        items = list(zip(names, dynamic_shapes))
    out = {}
    for name, axes in items:
        if axes:
            out[name] = {int(a): getattr(d, "__name__", None) or str(d) if not isinstance(d, str)
                         else d for a, d in dict(axes).items()}
    return out
