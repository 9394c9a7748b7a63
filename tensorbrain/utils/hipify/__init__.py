"""``torch.utils.hipify``: refused by name (:mod:`.hipify_python`). It translates CUDA C++
extension sources to HIP for ROCm builds of torch; TensorBrain builds no C++ extensions."""
from . import hipify_python  # noqa: F401

__all__ = ["hipify_python"]
