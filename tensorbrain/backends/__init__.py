"""``tb.backends``: torch's backend switches, with what each one means on TensorBrain's backends.

TensorBrain computes with NumPy (CPU) and CuPy (GPU); it does not use cuDNN, MPS, oneDNN
(mkldnn) or OpenMP. The flags exist so programs that set them run unchanged; each module says
what its flags do here (mostly: stored, no effect) and ``is_available()`` answers honestly.

>>> import tensorbrain as tb
>>> tb.backends.cudnn.benchmark = True        # accepted; TensorBrain has no cuDNN autotuner
>>> tb.backends.mps.is_available(), tb.backends.cudnn.is_available()
(False, False)
"""
from . import cuda, cudnn, cusparselt, mkldnn, mps, openmp, opt_einsum  # noqa: F401

__all__ = ["cuda", "cudnn", "cusparselt", "mkldnn", "mps", "openmp", "opt_einsum"]
