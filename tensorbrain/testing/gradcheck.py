"""``gradcheck``: one helper that checks an op's forward and gradient against references.

1. forward against a NumPy reference (``numpy_fn``), when given;
2. the gradient of ``sum(out * r)`` (``r`` a fixed random cotangent, so every output element
   matters) against float64 central finite differences;
3. forward and gradients against PyTorch (``torch_fn``), when given and torch is installed;
   without torch that part is skipped (CI does not install it).

>>> import numpy as np, tensorbrain as tb
>>> from tensorbrain.testing import gradcheck
>>> gradcheck(lambda a, b: a * b + a.exp(), [np.random.rand(3, 1), np.random.rand(4)],
...           numpy_fn=lambda a, b: a * b + np.exp(a))
True
"""
from __future__ import annotations

import importlib

import numpy as np

from .. import _xp
from ..autograd import grad_mode
from ..tensor import Tensor


class GradcheckError(AssertionError):
    """A mismatch found by :func:`gradcheck`; the message names the input, index and values."""


def _torch():
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def torch_available() -> bool:
    """Whether torch can be imported here (the torch comparisons skip otherwise).

    Returns:
        A bool.
    """
    return _torch() is not None


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _to_np(x):
    return _xp.to_numpy(x._data if isinstance(x, Tensor) else x)


def _compare(what, got, want, atol, rtol):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise GradcheckError(f"{what}: shape {got.shape} != expected {want.shape}")
    if not np.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True):
        err = np.abs(got - want)
        err = np.where(np.isnan(err), np.inf, err)
        i = np.unravel_index(np.argmax(err), err.shape) if err.ndim else ()
        raise GradcheckError(f"{what}: max abs error {err.max():.3g} at index {tuple(int(j) for j in i)}: "
                             f"got {got[i]!r}, expected {want[i]!r} (atol={atol}, rtol={rtol})")


def gradcheck(fn, inputs, *, numpy_fn=None, torch_fn=None, grad_inputs=None, eps=1e-6,
              atol=1e-5, rtol=1e-4, fwd_atol=None, fwd_rtol=None, dtype=np.float64,
              device="cpu", seed=0, check_grad=True):
    """Check ``fn(*tensors)`` (a Tensor or tuple of Tensors) and return True, or raise
    :class:`GradcheckError` naming the mismatch.

    ``inputs``: arrays, Tensors or plain values. Floating arrays become ``dtype`` tensors on
    ``device`` that require grad (those listed in ``grad_inputs``, default all floating ones);
    integer arrays (indices) become tensors without grad; other values are passed as they are.
    ``numpy_fn(*arrays)`` and ``torch_fn(*torch_tensors)`` receive the same values.
    Finite differences always run in float64; with ``dtype`` float32 the analytic gradient is
    compared with a tolerance loosened by the caller.
    """
    raw = [_to_np(x) if isinstance(x, (np.ndarray, Tensor)) else x for x in inputs]
    is_float = [isinstance(x, np.ndarray) and x.dtype.kind == "f" for x in raw]
    wanted = [i for i, f in enumerate(is_float) if f] if grad_inputs is None else list(grad_inputs)
    base = [x.astype(np.float64) if f else x for x, f in zip(raw, is_float)]

    def build(arrays, dt, requires):
        out = []
        for i, x in enumerate(arrays):
            if isinstance(x, np.ndarray):
                t = Tensor._wrap(np.array(x, dtype=dt if is_float[i] else x.dtype))
                if device != "cpu":
                    t = t.to(device)
                if requires and i in wanted:
                    t.requires_grad_(True)
                out.append(t)
            else:
                out.append(x)
        return out

    fwd_atol = atol if fwd_atol is None else fwd_atol
    fwd_rtol = rtol if fwd_rtol is None else fwd_rtol

    tensors = build(base, dtype, True)
    outs = _as_list(fn(*tensors))
    out_np = [_to_np(o) for o in outs]

    if numpy_fn is not None:
        ref = _as_list(numpy_fn(*[x.astype(dtype) if f else x for x, f in zip(base, is_float)]))
        if len(ref) != len(out_np):
            raise GradcheckError(f"forward: fn gave {len(out_np)} outputs, numpy_fn {len(ref)}")
        for k, (o, r) in enumerate(zip(out_np, ref)):
            _compare(f"forward output {k} vs NumPy", o, r, fwd_atol, fwd_rtol)

    rng = np.random.default_rng(seed)
    diff_outs = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    cot = {k: rng.standard_normal(out_np[k].shape) for k in diff_outs}

    analytic = {}
    if check_grad and diff_outs and wanted:
        from ..autograd import backward
        backward([outs[k] for k in diff_outs],
                 [Tensor._wrap(_on(cot[k].astype(out_np[k].dtype), outs[k]._data)) for k in diff_outs])
        for i in wanted:
            g = tensors[i].grad
            analytic[i] = np.zeros(base[i].shape) if g is None else _to_np(g).astype(np.float64)

        def objective(arrays):
            with grad_mode.no_grad():
                res = _as_list(fn(*build(arrays, np.float64, False)))
            return sum(float((_to_np(res[k]).astype(np.float64) * cot[k]).sum()) for k in diff_outs)

        for i in wanted:
            x = base[i]
            num = np.zeros(x.shape)
            for j in np.ndindex(x.shape):
                arrays = list(base)
                xp_, xm = x.copy(), x.copy()
                xp_[j] += eps
                xm[j] -= eps
                arrays[i] = xp_
                fp = objective(arrays)
                arrays[i] = xm
                fm = objective(arrays)
                num[j] = (fp - fm) / (2 * eps)
            _compare(f"gradient of input {i} (shape {x.shape}) vs finite differences",
                     analytic[i], num, atol, rtol)

    if torch_fn is not None:
        torch = _torch()
        if torch is not None:
            tdt = {np.dtype(np.float64): torch.float64, np.dtype(np.float32): torch.float32,
                   np.dtype(np.float16): torch.float16}[np.dtype(dtype)]
            targs = []
            for i, x in enumerate(base):
                if isinstance(x, np.ndarray):
                    t = torch.tensor(x, dtype=tdt) if is_float[i] else torch.from_numpy(x.copy())
                    if is_float[i] and i in wanted:
                        t.requires_grad_(True)
                    targs.append(t)
                else:
                    targs.append(x)
            touts = _as_list(torch_fn(*targs))
            for k, (o, t) in enumerate(zip(out_np, touts)):
                _compare(f"forward output {k} vs torch", o, t.detach().numpy(), fwd_atol, fwd_rtol)
            if analytic:
                torch.autograd.backward(
                    [touts[k] for k in diff_outs],
                    [torch.tensor(cot[k], dtype=touts[k].dtype) for k in diff_outs])
                for i in wanted:
                    tg = targs[i].grad
                    tg = np.zeros(base[i].shape) if tg is None else tg.numpy()
                    _compare(f"gradient of input {i} vs torch", analytic[i], tg, atol, rtol)
    return True


def _on(arr, like):
    return _xp.cupy().asarray(arr) if _xp.is_cupy_array(like) else arr
