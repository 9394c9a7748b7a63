"""Moving a Module's parameters and buffers between devices and dtypes, in place.

``_ModuleConversion`` is a part of :class:`~tensorbrain.nn.Module` (its only user), kept apart
because conversion is its own job: ``to``, ``cuda``, ``cpu``, ``half``, ``float``, ...
"""
from __future__ import annotations

import numpy as np

from ... import _dtype, _xp
from ..._device import as_device, device
from ...tensor import Tensor


class _ModuleConversion:
    """The device/dtype half of :class:`~tensorbrain.nn.Module`: parameters keep their identity
    (their arrays are swapped), so an optimizer made before ``model.to(...)`` still works."""

    # ***** device and dtype *****
    def _apply(self, convert):
        """Replace every parameter's and buffer's array by ``convert(array)`` in place.

        Parameters keep their identity (``p._data`` is swapped), so an optimizer built before
        ``model.to(...)`` still updates the model, as in PyTorch.
        """
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                new = convert(p._data)
                if new is not p._data:
                    p._data = new
                    p._version[0] += 1
                if p.grad is not None:
                    g = convert(p.grad._data)
                    if g is not p.grad._data:
                        p.grad._data = g
            for b in m._buffers.values():
                if b is not None:
                    new = convert(b._data)
                    if new is not b._data:
                        b._data = new
                        b._version[0] += 1
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``: in place.

        A dtype applies to floating point parameters and buffers only (BatchNorm's integer
        ``num_batches_tracked`` stays int64), as in PyTorch.

        Args:
            *args: a device, a dtype, both, or a tensor whose device and dtype are used.
            **kwargs: ``device=``, ``dtype=``, ``non_blocking=`` (ignored); ``memory_format=``
                only as contiguous.

        Returns:
            Module: self (the module is changed in place).

        Raises:
            TypeError: a non-floating dtype, or an unknown keyword argument.
        """
        dev, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs.pop("memory_format", None) not in (None, "contiguous_format"):
            raise NotImplementedError("Module.to(memory_format=...): only contiguous (NCHW) "
                                      "tensors exist in TensorBrain")
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dev, dtype = a.device, a.dtype
            elif isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda") or \
                    isinstance(a, device) or isinstance(a, int) and not isinstance(a, bool):
                dev = a
            else:
                dtype = a
        if dtype is not None:
            dtype = _dtype.as_dtype(dtype)
            if not _dtype.is_float_or_complex(dtype):
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, "
                                f"but got desired dtype={dtype}")
        dev = as_device(dev) if dev is not None else None
        return self._apply(lambda a: _convert(a, dev, dtype))

    def cuda(self, device=None):
        """Move every parameter and buffer to a CUDA device, in place.

        Args:
            device: a device index, ``"cuda:N"`` or :class:`device`; None for the current device.

        Returns:
            Module: self.
        """
        return self.to(as_device("cuda" if device is None else
                                 (f"cuda:{device}" if isinstance(device, int) else device)))

    def cpu(self):
        """Move every parameter and buffer to host memory, in place; returns self."""
        return self.to("cpu")

    def half(self):
        """Cast floating parameters and buffers to float16, in place; returns self."""
        return self.to(_dtype.float16)

    def bfloat16(self):
        """Cast floating parameters and buffers to bfloat16 (``torch.nn.Module.bfloat16``)."""
        return self.to(_dtype.bfloat16)

    def float(self):
        """Cast floating parameters and buffers to float32, in place; returns self."""
        return self.to(_dtype.float32)

    def double(self):
        """Cast floating parameters and buffers to float64, in place; returns self."""
        return self.to(_dtype.float64)

    def type(self, dst_type):
        """Cast floating parameters and buffers to ``dst_type``, in place.

        Args:
            dst_type: a floating dtype.

        Returns:
            Module: self.
        """
        return self.to(dst_type)

    def to_empty(self, *, device, recurse=True):
        """Give parameters and buffers on the meta device real storage on ``device``, values
        not initialised (torch's ``Module.to_empty``); then ``reset_parameters()`` (or a state
        dict) gives them values.

        A tensor that already has storage keeps it (moved to ``device`` when it lives
        elsewhere), values and identity included: torch leaves those values undefined, and
        keeping them keeps FSDP's shards (made by ``fully_shard`` on a meta model) where they are.

        Args:
            device: the device, e.g. ``"cpu"``.
            recurse: also the sub-modules' tensors (False: only this module's own).

        Returns:
            Module: self.

        Example:
            >>> import tensorbrain as tb
            >>> with tb.device("meta"):
            ...     fc = tb.nn.Linear(3, 2)
            >>> fc.weight.is_meta, fc.to_empty(device="cpu").weight.is_meta
            (True, False)
        """
        dev = as_device(device)
        if dev.type == "meta":
            return self

        def fresh(array):
            if not _xp.is_meta(array):
                return _convert(array, dev, None)
            if dev.type == "cpu":
                return np.empty(array.shape, dtype=array.dtype)
            with _xp.cupy().cuda.Device(dev.index or 0):
                return _xp.cupy().empty(array.shape, dtype=array.dtype)
        if recurse:
            return self._apply(fresh)
        for t in (*self._parameters.values(), *self._buffers.values()):
            if t is not None:
                t._data = fresh(t._data)
        return self

    def share_memory(self):
        """Move every parameter, gradient and buffer into shared memory (``Tensor.share_memory_``),
        so child processes of ``tensorbrain.multiprocessing`` train the same weights (hogwild)."""
        for t in [*self.parameters(), *(p.grad for p in self.parameters() if p.grad is not None),
                  *self.buffers()]:
            t.share_memory_()
        return self


def _convert(array, dev, dtype):
    """``array`` on device ``dev`` with dtype ``dtype`` (float arrays only for dtype); may be
    the same object when nothing changes."""
    out = array
    if dtype is not None and out.dtype != dtype and _dtype.is_float_or_complex(out.dtype):
        out = out.astype(dtype)
    if dev is not None and (dev.type == "meta") != _xp.is_meta(out):
        if dev.type == "meta":
            return _xp.meta_array(out.shape, out.dtype)
        raise NotImplementedError(
            "Cannot copy out of meta tensor; no data! Use Module.to_empty(device=...) instead "
            "of Module.to() to move a module from the meta device, then reset_parameters() "
            "(as torch says)")
    if dev is not None and dev.type != "meta":
        if dev.type == "cpu":
            if _xp.is_cupy_array(out):
                out = _xp.to_numpy(out)
            elif not isinstance(out, np.ndarray):
                out = np.asarray(out)
        else:
            cp = _xp.cupy()
            idx = dev.index if dev.index is not None else cp.cuda.runtime.getDevice()
            if not (_xp.is_cupy_array(out) and out.device.id == idx):
                with cp.cuda.Device(idx):
                    out = cp.asarray(out)
    return out
