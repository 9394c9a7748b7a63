"""The running-statistics base of the batch norms: ``_NormBase`` (parameters, buffers, state
dict) and ``_BatchNorm`` (the forward), shared by ``BatchNorm1d/2d/3d`` (batchnorm.py), the
``InstanceNorm`` classes (instancenorm.py) and ``SyncBatchNorm`` (sync_batchnorm.py); programs
name them at torch's path, ``nn.modules.batchnorm._BatchNorm``, which re-exports them.

Running statistics are buffers (``running_mean``, ``running_var``, ``num_batches_tracked``),
so they are saved in ``state_dict`` under PyTorch's names and moved by ``to``. In training the
batch statistics normalise and the running ones are updated by ``F.batch_norm`` in place:
``running = (1 - momentum) * running + momentum * batch`` (unbiased variance), or, with
``momentum=None``, a cumulative average (factor ``1 / num_batches_tracked``). In eval mode the
running statistics normalise.
"""
from __future__ import annotations

from ... import _dtype
from ...tensor import ones, tensor, zeros
from .. import functional as F
from .. import init
from .module import Module
from .normalization import _register_affine

__all__ = ["_NormBase", "_BatchNorm"]


class _NormBase(Module):
    """Parameters, buffers and state-dict handling shared by the BatchNorm classes."""

    _version = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None, dtype=None,
                 bias: bool = True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.use_bias = affine and bias  # PyTorch 2.13's `bias=False` drops only the shift
        dtype = dtype or _dtype.get_default_dtype()
        _register_affine(self, (num_features,), affine, self.use_bias, dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked",
                                 tensor(0, dtype=_dtype.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean._data.fill(0)
            self.running_var._data.fill(1)
            self.num_batches_tracked._data.fill(0)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.use_bias}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        before = len(missing_keys)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        # Checkpoints from before PyTorch 0.4.1 have no num_batches_tracked; PyTorch fills it
        # with 0 instead of reporting it missing, and so do we.
        key = prefix + "num_batches_tracked"
        if key in missing_keys[before:]:
            missing_keys.remove(key)
            if self.num_batches_tracked is not None:
                self.num_batches_tracked._data.fill(0)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked._data += 1
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked._data)
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)
