"""A job of replicas for the live-recovery tests: a store the test process serves (it must
outlive every replica), replicas as real processes (``python -m tests.distributed.ft.replica``),
their logs, hard timeouts, and nothing left running afterwards."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


class Job:
    """Replicas sharing one store; ``start(**FT_vars)`` returns the index of a new replica."""

    def __init__(self, tmp_path, world, **common):
        from tensorbrain.distributed.store import TCPStore
        self.tmp = tmp_path
        self.store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                              timeout=120)
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("RANK", "LOCAL_RANK", "TB_RUN_ID")}
        self.env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.store.port),
                        WORLD_SIZE=str(world), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
                        **{k: str(v) for k, v in common.items()})
        self.procs: list = []

    def start(self, module="tests.distributed.ft.replica", **ft):
        i = len(self.procs)
        env = dict(self.env, **{k: str(v) for k, v in ft.items()})
        err = open(self.tmp / f"err{i}.txt", "w")
        self.procs.append(subprocess.Popen([sys.executable, "-m", module,
                                            str(self.tmp / f"r{i}.jsonl")], env=env, cwd=ROOT,
                                           stdout=err, stderr=subprocess.STDOUT))
        return i

    def wait(self, i, timeout):
        try:
            return self.procs[i].wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"replica {i} still running after {timeout} s:\n{self.stderr(i)}")

    def log(self, i) -> list:
        path = self.tmp / f"r{i}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] \
            if path.exists() else []

    def stderr(self, i) -> str:
        return (self.tmp / f"err{i}.txt").read_text()

    def wait_step(self, i, step, timeout):
        """Until replica ``i`` logged ``step`` (or it ended, or the timeout)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.procs[i].poll() is None:
            if any(e.get("step", -1) >= step and "loss" in e for e in self.log(i)):
                return
            time.sleep(0.05)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        self.store.close()


@pytest.fixture
def ft_job(tmp_path):
    """``ft_job(world, **FT_vars)``: a :class:`Job`; everything it started is killed after."""
    jobs = []

    def make(world, **common):
        jobs.append(Job(tmp_path, world, **common))
        return jobs[-1]
    yield make
    for j in jobs:
        j.close()
