"""``torch.utils.hipify.hipify_python``: refused by name (see the package)."""
from ..._unsupported import unsupported

hipify = unsupported("torch.utils.hipify.hipify_python.hipify",
                     "it rewrites CUDA C++ extension sources for ROCm, and TensorBrain builds no "
                     "C++ extensions (torch.utils.cpp_extension is refused too)",
                     "PyTorch's torch.utils.hipify (or AMD's hipify-perl) on the sources")

__all__ = ["hipify"]
