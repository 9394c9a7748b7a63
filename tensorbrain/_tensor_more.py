"""Tensor methods of torch's that are not ops: ``set_`` (share another tensor's memory),
``apply_`` / ``map_`` / ``map2_`` (a Python function per element, CPU tensors only, as torch's),
``new_empty_strided``, ``module_load``; and the methods TensorBrain refuses by name, from the
table :data:`REFUSED` (quantized tensors, compressed sparse layouts, other devices).
A base class of ``tensorbrain.tensor.Tensor``.

Requires of the class it is installed on: ``_data``, ``_version``, ``is_cuda``,
``_check_inplace``.
"""
from __future__ import annotations

import numpy as np

from ._unsupported import unsupported

_QUANT = ("TensorBrain has no quantized tensors", "a float tensor")
_CSR = ("TensorBrain has the COO, CSR and CSC sparse layouts (no BSR, BSC or sparse-sparse products)",
        "to_sparse() / to_sparse_csr() and to_dense()")
_DEVICE = ("TensorBrain runs on the CPU and on CUDA only", ".cpu() or .cuda()")


class MoreMethods:
    """More of torch's Tensor methods (a base class of Tensor)."""

    def set_(self, source=None, storage_offset=0, size=None, stride=None):
        """Make this tensor use ``source``'s memory (same shape), or become empty, as
        ``torch.Tensor.set_``.

        Args:
            source: a tensor, or None for an empty tensor.
            storage_offset: must be 0 with a tensor source.
            size: the shape to view ``source`` with (default its own).
            stride: must be None (strides follow ``size``).

        Returns:
            Tensor: self.

        Raises:
            NotImplementedError: an offset or strides.
        """
        self._check_inplace("set_")
        if storage_offset or stride is not None:
            raise NotImplementedError("set_(storage_offset=, stride=) is not supported by "
                                      "TensorBrain; view the source with as_strided instead")
        if source is None:
            xp = np if not self.is_cuda else __import__("cupy")
            self._data = xp.empty((0,), dtype=self._data.dtype)
        else:
            data = source._data
            self._data = data if size is None else data.reshape(tuple(size))
        self._version[0] += 1
        return self

    def apply_(self, callable):  # noqa: A002  (torch's name)
        """Replace every element ``x`` by ``callable(x)`` (a Python function; slow), as
        ``torch.Tensor.apply_``.

        Args:
            callable: a function of one number.

        Returns:
            Tensor: self.

        Raises:
            TypeError: a CUDA tensor (as torch: CPU only).
        """
        return self._python_map("apply_", callable)

    def map_(self, tensor, callable):  # noqa: A002
        """``self[i] = callable(self[i], tensor[i])`` elementwise (``tensor`` broadcast), as
        ``torch.Tensor.map_``.

        Args:
            tensor: the second operand.
            callable: a function of two numbers.

        Returns:
            Tensor: self.
        """
        other = np.broadcast_to(np.asarray(tensor._data), self._data.shape)
        return self._python_map("map_", callable, other)

    def map2_(self, x, y, callable):  # noqa: A002
        """``self[i] = callable(self[i], x[i], y[i])``, as ``torch.Tensor.map2_``.

        Args:
            x: the second operand.
            y: the third operand.
            callable: a function of three numbers.

        Returns:
            Tensor: self.
        """
        shape = self._data.shape
        return self._python_map("map2_", callable, np.broadcast_to(np.asarray(x._data), shape),
                                np.broadcast_to(np.asarray(y._data), shape))

    def _python_map(self, name, fn, *others):
        if self.is_cuda:
            raise TypeError(f"{name} is only implemented on CPU tensors")
        self._check_inplace(name)
        flat = self._data.reshape(-1)
        extra = [o.reshape(-1) for o in others]
        for i in range(flat.size):
            flat[i] = fn(flat[i].item(), *(o[i].item() for o in extra))
        if flat.base is None or not np.shares_memory(flat, self._data):
            self._data[...] = flat.reshape(self._data.shape)
        self._version[0] += 1
        return self

    def new_empty_strided(self, size, stride, dtype=None, device=None, requires_grad=False):
        """An uninitialised tensor of ``size`` (contiguous: the strides are not kept), with
        this tensor's dtype and device unless given.

        Args:
            size: the shape.
            stride: accepted.
            dtype: the dtype.
            device: the device.
            requires_grad: whether autograd records operations on the result.

        Returns:
            Tensor: the new tensor.
        """
        from ._factories import empty
        return empty(*size, dtype=dtype or self._data.dtype, device=device or self.device,
                     requires_grad=requires_grad)

    def module_load(self, other, assign=False):
        """What ``Module.load_state_dict`` puts in place of this tensor: ``other`` (detached
        with ``assign``), as ``torch.Tensor.module_load``.

        Args:
            other: the loaded tensor.
            assign: whether the module takes ``other`` itself.
        """
        return other.detach() if assign else other

    def to_padded_tensor(self, padding, output_size=None):
        """Raises NotImplementedError: only nested tensors pad (torch's error; see
        ``tb.nested``).

        Args:
            padding: the fill value.
            output_size: the padded shape.
        """
        raise NotImplementedError("Could not run 'aten::to_padded_tensor' with arguments from "
                                  "the 'CPU' backend: it takes a nested tensor "
                                  "(tb.nested.nested_tensor)")

    # torch's methods TensorBrain refuses, each with why and what to use instead
    dequantize = unsupported("torch.Tensor.dequantize", *_QUANT)
    int_repr = unsupported("torch.Tensor.int_repr", *_QUANT)
    q_scale = unsupported("torch.Tensor.q_scale", *_QUANT)
    q_zero_point = unsupported("torch.Tensor.q_zero_point", *_QUANT)
    q_per_channel_scales = unsupported("torch.Tensor.q_per_channel_scales", *_QUANT)
    q_per_channel_zero_points = unsupported("torch.Tensor.q_per_channel_zero_points", *_QUANT)
    q_per_channel_axis = unsupported("torch.Tensor.q_per_channel_axis", *_QUANT)
    qscheme = unsupported("torch.Tensor.qscheme", *_QUANT)
    to_sparse_bsr = unsupported("torch.Tensor.to_sparse_bsr", *_CSR)
    to_sparse_bsc = unsupported("torch.Tensor.to_sparse_bsc", *_CSR)
    sparse_resize_and_clear_ = unsupported("torch.Tensor.sparse_resize_and_clear_", *_CSR)
    resize_as_sparse_ = unsupported("torch.Tensor.resize_as_sparse_", *_CSR)
    smm = unsupported("torch.Tensor.smm", *_CSR)
    sspaddmm = unsupported("torch.Tensor.sspaddmm", *_CSR)
    xpu = unsupported("torch.Tensor.xpu", *_DEVICE)
    ipu = unsupported("torch.Tensor.ipu", *_DEVICE)
    mtia = unsupported("torch.Tensor.mtia", *_DEVICE)
    to_mkldnn = unsupported("torch.Tensor.to_mkldnn", "TensorBrain has no oneDNN layout",
                            "the tensor itself")
    as_subclass = unsupported("torch.Tensor.as_subclass",
                              "TensorBrain's ops return Tensor, not subclasses (no __torch_function__)",
                              "composition: hold a Tensor in your class")
