"""``tb.utils.deterministic`` (``torch.utils.deterministic``): ``fill_uninitialized_memory``,
torch's switch for filling ``empty`` tensors with NaN (or the largest integer) when
deterministic algorithms are on. TensorBrain's ``empty`` gives NumPy's uninitialised memory; the
switch is kept and read back (True, torch's default) and does not change ``empty``.

>>> import tensorbrain as tb
>>> tb.utils.deterministic.fill_uninitialized_memory
True
"""
from __future__ import annotations

#: torch's switch (default True); stored, see the module note.
fill_uninitialized_memory = True
