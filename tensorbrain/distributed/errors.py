"""Errors of the distributed stack, as PyTorch names them (all are RuntimeErrors).

Every message names what it can: the op, the group, the sequence number, the peer rank and host,
the address or key, and what to do.
"""


class DistError(RuntimeError):
    """Base of all distributed errors."""


class DistBackendError(DistError):
    """A collective or point-to-point operation failed in a backend (peer died, mismatch...)."""

    rank: int | None  # set by the raiser where one peer is to blame


class DistTimeoutError(DistBackendError, TimeoutError):
    """An operation did not finish within the group's (or the call's) timeout."""


class DistStoreError(DistError):
    """A store operation failed or timed out (key never set, server unreachable)."""


class DistNetworkError(DistError):
    """A network-level failure: connection refused or reset, address in use, unreachable host."""
