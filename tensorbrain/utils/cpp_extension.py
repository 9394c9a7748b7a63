"""``tb.utils.cpp_extension`` (``torch.utils.cpp_extension``): refused by name. torch's C++
and CUDA extensions compile against torch's C++ API (ATen, ``torch/extension.h``), which
TensorBrain does not have; its own native code is ``tensorbrain._C`` (pybind11, csrc/). The
names exist so ``setup.py`` files import; building or loading an extension raises
``NotImplementedError`` saying so. Port the kernel to NumPy/CuPy (``cupy.RawKernel`` runs CUDA
C++ source) instead.
"""
from __future__ import annotations

from .._unsupported import unsupported, unsupported_class

_WHY = "torch's C++/CUDA extensions build against torch's C++ API (ATen), which TensorBrain " \
       "does not have"
_USE = "a NumPy/CuPy port of the kernel (cupy.RawKernel runs CUDA C++ source)"
load = unsupported("torch.utils.cpp_extension.load", _WHY, _USE)
load_inline = unsupported("torch.utils.cpp_extension.load_inline", _WHY, _USE)
include_paths = unsupported("torch.utils.cpp_extension.include_paths", _WHY, _USE)
BuildExtension = unsupported_class("torch.utils.cpp_extension.BuildExtension", _WHY, _USE)
CppExtension = unsupported("torch.utils.cpp_extension.CppExtension", _WHY, _USE)
CUDAExtension = unsupported("torch.utils.cpp_extension.CUDAExtension", _WHY, _USE)
CUDA_HOME = None
ROCM_HOME = None
