"""tensorbrain.distributed.slurm: SlurmConfig, submit / slurm_fn in mode="local" (everywhere) and
on a real one-node Slurm through submitit (skipped without Slurm or submitit)."""
import os
import subprocess
import sys

import pytest

from tensorbrain.distributed.slurm import (SlurmConfig, SlurmFunction, distributed_env,
                                           fill_launch_command, slurm_fn, submit)

from ._slurm import ROOT, slurm  # noqa: F401  (fixture)


def add(a, b=0):
    return a + b


def fails():
    raise ValueError("bad config 7")


def test_local_mode_runs_here_and_returns_a_finished_job():
    config = SlurmConfig(mode="local", nodes=1)
    job = submit(add, config, 2, b=3)
    assert job.job_id.startswith("local-") and job.state == "COMPLETED" and job.done()
    assert job.wait() == "COMPLETED" and job.result() == 5 and job.results() == [5]
    assert job.stdout_path is None
    bad = slurm_fn(config)(fails)()
    assert bad.state == "FAILED"
    with pytest.raises(RuntimeError, match="ValueError: bad config 7"):
        bad.result()


def test_config_checks_and_parameters():
    c = SlurmConfig(partition="gpu", job_name="t", nodes=2, tasks_per_node=4, cpus_per_task=8,
                    gpus_per_node=4, mem="64G", time="1-02:30:00", node_list="n[1-2]")
    assert c.timeout_min() == 26 * 60 + 30
    p = c.submitit_parameters()
    assert p == dict(name="t", nodes=2, tasks_per_node=4, cpus_per_task=8, timeout_min=1590,
                     gpus_per_node=4, slurm_partition="gpu", slurm_mem="64G",
                     slurm_additional_parameters={"nodelist": "n[1-2]"})
    with pytest.raises(ValueError, match="mode='cloud'"):
        SlurmConfig(mode="cloud")
    with pytest.raises(ValueError, match="'HH:MM:SS'"):
        SlurmConfig(time="soon")
    with pytest.raises(ValueError, match="not both or neither"):
        submit(None, SlurmConfig(mode="local"))


def test_launch_command_template_and_distributed_env():
    env = {"SLURM_JOB_NUM_NODES": "3", "SLURM_NODEID": "2", "SLURM_JOB_ID": "98765",
           "SLURM_JOB_NODELIST": "gpu[007-009]", "SLURM_PROCID": "5", "SLURM_NTASKS": "6",
           "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "2(x3)"}
    cmd = fill_launch_command("accelerate launch --num_processes {num_processes} --num_machines "
                              "{num_machines} --machine_rank {machine_rank} --main_process_ip "
                              "{main_process_ip} --main_process_port {main_process_port}",
                              env, nproc_per_node=4)
    assert cmd == ("accelerate launch --num_processes 12 --num_machines 3 --machine_rank 2 "
                   "--main_process_ip gpu007 --main_process_port 23765")
    with pytest.raises(KeyError, match="num_gpus"):
        fill_launch_command("{num_gpus}", env)
    d = distributed_env(env)
    assert (d["RANK"], d["WORLD_SIZE"], d["LOCAL_RANK"], d["GROUP_RANK"], d["MASTER_ADDR"]) == \
        ("5", "6", "1", "2", "gpu007")


def test_local_mode_runs_a_launch_command(tmp_path):
    out = tmp_path / "ran"
    config = SlurmConfig(mode="local", distributed_launch_command=(
        f"{sys.executable} -c \"open('{out}', 'w').write('{{num_machines}} {{machine_rank}}')\""))
    job = submit(None, config)
    assert job.result() == 0 and out.read_text() == "1 0"


def _rank_and_sum():
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    dist.init_process_group("tcp")
    x = tb.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(x)
    out = (dist.get_rank(), dist.get_world_size(), x.tolist())
    dist.destroy_process_group()
    return out


def test_submit_to_a_real_slurm_through_submitit(slurm, tmp_path, monkeypatch):  # noqa: F811
    pytest.importorskip("submitit")
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    monkeypatch.setenv("PYTHONPATH", slurm.env["PYTHONPATH"])
    config = SlurmConfig(job_name="tbsum", tasks_per_node=2, time=2, output=str(tmp_path / "jobs"),
                         use_distributed_env=True)
    job = slurm_fn(config)(_rank_and_sum)()
    assert job.job_id.isdigit() and os.path.dirname(job.stdout_path) == str(tmp_path / "jobs")
    assert job.wait() == "COMPLETED"
    assert sorted(job.results()) == [(0, 2, [3.0]), (1, 2, [3.0])]
    assert job.result() == (0, 2, [3.0])  # task 0's; it said "failed (COMPLETED): use results()"


def test_a_launch_command_with_accelerates_names_on_a_real_slurm(slurm, tmp_path, monkeypatch):  # noqa: F811,E501
    """nntool's idiom: SlurmConfig(distributed_launch_command="accelerate launch --num_processes
    {num_processes} ...") with `accelerate launch` changed to tbrun; each task runs it."""
    pytest.importorskip("submitit")
    monkeypatch.setenv("SLURM_CONF", slurm.env["SLURM_CONF"])
    monkeypatch.setenv("PYTHONPATH", slurm.env["PYTHONPATH"])
    (tmp_path / "train.py").write_text(
        "import os\n"
        "import tensorbrain as tb\n"
        "import tensorbrain.distributed as dist\n"
        "dist.init_process_group('tcp')\n"
        "x = tb.ones(1) * (dist.get_rank() + 1)\n"
        "dist.all_reduce(x)\n"
        "open(os.path.join(os.path.dirname(__file__), f'r{dist.get_rank()}'), 'w')"
        ".write(f'{dist.get_world_size()} {x.tolist()}')\n")
    config = SlurmConfig(job_name="tblaunch", tasks_per_node=1, cpus_per_task=2, time=2,
                         nproc_per_node=2, output=str(tmp_path / "jobs"),
                         distributed_launch_command=(
                             f"{sys.executable} -m tensorbrain.distributed.run --num_processes "
                             "{num_processes} --num_machines {num_machines} --machine_rank "
                             "{machine_rank} --main_process_ip {main_process_ip} "
                             "--main_process_port {main_process_port} "
                             f"{tmp_path / 'train.py'}"))
    job = submit(None, config)
    assert job.wait() == "COMPLETED", open(job.stderr_path).read()
    assert job.result() == 0
    assert [(tmp_path / f"r{r}").read_text() for r in (0, 1)] == ["2 [3.0]", "2 [3.0]"]


NNTOOL_PROGRAM = '''
import os
import sys
from tensorbrain.distributed.slurm import SlurmConfig, slurm_fn


@slurm_fn
def main(config, tag):
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    dist.init_process_group("tcp")
    x = tb.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(x)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{tag}{dist.get_rank()}")
    with open(out, "w") as f:
        f.write(f"{dist.get_world_size()} {x.tolist()} {sys.argv[1:]}")
    world = dist.get_world_size()
    dist.destroy_process_group()
    return world


if __name__ == "__main__":
    mode, folder = sys.argv[1], sys.argv[2]
    slurm_config = SlurmConfig(
        mode=mode, slurm_job_name="nntool", tasks_per_node=1, cpus_per_task=2, time=3,
        processes_per_task=2, output=folder, use_distributed_env=True,
        mem="1GB" if mode == "local" else None,   # the test cluster's node declares no memory
        distributed_launch_command=(
            sys.executable + " -m tensorbrain.distributed.run --num_processes {num_processes} "
            "--num_machines {num_machines} --machine_rank {machine_rank} --main_process_ip "
            "{main_process_ip} --main_process_port {main_process_port} " + __file__))
    job = main[slurm_config](slurm_config, "r")   # the launched processes: main's value (2)
    if job != 2:
        print("JOB", job.job_id, job.wait(), job.result())
'''


def test_nntools_bare_slurm_fn_and_config_at_the_call():
    @slurm_fn
    def mul(a, b=1):
        return a * b

    assert isinstance(mul, SlurmFunction) and mul.__name__ == "mul"
    assert mul[SlurmConfig(mode="run")](3, b=4).result() == 12
    assert slurm_fn(SlurmConfig(mode="local"))(mul.run_here)(5).result() == 5   # fn(...) still
    with pytest.raises(TypeError, match=r"mul\[config\]"):
        mul(2)
    c = SlurmConfig(num_of_node=2, slurm_partition="gpu", slurm_job_name="x", mem="192GB",
                    gpus_per_node=4, processes_per_task=4)
    assert (c.nodes, c.partition, c.job_name, c.mem) == (2, "gpu", "x", "192G")
    assert c.launch_nproc_per_node() == 4           # tasks_per_node 1 x processes_per_task 4
    env = {"SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "0", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NODELIST": "n[1-2]"}
    assert fill_launch_command("{num_processes}", env, c.launch_nproc_per_node()) == "8"
    with pytest.raises(ValueError, match="processes_per_task=0"):
        SlurmConfig(processes_per_task=0)


def _run_nntool_program(tmp_path, mode, env=None):
    script = tmp_path / "main.py"
    script.write_text(NNTOOL_PROGRAM)
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    e.pop("TB_SLURM_LAUNCHED", None)
    e.update(env or {})
    out = subprocess.run([sys.executable, str(script), mode, str(tmp_path / "jobs")], env=e,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_nntools_relaunch_idiom_runs_as_written_in_local_mode(tmp_path):
    """The program calls main[config](...) with use_distributed_env and a launch command: the
    command (tbrun with accelerate's option names) starts processes_per_task=2 processes that
    run the same program, reach the same line and call main there."""
    text = _run_nntool_program(tmp_path, "local")
    assert "COMPLETED 0" in text
    for r in (0, 1):   # each launched process ran main, with the program's own arguments
        assert (tmp_path / f"r{r}").read_text() == f"2 [3.0] ['local', '{tmp_path / 'jobs'}']"


def test_nntools_relaunch_idiom_on_a_real_slurm(slurm, tmp_path):  # noqa: F811
    pytest.importorskip("submitit")
    text = _run_nntool_program(tmp_path, "slurm", env={
        "SLURM_CONF": slurm.env["SLURM_CONF"], "PATH": slurm.env.get("PATH", os.environ["PATH"])})
    assert "COMPLETED 0" in text
    for r in (0, 1):
        assert (tmp_path / f"r{r}").read_text() == f"2 [3.0] ['slurm', '{tmp_path / 'jobs'}']"
