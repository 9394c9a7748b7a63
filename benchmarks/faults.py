"""How fast each injected fault is reported (the figures in docs/reliability.md).

Runs the fault-suite scenarios (tests/distributed/faults/) in real processes with real signals
and prints, per scenario, the slowest rank's seconds from the fault to its error (median and
worst over ``--repeat`` runs)::

    python benchmarks/faults.py --repeat 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tensorbrain.testing.distributed import run_workers  # noqa: E402

F = "tests.distributed.faults"


def mismatch(shm):
    res = run_workers(f"{F}.test_mismatch:mismatch_worker", 2, "op", timeout=60,
                      group_timeout=20, env={"TB_SHM": shm})
    assert all(r["first"]["error"] for r in res), res
    return max(r["first"]["secs"] for r in res)


def killed(count):
    res = run_workers(f"{F}.test_peer_failure:victim_worker", 4, 2, "kill", count, timeout=60,
                      group_timeout=20, init="env", raise_on_error=False, env={"TB_SHM": "0"})
    obs = [r.value for r in res if r.rank != 2]
    assert all(o and "rank 2" in o["msg"] for o in obs), obs
    return max(o["secs"] for o in obs)


def frozen():
    res = run_workers(f"{F}.test_peer_failure:victim_worker", 4, 1, "stop", 400_000,
                      timeout=30, group_timeout=4.0, init="env", raise_on_error=False,
                      env={"TB_SHM": "0"})
    obs = [r.value for r in res if r.rank != 1]
    assert all(o and "rank 1" in o["msg"] for o in obs), obs
    return max(o["secs"] for o in obs) - 0.2  # the victim stops 0.2 s into the op


def ctrl_c(mode):
    env = {"sockets": {"TB_SHM": "0"}, "shm": {"TB_SHM": "1"},
           "shm-twin": {"TB_SHM": "1", "TB_NATIVE": "0"}}[mode]
    res = run_workers(f"{F}.test_interrupt:interrupt_worker", 2, timeout=60, group_timeout=20,
                      env=env)
    assert res[0]["first"] == "KeyboardInterrupt", res[0]
    return res[0]["react_s"]


def init_kill(victim, sig):
    res = run_workers(f"{F}.test_init_failure:init_victim_worker", 4, victim, sig, timeout=40,
                      group_timeout=10.0, init=None, raise_on_error=False, env={"TB_SHM": "0"})
    for r in res:
        if r.rank == victim and sig == "stop" and r.pid:
            try:
                os.kill(r.pid, 9)
            except OSError:
                pass
    obs = [r.value for r in res if r.rank != victim]
    assert all(o and o["type"] for o in obs), obs
    return max(o["secs"] for o in obs) - 0.5  # the victim dies 0.5 s after joining


def tbrun_killed():
    """Seconds from SIGKILL of tbrun until its workers, their children and the run's shm
    segment are all gone."""
    import signal
    import subprocess
    import tempfile
    import time
    from pathlib import Path

    from tests.distributed.faults.test_launcher_leftovers import SCRIPT, _alive
    tmp = Path(tempfile.mkdtemp())
    script, info = tmp / "w.py", tmp / "pids"
    script.write_text(SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.Popen([sys.executable, "-m", "tensorbrain.distributed.run", "--standalone",
                          "--nproc_per_node", "2", str(script), str(info)],
                         env={**os.environ, "PYTHONPATH": root}, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    while len(list(tmp.glob("pids.*"))) < 2:
        time.sleep(0.05)
    recs = [f.read_text().split() for f in tmp.glob("pids.*")]
    time.sleep(0.2)
    t0 = time.monotonic()
    p.send_signal(signal.SIGKILL)
    p.wait()
    while (any(_alive(int(x)) for r in recs for x in r[:2])
           or any(os.path.exists(r[2]) for r in recs)):
        if time.monotonic() - t0 > 30:
            raise AssertionError(f"still there 30 s after tbrun was killed: {recs}")
        time.sleep(0.005)
    return time.monotonic() - t0


SCENARIOS = {
    "mismatch MAX vs SUM, sockets (timeout 20 s)": lambda: mismatch("0"),
    "mismatch MAX vs SUM, shared memory": lambda: mismatch("1"),
    "SIGKILL rank 2 of 4, sockets, 8 elements (timeout 20 s)": lambda: killed(8),
    "SIGKILL rank 2 of 4, sockets, 400k elements (ring)": lambda: killed(400_000),
    "SIGSTOP rank 1 of 4, sockets (timeout 4 s)": frozen,
    "Ctrl-C in a waiting all_reduce, sockets": lambda: ctrl_c("sockets"),
    "Ctrl-C in a waiting all_reduce, native shm": lambda: ctrl_c("shm"),
    "Ctrl-C in a waiting all_reduce, shm twin": lambda: ctrl_c("shm-twin"),
    "init: rank 1 of 4 killed after joining (timeout 10 s)": lambda: init_kill(1, "kill"),
    "init: store host (rank 0) killed": lambda: init_kill(0, "kill"),
    "init: store host (rank 0) frozen (timeout 10 s)": lambda: init_kill(0, "stop"),
    "tbrun SIGKILLed: workers, their children, shm gone": tbrun_killed,
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("-k", default="", help="only scenarios whose name contains this")
    args = p.parse_args()
    print(f"# seconds from the fault to the slowest rank's error; {args.repeat} runs each")
    print(f"{'scenario':<58} {'median s':>9} {'worst s':>8}")
    for name, fn in SCENARIOS.items():
        if args.k not in name:
            continue
        secs = [fn() for _ in range(args.repeat)]
        print(f"{name:<58} {statistics.median(secs):9.3f} {max(secs):8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
