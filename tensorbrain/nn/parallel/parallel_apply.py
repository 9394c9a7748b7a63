"""``parallel_apply``: run each replica on its inputs in its own thread.

NumPy releases the GIL inside its BLAS and ufunc loops (CuPy inside kernel launches and
synchronisation), so replicas overlap their heavy work. Grad mode is thread-local (as in
PyTorch), so each worker thread inherits the caller's mode explicitly. An exception in a
replica is re-raised in the caller, naming the replica and its device.
"""
from __future__ import annotations

import threading

from ... import _xp
from ...autograd import grad_mode

__all__ = ["parallel_apply"]


def _device_ctx(dev):
    if dev is not None and getattr(dev, "type", "cpu") == "cuda":
        return _xp.cupy().cuda.Device(dev.index or 0)
    return _Null()


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def parallel_apply(modules, inputs, kwargs_tup=None, devices=None):
    """``[modules[i](*inputs[i], **kwargs_tup[i]) ...]`` computed concurrently."""
    from ... import device as _device
    if len(modules) != len(inputs):
        raise ValueError(f"parallel_apply: {len(modules)} modules but {len(inputs)} inputs")
    kwargs_tup = kwargs_tup if kwargs_tup is not None else ({},) * len(modules)
    devices = [None if d is None else _device(d) for d in (devices or [None] * len(modules))]
    enabled = grad_mode.is_grad_enabled()
    results: list = [None] * len(modules)
    errors: list = [None] * len(modules)

    def work(i):
        try:
            with grad_mode.set_grad_enabled(enabled), _device_ctx(devices[i]):
                args = inputs[i] if isinstance(inputs[i], (list, tuple)) else (inputs[i],)
                results[i] = modules[i](*args, **kwargs_tup[i])
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller below
            errors[i] = exc

    if len(modules) == 1:
        work(0)
    else:
        threads = [threading.Thread(target=work, args=(i,), name=f"tb-replica-{i}")
                   for i in range(len(modules))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for i, exc in enumerate(errors):
        if exc is not None:
            where = devices[i] if devices[i] is not None else "its device"
            raise type(exc)(f"Caught {type(exc).__name__} in replica {i} on device {where}: "
                            f"{exc}") from exc
    return results
