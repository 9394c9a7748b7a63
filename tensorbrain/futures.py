"""``tb.futures`` (``torch.futures``): :class:`Future` (``wait``, ``value``, ``then``,
``set_result``, ``done``), the object DDP communication hooks return, and
:func:`collect_all` / :func:`wait_all`. The class is the one ``tb.nn.parallel`` hooks use
(``tensorbrain/nn/parallel/_future.py``).

>>> import tensorbrain as tb
>>> tb.futures.wait_all([tb.futures.Future.completed(1), tb.futures.Future.completed(2)])
[1, 2]
"""
from __future__ import annotations

from .nn.parallel._future import Future


def collect_all(futures) -> Future:
    """A Future that finishes with the list of ``futures`` once all have finished.

    Args:
        futures: a list of :class:`Future`.

    Returns:
        Future: its value is ``futures`` (each finished).
    """
    futures = list(futures)

    def run():
        for f in futures:
            f.wait()
        return futures
    return Future(run)


def wait_all(futures) -> list:
    """Wait for every Future and return their values, in order.

    Args:
        futures: a list of :class:`Future`.

    Returns:
        list: the values.
    """
    return [f.wait() for f in futures]


__all__ = ["Future", "collect_all", "wait_all"]
