"""Installs TensorBrain's ``import torch`` alias in Python processes started by an as_torch run.

``python -m tensorbrain.as_torch`` and ``tbrun --as-torch`` put this folder on ``PYTHONPATH`` and
set ``TENSORBRAIN_AS_TORCH=1``, so children (``mp.spawn``, tbrun workers, subprocesses) get the
alias before their program imports torch. Any other ``sitecustomize`` on the path still runs.
"""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("TENSORBRAIN_AS_TORCH") == "1":
    from tensorbrain.as_torch import install as _install
    _install()
# hand over to the next sitecustomize on the path, if there is one
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules["sitecustomize"]
try:
    import sitecustomize  # noqa: F401
except ImportError:
    pass
_mine = sys.modules.get(__name__)
if _mine is not None:
    sys.modules.setdefault("sitecustomize", _mine)
