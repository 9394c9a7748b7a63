"""``tb.onnx.export`` and the :class:`ONNXProgram` it returns (the exporter itself is
:mod:`._export`)."""
from __future__ import annotations

import enum
import os
from typing import Any

from ._export import (_dynamic_shapes_to_axes, _export_mode, build_model, check_destination,
                      write_model)
from ._graph import onnx_module


class OperatorExportTypes(enum.IntEnum):
    """torch's ONNX operator export types (only ``ONNX`` is exported)."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


class TrainingMode(enum.IntEnum):
    """torch's ONNX training modes: ``EVAL`` (the default) exports with ``model.eval()``,
    ``PRESERVE`` in the mode the model is in; ``TRAINING`` is refused."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class ONNXProgram:
    """An exported model (torch's ``torch.onnx.ONNXProgram``): what :func:`export` returns
    with ``dynamo=True``.

    Args:
        model_proto: the ``onnx.ModelProto``.
        exported_program: torch's ``torch.export`` program; always None here.
    """

    def __init__(self, model_proto: Any, exported_program: Any = None) -> None:
        self._proto = model_proto
        self.exported_program = exported_program
        self._session: Any = None

    @property
    def model_proto(self) -> Any:
        """The ``onnx.ModelProto``."""
        return self._proto

    def save(self, destination: str | os.PathLike | Any, *, include_initializers: bool = True,
             keep_initializers_as_inputs: bool = False, external_data: bool | None = None) -> None:
        """Write the model to ``destination`` (a path, written atomically, or a binary file).

        Args:
            destination: where to write.
            include_initializers: False writes the graph without its weights.
            keep_initializers_as_inputs: also list the weights as graph inputs.
            external_data: torch's option for > 2 GB models; only False/None (one file) is
                written.

        Raises:
            FileNotFoundError: the destination's folder does not exist.
            NotImplementedError: ``external_data=True``.
        """
        if external_data:
            raise NotImplementedError("ONNXProgram.save(external_data=True) is not supported by "
                                      "TensorBrain: models are written as one file (< 2 GB)")
        check_destination(destination)
        proto = self._proto
        if not include_initializers or keep_initializers_as_inputs:
            proto = type(proto)()
            proto.CopyFrom(self._proto)
            if keep_initializers_as_inputs:
                have = {i.name for i in proto.graph.input}
                proto.graph.input.extend(
                    onnx_module().helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                    for t in proto.graph.initializer if t.name not in have)
            if not include_initializers:
                del proto.graph.initializer[:]
        write_model(proto, destination)

    def optimize(self) -> None:
        """torch's graph optimisation pass; the graph is written compact already (no-op)."""

    def initialize_inference_session(self, initializer: Any = None) -> None:
        """Start the onnxruntime session :meth:`__call__` uses (``pip install onnxruntime``)."""
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ImportError("running an ONNXProgram needs onnxruntime: pip install "
                              "onnxruntime") from exc
        self._session = ort.InferenceSession(self._proto.SerializeToString(),
                                             providers=["CPUExecutionProvider"])

    def release(self) -> None:
        """Drop the inference session."""
        self._session = None

    def __call__(self, *args: Any, **kwargs: Any) -> list:
        """Run the model in onnxruntime on tb tensors; returns the outputs as tb tensors."""
        import numpy as np

        import tensorbrain as tb
        if self._session is None:
            self.initialize_inference_session()
        names = [i.name for i in self._session.get_inputs()]
        values = [*args, *kwargs.values()]
        feed = {n: np.asarray(v.detach().numpy() if isinstance(v, tb.Tensor) else v)
                for n, v in zip(names, values)}
        return [tb.tensor(o) for o in self._session.run(None, feed)]

    def __repr__(self) -> str:
        g = self._proto.graph
        return (f"ONNXProgram(graph {g.name!r}: {len(g.input)} inputs, {len(g.output)} outputs, "
                f"{len(g.node)} nodes, opset {self._proto.opset_import[0].version})")


def export(model: Any, args: Any = (), f: Any = None, *, kwargs: dict | None = None,
           verbose: bool | None = None, input_names: Any = None, output_names: Any = None,
           opset_version: int | None = None, dynamo: bool = True, external_data: bool = True,
           dynamic_shapes: Any = None, custom_translation_table: Any = None,
           report: bool = False, optimize: bool = True, verify: bool = False,
           profile: bool = False, dump_exported_program: bool = False,
           artifacts_dir: Any = ".", export_params: bool = True,
           keep_initializers_as_inputs: bool = False, dynamic_axes: Any = None,
           training: Any = TrainingMode.EVAL,
           operator_export_type: Any = OperatorExportTypes.ONNX,
           do_constant_folding: bool = True, custom_opsets: Any = None,
           export_modules_as_functions: Any = False, autograd_inlining: bool = True) -> Any:
    """Export ``model`` to ONNX (torch's ``torch.onnx.export``, same arguments).

    Args:
        model: a ``tb.nn.Module`` (or a function of tensors).
        args: the example inputs: a tuple, or one tensor; a trailing dict is keyword inputs.
        f: where to write: a path (written atomically) or a binary file object; None with
            ``dynamo=True`` only returns the program.
        kwargs: keyword example inputs.
        verbose: print each translated node.
        input_names: names of the graph inputs, in order (default: ``forward``'s names).
        output_names: names of the graph outputs (default ``output`` / ``output_<i>``).
        opset_version: the ONNX opset (13 up to the installed onnx's newest; default 18).
        dynamo: True (torch 2.13's default) returns an :class:`ONNXProgram`; False returns
            None. The same exporter runs either way.
        external_data: accepted; models are written as one file.
        dynamic_shapes: ``{input name: {axis: name}}`` (or a tuple of such per input): axes
            left symbolic, as ``dynamic_axes``.
        custom_translation_table: not supported (use :func:`register_custom_op_symbolic`).
        report: not supported. optimize: accepted (the graph is written compact).
        verify: not supported (run the program in onnxruntime yourself: ``program(*args)``).
        profile: not supported. dump_exported_program: not supported.
        artifacts_dir: accepted, unused.
        export_params: write the parameters into the file (False makes them graph inputs).
        keep_initializers_as_inputs: also list the parameters as graph inputs.
        dynamic_axes: ``{name: {axis: "batch"}}`` or ``{name: [axis]}`` for inputs/outputs.
        training: ``TrainingMode.EVAL`` (exports with ``model.eval()``) or ``PRESERVE``.
        operator_export_type: only ``OperatorExportTypes.ONNX``.
        do_constant_folding: fold BatchNormalization into the Conv before it.
        custom_opsets: ``{domain: version}`` for custom-domain ops.
        export_modules_as_functions: only False.
        autograd_inlining: accepted, unused.

    Returns:
        An :class:`ONNXProgram` with ``dynamo=True``, else None.

    Raises:
        ImportError: the ``onnx`` package is missing (``pip install onnx``).
        torch.onnx.errors.UnsupportedOperatorError: an op has no translation (named, with the
            module it is called in).
        ValueError: ``dynamic_axes`` names an unknown input/output or axis; a bad opset.
        FileNotFoundError: ``f``'s folder does not exist (checked before tracing).
        NotImplementedError: an option TensorBrain does not support (named).
    """
    options = {"report": report, "verify": verify, "profile": profile,
               "dump_exported_program": dump_exported_program}
    refused = [n for n, v in options.items() if v]
    if custom_translation_table:
        refused.append("custom_translation_table")
    if export_modules_as_functions:
        refused.append("export_modules_as_functions")
    if int(operator_export_type) != OperatorExportTypes.ONNX:
        refused.append(f"operator_export_type={OperatorExportTypes(operator_export_type).name}")
    if refused:
        raise NotImplementedError(f"tb.onnx.export: {', '.join(refused)} is not supported by "
                                  f"TensorBrain's exporter (see docs/onnx.md)")
    onnx_module()
    check_destination(f)
    if f is None and not dynamo:
        raise ValueError("tb.onnx.export(dynamo=False) needs f, the path or file to write")
    import tensorbrain as tb
    if isinstance(args, tb.Tensor):
        args = (args,)
    args = tuple(args)
    kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict):
        kwargs.update(args[-1])
        args = args[:-1]
    axes = dict(dynamic_axes or {})
    if dynamic_shapes:
        axes.update(_dynamic_shapes_to_axes(model, dynamic_shapes, input_names))
    with _export_mode(model, training):
        proto = build_model(model, args, kwargs, export_params=export_params,
                            input_names=input_names, output_names=output_names,
                            opset_version=18 if opset_version is None else int(opset_version),
                            dynamic_axes=axes, do_constant_folding=do_constant_folding,
                            keep_initializers_as_inputs=keep_initializers_as_inputs,
                            verbose=bool(verbose))
    for domain, version in (custom_opsets or {}).items():
        for op in proto.opset_import:
            if op.domain == domain:
                op.version = int(version)
    if f is not None:
        write_model(proto, f)
    return ONNXProgram(proto) if dynamo else None
