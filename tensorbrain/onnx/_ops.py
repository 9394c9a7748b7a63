"""The op table of the exporter: torch op name -> symbolic function ``fn(g, *args, **kwargs)``.

Arguments arrive as in torch's functional form (``F.conv2d(input, weight, bias, stride, ...)``):
tensors as :class:`~tensorbrain.onnx._graph.Value`, everything else as the Python value the
traced code passed. A method call (``x.view(...)``) arrives as the function of the same name
with ``x`` first; an operator (``a + b``) under the ``operator`` module's name. Families share
one function (``_unary("Relu")``), so a new op is a new row, not new code.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._graph import GraphContext, Value
from .symbolic_opset9 import expand, shape_tensor, unsqueeze


def _ex(x: Any) -> np.ndarray:
    """The example array of a Value (its shape and dtype decide some lowerings)."""
    if not isinstance(x, Value) or x.example is None:
        raise ValueError(f"the exporter needs the shape of {x!r}, which is not known")
    return np.asarray(x.example)


def _static(v: Any) -> Any:
    """A traced size (``x.size(1)``) as the number it was in the example run."""
    if isinstance(v, Value):
        return v.example.tolist() if isinstance(v.example, np.ndarray) else v.example
    return [_static(i) for i in v] if isinstance(v, (list, tuple)) else v


def _tuple(v: Any, n: int) -> list[int]:
    v = _static(v)
    return [int(i) for i in v] if isinstance(v, (list, tuple)) else [int(v)] * n


def _like(g: GraphContext, x: Any, other: Any) -> Any:
    """``x`` as a Value; a Python number becomes a constant of ``other``'s dtype."""
    if isinstance(x, Value):
        return x
    dt = other.dtype() if isinstance(other, Value) and other.dtype() is not None else None
    return g.constant(np.asarray(x, dtype=dt) if dt is not None else x)


def _unary(op: str, **attrs: Any) -> Callable:
    def fn(g: GraphContext, x: Value, *_: Any, **__: Any) -> Value:
        return g.op(op, x, **attrs)
    return fn


def _identity(g: GraphContext, x: Any, *_: Any, **__: Any) -> Any:
    return x


def _dropout(g: GraphContext, x: Value, p: float = 0.5, training: bool = True,
             inplace: bool = False, generator: Any = None) -> Value:
    """Nothing at inference; a dropout that is on (``training=True``, torch's functional
    default) is random, which an inference graph does not reproduce."""
    if training and p > 0:
        raise ValueError(f"dropout(p={p}) with training=True is random and is not exported: "
                         f"export the model in eval mode, or pass training=self.training")
    return x


def _alpha_dropout(g: GraphContext, x: Value, p: float = 0.5, training: bool = False,
                   inplace: bool = False) -> Value:
    """As :func:`_dropout`, with torch's default for these (off)."""
    return _dropout(g, x, p, training)


def _binary(op: str) -> Callable:
    def fn(g: GraphContext, a: Any, b: Any, *, alpha: Any = None, **__: Any) -> Value:
        if not isinstance(a, Value) and not isinstance(b, Value):
            raise ValueError(f"{op} of two constants should not reach the exporter")
        if alpha is not None and alpha != 1:
            b = g.op("Mul", _like(g, b, a), _like(g, alpha, a))
        kinds = [getattr(v.dtype(), "kind", "?") for v in (a, b) if isinstance(v, Value)]
        if op == "Div" and all(k in "iub" for k in kinds):
            a, b = (g.op("Cast", _like(g, v, None), to_i=1) for v in (a, b))  # true division
        elif isinstance(a, Value) and isinstance(b, Value) and None not in (a.dtype(), b.dtype()) \
                and a.dtype() != b.dtype():
            a, b = _promote(g, a, b)
        return g.op(op, _like(g, a, b), _like(g, b, a))
    return fn


def _promote(g: GraphContext, a: Value, b: Value) -> tuple[Value, Value]:
    """Two tensors of different dtypes cast to one, as torch promotes (``x * x.size(1)``: the
    float one wins; a 0-d operand of the same kind takes the other's dtype)."""
    from .symbolic_helper import onnx_dtype
    da, db = np.dtype(a.dtype()), np.dtype(b.dtype())
    fa, fb = da.kind in "fc", db.kind in "fc"
    if fa != fb:
        to = da if fa else db
    elif _ex(a).ndim == 0 and _ex(b).ndim:
        to = db
    elif _ex(b).ndim == 0 and _ex(a).ndim:
        to = da
    else:
        to = np.promote_types(da, db)
    cast = lambda v: v if v.dtype() == to else g.op("Cast", v, to_i=int(onnx_dtype(to)))  # noqa: E731
    return cast(a), cast(b)


def _floordiv(g: GraphContext, a: Any, b: Any) -> Value:
    q = g.op("Div", _like(g, a, b), _like(g, b, a))
    dt = (a if isinstance(a, Value) else b).dtype()
    return q if dt is not None and dt.kind in "iu" else g.op("Floor", q)


def _gelu(g: GraphContext, x: Value, approximate: str = "none") -> Value:
    half = _like(g, 0.5, x)
    if approximate == "tanh":    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        inner = g.op("Mul", _like(g, math.sqrt(2 / math.pi), x), g.op(
            "Add", x, g.op("Mul", _like(g, 0.044715, x), g.op("Pow", x, _like(g, 3.0, x)))))
        return g.op("Mul", g.op("Mul", x, half), g.op("Add", g.op("Tanh", inner), _like(g, 1.0, x)))
    erf = g.op("Erf", g.op("Div", x, _like(g, math.sqrt(2.0), x)))
    return g.op("Mul", g.op("Mul", x, g.op("Add", erf, _like(g, 1.0, x))), half)


def _silu(g: GraphContext, x: Value, inplace: bool = False) -> Value:
    return g.op("Mul", x, g.op("Sigmoid", x))


def _leaky_relu(g: GraphContext, x: Value, negative_slope: float = 0.01, inplace: bool = False):
    return g.op("LeakyRelu", x, alpha_f=negative_slope)


def _softmax(op: str) -> Callable:
    def fn(g: GraphContext, x: Value, dim: int | None = None, _stacklevel: int = 3,
           dtype: Any = None) -> Value:
        if dim is None:
            raise ValueError(f"{op}: give dim (torch's implicit-dim form is not exported)")
        return g.op(op, x if dtype is None else _to(g, x, dtype=dtype), axis_i=dim)
    return fn


def _initializer_T(g: GraphContext, w: Value) -> Value:
    """``w.T`` as a new initializer when ``w`` is one (no Transpose node at run time)."""
    if w.name in g.initializers:
        return g.initializer(g.fresh(f"{w.name}_T"), g.initializers[w.name].T)
    return g.op("Transpose", w, perm_i=[1, 0])


def _linear(g: GraphContext, x: Value, weight: Value, bias: Value | None = None) -> Value:
    if x.rank() == 2:
        return g.op("Gemm", x, weight, bias, transB_i=1)
    y = g.op("MatMul", x, _initializer_T(g, weight))
    return y if bias is None else g.op("Add", y, bias)


def _conv_pads(padding: Any, kernel: tuple, dilation: list[int], n: int) -> list[int]:
    if padding == "valid":
        return [0] * (2 * n)
    if padding == "same":
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return [t // 2 for t in total] + [t - t // 2 for t in total]
    p = _tuple(padding, n)
    return p + p


def _conv(g: GraphContext, x: Value, weight: Value, bias: Value | None = None, stride: Any = 1,
          padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Value:
    n = _ex(x).ndim - 2
    kernel = _ex(weight).shape[2:]
    dil = _tuple(dilation, n)
    return g.op("Conv", x, weight, bias, kernel_shape_i=list(kernel), strides_i=_tuple(stride, n),
                pads_i=_conv_pads(padding, kernel, dil, n), dilations_i=dil, group_i=groups)


def _conv_transpose(g: GraphContext, x: Value, weight: Value, bias: Value | None = None,
                    stride: Any = 1, padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                    dilation: Any = 1) -> Value:
    n = _ex(x).ndim - 2
    p = _tuple(padding, n)
    return g.op("ConvTranspose", x, weight, bias, kernel_shape_i=list(_ex(weight).shape[2:]),
                strides_i=_tuple(stride, n), pads_i=p + p, dilations_i=_tuple(dilation, n),
                output_padding_i=_tuple(output_padding, n), group_i=groups)


def _batch_norm(g: GraphContext, x: Value, running_mean: Value, running_var: Value,
                weight: Value | None = None, bias: Value | None = None, training: bool = False,
                momentum: float = 0.1, eps: float = 1e-5) -> Value:
    if training:
        raise ValueError("batch_norm in training mode is not exported (ONNX's BatchNormalization "
                         "uses the running statistics): call model.eval() first")
    c = _ex(x).shape[1]
    dt = x.dtype()
    weight = weight if weight is not None else g.constant(np.ones(c, dt))
    bias = bias if bias is not None else g.constant(np.zeros(c, dt))
    return g.op("BatchNormalization", x, weight, bias, running_mean, running_var,
                epsilon_f=eps, momentum_f=1 - (0.1 if momentum is None else momentum))


def _layer_norm(g: GraphContext, x: Value, normalized_shape: Any, weight: Value | None = None,
                bias: Value | None = None, eps: float = 1e-5) -> Value:
    if g.opset < 17:
        raise ValueError(f"layer_norm needs opset_version >= 17 (LayerNormalization); the export "
                         f"asked for {g.opset}")
    shape = _tuple(normalized_shape, 1)
    weight = weight if weight is not None else g.constant(np.ones(shape, x.dtype()))
    return g.op("LayerNormalization", x, weight, bias, axis_i=-len(shape), epsilon_f=eps)


def _rms_norm(g: GraphContext, x: Value, normalized_shape: Any, weight: Value | None = None,
              eps: float | None = None) -> Value:
    """``x / sqrt(mean(x^2 over the last dims) + eps) * weight`` (ONNX's RMSNormalization
    needs opset 23)."""
    n = len(_tuple(normalized_shape, 1))
    dt = x.dtype()
    eps = float(np.finfo(dt).eps) if eps is None else eps
    axes = list(range(-n, 0))
    ms = _reduce("ReduceMean")(g, g.op("Mul", x, x), axes, True)
    y = g.op("Div", x, g.op("Sqrt", g.op("Add", ms, g.constant(np.asarray(eps, dt)))))
    return y if weight is None else g.op("Mul", y, weight)


def _pool_args(x: Value, kernel_size: Any, stride: Any, padding: Any) -> tuple:
    n = _ex(x).ndim - 2
    k = _tuple(kernel_size, n)
    s = _tuple(stride, n) if stride not in (None, [], ()) else k
    p = _tuple(padding, n)
    return n, k, s, p + p


def _max_pool(g: GraphContext, x: Value, kernel_size: Any, stride: Any = None, padding: Any = 0,
              dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Value:
    if return_indices:
        raise ValueError("max_pool with return_indices=True is not exported")
    n, k, s, p = _pool_args(x, kernel_size, stride, padding)
    return g.op("MaxPool", x, kernel_shape_i=k, strides_i=s, pads_i=p,
                dilations_i=_tuple(dilation, n), ceil_mode_i=int(ceil_mode))


def _avg_pool(g: GraphContext, x: Value, kernel_size: Any, stride: Any = None, padding: Any = 0,
              ceil_mode: bool = False, count_include_pad: bool = True,
              divisor_override: Any = None) -> Value:
    if divisor_override is not None:
        raise ValueError("avg_pool with divisor_override is not exported")
    _, k, s, p = _pool_args(x, kernel_size, stride, padding)
    return g.op("AveragePool", x, kernel_shape_i=k, strides_i=s, pads_i=p,
                ceil_mode_i=int(ceil_mode), count_include_pad_i=int(count_include_pad))


def _adaptive_avg_pool(g: GraphContext, x: Value, output_size: Any) -> Value:
    spatial = _ex(x).shape[2:]
    out = [o if o is not None else i for o, i in zip(_tuple(output_size, len(spatial)), spatial)]
    if all(o == 1 for o in out):
        return g.op("GlobalAveragePool", x)
    if any(i % o for i, o in zip(spatial, out)):
        raise ValueError(f"adaptive_avg_pool to {tuple(out)} from {tuple(spatial)}: only sizes "
                         f"that divide the input (or 1) are exported")
    k = [i // o for i, o in zip(spatial, out)]
    return g.op("AveragePool", x, kernel_shape_i=k, strides_i=k)


def _reduce(op: str) -> Callable:
    def fn(g: GraphContext, x: Value, dim: Any = None, keepdim: bool = False, *,
           dtype: Any = None) -> Value:
        if dtype is not None:
            x = _to(g, x, dtype=dtype)
        if dim is None or dim == ():
            return g.op(op, x, keepdims_i=0)
        axes = np.array(_tuple(dim, 1), np.int64)
        if op == "ReduceMean" and g.opset < 18:
            return g.op(op, x, axes_i=list(axes), keepdims_i=int(keepdim))
        return g.op(op, x, g.constant(axes), keepdims_i=int(keepdim))
    return fn


def _sizes(shape: tuple) -> Any:
    """``view(2, 3)``, ``view((2, 3))`` and ``view(shape_value)`` alike."""
    return shape[0] if len(shape) == 1 and isinstance(shape[0], (list, tuple, Value)) else shape


def _reshape(g: GraphContext, x: Value, *shape: Any) -> Value:
    return g.op("Reshape", x, shape_tensor(g, _sizes(shape)))


def _flatten(g: GraphContext, x: Value, start_dim: int = 0, end_dim: int = -1) -> Value:
    dims = _ex(x).shape
    start, end = start_dim % max(len(dims), 1), end_dim % max(len(dims), 1)
    if start == 1 and end == len(dims) - 1:
        return g.op("Flatten", x, axis_i=1)
    return _reshape(g, x, [0] * start + [-1] + list(dims[end + 1:]))


def _permute(g: GraphContext, x: Value, *dims: Any) -> Value:
    rank = _ex(x).ndim
    return g.op("Transpose", x, perm_i=[d % rank for d in _sizes(dims)])


def _transpose(g: GraphContext, x: Value, dim0: int = 0, dim1: int = 1) -> Value:
    perm = list(range(_ex(x).ndim))
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return g.op("Transpose", x, perm_i=perm)


def _squeeze(g: GraphContext, x: Value, dim: Any = None) -> Value:
    shape = _ex(x).shape
    if dim is None:
        return g.op("Squeeze", x)
    axes = [d % len(shape) for d in _tuple(dim, 1) if shape[d] == 1]
    return g.op("Squeeze", x, g.constant(np.array(axes, np.int64))) if axes else x


def _cat(g: GraphContext, tensors: Any, dim: int = 0) -> Value:
    return g.op("Concat", *tensors, axis_i=dim)


def _stack(g: GraphContext, tensors: Any, dim: int = 0) -> Value:
    if dim < 0:
        dim += _ex(tensors[0]).ndim + 1
    return g.op("Concat", *[unsqueeze(g, t, dim) for t in tensors], axis_i=dim)


def _split_sizes(g: GraphContext, x: Value, sizes: list[int], dim: int) -> tuple:
    return g.op("Split", x, g.constant(np.array(sizes, np.int64)), axis_i=dim,
                outputs=len(sizes))


def _split(g: GraphContext, x: Value, split_size_or_sections: Any, dim: int = 0) -> tuple:
    n = _ex(x).shape[dim]
    split_size_or_sections = _static(split_size_or_sections)
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [int(s) for s in split_size_or_sections]
    else:
        s = int(split_size_or_sections)
        sizes = [s] * (n // s) + ([n % s] if n % s else [])
    return _split_sizes(g, x, sizes, dim)


def _chunk(g: GraphContext, x: Value, chunks: int, dim: int = 0) -> tuple:
    n = _ex(x).shape[dim]
    return _split(g, x, -(-n // chunks), dim)


def _size(g: GraphContext, x: Value, dim: int | None = None) -> Value:
    shape = g.op("Shape", x)
    return shape if dim is None else g.op("Gather", shape, g.constant(np.array(dim, np.int64)))


def _getattr(g: GraphContext, x: Value, name: str) -> Any:
    if name == "shape":
        return g.op("Shape", x)
    if name in ("T", "mT"):
        rank = _ex(x).ndim
        perm = list(range(rank))[::-1] if name == "T" else [*range(rank - 2), rank - 1, rank - 2]
        return g.op("Transpose", x, perm_i=perm)
    raise KeyError(name)   # the exporter takes the value from the example run


def _index(g: GraphContext, x: Value, index: Any) -> Any:
    """``x[index]`` for ints, slices, None and ``...`` (Gather, Slice, Unsqueeze)."""
    if isinstance(x, (tuple, list)):
        return x[index]
    items = list(index) if isinstance(index, tuple) else [index]
    rank = _ex(x).ndim
    if any(i is Ellipsis for i in items):
        k = items.index(Ellipsis)
        fill = rank - sum(i is not None for i in items if i is not Ellipsis)
        items[k:k + 1] = [slice(None)] * fill
    axis, out_axis, gathers, y = 0, 0, [], x
    for item in items:
        if item is None:
            y = unsqueeze(g, y, out_axis)
            out_axis += 1
        elif isinstance(item, slice):
            if item != slice(None):
                big = np.iinfo(np.int64).max
                start = item.start if item.start is not None else 0
                stop = item.stop if item.stop is not None else big
                y = g.op("Slice", y, g.constant([start]), g.constant([stop]),
                         g.constant([out_axis]), g.constant([item.step or 1]))
            axis, out_axis = axis + 1, out_axis + 1
        elif isinstance(item, (int, np.integer, Value)):
            gathers.append(out_axis)
            y = g.op("Gather", y, _like(g, item, None), axis_i=out_axis)
            axis += 1
        else:
            raise ValueError(f"indexing with {type(item).__name__} is not exported (ints, "
                             f"slices, None and ... are)")
    return y


def _sdpa(g: GraphContext, q: Value, k: Value, v: Value, attn_mask: Any = None,
          dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
          enable_gqa: bool = False) -> Value:
    qe, ke = _ex(q), _ex(k)
    scale = scale if scale is not None else 1.0 / math.sqrt(qe.shape[-1])
    rank = qe.ndim
    kt = g.op("Transpose", k, perm_i=[*range(rank - 2), rank - 1, rank - 2])
    scores = g.op("Mul", g.op("MatMul", q, kt), _like(g, scale, q))
    if is_causal:
        attn_mask = g.constant(np.tril(np.ones((qe.shape[-2], ke.shape[-2]), bool)))
    if attn_mask is not None:
        if not isinstance(attn_mask, Value) or attn_mask.dtype() == np.bool_:
            scores = g.op("Where", _like(g, attn_mask, None), scores,
                          g.constant(np.array(-np.inf, qe.dtype)))
        else:
            scores = g.op("Add", scores, attn_mask)
    return g.op("MatMul", g.op("Softmax", scores, axis_i=-1), v)


def _rows(g: GraphContext, w: Value, n: int) -> list[Value]:
    """``w`` split into ``n`` equal row blocks (slices of the initializer when it is one)."""
    if w.name in g.initializers:
        return [g.initializer(g.fresh(f"{w.name}_{i}"), a)
                for i, a in enumerate(np.split(g.initializers[w.name], n))]
    return list(g.op("Split", w, g.constant(np.full(n, _ex(w).shape[0] // n, np.int64)),
                     axis_i=0, outputs=n))


def _mha(g: GraphContext, query: Value, key: Value, value: Value, key_padding_mask: Any = None,
         need_weights: bool = True, attn_mask: Any = None, average_attn_weights: bool = True,
         is_causal: bool = False, *, module: Any, in_w: Value, in_b: Value | None,
         out_w: Value, out_b: Value | None) -> tuple:
    """``nn.MultiheadAttention`` (eval): projections, heads, masked softmax, output projection;
    the head-averaged (or per-head) weights as the second output when asked for."""
    if not module._qkv_same_embed_dim or module.bias_k is not None or module.add_zero_attn \
            or _ex(query).ndim != 3:
        raise ValueError("MultiheadAttention is exported for batched inputs with kdim = vdim = "
                         "embed_dim, no add_bias_kv, no add_zero_attn")
    heads, e = module.num_heads, module.embed_dim
    if not module.batch_first:
        query, key, value = (g.op("Transpose", t, perm_i=[1, 0, 2]) for t in (query, key, value))
    ws, bs = _rows(g, in_w, 3), _rows(g, in_b, 3) if in_b is not None else [None] * 3
    q, k, v = (g.op("Transpose", g.op("Reshape", _linear(g, t, w, b),
                                      g.constant([0, 0, heads, e // heads])), perm_i=[0, 2, 1, 3])
               for t, w, b in zip((query, key, value), ws, bs))
    scores = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm_i=[0, 1, 3, 2])),
                  g.constant(np.asarray(1 / math.sqrt(e // heads), _ex(in_w).dtype)))
    neg = g.constant(np.asarray(-np.inf, _ex(in_w).dtype))
    if attn_mask is not None:
        if _ex(attn_mask).ndim != 2:
            raise ValueError("MultiheadAttention: only a 2-D (L, S) attn_mask is exported")
        scores = g.op("Where", attn_mask, neg, scores) if attn_mask.dtype() == np.bool_ \
            else g.op("Add", scores, attn_mask)
    if key_padding_mask is not None:
        kpm = g.op("Unsqueeze", key_padding_mask, g.constant([1, 2]))
        scores = g.op("Where", kpm, neg, scores) if key_padding_mask.dtype() == np.bool_ \
            else g.op("Add", scores, kpm)
    probs = g.op("Softmax", scores, axis_i=-1)
    out = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, v), perm_i=[0, 2, 1, 3]),
               g.constant([0, 0, e]))
    out = _linear(g, out, out_w, out_b)
    if not module.batch_first:
        out = g.op("Transpose", out, perm_i=[1, 0, 2])
    if not need_weights:
        return out, None
    return out, (_reduce("ReduceMean")(g, probs, 1) if average_attn_weights else probs)


def _to(g: GraphContext, x: Value, *args: Any, dtype: Any = None, **__: Any) -> Value:
    from .symbolic_helper import onnx_dtype
    for a in args:
        if a is not None and not isinstance(a, (str, bool, Value)) and \
                "device" not in type(a).__name__.lower():
            dtype = a
    return x if dtype is None else g.op("Cast", x, to_i=int(onnx_dtype(dtype)))


def _embedding(g: GraphContext, x: Value, weight: Value, *_: Any, **__: Any) -> Value:
    return g.op("Gather", weight, x, axis_i=0)


def _expand(g: GraphContext, x: Value, *sizes: Any) -> Value:
    return expand(g, x, _sizes(sizes), None)


_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "neg": "Neg", "abs": "Abs", "erf": "Erf", "sin": "Sin", "cos": "Cos",
          "reciprocal": "Reciprocal", "floor": "Floor", "ceil": "Ceil", "softplus": "Softplus",
          "shape_as_tensor": "Shape"}
_BINARY = {"add": "Add", "iadd": "Add", "sub": "Sub", "isub": "Sub", "mul": "Mul",
           "imul": "Mul", "div": "Div", "truediv": "Div", "itruediv": "Div", "pow": "Pow",
           "matmul": "MatMul", "mm": "MatMul", "bmm": "MatMul"}

#: torch op name -> symbolic function. The names are torch's (``aten::<name>`` in the custom
#: symbolic registry, which is consulted first).
OPS: dict[str, Callable] = {
    **{k: _unary(v) for k, v in _UNARY.items()},
    **{k: _binary(v) for k, v in _BINARY.items()},
    "floordiv": _floordiv,
    "rsqrt": lambda g, x: g.op("Reciprocal", g.op("Sqrt", x)),
    "gelu": _gelu, "silu": _silu, "leaky_relu": _leaky_relu,
    "softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"),
    "contiguous": _identity, "clone": _identity, "detach": _identity,
    **{k: _dropout for k in ("dropout", "dropout1d", "dropout2d", "dropout3d")},
    **{k: _alpha_dropout for k in ("alpha_dropout", "feature_alpha_dropout")},
    "linear": _linear,
    "conv1d": _conv, "conv2d": _conv, "conv3d": _conv,
    "conv_transpose1d": _conv_transpose, "conv_transpose2d": _conv_transpose,
    "batch_norm": _batch_norm, "layer_norm": _layer_norm, "rms_norm": _rms_norm,
    "max_pool1d": _max_pool, "max_pool2d": _max_pool, "max_pool3d": _max_pool,
    "avg_pool1d": _avg_pool, "avg_pool2d": _avg_pool, "avg_pool3d": _avg_pool,
    "adaptive_avg_pool1d": _adaptive_avg_pool, "adaptive_avg_pool2d": _adaptive_avg_pool,
    "mean": _reduce("ReduceMean"), "sum": _reduce("ReduceSum"),
    "view": _reshape, "reshape": _reshape, "reshape_from_tensor_shape": _reshape,
    "flatten": _flatten, "permute": _permute, "transpose": _transpose,
    "t": lambda g, x: g.op("Transpose", x, perm_i=[1, 0]),
    "unsqueeze": lambda g, x, dim: unsqueeze(g, x, dim), "squeeze": _squeeze,
    "cat": _cat, "concat": _cat, "concatenate": _cat, "stack": _stack,
    "split": _split, "chunk": _chunk, "size": _size, "getattr": _getattr,
    "getitem": _index, "expand": _expand,
    "scaled_dot_product_attention": _sdpa, "embedding": _embedding,
    "multi_head_attention": _mha,
    "to": _to, "float": functools.partial(_to, dtype="float32"),
}


class P(str):
    """A module attribute (a parameter or buffer) in a :data:`MODULES` row."""


def _conv_row(m: Any) -> tuple:
    if getattr(m, "padding_mode", "zeros") != "zeros":
        raise ValueError(f"{type(m).__name__}(padding_mode={m.padding_mode!r}) is not exported "
                         f"(only 'zeros')")
    if getattr(m, "transposed", False):
        return ("conv_transpose2d", (P("weight"), P("bias"), m.stride, m.padding,
                                     m.output_padding, m.groups, m.dilation), {})
    return ("conv2d", (P("weight"), P("bias"), m.stride, m.padding, m.dilation, m.groups), {})


def _pool_row(key: str) -> Callable:
    def row(m: Any) -> tuple:
        if key == "max_pool2d":
            return (key, (m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                          m.return_indices), {})
        return (key, (m.kernel_size, m.stride, m.padding, m.ceil_mode,
                      m.count_include_pad, getattr(m, "divisor_override", None)), {})
    return row


def _plain(key: str, *attrs: str) -> Callable:
    return lambda m: (key, tuple(getattr(m, a) for a in attrs), {})


#: TensorBrain layer class name -> ``m -> (op name, arguments after the input, kwargs)``: the
#: functional call the layer's forward makes (its own forward calls private kernels the tracer
#: cannot follow). Layers not named here are traced through.
MODULES: dict[str, Callable] = {
    "Linear": lambda m: ("linear", (P("weight"), P("bias")), {}),
    **{c: _conv_row for c in ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
                              "ConvTranspose2d")},
    **{c: lambda m: ("batch_norm", (P("running_mean"), P("running_var"), P("weight"),
                                    P("bias"), m.training, m.momentum, m.eps), {})
       for c in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")},
    "LayerNorm": lambda m: ("layer_norm", (m.normalized_shape, P("weight"), P("bias"), m.eps),
                            {}),
    "RMSNorm": lambda m: ("rms_norm", (m.normalized_shape, P("weight"), m.eps), {}),
    "ReLU": _plain("relu"), "Sigmoid": _plain("sigmoid"), "Tanh": _plain("tanh"),
    "SiLU": _plain("silu"), "GELU": _plain("gelu", "approximate"),
    "LeakyReLU": _plain("leaky_relu", "negative_slope"),
    "Softmax": _plain("softmax", "dim"), "LogSoftmax": _plain("log_softmax", "dim"),
    **{c: _plain("dropout", "p", "training") for c in ("Dropout", "Dropout1d", "Dropout2d",
                                                       "Dropout3d", "AlphaDropout")},
    "Identity": _plain("clone"),
    "Flatten": _plain("flatten", "start_dim", "end_dim"),
    **{c: _pool_row("max_pool2d") for c in ("MaxPool1d", "MaxPool2d", "MaxPool3d")},
    **{c: _pool_row("avg_pool2d") for c in ("AvgPool1d", "AvgPool2d", "AvgPool3d")},
    **{c: _plain("adaptive_avg_pool2d", "output_size")
       for c in ("AdaptiveAvgPool1d", "AdaptiveAvgPool2d")},
    "Embedding": lambda m: ("embedding", (P("weight"),), {}),
    "MultiheadAttention": lambda m: ("multi_head_attention", (), {
        "module": m, "in_w": P("in_proj_weight"), "in_b": P("in_proj_bias"),
        "out_w": P("out_proj.weight"), "out_b": P("out_proj.bias")}),
}
