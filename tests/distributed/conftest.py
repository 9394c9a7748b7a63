"""Shared fixtures for the distributed tests: every multi-process test goes through
``tensorbrain.testing.distributed.run_workers`` (real processes on 127.0.0.1, hard timeouts,
leftovers killed)."""
import pytest

from tensorbrain.testing.distributed import WorkerFailure, run_workers


@pytest.fixture
def workers():
    """``workers(fn_ref, world_size, *args, **kw)``: run_workers with test-friendly defaults."""
    def run(fn_ref, world_size, *args, timeout=60.0, **kw):
        return run_workers(fn_ref, world_size, *args, timeout=timeout, **kw)
    return run


__all__ = ["WorkerFailure"]
