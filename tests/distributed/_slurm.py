"""A real one-node Slurm cluster for tests (Debian's slurm-wlm + munge), under a temp folder.

The ``slurm`` fixture starts its own ``munged`` (own socket, run as user munge), ``slurmctld``
and ``slurmd`` (``SlurmUser=root``, ``proctrack/linuxproc``, ``task/none``, one node with this
host's cores, free ports, state/spool/logs in the temp folder), waits for the node to be idle,
and tears everything down afterwards (jobs cancelled, daemons stopped). It skips cleanly without
root or the packages (``apt-get install slurm-wlm munge``).
"""
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARIES = ("slurmctld", "slurmd", "munged", "srun", "sbatch", "scancel", "squeue", "sinfo")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurm:
    """A running cluster: ``env`` has ``SLURM_CONF``; ``run`` calls its commands."""

    def __init__(self, folder: Path, conf: Path, env: dict):
        self.folder, self.conf, self.env = folder, conf, env
        self.daemons: list[subprocess.Popen] = []

    def run(self, *argv, timeout=60, check=True, **kw):
        """Run a Slurm command (or anything) with this cluster's environment."""
        r = subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                           timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise AssertionError(f"{argv}: status {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def job_state(self, job_id) -> str:
        """The job's state from slurmctld (``sacct`` needs a database, so ``scontrol``)."""
        r = self.run("scontrol", "show", "job", str(job_id), check=False)
        for word in r.stdout.split():
            if word.startswith("JobState="):
                return word.split("=", 1)[1]
        return "UNKNOWN"

    def wait_job(self, job_id, states=("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"),
                 timeout=40) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.job_state(job_id)
            if state in states:
                return state
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} still {self.job_state(job_id)} after {timeout} s\n"
                             + self.logs())

    def logs(self) -> str:
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            p = self.folder / name
            if p.exists():
                out.append(f"--- {name} (tail)\n" + "\n".join(p.read_text().splitlines()[-15:]))
        return "\n".join(out)


def _conf_text(folder: Path, host: str, cpus: int, sock: Path) -> str:
    return f"""
ClusterName=tbtest
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
JobRequeue=1
KillWait=2
InactiveLimit=0
MinJobAge=300
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


@pytest.fixture
def slurm():
    """Yield a running one-node :class:`Slurm`; skip when it cannot run here."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing or os.geteuid() != 0:
        pytest.skip(f"needs root and Slurm + munge (apt-get install slurm-wlm munge); "
                    f"missing: {missing or 'root'}")
    try:
        munge = pwd.getpwnam("munge")
    except KeyError:
        pytest.skip("no 'munge' user")
    folder = Path(tempfile.mkdtemp(prefix="tbslurm_"))
    os.chmod(folder, 0o755)
    mdir = folder / "munge"
    mdir.mkdir(mode=0o755)
    os.chown(mdir, munge.pw_uid, munge.pw_gid)
    sock = mdir / "munge.socket"
    host = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(_conf_text(folder, host, os.cpu_count() or 1, sock))
    for d in ("state", "spool"):
        (folder / d).mkdir()
    env = dict(os.environ, SLURM_CONF=str(conf), PYTHONPATH=str(ROOT))
    cluster = Slurm(folder, conf, env)
    munged = None
    try:
        munged = subprocess.Popen(
            ["runuser", "-u", "munge", "--", "munged", "-F", f"--socket={sock}",
             f"--pid-file={mdir}/munged.pid", f"--log-file={mdir}/munged.log",
             f"--seed-file={mdir}/munged.seed"], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True)
        for _ in range(50):
            if sock.exists() or munged.poll() is not None:
                break
            time.sleep(0.1)
        if not sock.exists():
            err = munged.stderr.read().decode() if munged.poll() is not None else ""
            pytest.skip(f"munged did not start: {err.strip()}")
        for daemon in ("slurmctld", "slurmd"):
            cluster.daemons.append(subprocess.Popen(
                [daemon, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True))
            time.sleep(0.3)
        deadline = time.monotonic() + 20
        while True:
            r = cluster.run("sinfo", "-h", "-o", "%t", check=False, timeout=10)
            if r.stdout.strip() == "idle":
                break
            if time.monotonic() > deadline:
                pytest.skip(f"Slurm did not come up: {r.stdout}{r.stderr}\n{cluster.logs()}")
            time.sleep(0.2)
        yield cluster
    finally:
        subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True,
                       timeout=10)
        for p in reversed(cluster.daemons):
            p.terminate()
        for p in cluster.daemons:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if munged is not None:
            try:
                os.killpg(munged.pid, 15)
                munged.wait(5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(folder, ignore_errors=True)
