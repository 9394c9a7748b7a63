"""``detect_anomaly`` / ``set_detect_anomaly`` (torch's anomaly mode): a switch the engine
reads. TensorBrain's engine reports a backward function that returns a gradient of the wrong
shape always (naming the function); with anomaly detection on it also checks every gradient
for NaN and raises ``RuntimeError`` naming the function that produced it, as torch does.

>>> import tensorbrain as tb
>>> with tb.autograd.detect_anomaly():
...     tb.autograd.is_anomaly_enabled()
True
"""
from __future__ import annotations

_state = {"enabled": False, "check_nan": True}


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return _state["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks gradients for NaN."""
    return _state["enabled"] and _state["check_nan"]


class set_detect_anomaly:
    """Turn anomaly detection on or off (a function call, or a context for a block).

    Args:
        mode: on or off.
        check_nan: check gradients for NaN.
    """

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = dict(_state)
        _state.update(enabled=bool(mode), check_nan=bool(check_nan))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _state.update(self.prev)
        return False


class detect_anomaly(set_detect_anomaly):
    """``with detect_anomaly():`` turns anomaly detection on for the block.

    Args:
        check_nan: check gradients for NaN.
    """

    def __init__(self, check_nan: bool = True):
        self.prev = dict(_state)
        self.check_nan = check_nan

    def __enter__(self):
        _state.update(enabled=True, check_nan=bool(self.check_nan))
        return self
