"""``DataParallel``: one process, several devices; the batch is split, replicas run in threads.

Each forward: ``scatter`` the inputs along ``dim`` -> ``replicate`` the module onto the devices
-> ``parallel_apply`` (threads) -> ``gather`` the outputs on ``output_device``. Everything is
recorded by autograd, so ``loss.backward()`` leaves in the original parameters' ``.grad`` the
sum of the replicas' gradients: for a loss that averages over the batch, exactly the gradient of
the module on the whole batch.

CUDA: ``device_ids`` are GPU ordinals (default: all GPUs). CPU: ``device_ids=['cpu', 'cpu']``
runs two replicas in threads on the host (NumPy releases the GIL in BLAS), which is also how the
mechanism is tested on machines without a GPU. With one device (or none) the module is called
directly. Prefer ``DistributedDataParallel`` for speed, as PyTorch advises: replication and the
GIL cost time every step.

>>> import tensorbrain as tb
>>> dp = tb.nn.DataParallel(tb.nn.Linear(4, 2), device_ids=["cpu", "cpu"])
>>> dp(tb.randn(6, 4)).shape
tb.Size([6, 2])
"""
from __future__ import annotations

from ... import _xp
from ..._device import device as _device
from ..modules.module import Module
from .parallel_apply import parallel_apply
from .replicate import replicate
from .scatter_gather import gather, scatter_kwargs

__all__ = ["DataParallel", "data_parallel"]


def _normalize(device_ids):
    out = []
    for d in device_ids:
        out.append(_device("cuda", d) if isinstance(d, int) else _device(d))
    return out


def _check_module_on(module, dev):
    for t in list(module.parameters()) + list(module.buffers()):
        if t.device.type != dev.type or (dev.type == "cuda" and t.device.index != (dev.index or 0)):
            raise RuntimeError(f"module must have its parameters and buffers on device {dev} "
                               f"(device_ids[0]) but found one of them on device: {t.device}")


class DataParallel(Module):
    """``torch.nn.DataParallel`` (see the module docstring)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.dim = dim
        if device_ids is None:
            n = _xp.cupy().cuda.runtime.getDeviceCount() if _xp.cuda_available() else 0
            device_ids = list(range(n))
        self.device_ids = _normalize(device_ids)
        if not self.device_ids:
            self.output_device = None
            self.src_device_obj = None
            return
        self.output_device = (self.device_ids[0] if output_device is None else
                              _normalize([output_device])[0])
        self.src_device_obj = self.device_ids[0]
        _check_module_on(module, self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_module_on(self.module, self.src_device_obj)
        inputs, kwargs = scatter_kwargs(inputs, kwargs, self.device_ids, self.dim)
        if not inputs and not kwargs:
            inputs, kwargs = ((),), ({},)
        if len(self.device_ids) == 1:
            return self.module(*inputs[0], **kwargs[0])
        from ...autograd import grad_mode
        n = len(inputs)
        replicas = replicate(self.module, self.device_ids[:n], not grad_mode.is_grad_enabled())
        outputs = parallel_apply(replicas, inputs, kwargs, self.device_ids[:n])
        return gather(outputs, self.output_device, self.dim)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """The functional form: one DataParallel forward of ``module`` on ``inputs``."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    dp = DataParallel(module, device_ids, output_device, dim)
    return dp(*inputs, **(module_kwargs or {}))
