"""Other launchers' commands with the launcher's name changed to tbrun: accelerate launch (and
its YAML config), DeepSpeed's launcher, horovodrun."""
import subprocess
import sys

import pytest

from tensorbrain.distributed.run import UsageError, parse_args

from .test_run import env, free_port, parse_env_lines, script, start_tbrun, tbrun
from .test_run_torchrun import TORCH_ENV

ENV_DUMP_MP = """
import json, os
keys = ["RANK", "WORLD_SIZE", "MASTER_PORT", "ACCELERATE_MIXED_PRECISION"]
print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}))
"""


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


ACCELERATE_FIELDS = {"compute_environment": "LOCAL_MACHINE", "debug": False,
                     "distributed_type": "MULTI_CPU", "downcast_bf16": "no", "machine_rank": 0,
                     "main_training_function": "main", "mixed_precision": "bf16",
                     "num_machines": 1, "num_processes": 2, "rdzv_backend": "static",
                     "same_network": True, "use_cpu": True}


def test_accelerate_json_config_runs_as_its_yaml_twin(tmp_path):
    """`accelerate config default` writes JSON, even to default_config.yaml (YAML reads JSON):
    tbrun --config_file reads it as the same settings in YAML form, without PyYAML too."""
    import json
    port = free_port()
    fields = dict(ACCELERATE_FIELDS, main_process_port=port)
    as_json = tmp_path / "default_config.yaml"
    as_json.write_text(json.dumps(fields, indent=2, sort_keys=True))
    as_yaml = tmp_path / "yaml_config.yaml"
    as_yaml.write_text("".join(f"{k}: {json.dumps(v) if isinstance(v, bool) else v}\n"
                               for k, v in fields.items()).replace("True", "true"))
    w = script(tmp_path, ENV_DUMP_MP)
    outs = {}
    for conf in (as_json, as_yaml):
        r = tbrun("--config_file", str(conf), w)
        assert r.returncode == 0, r.stderr
        outs[conf.name] = parse_env_lines(r.stdout)
    assert outs["default_config.yaml"] == outs["yaml_config.yaml"]
    assert sorted(outs["default_config.yaml"]) == [0, 1]


def test_config_file_after_options_with_values_is_read(tmp_path):
    """`--config_file` after an option that takes a value (`--main_process_port 29501
    --config_file F`) was ignored without a word: the scan stopped at the option's value."""
    conf = tmp_path / "c.yaml"
    conf.write_text("num_processes: 2\nmixed_precision: bf16\nmain_process_port: 29555\n")
    first = parse_args(["--config_file", str(conf), "t.py"])
    for argv in (["--stop_timeout", "3", "--config_file", str(conf), "t.py"],
                 ["--stop_t", "3", "--config-file=" + str(conf), "t.py"],
                 ["--nproc_per_node", "2", "--config_file", str(conf), "t.py"]):
        cfg = parse_args(argv)
        assert (cfg.nproc, cfg.master_port, cfg.mixed_precision) == \
            (first.nproc, first.master_port, first.mixed_precision), argv
    port = free_port()
    w = script(tmp_path, ENV_DUMP_MP)
    r = tbrun("--main_process_port", str(port), "--config_file", str(conf), w)
    assert r.returncode == 0, r.stderr
    envs = parse_env_lines(r.stdout)
    assert sorted(envs) == [0, 1]
    assert {(e["WORLD_SIZE"], e["MASTER_PORT"], e["ACCELERATE_MIXED_PRECISION"])
            for e in envs.values()} == {("2", str(port), "bf16")}


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


LEGACY = """
import argparse, os
p = argparse.ArgumentParser()
p.add_argument("--local-rank", "--local_rank", type=int, default=-1)
p.add_argument("--args", action="store_true")
a = p.parse_args()
print(f"ARG {a.local_rank} ENV {os.environ['LOCAL_RANK']} FLAG {a.args}", flush=True)
"""


def _arg_lines(out):
    return sorted(x.split("] ", 1)[1] for x in out.splitlines() if "] ARG" in x)


def test_torch_distributed_launch_module_passes_local_rank(tmp_path):
    """The guide's `python -m torch.distributed.launch --nproc_per_node=4 train.py --args` with
    the name changed: workers get --local-rank=N before their arguments unless --use-env."""
    w = script(tmp_path, LEGACY)
    run = [sys.executable, "-m", "tensorbrain.distributed.launch", "--master_port",
           str(free_port())]
    r = subprocess.run([*run, "--nproc_per_node=2", w, "--args"], env=env(
        PYTHON_MULTIPROCESSING_METHOD="spawn"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert _arg_lines(r.stdout) == ["ARG 0 ENV 0 FLAG True", "ARG 1 ENV 1 FLAG True"], r.stdout
    assert "deprecated: use tbrun" in r.stderr
    r = subprocess.run([*run, "--use-env", "--nproc_per_node=2", w], env=env(),
                       capture_output=True, text=True, timeout=60)
    assert _arg_lines(r.stdout) == ["ARG -1 ENV 0 FLAG False", "ARG -1 ENV 1 FLAG False"], r
    r = subprocess.run([*run, "--no-python", "echo"], env=env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--no-python needs --use-env" in r.stderr, r.stderr


def test_deepspeed_commands_pass_local_rank_as_deepspeed_does(tmp_path):
    """`deepspeed --num_gpus 2 train.py --deepspeed --deepspeed_config ds.json`: DeepSpeed's
    launcher hands every worker --local_rank=N first; torchrun's spelling does not."""
    w = script(tmp_path, LEGACY.replace('"--args", action="store_true"', '"--deepspeed", '
                                        'action="store_true", dest="args"') +
               "import sys; print('REST', sys.argv[1:])\n")
    port = str(free_port())
    r = tbrun("--num_gpus", "2", "--master_port", port, w, "--deepspeed")
    assert r.returncode == 0, r.stderr
    assert _arg_lines(r.stdout) == ["ARG 0 ENV 0 FLAG True", "ARG 1 ENV 1 FLAG True"], r.stdout
    assert "[rank 1] REST ['--local_rank=1', '--deepspeed']" in r.stdout
    assert "each worker also gets --local_rank" in r.stderr
    for argv in (["--num_gpus", "2", "--no_local_rank"], ["--nproc_per_node", "2"]):
        r = tbrun(*argv, "--master_port", port, w)
        assert _arg_lines(r.stdout) == ["ARG -1 ENV 0 FLAG False", "ARG -1 ENV 1 FLAG False"]
    hosts = tmp_path / "hostfile"
    hosts.write_text("localhost slots=2\n")
    assert parse_args(["--hostfile", str(hosts), "t.py", "x"]).cmd[-3:] == \
        ["t.py", "--local_rank=${local_rank}", "x"]
    # horovodrun's -np with a hostfile: no --local_rank (horovodrun passes none)
    assert parse_args(["-np", "2", "--hostfile", str(hosts), "t.py"]).cmd[-1] == "t.py"


def test_local_rank_macro_is_substituted_as_torchrun_does(tmp_path):
    r = tbrun("--nproc_per_node", "2", "--master_port", str(free_port()), "--no_python",
              "echo", "rank=${local_rank}", "cost=$$5")
    assert r.returncode == 0, r.stderr
    assert sorted(x for x in r.stdout.splitlines()) == ["[rank 0] rank=0 cost=$5",
                                                        "[rank 1] rank=1 cost=$5"]


def test_the_guides_multi_machine_exports_form_one_world(tmp_path):
    """The guide's recipe: export MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE on each machine,
    then `torchrun --nproc_per_node=N train.py` (torchrun ignores them: each machine trains
    alone). tbrun takes them as the node's placement, on two 'machines' here."""
    w = script(tmp_path, TORCH_ENV)
    common = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "4"}
    first = start_tbrun("--nproc_per_node=2", w, extra_env={**common, "RANK": "0"})
    try:
        second = tbrun("--nproc_per_node=2", w, extra_env={**common, "RANK": "2"})
        out1, err1 = first.communicate(timeout=40)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0 and second.returncode == 0, err1 + second.stderr
    envs = {**parse_env_lines(out1), **parse_env_lines(second.stdout)}
    assert sorted(envs) == [0, 1, 2, 3] and {e["WORLD_SIZE"] for e in envs.values()} == {"4"}
    assert [envs[r]["GROUP_RANK"] for r in range(4)] == ["0", "0", "1", "1"]
    assert "this is node 1 of 2" in second.stderr and "warning" not in second.stderr


def test_exported_placement_is_used_only_when_it_describes_whole_nodes(monkeypatch):
    for k, v in {"MASTER_ADDR": "10.1.1.1", "MASTER_PORT": "2345", "WORLD_SIZE": "8",
                 "RANK": "4"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    cfg = parse_args(["--nproc_per_node=4", "t.py"])
    assert (cfg.max_nodes, cfg.node_rank, cfg.master_addr, cfg.master_port, cfg.elastic) == \
        (2, 1, "10.1.1.1", 2345, False)
    for argv in (["--nproc_per_node=3"], ["--nproc_per_node=8"], ["--standalone"],
                 ["--nproc_per_node=4", "--node_rank=0"],
                 ["--nproc_per_node=4", "--rdzv_endpoint=h:1"]):
        assert parse_args([*argv, "t.py"]).env_placement is False, argv
    monkeypatch.setenv("LOCAL_RANK", "0")  # inside a launched worker: those are its own
    assert parse_args(["--nproc_per_node=4", "t.py"]).max_nodes == 1


def test_store_address_variables_equal_to_tbruns_are_not_warned_about():
    """An sbatch recipe exports MASTER_ADDR/MASTER_PORT and passes the same values as
    --main_process_ip/--main_process_port: nothing is overridden, so no warning."""
    from tensorbrain.distributed.run import warn_placement_overrides
    cfg = parse_args(["--master_addr", "h0", "--master_port", "1234", "t.py"])
    assert warn_placement_overrides(cfg, {"MASTER_ADDR": "h0", "MASTER_PORT": "1234"}) == []
    assert warn_placement_overrides(cfg, {"MASTER_ADDR": "h0", "MASTER_PORT": "99"}) == \
        ["MASTER_PORT"]


def test_accelerates_resource_options_reach_the_workers(tmp_path):
    """`accelerate launch` without a config tells users to pass --num_machines, --mixed_precision
    and --dynamo_backend; those and its thread/GPU options work with the name changed."""
    w = script(tmp_path, "import os\nprint('VARS', *[os.environ.get(k) for k in ("
               "'OMP_NUM_THREADS', 'CUDA_VISIBLE_DEVICES', 'ACCELERATE_DYNAMO_BACKEND', "
               "'ACCELERATE_MIXED_PRECISION', 'ACCELERATE_DEBUG_MODE')])\n")
    r = tbrun("--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
              "--dynamo_backend", "no", "--num_cpu_threads_per_process", "3", "--gpu_ids", "0,1",
              "--same_network", "-q", "--debug", "--main_process_port", str(free_port()), w)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("VARS 3 0,1 NO no true") == 2, r.stdout
    assert "OMP_NUM_THREADS=1" not in r.stderr  # the user's thread count, no notice about ours
    with pytest.raises(UsageError, match="--num_cpu_threads_per_process 0"):
        parse_args(["--num_cpu_threads_per_process", "0", "t.py"])
