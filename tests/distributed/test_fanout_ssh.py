"""tbrun --hostfile / -H: one agent per host over a real sshd, two hosts in two network
namespaces. Skipped without root, ip netns, sshd or ssh (apt-get install openssh-server)."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.distributed._netns import ROOT, in_ns, two_hosts  # noqa: F401  (fixture)


@pytest.fixture
def ssh_hosts(two_hosts, tmp_path):  # noqa: F811
    """Two hosts, each running sshd on port 2222 that accepts a fresh key; yields
    (namespaces, addresses, ssh_opts)."""
    for tool in ("sshd", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            pytest.skip(f"needs {tool} (apt-get install openssh-server)")
    ns, addrs = two_hosts
    d = tmp_path / "ssh"
    d.mkdir()
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                       check=True, timeout=20)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    os.makedirs("/run/sshd", exist_ok=True)
    daemons = []
    try:
        for n, a in zip(ns, addrs, strict=True):
            conf = d / f"sshd_{n}.conf"
            conf.write_text(textwrap.dedent(f"""
                ListenAddress {a}
                Port 2222
                HostKey {d}/host_key
                PidFile {d}/sshd_{n}.pid
                AuthorizedKeysFile {d}/authorized_keys
                PermitRootLogin yes
                PasswordAuthentication no
                StrictModes no
                UsePAM no
                """))
            daemons.append(subprocess.Popen(["ip", "netns", "exec", n, shutil.which("sshd")
                                             or "/usr/sbin/sshd", "-D", "-e", "-f", str(conf)],
                                            stderr=subprocess.PIPE))
        opts = (f"-i {d}/client_key -o StrictHostKeyChecking=no "
                "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR")
        deadline = time.monotonic() + 15
        for a in addrs:  # wait until each sshd answers
            while True:
                r = subprocess.run(["ip", "netns", "exec", ns[0], "ssh", "-p", "2222",
                                    *opts.split(), a, "true"], capture_output=True, timeout=20)
                if r.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    pytest.skip(f"sshd in a namespace did not answer: {r.stderr.decode()}")
                time.sleep(0.2)
        yield ns, addrs, opts
    finally:
        for p in daemons:
            p.terminate()
            p.wait(10)


def driver(ns, argv):
    return in_ns(ns, [sys.executable, "-m", "tensorbrain.distributed.run", *argv])


ALLREDUCE = """
import os, socket, sys
import tensorbrain as tb
import tensorbrain.distributed as dist
dist.init_process_group("tcp")
x = tb.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(x)
print("OK", dist.get_rank(), dist.get_world_size(), os.environ["GROUP_RANK"], x.tolist())
print("ARGV", dist.get_rank(), sys.argv[1:])
dist.destroy_process_group()
"""


def test_hostfile_and_dash_h_start_one_agent_per_host(ssh_hosts, tmp_path):
    ns, (a0, a1), opts = ssh_hosts
    w = tmp_path / "w.py"
    w.write_text(ALLREDUCE)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(f"# DeepSpeed's format\n{a0} slots=2\n{a1} slots=2\n")
    for argv in (["--hostfile", str(hostfile)], ["-np", "4", "-H", f"{a0}:2,{a1}:2"]):
        p = driver(ns[0], [*argv, "--ssh_port", "2222", "--ssh_opts", opts, "--master_port",
                           "29561", "--stop_timeout", "3", "python", str(w)])
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err
        lines = sorted(x.split("] ", 1)[1] for x in out.splitlines() if "] OK" in x)
        assert lines == ["OK 0 4 0 [10.0]", "OK 1 4 0 [10.0]", "OK 2 4 1 [10.0]", "OK 3 4 1 [10.0]"], out + err
        # DeepSpeed's --hostfile: every host's workers get --local_rank=N, as deepspeed passes
        # it (the driver decides, the remote tbruns are told); horovodrun's -np/-H: none
        argvs = sorted(x.split("] ", 1)[1] for x in out.splitlines() if "] ARGV" in x)
        want = [f"ARGV {r} ['--local_rank={r % 2}']" if "--hostfile" in argv else f"ARGV {r} []"
                for r in range(4)]
        assert argvs == want, out


SLEEPER = """
import os, sys, time
with open(os.path.join(os.path.dirname(__file__), f"pid.{os.environ['RANK']}"), "w") as f:
    f.write(str(os.getpid()))
if os.environ["RANK"] == "2" and "fail" in sys.argv:
    time.sleep(1)
    sys.exit(3)
time.sleep(120)
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", ["ctrl-c", "failure"])
def test_ctrl_c_or_a_failure_on_one_host_ends_every_host(ssh_hosts, tmp_path, how):
    ns, (a0, a1), opts = ssh_hosts
    w = tmp_path / "s.py"
    w.write_text(SLEEPER)
    p = driver(ns[0], ["-H", f"{a0}:2,{a1}:1", "--ssh_port", "2222", "--ssh_opts", opts,
                       "--master_port", "29562", "--stop_timeout", "3", str(w),
                       *(["fail"] if how == "failure" else [])])
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("pid.*"))) < 3:
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.2)
        pids = [int(f.read_text()) for f in tmp_path.glob("pid.*")]
        if how == "ctrl-c":
            os.kill(p.pid, signal.SIGINT)  # `ip netns exec` execs the driver: same pid
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    if how == "ctrl-c":
        assert p.returncode == 130, err
    else:
        assert p.returncode == 1 and "rank 2" in err and "exited with code 3" in err, err
    deadline = time.monotonic() + 15
    while any(_alive(x) for x in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(x) for x in pids), err
