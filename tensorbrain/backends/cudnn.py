"""``tb.backends.cudnn``: TensorBrain does not use cuDNN (GPU convolutions are CuPy kernels).

``enabled``, ``benchmark``, ``deterministic`` and ``allow_tf32`` are stored so programs that set
them run, and have no effect: there is no autotuner to enable, TensorBrain's convolutions are
deterministic on the CPU, and they never compute in TF32.
"""
from __future__ import annotations

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: TensorBrain never calls cuDNN."""
    return False


def version():
    """None, as torch answers when cuDNN is not available."""
    return None


class _Flags:
    def __init__(self, **flags):
        self.flags = flags

    def __enter__(self):
        g = globals()
        self.saved = {k: g[k] for k in self.flags}
        g.update({k: v for k, v in self.flags.items() if v is not None})

    def __exit__(self, *exc):
        globals().update(self.saved)


def flags(enabled=None, benchmark=None, deterministic=None, allow_tf32=None, **_):
    """``with tb.backends.cudnn.flags(enabled=False): ...``: set the flags for a block."""
    return _Flags(enabled=enabled, benchmark=benchmark, deterministic=deterministic,
                  allow_tf32=allow_tf32)
