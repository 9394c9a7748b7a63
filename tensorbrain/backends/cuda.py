"""``tb.backends.cuda``: ``matmul.allow_tf32`` and friends.

TensorBrain's GPU matmuls are CuPy's, which run in full float32 unless CuPy itself was told
otherwise (the ``CUPY_TF32=1`` environment variable, read when CuPy starts). The flags here are
stored so programs that set them run; they do not change TensorBrain's numerics.
"""
from __future__ import annotations

from .. import _xp


class _Matmul:
    """``tb.backends.cuda.matmul``: ``allow_tf32`` (default False, as torch), stored only."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _Matmul()


def is_built() -> bool:
    """True when CuPy (TensorBrain's CUDA path) can be used."""
    return _xp.cuda_available()


def preferred_linalg_library(backend=None):
    """Accepted for compatibility; CuPy chooses its own linear-algebra library."""
    return "default"


_PRECISIONS = ("highest", "high", "medium")
_precision = ["highest"]


def set_float32_matmul_precision(precision: str) -> None:
    """``torch.set_float32_matmul_precision``: stored, no effect on TensorBrain's numerics.

    As torch, ``"high"`` and ``"medium"`` also set :attr:`matmul.allow_tf32` to True and
    ``"highest"`` sets it to False; TensorBrain's matmuls stay full float32 either way (see the
    module docstring). An unknown value warns and changes nothing, as torch.

    Args:
        precision: ``"highest"``, ``"high"`` or ``"medium"``.
    """
    if precision not in _PRECISIONS:
        import warnings
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"set_float32_matmul_precision call has no effect.", stacklevel=2)
        return
    _precision[0] = precision
    matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision() -> str:
    """``torch.get_float32_matmul_precision``: the last precision set (``"highest"`` at start;
    ``"high"`` once ``matmul.allow_tf32`` was set True, as torch).

    Returns:
        ``"highest"``, ``"high"`` or ``"medium"``.
    """
    if _precision[0] == "highest" and matmul.allow_tf32:
        return "high"
    if _precision[0] != "highest" and not matmul.allow_tf32:
        return "highest"
    return _precision[0]


# ***** scaled-dot-product-attention backend switches (torch.backends.cuda.*_sdp) *****
# TensorBrain has one attention implementation (the math one); the switches are stored so the
# programs that flip them run, and reported back.
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _sdp_switch(name):
    def enable(enabled: bool) -> None:
        _sdp[name] = bool(enabled)

    def enabled() -> bool:
        return _sdp[name]
    enable.__name__ = f"enable_{name}_sdp"
    enable.__doc__ = (f"Store whether the {name} attention backend may be used (TensorBrain "
                      f"runs its one math implementation either way).\n\nArgs:\n    enabled: "
                      f"the flag.\n")
    enabled.__name__ = f"{name}_sdp_enabled"
    enabled.__doc__ = f"The flag :func:`enable_{name}_sdp` stored (True at start)."
    return enable, enabled


enable_flash_sdp, flash_sdp_enabled = _sdp_switch("flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _sdp_switch("mem_efficient")
enable_math_sdp, math_sdp_enabled = _sdp_switch("math")
enable_cudnn_sdp, cudnn_sdp_enabled = _sdp_switch("cudnn")


class sdp_kernel:
    """``with torch.backends.cuda.sdp_kernel(enable_flash=..., ...):`` (torch's deprecated
    form of ``nn.attention.sdpa_kernel``): sets the switches above for the block.

    Args:
        enable_flash: the flash backend's switch.
        enable_math: the math backend's.
        enable_mem_efficient: the memory-efficient backend's.
        enable_cudnn: the cuDNN backend's.
    """

    def __init__(self, enable_flash: bool = True, enable_math: bool = True,
                 enable_mem_efficient: bool = True, enable_cudnn: bool = True):
        self.new = {"flash": enable_flash, "math": enable_math,
                    "mem_efficient": enable_mem_efficient, "cudnn": enable_cudnn}

    def __enter__(self):
        self.old = dict(_sdp)
        _sdp.update({k: bool(v) for k, v in self.new.items()})
        return self

    def __exit__(self, *exc):
        _sdp.update(self.old)
        return False
