"""The graph an export builds, and the ``g`` that symbolic functions write into.

torch's TorchScript exporter hands each symbolic function a ``GraphContext`` ``g``; the
function returns ``g.op("Name", *inputs, attr_i=3)``. :class:`GraphContext` is that subset, over
the ``onnx`` package's protobuf helpers: inputs are :class:`Value` (a tensor in the graph, with
the value it had in the example run when one is known), ``None`` (an omitted optional input) or a
Python number / list / array / tensor (made a constant). Attribute names carry torch's type
suffix (``_i`` int or ints, ``_f`` float(s), ``_s`` string, ``_t`` tensor); one without a suffix
is typed by its value.
"""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np


def onnx_module() -> Any:
    """The ``onnx`` package, or an ImportError that says how to install it."""
    try:
        return importlib.import_module("onnx")
    except ImportError as exc:
        raise ImportError("tb.onnx.export writes its files with the 'onnx' package, which is not "
                          "installed: pip install onnx (or pip install 'tensorbrain[onnx]', which "
                          "adds onnxruntime to run the files)") from exc


class Value:
    """One tensor of the graph being built (torch's ``torch._C.Value`` for symbolic functions).

    Args:
        name: its name in the ONNX graph.
        example: what it was in the example run (a NumPy array, or a Python int / tuple for a
            size), or None when it was made inside a symbolic function.
    """

    def __init__(self, name: str, example: Any = None) -> None:
        self.name = name
        self.example = example

    def debugName(self) -> str:  # noqa: N802 - torch's name
        """Its name in the graph (torch's ``Value.debugName``)."""
        return self.name

    def rank(self) -> int | None:
        """The number of dimensions, when the example run tells it."""
        return None if self.example is None else int(np.ndim(self.example))

    def dtype(self) -> np.dtype | None:
        """The NumPy dtype, when the example run tells it."""
        return None if self.example is None else np.asarray(self.example).dtype

    def type(self) -> _ValueType:
        """torch's ``Value.type()``: ``.sizes()``, ``.dim()``, ``.scalarType()``."""
        return _ValueType(self)

    def __repr__(self) -> str:
        return f"Value({self.name!r})"


_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                 "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


class _ValueType:
    """What torch's ``Value.type()`` answers, from the example run (None where unknown)."""

    def __init__(self, value: Value) -> None:
        self._value = value

    def sizes(self) -> list[int] | None:
        """The shape."""
        ex = self._value.example
        return None if ex is None else [int(s) for s in np.shape(ex)]

    def dim(self) -> int | None:
        """The rank."""
        return self._value.rank()

    def scalarType(self) -> str | None:  # noqa: N802 - torch's name
        """torch's scalar type name (``"Float"``, ``"Long"``)."""
        dt = self._value.dtype()
        return None if dt is None else _SCALAR_NAMES.get(dt.name)


def _constant_array(value: Any) -> np.ndarray:
    """A Python number / list / tb or NumPy array as the array a Constant holds (int64 for ints,
    float32 for floats, as torch's exporter makes them)."""
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.detach().numpy() if hasattr(value, "detach") else value.numpy()
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
        arr = arr.astype(np.float32)
    elif arr.dtype.kind in "iu" and not isinstance(value, np.ndarray):
        arr = arr.astype(np.int64)
    return arr


class GraphContext:
    """Where nodes, constants and initializers of one export collect (torch's
    ``jit_utils.GraphContext``, the ``g`` of a symbolic function).

    Args:
        opset: the ONNX opset the graph targets (``g.opset``).

    Attributes:
        opset: the opset version.
        nodes: the NodeProtos, in order.
        initializers: name -> NumPy array (parameters and constants).
        domains: custom op domains used (``"mydomain::Op"``), each at version 1.
        module_path: the module being exported when the current node was recorded ("" for the
            root), used in error messages.
    """

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list = []
        self.initializers: dict[str, np.ndarray] = {}
        self.domains: dict[str, int] = {}
        self.module_path = ""
        self._names: set[str] = set()

    def fresh(self, hint: str) -> str:
        """A name not used yet in the graph, starting from ``hint``."""
        base = hint.replace("::", "_") or "v"
        name, i = base, 0
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def initializer(self, name: str, array: np.ndarray) -> Value:
        """Add ``array`` as an initializer named ``name`` (a parameter, a buffer)."""
        if name not in self.initializers:
            self._names.add(name)
            arr = np.asarray(array)   # (np.ascontiguousarray would make a 0-d array 1-d)
            self.initializers[name] = arr if arr.flags.c_contiguous else arr.copy(order="C")
        return Value(name, self.initializers[name])

    def constant(self, value: Any) -> Value:
        """``value`` (a number, list, NumPy/tb array) as a constant of the graph."""
        arr = _constant_array(value)
        return self.initializer(self.fresh("const"), arr)

    def as_value(self, x: Any) -> Value | None:
        """An input of :meth:`op`: a Value as it is, None as an omitted input, anything else a
        constant."""
        if x is None or isinstance(x, Value):
            return x
        return self.constant(x)

    def op(self, opname: str, *inputs: Any, outputs: int = 1, **attributes: Any) -> Any:
        """Add one ONNX node and return its output Value (a tuple of them for ``outputs > 1``).

        Args:
            opname: the ONNX op type (``"Relu"``), or ``"domain::Op"`` for a custom domain.
            *inputs: Values, None (an omitted optional input), or constants.
            outputs: how many outputs the node has.
            **attributes: the node's attributes, named with torch's type suffixes (``axis_i``,
                ``alpha_f``, ``mode_s``, ``value_t``).

        Returns:
            The output Value, or a tuple of ``outputs`` Values.
        """
        helper = onnx_module().helper
        domain, _, op_type = opname.rpartition("::")
        if domain in ("onnx", "aten"):
            domain = ""
        if domain:
            self.domains.setdefault(domain, 1)
        ins = [self.as_value(x) for x in inputs]
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        attrs = {}
        for key, val in attributes.items():
            name, _, kind = key.rpartition("_")
            if kind in ("i", "f", "s", "t") and name:
                key = name
                if kind == "i":
                    val = [int(v) for v in val] if isinstance(val, (list, tuple)) else int(val)
                elif kind == "f":
                    val = [float(v) for v in val] if isinstance(val, (list, tuple)) else float(val)
                elif kind == "t":
                    val = onnx_module().numpy_helper.from_array(_constant_array(val))
            attrs[key] = val
        self.nodes.append(helper.make_node(
            op_type, [v.name if v is not None else "" for v in ins], names,
            name=self.fresh(f"/{self.module_path.replace('.', '/')}/{op_type}"
                            if self.module_path else f"/{op_type}"),
            domain=domain or None, **attrs))
        vals = tuple(Value(n) for n in names)
        return vals[0] if outputs == 1 else vals
