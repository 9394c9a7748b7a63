"""elastic.multiprocessing.start_processes: real processes (a program and spawned functions),
per-rank environments, redirected streams, return values, and a failure that stops the group
with the child's error file in torch's format; the result shape checked against torch's."""
import os
import sys

import pytest

from tensorbrain.distributed.elastic.multiprocessing import (DefaultLogsSpecs, Std,
                                                             start_processes)

from . import _start_processes_cases as C


def test_program_entrypoint_envs_and_redirects(tmp_path):
    envs = {r: {"LOCAL_RANK": str(r), "TORCHELASTIC_RUN_ID": "job"} for r in range(2)}
    code = "import os, sys; print('out', os.environ['LOCAL_RANK']); print('err', file=sys.stderr)"
    ctx = start_processes("prog", sys.executable, {r: ("-c", code) for r in range(2)}, envs,
                          DefaultLogsSpecs(str(tmp_path), redirects=Std.ALL))
    assert sorted(ctx.pids()) == [0, 1]
    res = ctx.wait(timeout=60, period=0.1)
    assert res is not None and not res.is_failed() and res.return_values == {0: None, 1: None}
    for r in range(2):
        assert open(res.stdouts[r]).read() == f"out {r}\n"
        assert open(res.stderrs[r]).read() == "err\n"
        assert f"job_{os.getpid()}" in res.stdouts[r]
    failing = start_processes("prog", sys.executable,
                              {0: ("-c", "import time; time.sleep(30)"),
                               1: ("-c", "raise SystemExit(3)")}, {0: {}, 1: {}},
                              DefaultLogsSpecs(str(tmp_path)))
    res = failing.wait(timeout=60, period=0.1)
    assert res.is_failed() and list(res.failures) == [1] and res.failures[1].exitcode == 3
    assert failing._procs[0].poll() is not None   # the other process was stopped


def test_function_entrypoint_return_values_and_errors(tmp_path):
    pytest.importorskip("torch")
    envs = {r: {"LOCAL_RANK": str(r)} for r in range(2)}
    res = start_processes("fn", C.square, {0: (3,), 1: (4,)}, envs,
                          DefaultLogsSpecs(str(tmp_path), redirects={1: Std.OUT})).wait(60, 0.1)
    assert res.return_values == {0: {"rank": 0, "sq": 9}, 1: {"rank": 1, "sq": 16}}
    assert res.stdouts[0] == "" and open(res.stdouts[1]).read() == "rank value 4\n"
    res = start_processes("fn", C.boom, {0: (0,), 1: (1,)}, envs,
                          DefaultLogsSpecs(str(tmp_path / "b"))).wait(60, 0.1)
    assert list(res.failures) == [1] and res.failures[1].exitcode != 0
    assert "ValueError: boom on 1" in res.failures[1].message
    import dataclasses

    from torch.distributed.elastic.multiprocessing.api import RunProcsResult
    assert [f.name for f in dataclasses.fields(RunProcsResult)] == \
        [f.name for f in dataclasses.fields(type(res))]
    with pytest.raises(NotImplementedError, match="tee"):
        DefaultLogsSpecs(tee=Std.ALL)
