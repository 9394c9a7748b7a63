"""``tb.backends.cusparselt``: NVIDIA's semi-structured sparse matmul library, which
TensorBrain does not use (what torch built without it answers).

>>> import tensorbrain as tb
>>> tb.backends.cusparselt.is_available(), tb.backends.cusparselt.version()
(False, None)
"""
from __future__ import annotations


def is_available() -> bool:
    """False: TensorBrain has no semi-structured sparse kernels."""
    return False


def version():
    """None: cuSPARSELt is not used."""
    return None
