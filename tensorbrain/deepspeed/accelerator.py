"""``deepspeed.accelerator``: ``get_accelerator()``, the device abstraction DeepSpeed programs use
to stay device-neutral (``get_accelerator().device_name(local_rank)``, ``.device_count()``, ...).

TensorBrain has two kinds: "cuda" when a usable GPU is present, else "cpu" (DeepSpeed's CPU
accelerator). DeepSpeed's ``DS_ACCELERATOR`` variable chooses between them as in DeepSpeed
("cuda" or "cpu"; other names are an error).
"""
from __future__ import annotations

import os


class TensorBrainAccelerator:
    """DeepSpeed's accelerator interface over TensorBrain's devices.

    Args:
        name: "cuda" or "cpu".

    Example:
        >>> acc = TensorBrainAccelerator("cpu")
        >>> acc.device_name(0), acc.communication_backend_name()
        ('cpu', 'gloo')
    """

    def __init__(self, name: str):
        self._name = name
        self._communication_backend_name = "nccl" if name == "cuda" else "gloo"

    def is_synchronized_device(self) -> bool:
        """True on the CPU (work is done when a call returns)."""
        return self._name == "cpu"

    def device_name(self, device_index=None) -> str:
        """``"cuda"`` / ``"cuda:N"``, or ``"cpu"`` (the CPU accelerator ignores the index).

        Args:
            device_index: the GPU index (None: no index).
        """
        if self._name == "cpu" or device_index is None:
            return self._name
        return f"cuda:{int(device_index)}"

    def device(self, device_index=None):
        """A ``tb.device`` for :meth:`device_name`.

        Args:
            device_index: the GPU index.
        """
        import tensorbrain as tb
        return tb.device(self.device_name(device_index))

    def current_device(self) -> int:
        """The current GPU index (0 on the CPU)."""
        import tensorbrain as tb
        return tb.cuda.current_device() if self._name == "cuda" else 0

    def current_device_name(self) -> str:
        """``device_name(current_device())``."""
        return self.device_name(self.current_device() if self._name == "cuda" else None)

    def set_device(self, device_index) -> None:
        """Make ``device_index`` the current GPU (no-op on the CPU).

        Args:
            device_index: the GPU index.
        """
        import tensorbrain as tb
        if self._name == "cuda":
            tb.cuda.set_device(device_index)

    def device_count(self) -> int:
        """GPUs visible (1 on the CPU, as DeepSpeed's CPU accelerator counts one device)."""
        import tensorbrain as tb
        return tb.cuda.device_count() if self._name == "cuda" else 1

    def is_available(self) -> bool:
        """Whether this accelerator can run."""
        import tensorbrain as tb
        return tb.cuda.is_available() if self._name == "cuda" else True

    def synchronize(self, device_index=None) -> None:
        """Wait for the device's queued work.

        Args:
            device_index: the GPU index.
        """
        import tensorbrain as tb
        if self._name == "cuda":
            tb.cuda.synchronize(device_index)

    def manual_seed(self, seed: int) -> None:
        """Seed the generator(s).

        Args:
            seed: the seed.
        """
        import tensorbrain as tb
        tb.manual_seed(seed)

    manual_seed_all = manual_seed

    def empty_cache(self) -> None:
        """Return cached GPU memory (no-op on the CPU)."""
        import tensorbrain as tb
        if self._name == "cuda":
            tb.cuda.empty_cache()

    def is_bf16_supported(self) -> bool:
        """True: TensorBrain computes bfloat16 on both kinds."""
        return True

    def is_fp16_supported(self) -> bool:
        """True: TensorBrain computes float16 on both kinds."""
        return True

    def supported_dtypes(self) -> list:
        """float32, float16 and bfloat16."""
        import tensorbrain as tb
        return [tb.float32, tb.float16, tb.bfloat16]

    def communication_backend_name(self) -> str:
        """"nccl" on GPUs, "gloo" on the CPU (DeepSpeed's CPU accelerator says "ccl" when
        oneCCL is installed; TensorBrain's CPU transport plays gloo's part)."""
        return self._communication_backend_name

    def on_accelerator(self, tensor) -> bool:
        """Whether ``tensor`` lives on this accelerator's device type.

        Args:
            tensor: a tensor.
        """
        return tensor.device.type == self._name

    def pin_memory(self, tensor, align_bytes: int = 1):
        """``tensor`` (TensorBrain does not pin host memory).

        Args:
            tensor: a tensor.
            align_bytes: accepted.
        """
        return tensor


_ACCELERATOR: TensorBrainAccelerator | None = None


def get_accelerator() -> TensorBrainAccelerator:
    """The accelerator of this process: "cuda" with a usable GPU, else "cpu"
    (``DS_ACCELERATOR=cpu|cuda`` overrides, as in DeepSpeed).

    Raises:
        ValueError: ``DS_ACCELERATOR`` names another kind, or "cuda" without a GPU.
    """
    global _ACCELERATOR
    if _ACCELERATOR is None:
        import tensorbrain as tb
        name = os.environ.get("DS_ACCELERATOR")
        if name is None:
            name = "cuda" if tb.cuda.is_available() else "cpu"
        if name not in ("cuda", "cpu"):
            raise ValueError(f"DS_ACCELERATOR={name!r}: tensorbrain.deepspeed has only the "
                             f"'cuda' and 'cpu' accelerators")
        if name == "cuda" and not tb.cuda.is_available():
            raise ValueError("DS_ACCELERATOR=cuda but no usable GPU is present")
        _ACCELERATOR = TensorBrainAccelerator(name)
    return _ACCELERATOR


def set_accelerator(accel: TensorBrainAccelerator) -> None:
    """Replace the accelerator :func:`get_accelerator` returns.

    Args:
        accel: the accelerator.
    """
    global _ACCELERATOR
    _ACCELERATOR = accel


__all__ = ["TensorBrainAccelerator", "get_accelerator", "set_accelerator"]
