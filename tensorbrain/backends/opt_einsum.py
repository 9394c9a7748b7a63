"""``tb.backends.opt_einsum``: torch's switch for contracting ``einsum`` in the order the
``opt_einsum`` package finds. TensorBrain's ``einsum`` goes through NumPy's (CuPy's) ``einsum``
with ``optimize=True`` for three or more operands, which orders contractions itself; the package is not used, so
``is_available()`` is False and the switches are stored without effect, as in torch without the
package.

>>> import tensorbrain as tb
>>> tb.backends.opt_einsum.is_available(), tb.backends.opt_einsum.enabled
(False, False)
"""
from __future__ import annotations

#: torch's switch: False without the package (as torch).
enabled = False
#: torch's strategy ("auto", "greedy", "optimal"); None without the package (as torch).
strategy = None


def is_available() -> bool:
    """False: TensorBrain does not use the ``opt_einsum`` package."""
    return False


def get_opt_einsum():
    """None: the package is not used (torch returns the module when it is installed)."""
    return None
