"""TB_TIMELINE (Chrome-trace JSON of collectives and DDP buckets) and TB_DISTRIBUTED_DEBUG=INFO
summaries, checked on 2 real processes against the collectives each worker issued."""
import json
import os

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed import _observe

HERE = "tests.distributed.test_observe"

# what _issue runs, in order: (timeline name, bytes of the payload)
ISSUED = [("all_reduce", 4 * 1000), ("broadcast", 8 * 10), ("all_gather", 4 * 6),
          ("all_reduce", 4 * 3), ("barrier", 0)]


def _issue(rank, world):
    dist.all_reduce(tb.ones(1000))
    dist.broadcast(tb.zeros(10, dtype=tb.float64), src=0)
    outs = [tb.zeros(3) for _ in range(world)]
    dist.all_gather(outs, tb.ones(3))  # payload counted by the output list: 2 x 3 x 4 bytes
    dist.all_reduce(tb.ones(3), async_op=True).wait()
    dist.barrier()
    model = tb.nn.parallel.DistributedDataParallel(tb.nn.Linear(4, 2))
    model(tb.ones(5, 4)).sum().backward()
    return _observe.flush()


def _check_chrome_trace(doc):
    assert isinstance(doc["traceEvents"], list)
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
        if e["ph"] == "X":
            assert isinstance(e["ts"], float) and e["dur"] >= 0 and isinstance(e["args"], dict)


def test_timeline_records_every_collective_and_bucket(workers, tmp_path):
    pattern = str(tmp_path / "trace_{rank}.json")
    paths = workers(f"{HERE}:_issue", 2, env={"TB_TIMELINE": pattern})
    assert paths == [str(tmp_path / "trace_0.json"), str(tmp_path / "trace_1.json")]
    docs = []
    for rank, path in enumerate(paths):
        with open(path) as f:
            doc = json.load(f)
        _check_chrome_trace(doc)
        docs.append(doc)
        events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
        assert {e["pid"] for e in events} == {rank}
        coll = [e for e in events if e["cat"] == "collectives"]
        # the issued ones, in order, with their sizes; DDP's own collectives follow
        got = [(e["name"], e["args"]["bytes"]) for e in coll[:len(ISSUED)]]
        assert got == ISSUED, got
        assert [e["args"]["seq"] for e in coll[:len(ISSUED)]] == list(range(len(ISSUED)))
        assert coll[3]["args"]["async"] is True and coll[0]["args"]["dtype"] == "float32"
        assert coll[2]["args"]["elements"] == 6
        starts = [e["ts"] for e in coll]
        assert starts == sorted(starts)
        buckets = [e for e in events if e["cat"] == "ddp"]
        assert buckets and buckets[0]["args"]["bytes"] == (4 * 2 + 2) * 4
        assert buckets[0]["args"]["params"] == 2
        names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
        assert names == {"collectives default", "ddp buckets"}
    merged = _observe.merge(paths, str(tmp_path / "merged.json"))
    _check_chrome_trace(merged)
    first = [e for e in merged["traceEvents"] if e["ph"] == "X" and e["args"].get("seq") == 0
             and e["name"] == "all_reduce"]
    assert len(first) == 2
    waits = sorted(e["args"]["wait_us"] for e in first)
    assert waits[0] == 0 and waits[1] >= 0  # the last rank to arrive waited for nobody
    assert waits[1] == abs(first[0]["ts"] - first[1]["ts"]) or np.isclose(
        waits[1], abs(first[0]["ts"] - first[1]["ts"]))


def test_timeline_path_suffix_and_off_by_default():
    assert _observe.timeline_path("/x/t.json", 2) == "/x/t.rank2.json"
    assert _observe.timeline_path("/x/t", 0) == "/x/t.rank0.json"
    assert _observe.timeline_path("/x/{rank}/t.json", 5) == "/x/5/t.json"
    os.environ.pop("TB_TIMELINE", None)
    _observe.reset()
    backend = object()
    if os.environ.get("TB_DISTRIBUTED_DEBUG", "OFF").upper() == "OFF":
        assert _observe.wrap(backend, "default", 0) is backend  # unset: no proxy, no cost


def test_debug_info_logs_each_collective(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "w.py"
    script.write_text(
        "import tensorbrain as tb, tensorbrain.distributed as dist\n"
        "dist.init_process_group('tcp')\n"
        "dist.all_reduce(tb.ones(7))\n"
        "dist.destroy_process_group()\n")
    env = dict(os.environ, TB_DISTRIBUTED_DEBUG="info", PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-m", "tensorbrain.distributed.run", "--standalone",
                          "--nproc_per_node", "2", str(script)], env=env, capture_output=True,
                         text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    for rank in (0, 1):
        assert (f"[tensorbrain rank {rank}] INFO tensorbrain.distributed: all_reduce (seq 0) of "
                f"group 'default': float32 x 7 (28 B)") in text, text


@pytest.mark.mpi
def test_timeline_and_summaries_on_the_mpi_backend(tmp_path):
    """The same observation on another backend (the layer sits above every backend)."""
    import shutil
    import subprocess
    import sys
    pytest.importorskip("mpi4py")
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = mpiexec if os.path.exists(mpiexec) else shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec not found")
    script = tmp_path / "w.py"
    script.write_text(
        "import tensorbrain as tb, tensorbrain.distributed as dist\n"
        "dist.init_process_group('mpi')\n"
        "t = tb.ones(100)\n"
        "dist.all_reduce(t)\n"
        "dist.all_reduce(t, async_op=True).wait()\n"
        "dist.broadcast(t, src=0)\n"
        "dist.destroy_process_group()\n")
    env = dict(os.environ, TB_DISTRIBUTED_DEBUG="INFO", TB_TIMELINE=str(tmp_path / "t.json"),
               PYTHONPATH=os.getcwd())
    out = subprocess.run([mpiexec, "-n", "2", sys.executable, str(script)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    for rank in (0, 1):
        with open(tmp_path / f"t.rank{rank}.json") as f:
            doc = json.load(f)
        _check_chrome_trace(doc)
        got = [(e["name"], e["args"]["seq"], e["args"]["bytes"], e["args"]["async"])
               for e in doc["traceEvents"] if e["ph"] == "X"]
        assert got == [("all_reduce", 0, 400, False), ("all_reduce", 1, 400, True),
                       ("broadcast", 2, 400, False)], got
        assert (f"[tensorbrain rank {rank}] INFO tensorbrain.distributed: broadcast (seq 2) of "
                f"group 'default': float32 x 100 (400 B)") in out.stderr + out.stdout


def _hooked_ddp(rank, world):
    from tensorbrain.nn.parallel.comm_hooks import default_hooks
    model = tb.nn.parallel.DistributedDataParallel(tb.nn.Linear(4, 2))
    model.register_comm_hook(None, default_hooks.allreduce_hook)
    model(tb.ones(5, 4)).sum().backward()
    _observe.flush()
    with open(_observe.timeline().path) as f:
        doc = json.load(f)
    return [e["args"]["bytes"] for e in doc["traceEvents"] if e.get("cat") == "ddp"]


def test_timeline_records_comm_hook_buckets(workers, tmp_path):
    got = workers(f"{HERE}:_hooked_ddp", 2, env={"TB_TIMELINE": str(tmp_path / "t.json")})
    assert got == [[(4 * 2 + 2) * 4]] * 2
