"""tensorbrain.distributed.slurm: SlurmConfig, submit / slurm_fn in mode="local" (everywhere) and
on a real one-node Slurm through submitit (skipped without Slurm or submitit)."""
import os
import sys

import pytest

from tensorbrain.distributed.slurm import (SlurmConfig, distributed_env, fill_launch_command,
                                           slurm_fn, submit)

from ._slurm import slurm  # noqa: F401  (fixture)


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
