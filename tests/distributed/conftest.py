"""Shared fixtures for the distributed tests: every multi-process test goes through
``tensorbrain.testing.distributed.run_workers`` (real processes on 127.0.0.1, hard timeouts,
leftovers killed)."""
import glob
import os
import uuid

import pytest

from tensorbrain.testing.distributed import WorkerFailure, run_workers


@pytest.fixture
def workers():
    """``workers(fn_ref, world_size, *args, **kw)``: run_workers with test-friendly defaults."""
    def run(fn_ref, world_size, *args, timeout=60.0, **kw):
        return run_workers(fn_ref, world_size, *args, timeout=timeout, **kw)
    return run


@pytest.fixture
def run_id():
    """A TB_RUN_ID for the workers; after the test no /dev/shm/tb_<run_id>_* may remain."""
    rid = "t" + uuid.uuid4().hex[:10]
    yield rid
    left = glob.glob(f"/dev/shm/tb_{rid}_*")
    for path in left:
        os.unlink(path)
    assert not left, f"shared-memory segments left behind: {left}"


__all__ = ["WorkerFailure"]
