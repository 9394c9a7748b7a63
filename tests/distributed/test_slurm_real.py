"""tensorbrain on a real (one-node) Slurm: srun without a launcher, sbatch + srun tbrun,
scancel, requeue and resume. Skipped where Slurm + munge are not installed (see _slurm.py)."""
import sys
import textwrap
import time

from ._slurm import slurm  # noqa: F401  (fixture)


def test_srun_two_tasks_form_a_group_from_slurm_variables(slurm, tmp_path):  # noqa: F811
    w = tmp_path / "train.py"
    w.write_text(textwrap.dedent("""
        import tensorbrain as tb
        import tensorbrain.distributed as dist
        dist.init_process_group("tcp")
        x = tb.ones(2) * (dist.get_rank() + 1)
        dist.all_reduce(x)
        print("OK", dist.get_rank(), dist.get_world_size(), x.tolist(), flush=True)
        dist.destroy_process_group()
        """))
    r = slurm.run("srun", "-n", "2", "--kill-on-bad-exit=1", sys.executable, str(w), timeout=60)
    lines = sorted(x for x in r.stdout.splitlines() if x.startswith("OK"))
    assert lines == ["OK 0 2 [3.0, 3.0]", "OK 1 2 [3.0, 3.0]"], r.stderr


TRAIN = """
import os
import tensorbrain as tb
import tensorbrain.distributed as dist
dist.init_process_group("tcp")
x = tb.ones(2) * (dist.get_rank() + 1)
dist.all_reduce(x)
print("OK", dist.get_rank(), dist.get_world_size(), os.environ["GROUP_RANK"], x.tolist())
dist.destroy_process_group()
"""


def sbatch(slurm, tmp_path, body, *opts):  # noqa: F811
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n" + textwrap.dedent(body))
    r = slurm.run("sbatch", "--parsable", "-o", str(tmp_path / "out.txt"), "-D", str(tmp_path),
                  *opts, str(script))
    return r.stdout.strip().split(";")[0]


def test_sbatch_script_running_srun_tbrun(slurm, tmp_path):  # noqa: F811
    (tmp_path / "train.py").write_text(TRAIN)
    job = sbatch(slurm, tmp_path, f"""
        #SBATCH --nodes=1 --ntasks-per-node=1 --cpus-per-task=1
        srun {sys.executable} -m tensorbrain.distributed.run --nproc_per_node 2 train.py
        """)
    assert slurm.wait_job(job) == "COMPLETED", (tmp_path / "out.txt").read_text()
    out = (tmp_path / "out.txt").read_text()
    lines = sorted(x.split("] ", 1)[1] for x in out.splitlines() if "] OK" in x)
    assert lines == ["OK 0 2 0 [3.0, 3.0]", "OK 1 2 0 [3.0, 3.0]"], out
    # tbrun took its rendezvous from Slurm: port 15000 + the job id's last four digits
    assert f"store at {slurm_host()}:{15000 + int(job[-4:])}" in out, out


def slurm_host():
    import socket
    return socket.gethostname().split(".")[0]


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ValueError):
        return False


def test_scancel_ends_the_workers_and_leaves_nothing(slurm, tmp_path):  # noqa: F811
    (tmp_path / "sleeper.py").write_text(textwrap.dedent("""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        with open(f"pids.{os.environ['RANK']}", "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        time.sleep(300)
        """))
    job = sbatch(slurm, tmp_path, f"""
        srun {sys.executable} -m tensorbrain.distributed.run --nproc_per_node 2 sleeper.py
        """)
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("pids.*"))) < 2:
        assert time.monotonic() < deadline, (tmp_path / "out.txt").read_text()
        time.sleep(0.2)
    pids = [int(p) for f in tmp_path.glob("pids.*") for p in f.read_text().split()]
    assert all(_alive(p) for p in pids)
    slurm.run("scancel", job)
    assert slurm.wait_job(job) == "CANCELLED"
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids), [p for p in pids if _alive(p)]


def test_a_requeued_job_resumes_from_its_snapshot(slurm, tmp_path):  # noqa: F811
    (tmp_path / "resume.py").write_text(textwrap.dedent("""
        import json, os, time
        import tensorbrain as tb
        snap = "snapshot.safetensors"
        start = 0
        w = tb.zeros(3)
        if os.path.exists(snap):
            w = tb.load(snap)["w"]
            start = int(w[0].item())
            print("resumed from step", start, "restart", os.environ.get("SLURM_RESTART_COUNT"))
        for step in range(start, 6):
            w = w + 1
            if step == 2 and start == 0:
                tb.save({"w": w}, snap + ".tmp")
                os.replace(snap + ".tmp", snap)
                print("snapshot at step", step + 1, flush=True)
                time.sleep(120)     # requeued while here
        print("final", w.tolist())
        """))
    job = sbatch(slurm, tmp_path, f"""
        srun {sys.executable} -m tensorbrain.distributed.run resume.py
        """, "--requeue", "--open-mode=append")
    deadline = time.monotonic() + 30
    while not (tmp_path / "snapshot.safetensors").exists():
        assert time.monotonic() < deadline, (tmp_path / "out.txt").read_text()
        time.sleep(0.2)
    slurm.run("scontrol", "requeue", job)
    # Slurm holds a requeued job back (BeginTime = now + ~2 min); let it start at once
    deadline = time.monotonic() + 10
    while "PENDING" not in slurm.job_state(job) and time.monotonic() < deadline:
        time.sleep(0.2)
    slurm.run("scontrol", "update", f"JobId={job}", "StartTime=now")
    assert slurm.wait_job(job, timeout=60) == "COMPLETED"
    out = (tmp_path / "out.txt").read_text()
    assert "resumed from step 3 restart 1" in out and "final [6.0, 6.0, 6.0]" in out, out
