"""Finding 7: nothing outlives a SIGKILLed tbrun.

A worker starts a child process (as a DataLoader worker or a subprocess would) and creates a
shared-memory segment named for the run; then tbrun is SIGKILLed. Within a few seconds the
worker, its child and the segment must be gone (before the fix the child lived on: 6 of 6 runs).
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = r"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
seg = f"/dev/shm/tb_{os.environ['TB_RUN_ID']}_leftover_test"
open(seg, "wb").close()
with open(sys.argv[1] + f".{os.environ['LOCAL_RANK']}", "w") as f:
    f.write(f"{os.getpid()} {child.pid} {seg}")
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] not in (b"Z", b"X")


def test_nothing_outlives_a_killed_launcher(tmp_path, soak):
    script = tmp_path / "w.py"
    script.write_text(SCRIPT)
    info = tmp_path / "pids"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(soak):
        for f in tmp_path.glob("pids.*"):
            f.unlink()
        tbrun = subprocess.Popen([sys.executable, "-m", "tensorbrain.distributed.run",
                                  "--standalone", "--nproc_per_node", "2", str(script), str(info)],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("pids.*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        records = [f.read_text().split() for f in tmp_path.glob("pids.*")]
        assert len(records) == 2, "the workers did not start"
        time.sleep(0.2)
        tbrun.send_signal(signal.SIGKILL)
        tbrun.wait(10)
        deadline = time.monotonic() + 10
        left = []
        while time.monotonic() < deadline:
            left = [int(p) for rec in records for p in rec[:2] if _alive(int(p))]
            left += [rec[2] for rec in records if os.path.exists(rec[2])]
            if not left:
                break
            time.sleep(0.1)
        for rec in records:  # never leave anything behind ourselves, whatever the outcome
            for p in rec[:2]:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except OSError:
                    pass
            if os.path.exists(rec[2]):
                os.unlink(rec[2])
        assert not left, f"alive or left 10 s after tbrun was killed: {left}"
