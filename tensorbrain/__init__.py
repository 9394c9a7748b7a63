"""TensorBrain: tensors on NumPy (CPU) and CuPy (GPU) with autograd and a distributed stack.

>>> import tensorbrain as tb
>>> x = tb.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad.tolist()
[2.0, 4.0, 6.0]
"""
from __future__ import annotations

import builtins as _builtins  # bool and int below are dtypes (tb.bool, tb.int)

__version__ = "0.1.0"

from . import _config, _malloc, autograd, cuda
from ._device import device, get_default_device, set_default_device
from ._layout import (channels_last, channels_last_3d, contiguous_format, layout,  # noqa: F401
                      memory_format, preserve_format, sparse_bsc, sparse_bsr, sparse_coo,
                      sparse_csc, sparse_csr, strided, jagged)
from ._layout import contiguous_format as legacy_contiguous_format  # noqa: F401  (torch's alias)
from ._dtype import (bool_, double, float, float16, float32, float64, get_default_dtype, half, int,
                     int8, int16, int32, int64, long, set_default_dtype, short, uint8)
from ._dtype import bfloat16, finfo, iinfo, promote_types
from ._dtype import uint16, uint32, uint64  # noqa: F401  (torch's limited-support unsigned ints)
from ._dtype import cdouble, cfloat, complex64, complex128  # noqa: F401
from ._dtype import is_floating_point as _is_fp_dtype
from ._random import Generator, initial_seed, manual_seed, seed
from . import amp, cpu
from .amp import autocast, get_autocast_dtype, is_autocast_available, is_autocast_enabled
from ._random import get_rng_state, set_rng_state
from ._sampling import bernoulli, multinomial, normal
from .backends.cuda import get_float32_matmul_precision, set_float32_matmul_precision
from ._threads import (get_num_interop_threads, get_num_threads, set_num_interop_threads,
                       set_num_threads)
from ._interop import from_dlpack
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .autograd import inference_mode, is_inference_mode_enabled
from .tensor import (Size, Tensor, arange, as_tensor, empty, empty_like, eye, from_numpy, full,
                     full_like, linspace, ones, ones_like, rand, rand_like, randint, randn,
                     randn_like, randperm, tensor, zeros, zeros_like)

bool = bool_  # noqa: A001  (torch.bool)
import numpy as _np  # noqa: E402
dtype = _np.dtype  # torch.dtype: TensorBrain's dtypes are NumPy dtypes (isinstance(tb.float32, tb.dtype))

_config.check_at_import()  # a bad TB_* value stops here, one line each; a misspelt name warns
from . import _native  # noqa: E402
_native.note_at_import()  # a missing tensorbrain._C is said once, unless NumPy was asked for
from . import _logging  # noqa: E402
_logging.configure()  # TB_LOG_LEVEL: the 'tensorbrain' logger and its stderr handler
_malloc.keep_freed_memory()  # see _malloc.py: steps stop re-faulting their freed arrays' pages

# ***** ops as tb.* functions: generated from the op table (tensorbrain/_ops/table.py) *****
from ._ops.functions import *  # noqa: E402,F403
from ._ops import table as _op_table  # noqa: E402,F401  (sets docs_math.py's docstrings on the ops)
from .sparse import sparse_coo_tensor, spmm  # noqa: E402,F401  (torch's sparse COO, sparse.py)
from ._sparse_compressed import sparse_csc_tensor, sparse_csr_tensor  # noqa: E402,F401  (CSR, CSC)
from ._batch_norm_parts import *  # noqa: E402,F403  (SyncBatchNorm's pieces: batch_norm_stats...)
from ._ops.conv_tbc import conv_tbc  # noqa: E402,F401
from ._torch_extras import (SymBool, SymFloat, SymInt, Tag, cond, scalar_tensor,  # noqa: E402,F401
                            set_default_tensor_type, sym_ite, are_deterministic_algorithms_enabled,
                            e, frombuffer, get_autocast_cpu_dtype, get_autocast_gpu_dtype,
                            get_deterministic_debug_mode, get_device_module, inf,
                            is_autocast_cpu_enabled, is_deterministic_algorithms_warn_only_enabled,
                            logspace, nan, newaxis, pi, set_deterministic_debug_mode,
                            use_deterministic_algorithms)
from ._tensor_str import set_printoptions  # noqa: E402,F401  (how tensors print)
from ._torch_extras import FLOAT8 as _FLOAT8  # noqa: E402
from ._torch_extras import SHELL_UINTS as _SHELL_UINTS  # noqa: E402
from ._torch_extras import QUANTIZED as _QUANTIZED, QSCHEMES as _QSCHEMES  # noqa: E402
from ._torch_extras import qscheme  # noqa: E402,F401
globals().update(_FLOAT8)   # float8_e4m3fn, float8_e5m2, ... (ml_dtypes')
globals().update(_SHELL_UINTS)   # uint1 .. uint7: torch's storage-only one-byte dtypes
globals().update(_QUANTIZED)   # qint8, quint8, qint32, ...: what observers compute for
globals().update(_QSCHEMES)   # per_tensor_affine, per_channel_symmetric, ...
from .amp import clear_autocast_cache  # noqa: E402,F401
from ._random import default_generator  # noqa: E402,F401
from ._classes import classes  # noqa: E402,F401  (torch.classes: namespaces, nothing registered)
from .storage import TypedStorage, UntypedStorage, is_storage  # noqa: E402,F401
from . import storage as _storage  # noqa: E402
globals().update({_n: getattr(_storage, _n) for _n in _storage.LEGACY})   # ByteStorage, ...

concatenate = cat  # noqa: F405  (tb.cat comes from the generated functions above)
# torch.FloatTensor, torch.LongTensor, ...: the legacy typed classes (tensorbrain/_legacy_types.py)
from ._legacy_types import CPU_TYPES as _LEGACY_TYPES  # noqa: E402
globals().update(_LEGACY_TYPES)


def is_tensor(obj) -> _builtins.bool:
    """Whether ``obj`` is a TensorBrain ``Tensor`` (parameters included).

    Args:
        obj: any object.

    Returns:
        True for a Tensor, False otherwise.
    """
    return isinstance(obj, Tensor)


def numel(t: Tensor) -> _builtins.int:
    """The number of elements of ``t`` (the product of its shape).

    Args:
        t: the tensor.

    Returns:
        An int.
    """
    return t.numel()


def is_floating_point(t: Tensor) -> _builtins.bool:
    """Whether ``t``'s dtype is a floating-point one (float16/bfloat16/32/64).

    Args:
        t: the tensor.

    Returns:
        A bool.
    """
    return _is_fp_dtype(t.dtype)


# Subpackages load on first use: `import tensorbrain` stays fast and never needs MPI, CUDA or a
# compiler; `tb.nn`, `tb.distributed`, ... work as attributes as in torch.
_SUBMODULES: tuple[str, ...] = ("nn", "optim", "utils", "distributed", "models", "testing", "serialization",
               "multiprocessing", "backends", "accelerator", "onnx", "as_torch", "distributions",
               "profiler")
_SUBMODULES += ("random", "jit", "compiler", "_dynamo", "linalg", "func", "xpu", "mps", "version",
                "fx", "library", "quantization", "nested", "overrides", "futures", "sparse",
                "hub", "storage", "__config__", "fft", "ops", "numa", "special", "types",
                "torch_version", "__future__", "mtia", "quasirandom", "ao")


def __getattr__(name):
    import importlib
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in ("save", "load"):
        return getattr(importlib.import_module(".serialization", __name__), name)
    if name == "compile":   # torch.compile: runs eagerly (tensorbrain/_dynamo/__init__.py)
        return importlib.import_module("._dynamo", __name__).compile
    if name == "dropout":   # torch.dropout(input, p, train): nn.functional's, loaded on use
        return importlib.import_module(".nn.functional", __name__).dropout
    if name in ("cosine_similarity", "pairwise_distance"):   # nn.functional's too
        return getattr(importlib.import_module(".nn.functional", __name__), name)
    if name == "dropout_":   # torch.dropout_(input, p, train), in place (nn/functional.py)
        return importlib.import_module(".nn.functional", __name__).dropout_
    if name == "vmap":   # torch.vmap is torch.func.vmap
        return importlib.import_module(".func", __name__).vmap
    if name == "ScriptModule":   # torch.ScriptModule is torch.jit.ScriptModule (an nn.Module)
        return importlib.import_module(".jit", __name__).ScriptModule
    if name == "PyTorchFileReader":   # torch.save archives' records (_torch_format.py)
        return importlib.import_module("._torch_format", __name__).PyTorchFileReader
    if name in ("OutOfMemoryError", "Stream", "Event"):   # torch's device-generic names: CUDA's
        return getattr(importlib.import_module(".cuda", __name__), name)
    raise AttributeError(f"module 'tensorbrain' has no attribute {name!r}")
