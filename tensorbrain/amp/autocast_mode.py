"""``tb.autocast``: run PyTorch's lower-precision op list in float16/bfloat16, the rest as given.

Autocast is thread-local state (one switch per device type, as PyTorch's dispatch keys) read by
the ops that carry the :func:`autocast_op` decorator: that decorator is the one place where
autocast meets op dispatch. With autocast off, the decorated op costs one attribute read more.
With it on, the op's PyTorch name is looked up in ``_lists`` for the device its tensors are on,
its floating inputs are cast (an autograd-recorded cast, so gradients flow back to the float32
parameters in float32), and the op runs with autocast off inside it, as PyTorch's autocast
kernels exclude their own dispatch key.

Lower precision on the CPU: NumPy has no bfloat16/float16 GEMM (ml_dtypes' bfloat16 matmul
returns float32 from a scalar loop, NumPy's float16 one skips BLAS), so an op of the ``lower``
list (matmul, linear, conv2d...) given float16/bfloat16 NumPy arrays -- by autocast, or by a
model converted with ``.bfloat16()`` -- multiplies those exact values in float32 with BLAS and
rounds the result once to the low dtype. That is what PyTorch's CPU kernels compute (oneDNN
accumulates bfloat16 products in float32). On CUDA the op runs on the float16 arrays themselves
(cuBLAS).
"""
from __future__ import annotations

import functools
import threading
import warnings

import numpy as np

from .. import _dtype, _xp
from .._ops import core as _core
from . import _lists

_F32 = _dtype.float32
_LOW = (_dtype.float16, _dtype.bfloat16)


class _State(threading.local):
    """Per-thread autocast state; class attributes are every new thread's defaults."""
    active = False            # any device type enabled (the decorator's fast check)
    inside = False            # running inside an autocast op: nested ops are left alone
    nesting = 0               # open autocast regions (the cache is cleared at 0)

    def __init__(self):
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {"cpu": _dtype.bfloat16, "cuda": _dtype.float16}
        self.cache_enabled = True
        self.cache = {}


_state = _State()
# How many threads have autocast on: the decorated ops read this global first (~20 ns) and touch
# the thread-local state (~100 ns) only while some thread is inside an autocast region.
_threads_on = [0]
_threads_lock = threading.Lock()   # += on it from two threads at once could lose an update


def _refresh():
    was, _state.active = _state.active, any(_state.enabled.values())
    if was != _state.active:
        with _threads_lock:
            _threads_on[0] += 1 if _state.active else -1


# ***** the hook: ops declare their PyTorch name *****
def autocast_op(name):
    """Decorator for an op function: under autocast, its inputs are cast per PyTorch's lists.

    Args:
        name: the op's PyTorch name (``"conv2d"``, ``"softmax"``, ...), looked up in
            ``tensorbrain/amp/_lists.py`` for the device type of the op's tensors.
    """
    def decorate(fn):
        if _lists.CPU.get(name) in ("lower", "input"):   # matmul, conv2d, batch_norm...
            @functools.wraps(fn)
            def op(*args, **kwargs):
                if _threads_on[0] and _state.active and not _state.inside:
                    return _dispatch(name, fn, args, kwargs)
                if args and _is_low_numpy(args[0]):   # see _low_on_cpu
                    return _low_on_cpu(name, fn, args, kwargs)
                return fn(*args, **kwargs)
        else:
            @functools.wraps(fn)
            def op(*args, **kwargs):
                if _threads_on[0] and _state.active and not _state.inside:
                    return _dispatch(name, fn, args, kwargs)
                return fn(*args, **kwargs)
        op.__wrapped__ = fn
        return op
    return decorate


def _is_low_numpy(t):
    """A float16 ('e') or bfloat16 ('E') NumPy array inside ``t`` (dtype chars: ~50 ns where a
    dtype comparison costs several times that)."""
    d = getattr(t, "_data", None)
    return type(d) is np.ndarray and d.dtype.char in "eE"


def _low_on_cpu(name, fn, args, kwargs):
    """A ``lower`` op on float16/bfloat16 NumPy arrays: float32 BLAS on the exact values, one
    rounding of the result (NumPy alone would return float32, or skip BLAS). The ``input`` ops
    (batch/layer/group norm) take the same path: a bfloat16 input with float32 or bfloat16
    parameters gives a bfloat16 output computed in float32, as PyTorch's CPU kernels do."""
    low = args[0]._data.dtype
    for t in _tensors(args, kwargs) if _lists.CPU[name] == "lower" else ():
        if _dtype.is_floating_point(t._data.dtype) and t._data.dtype != low:
            raise RuntimeError(f"{name}: expected all floating tensors to have the same dtype, "
                               f"but got {low} and {t._data.dtype}: convert one with .to(dtype), "
                               f"or run under tb.autocast, which casts the inputs for you")
    prev, _state.inside = _state.inside, True
    try:
        args, kwargs = _map(args, kwargs, lambda t: _cast(t, _F32))
        return _map_out(fn(*args, **kwargs), lambda t: _cast(t, low))
    finally:
        _state.inside = prev


def _tensors(args, kwargs):
    T = _core.Tensor
    for a in args:
        if isinstance(a, T):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (t for t in a if isinstance(t, T))
    for a in kwargs.values():
        if isinstance(a, T):
            yield a


def _dispatch(name, fn, args, kwargs):
    first = next(_tensors(args, kwargs), None)
    if first is None:
        return fn(*args, **kwargs)
    device_type = "cuda" if _xp.is_cupy_array(first._data) else "cpu"
    policy = _lists.POLICIES[device_type].get(name) if _state.enabled[device_type] else None
    if policy is None:
        return fn(*args, **kwargs)
    if policy == "banned":
        raise RuntimeError(_lists.BANNED_MESSAGE)
    low = _state.dtype[device_type]
    _state.inside = True
    try:
        if policy == "lower":
            args, kwargs = _map(args, kwargs, lambda t: _cast_lower(t, low))
            if device_type == "cpu" and args and _is_low_numpy(args[0]):
                return _low_on_cpu(name, fn, args, kwargs)   # see the module docstring
            return fn(*args, **kwargs)
        if policy == "input" and device_type == "cpu" and args and _is_low_numpy(args[0]):
            return _low_on_cpu(name, fn, args, kwargs)
        if policy == "fp32":
            args, kwargs = _map(args, kwargs, lambda t: _cast(t, _F32) if t.dtype in _LOW else t)
            return fn(*args, **kwargs)
        if policy == "promote":
            widest = functools.reduce(_dtype.promote_types,
                                      [t.dtype for t in _tensors(args, kwargs)
                                       if _dtype.is_floating_point(t.dtype)], first.dtype)
            args, kwargs = _map(args, kwargs, lambda t: _cast(t, widest))
            return fn(*args, **kwargs)
        # "input": float32 math, the output in the dtype of the op's first tensor
        if first.dtype not in _LOW:
            return fn(*args, **kwargs)
        out_dtype = first.dtype
        args, kwargs = _map(args, kwargs, lambda t: _cast(t, _F32) if t.dtype in _LOW else t)
        return _map_out(fn(*args, **kwargs), lambda t: _cast(t, out_dtype))
    finally:
        _state.inside = False


def _map(args, kwargs, cast):
    """Apply ``cast`` to every floating tensor in args/kwargs (and in list/tuple arguments)."""
    T = _core.Tensor

    def one(a):
        if isinstance(a, T):
            return cast(a) if _dtype.is_floating_point(a._data.dtype) else a
        if isinstance(a, (list, tuple)) and any(isinstance(t, T) for t in a):
            return type(a)(one(t) for t in a)
        return a
    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def _map_out(out, cast):
    if isinstance(out, _core.Tensor):
        return cast(out) if _dtype.is_floating_point(out._data.dtype) else out
    if isinstance(out, tuple):
        return type(out)(_map_out(o, cast) for o in out) if not hasattr(out, "_fields") else \
            type(out)(*(_map_out(o, cast) for o in out))
    return out


def _cast(t, dtype):
    """``t.to(dtype)`` recorded for autograd: the gradient comes back in ``t``'s dtype."""
    x = t._data
    if x.dtype == dtype:
        return t
    src = x.dtype
    return _core.make(x.astype(dtype), (t,), lambda g: (g.astype(src),), "ToCopyBackward")


def _cast_lower(t, low):
    """The cast to the low dtype for a ``lower`` op; float64 stays (PyTorch's is_eligible).

    Casts of float32 leaves that require grad (the parameters) are cached until the outermost
    autocast region exits, as PyTorch's cache; an entry is dropped when the parameter was
    modified in place since (PyTorch would hand out the stale copy) or its cast's graph node was
    freed by a backward pass.
    """
    x = t._data
    if x.dtype == low or x.dtype == _dtype.float64:
        return t
    if not (_state.cache_enabled and x.dtype == _F32 and t.requires_grad and t.grad_fn is None):
        return _cast(t, low)
    key = id(t)
    hit = _state.cache.get(key)
    if hit is not None:
        src, version, cast = hit
        if src is t and version == t._version[0] and cast.grad_fn is not None \
                and cast.grad_fn.backward is not None:
            return cast
    cast = _cast(t, low)
    _state.cache[key] = (t, t._version[0], cast)   # holds t: its id cannot be reused meanwhile
    return cast


# ***** the public context manager / decorator *****
# bfloat16 on cuda needs CuPy >= 14 (checked when asked for: _xp.cupy_bfloat16_unsupported)
_SUPPORTED = {"cpu": (_dtype.bfloat16, _dtype.float16), "cuda": (_dtype.float16, _dtype.bfloat16)}


class autocast:
    """Context manager and decorator: the ops in PyTorch's autocast lists run in ``dtype``.

    Args:
        device_type: ``"cpu"`` or ``"cuda"``: which device's ops are autocast.
        dtype: the lower precision: bfloat16 (CPU default) or float16 (CUDA default; also
            allowed on CPU). bfloat16 on CUDA needs CuPy >= 14 (its ml_dtypes bfloat16); an
            older CuPy gets a RuntimeError saying so.
        enabled: False makes the region a no-op (and, nested, turns autocast off inside).
        cache_enabled: cache the low-precision copies of parameters within the region.

    Raises:
        RuntimeError: for an unknown device type or an unsupported dtype.

    Example:
        >>> import tensorbrain as tb
        >>> w = tb.randn(4, 4, requires_grad=True)
        >>> with tb.autocast("cpu", dtype=tb.bfloat16):
        ...     y = tb.randn(2, 4) @ w
        >>> y.dtype, w.dtype
        (dtype(bfloat16), dtype('float32'))

    Without CUDA, ``autocast("cuda")`` warns and disables itself, as PyTorch does, so scripts
    written for a GPU still run.
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected device_type of type str, got "
                             f"{type(device_type).__name__}")
        device_type = device_type.split(":")[0]
        if device_type not in _SUPPORTED:
            raise RuntimeError(f"autocast: device_type must be 'cpu' or 'cuda', got "
                               f"{device_type!r}")
        self.device = device_type
        self.fast_dtype = _state.dtype[device_type] if dtype is None else _dtype.as_dtype(dtype)
        self._enabled = bool(enabled)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        if device_type == "cuda" and self._enabled and not _xp.cuda_available():
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. "
                          "Disabling", stacklevel=2)
            self._enabled = False
        if self._enabled and self.fast_dtype not in _SUPPORTED[device_type]:
            names = ", ".join(str(d) for d in _SUPPORTED[device_type])
            raise RuntimeError(f"autocast: dtype {self.fast_dtype} is not supported on "
                               f"{device_type} (supported: {names})")
        if self._enabled and device_type == "cuda" and self.fast_dtype == _dtype.bfloat16:
            why = _xp.cupy_bfloat16_unsupported()
            if why is not None:
                raise RuntimeError(f"autocast: bfloat16 on cuda needs CuPy's bfloat16: {why}; "
                                   "use dtype=float16")

    def __enter__(self):
        self._prev = (_state.enabled[self.device], _state.dtype[self.device],
                      _state.cache_enabled)
        _state.enabled[self.device] = self._enabled
        _state.dtype[self.device] = self.fast_dtype
        _state.cache_enabled = self._cache_enabled
        _state.nesting += 1
        _refresh()
        return self

    def __exit__(self, exc_type, exc, tb):
        _state.nesting -= 1
        if _state.nesting == 0:
            _state.cache.clear()
        _state.enabled[self.device], _state.dtype[self.device], _state.cache_enabled = self._prev
        _refresh()
        return False

    def __call__(self, func):
        """Use as a decorator: ``func`` runs inside this autocast region at every call."""
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return wrapper


# ***** queries (PyTorch's torch.is_autocast_enabled & co.) *****
def is_autocast_enabled(device_type="cuda"):
    """Whether autocast is on for ``device_type`` in this thread.

    Args:
        device_type: ``'cpu'`` or ``'cuda'``.
    """
    return bool(_state.enabled.get(device_type, False))


def get_autocast_dtype(device_type):
    """The lower-precision dtype autocast uses on ``device_type`` in this thread.

    Args:
        device_type: ``'cpu'`` or ``'cuda'``.
    """
    return _state.dtype[device_type]


def is_autocast_available(device_type):
    """True for the device types TensorBrain's autocast knows: ``"cpu"`` and ``"cuda"``.

    Args:
        device_type: a device type string.
    """
    return device_type in _SUPPORTED


def clear_autocast_cache():
    """Drop the cached low-precision copies of parameters (done on leaving autocast)."""
    _state.cache.clear()


# ***** custom autograd Functions under autocast (torch.amp.custom_fwd / custom_bwd) *****
def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a ``tb.autograd.Function``'s ``forward`` under autocast.

    Args:
        fwd: the forward (``@custom_fwd(device_type="cuda")`` leaves it out).
        device_type: ``"cpu"`` or ``"cuda"``.
        cast_inputs: None runs ``forward`` with the surrounding autocast state; a dtype (e.g.
            ``tb.float32``) runs it with autocast off and its floating tensor arguments cast to
            that dtype, when autocast is on (as torch).

    Example:
        >>> import tensorbrain as tb
        >>> class Square(tb.autograd.Function):
        ...     @staticmethod
        ...     @tb.amp.custom_fwd(device_type="cpu", cast_inputs=tb.float32)
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     @tb.amp.custom_bwd(device_type="cpu")
        ...     def backward(ctx, g):
        ...         return 2 * ctx.saved_tensors[0] * g
        >>> with tb.autocast("cpu"):
        ...     Square.apply(tb.ones(2).bfloat16()).dtype
        dtype('float32')
    """
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._fwd_used_autocast = is_autocast_enabled(device_type)
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None or not ctx._fwd_used_autocast:
            return fwd(*args, **kwargs)
        dtype = _dtype.as_dtype(cast_inputs)
        args, kwargs = _map(args[1:], kwargs, lambda t: _cast(t, dtype))
        with autocast(device_type, enabled=False):
            return fwd(ctx, *args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for the matching ``backward``: it runs with the autocast state its forward
    ran with (see :func:`custom_fwd`).

    Args:
        bwd: the ``backward`` staticmethod (when used without arguments).
        device_type: ``'cpu'`` or ``'cuda'``, the device whose autocast state is restored.
    """
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type, dtype=getattr(ctx, "_dtype", None),
                      enabled=getattr(ctx, "_fwd_used_autocast", False)):
            return bwd(*args, **kwargs)
    return decorate_bwd
