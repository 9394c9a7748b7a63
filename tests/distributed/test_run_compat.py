"""Other launchers' commands with the launcher's name changed to tbrun: accelerate launch (and
its YAML config), DeepSpeed's launcher, horovodrun."""
import pytest

from tensorbrain.distributed.run import UsageError, parse_args

from .test_run import free_port, parse_env_lines, script, tbrun
from .test_run_torchrun import TORCH_ENV


def test_accelerate_names_map_onto_tbrun_options():
    cfg = parse_args(["--num_processes", "8", "--num_machines", "2", "--machine_rank", "1",
                      "--main_process_ip", "10.0.0.5", "--main_process_port", "1234",
                      "--multi_gpu", "train.py", "--lr", "3"])
    assert (cfg.nproc, cfg.min_nodes, cfg.max_nodes, cfg.node_rank) == (4, 2, 2, 1)
    assert (cfg.master_addr, cfg.master_port, cfg.elastic) == ("10.0.0.5", 1234, False)
    assert cfg.cmd[-3:] == ["train.py", "--lr", "3"]
    with pytest.raises(UsageError, match="--num_processes 3 is not a multiple of 2"):
        parse_args(["--num_processes", "3", "--num_machines", "2", "t.py"])


def test_accelerate_yaml_config_is_read_and_the_command_line_wins(tmp_path):
    conf = tmp_path / "default_config.yaml"
    conf.write_text("compute_environment: LOCAL_MACHINE\n"
                    "distributed_type: MULTI_GPU\n"
                    "downcast_bf16: 'no'\n"
                    "machine_rank: 1\n"
                    "main_process_ip: 192.168.1.7   # head node\n"
                    "main_process_port: 29555\n"
                    "num_machines: 2\n"
                    "num_processes: 4\n"
                    "fsdp_config: {}\n"
                    "dynamo_config:\n"
                    "  dynamo_backend: NO\n")
    cfg = parse_args(["--config_file", str(conf), "t.py"])
    assert (cfg.nproc, cfg.max_nodes, cfg.node_rank, cfg.master_addr, cfg.master_port) == \
        (2, 2, 1, "192.168.1.7", 29555)
    cfg = parse_args(["--config_file", str(conf), "--machine_rank", "0", "t.py"])
    assert cfg.node_rank == 0
    with pytest.raises(UsageError, match="nope.yaml"):
        parse_args(["--config_file", str(tmp_path / "nope.yaml"), "t.py"])


def test_deepspeed_and_horovod_names(tmp_path):
    cfg = parse_args(["--num_gpus", "2", "--num_nodes", "2", "--master_addr", "h0",
                      "--master_port", "2222", "t.py"])
    assert (cfg.nproc, cfg.max_nodes, cfg.master_addr, cfg.master_port) == (2, 2, "h0", 2222)
    # horovodrun -np 3 -H localhost:3 python train.py
    cfg = parse_args(["-np", "3", "-H", "localhost:3", "python", "train.py", "--x", "1"])
    assert cfg.nproc == 3 and cfg.cmd[-3:] == ["train.py", "--x", "1"]
    cfg = parse_args(["-np", "2", "python3", "-m", "pkg.train"])
    assert cfg.nproc == 2 and cfg.cmd[-2:] == ["-m", "pkg.train"]
    hosts = tmp_path / "hostfile"
    hosts.write_text("# DeepSpeed hostfile\nlocalhost slots=4\n")
    assert parse_args(["--hostfile", str(hosts), "t.py"]).nproc == 4
    with pytest.raises(UsageError, match="-np 2 does not match the 3 slot"):
        parse_args(["-np", "2", "-H", "localhost:3", "t.py"])
    hosts.write_text("localhost slots=two\n")
    with pytest.raises(UsageError, match="line 1: expected 'HOST slots=N'"):
        parse_args(["--hostfile", str(hosts), "t.py"])


@pytest.mark.parametrize("launcher", ["accelerate", "deepspeed", "horovodrun"])
def test_guides_commands_run_with_the_name_changed(tmp_path, launcher):
    w = script(tmp_path, TORCH_ENV)
    port = str(free_port())
    argv = {"accelerate": ["--num_processes", "2", "--num_machines", "1", "--machine_rank", "0",
                           "--main_process_ip", "127.0.0.1", "--main_process_port", port, w],
            "deepspeed": ["--num_gpus", "2", "--num_nodes", "1", "--master_addr", "127.0.0.1",
                          "--master_port", port, w],
            "horovodrun": ["-np", "2", "-H", "localhost:2", "--master_port", port, "python", w],
            }[launcher]
    r = tbrun(*argv)
    assert r.returncode == 0, r.stderr
    envs = parse_env_lines(r.stdout)
    assert sorted(envs) == [0, 1] and {e["WORLD_SIZE"] for e in envs.values()} == {"2"}


def test_srun_tbrun_defaults_come_from_the_step_only(monkeypatch):
    step = {"SLURM_STEP_ID": "0", "SLURM_NODEID": "1", "SLURM_STEP_NUM_NODES": "2",
            "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "gpu[07-08]",
            "SLURM_JOB_ID": "4321"}
    for k, v in step.items():
        monkeypatch.setenv(k, v)
    cfg = parse_args(["--nproc_per_node", "4", "t.py"])
    assert (cfg.max_nodes, cfg.node_rank, cfg.master_addr, cfg.master_port, cfg.run_id,
            cfg.elastic) == (2, 1, "gpu07", 19321, "slurm-4321", False)
    assert parse_args(["--master_port", "1", "t.py"]).master_port == 1  # the command line wins
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "8")  # srun -n 8: tasks are workers, not agents
    assert parse_args(["t.py"]).max_nodes == 1
    monkeypatch.delenv("SLURM_STEP_NUM_NODES")  # the batch script itself: nothing taken
    monkeypatch.delenv("SLURM_STEP_NUM_TASKS")
    assert parse_args(["t.py"]).max_nodes == 1


def test_the_guides_multinode_commands_verbatim(tmp_path):
    """The torchrun DDP series' multinode command (node_rank given with c10d: torchrun ignores
    it and ranks nodes by arrival) on two 'nodes' here, and accelerate's mixed precision."""
    w = script(tmp_path, TORCH_ENV + "print('MP', os.environ.get('ACCELERATE_MIXED_PRECISION'))\n")
    port = free_port()
    cmds = [["--nproc_per_node=2", "--nnodes=2", f"--node_rank={r}", "--rdzv_id=456",
             "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", w, "50", "10"]
            for r in (0, 1)]
    from .test_run import start_tbrun
    first = start_tbrun(*cmds[0])
    try:
        second = tbrun(*cmds[1])
        out1, err1 = first.communicate(timeout=40)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0 and second.returncode == 0, err1 + second.stderr
    envs = {**parse_env_lines(out1), **parse_env_lines(second.stdout)}
    assert sorted(envs) == [0, 1, 2, 3] and {e["WORLD_SIZE"] for e in envs.values()} == {"4"}
    r = tbrun("--num_processes", "1", "--mixed_precision", "bf16", "--main_process_port",
              str(free_port()), w)
    assert r.returncode == 0 and "MP bf16" in r.stdout, r.stderr
