"""``tb.amp.GradScaler``: PyTorch's dynamic loss scaling for float16 training.

A float16 gradient underflows to zero below ~6e-8. The scaler multiplies the loss by a large
factor (2**16 to start) so the backward pass runs on scaled gradients, divides them back
(``unscale_``) before the optimizer sees them, skips the step when any gradient is inf/NaN
(the scale was too large) and then halves the scale; after ``growth_interval`` clean steps in a
row it doubles the scale again. Same names, defaults, state-dict keys and error messages as
``torch.amp.GradScaler``.
"""
from __future__ import annotations

import enum
import warnings

import numpy as np

from .. import _dtype, _xp
from .._ops import core as _core



class OptState(enum.Enum):
    """Where an optimizer is in a step's scaling (``torch.amp.grad_scaler.OptState``)."""
    READY = 0
    UNSCALED = 1
    STEPPED = 2


_READY, _UNSCALED, _STEPPED = OptState.READY, OptState.UNSCALED, OptState.STEPPED


class GradScaler:
    """Dynamic loss scaling (``torch.amp.GradScaler``).

    Args:
        device: ``"cuda"`` (PyTorch's default) or ``"cpu"``. A CUDA scaler on a machine without
            CUDA warns and disables itself, as PyTorch does: every method then passes through.
        init_scale: the first scale factor (2**16).
        growth_factor: the scale is multiplied by this after ``growth_interval`` clean steps.
        backoff_factor: the scale is multiplied by this after a step with inf/NaN gradients.
        growth_interval: clean steps in a row before the scale grows.
        enabled: False makes every method a pass-through (``scale`` returns its input).

    Raises:
        AssertionError: growth_factor <= 1 or backoff_factor >= 1 (PyTorch's checks).

    Example:
        >>> import tensorbrain as tb
        >>> model = tb.nn.Linear(3, 1)
        >>> opt = tb.optim.SGD(model.parameters(), lr=0.1)
        >>> scaler = tb.amp.GradScaler("cpu")
        >>> loss = model(tb.ones(2, 3)).sum()
        >>> scaler.scale(loss).backward()
        >>> scaler.step(opt); scaler.update()
        >>> scaler.get_scale()
        65536.0
    """

    _allow_fp16 = False   # FSDP's ShardedGradScaler unscales float16 gradients too

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = str(device).split(":")[0]
        if self._device not in ("cpu", "cuda"):
            raise RuntimeError(f"GradScaler: device must be 'cpu' or 'cuda', got {device!r}")
        self._enabled = bool(enabled)
        if self._device == "cuda" and self._enabled and not _xp.cuda_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = float(init_scale)
        self._scale = None            # set by the first scale() call, as PyTorch (lazily)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._growth_tracker = None
        self._per_optimizer_states = {}

    # ***** the four calls of a step *****
    def scale(self, outputs):
        """Multiply ``outputs`` (a tensor, or a list/tuple/iterable of them) by the scale.

        A 0-dim low-precision output (a float16 loss) is scaled in float32, as PyTorch's
        0-dim float32 scale tensor promotes it, so ``loss * 65536`` cannot overflow float16.

        Args:
            outputs: a tensor, or a list/tuple/iterable of tensors (usually the loss).
        """
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale = self._init_scale
            self._growth_tracker = self._init_growth_tracker
        if isinstance(outputs, _core.Tensor):
            return self._scale_one(outputs)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        try:
            return map(self.scale, outputs)
        except TypeError:
            raise ValueError("outputs must be a Tensor or an iterable of Tensors") from None

    def _scale_one(self, t):
        from .._ops import elementwise as E
        from .._ops.shape import to_dtype
        if t._data.ndim == 0 and t._data.dtype in (_dtype.float16, _dtype.bfloat16):
            t = to_dtype(t, _dtype.float32)
        return E.mul(t, self._scale)

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale in place and record inf/NaN.

        Call it before clipping gradients; ``step`` calls it when it was not called.

        Args:
            optimizer: the optimizer whose parameters' gradients are divided.

        Raises:
            RuntimeError: called twice before ``update()``, or after ``step()``.
            ValueError: a gradient is float16 ("Attempting to unscale FP16 gradients."): keep
                the parameters in float32 and let autocast do the float16 math.
        """
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._opt_state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = float(np.float32(1.0 / self._scale))   # reciprocal in float64, as PyTorch
        found_inf = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad._data
                if g.dtype == _dtype.float16 and not self._allow_fp16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                g *= g.dtype.type(inv_scale)
                if not found_inf:
                    found_inf = not bool(_xp.get_array_module(g).isfinite(g).all())
        state["found_inf"] = found_inf
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``unscale_`` (if not done) then ``optimizer.step(*args, **kwargs)`` unless a
        gradient was inf/NaN. Returns what ``optimizer.step`` returned (None when skipped).

        Args:
            optimizer: the optimizer to step.
            *args: passed to ``optimizer.step``.
            **kwargs: passed to ``optimizer.step``.

        Raises:
            RuntimeError: a ``closure`` keyword (not supported with scaling, as in PyTorch), or
                a second ``step`` before ``update()``.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale("step")
        state = self._opt_state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        retval = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return retval

    def update(self, new_scale=None):
        """Back off (inf/NaN seen this iteration) or count a clean step and maybe grow.

        Args:
            new_scale: a float (or a one-element tensor) to set the scale to directly instead.

        Raises:
            AssertionError: no optimizer was unscaled/stepped since the last update.
        """
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            if isinstance(new_scale, _core.Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError("new_scale should be a float or a 1-element tensor "
                                         "with requires_grad=False.")
                new_scale = new_scale.item()
            self._scale = float(np.float32(new_scale))
        else:
            found = [s["found_inf"] for s in self._per_optimizer_states.values()
                     if s["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(found):   # torch._amp_update_scale_
                self._scale = float(np.float32(self._scale * self._backoff_factor))
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = np.float32(self._scale * self._growth_factor)
                    if np.isfinite(grown):
                        self._scale = float(grown)
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._per_optimizer_states = {}

    # ***** queries and state *****
    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self):
        """The factor the scale is multiplied by after ``growth_interval`` steps without inf/NaN.

        Returns:
            The current value.
        """
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        """Set the factor the scale is multiplied by after ``growth_interval`` steps without inf/NaN.

        Args:
            new_factor: the new value.
        """
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        """The factor the scale is multiplied by after a step with inf/NaN gradients.

        Returns:
            The current value.
        """
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        """Set the factor the scale is multiplied by after a step with inf/NaN gradients.

        Args:
            new_factor: the new value.
        """
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        """The number of consecutive clean steps before the scale grows.

        Returns:
            The current value.
        """
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        """Set the number of consecutive clean steps before the scale grows.

        Args:
            new_interval: the new value.
        """
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self):
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker

    def is_enabled(self):
        """Whether this scaler scales (False when disabled or CUDA was missing)."""
        return self._enabled

    def state_dict(self):
        """``{"scale", "growth_factor", "backoff_factor", "growth_interval",
        "_growth_tracker"}`` (PyTorch's keys; empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        """Restore what :meth:`state_dict` returned (also one saved by torch's GradScaler).

        Args:
            state_dict: the dict ``state_dict()`` returned.

        Raises:
            RuntimeError: the state dict is empty (saved from a disabled scaler).
        """
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = self._init_scale
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker

    # ***** helpers *****
    def _opt_state(self, optimizer):
        return self._per_optimizer_states.setdefault(
            id(optimizer), {"stage": _READY, "found_inf": None})

    def _check_scale(self, funcname):
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  This may indicate "
                                 f"your script did not use scaler.scale(loss or outputs) earlier "
                                 f"in the iteration.")
