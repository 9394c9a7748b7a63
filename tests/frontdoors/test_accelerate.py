"""tensorbrain.accelerate: an Accelerate-style program (tests/frontdoors/programs) run unchanged
under tbrun --as-torch at 2 ranks ends with the weights one process reaches on the full batch."""
import os

import numpy as np
import pytest

from tensorbrain.accelerate import BatchSamplerShard
from tensorbrain.accelerate.accelerator import _split
from tensorbrain.accelerate.utils import load_config_from_file, parse_yaml

from ._run import assert_close, assert_identical, run, weights

PROG = "accelerate_train.py"
pytestmark = pytest.mark.timeout(300)


def test_two_ranks_match_one_process_on_the_full_batch(tmp_path):
    run(PROG, "--batch", "16", "--out", str(tmp_path / "one.st"))
    text = run(PROG, "--batch", "8", "--out", str(tmp_path / "two.st"), nproc=2)
    assert "accuracy" in text and "/61" in text   # gather_for_metrics dropped the padding
    assert_close(weights(tmp_path / "one.st"), weights(tmp_path / "two.st"))
    # gradient accumulation: 2 ranks x 2 micro-batches of 4 = one step on 16
    run(PROG, "--batch", "4", "--accum", "2", "--out", str(tmp_path / "acc.st"), nproc=2)
    assert_close(weights(tmp_path / "one.st"), weights(tmp_path / "acc.st"))


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mixed_precision_stays_finite_and_close(tmp_path, precision):
    run(PROG, "--batch", "16", "--out", str(tmp_path / "fp32.st"))
    run(PROG, "--batch", "8", "--mixed-precision", precision, "--out", str(tmp_path / "low.st"),
        nproc=2)
    ref, low = weights(tmp_path / "fp32.st"), weights(tmp_path / "low.st")
    for k in ref:
        assert np.isfinite(low[k]).all(), k
    assert_close(ref, low, rtol=0, atol=0.05 if precision == "bf16" else 0.01)


@pytest.mark.parametrize("kind", ["ddp", "fsdp"])
def test_save_state_round_trip_resumes_bit_identically(tmp_path, kind):
    env = {}
    if kind == "fsdp":   # each rank saves and loads its own optimizer shard
        cfg = tmp_path / "fsdp.yaml"
        cfg.write_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: 1\n")
        env = {"ACCELERATE_CONFIG_FILE": str(cfg)}
    run(PROG, "--epochs", "2", "--out", str(tmp_path / "straight.st"), nproc=2, env=env)
    ckpt = str(tmp_path / "ckpt")
    run(PROG, "--epochs", "1", "--save-state", ckpt, "--out", str(tmp_path / "half.st"), nproc=2,
        env=env)
    run(PROG, "--epochs", "2", "--start-epoch", "1", "--load-state", ckpt,
        "--out", str(tmp_path / "resumed.st"), nproc=2, env=env)
    assert_identical(weights(tmp_path / "straight.st"), weights(tmp_path / "resumed.st"))


def _shards(batches, n, even=True, drop_last=False, size=2):
    class Sampler(list):
        batch_size = size
    return [list(BatchSamplerShard(Sampler(batches), n, r, even, drop_last)) for r in range(n)]


def test_batches_go_round_robin_and_the_last_round_is_completed_from_the_start():
    batches = [[0, 1], [2, 3], [4, 5], [6, 7], [8]]
    assert _shards(batches[:4], 2) == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]
    # 9 samples on 2 ranks: [8] is completed with 0, then rank 1 gets [1, 2]
    assert _shards(batches, 2) == [[[0, 1], [4, 5], [8, 0]], [[2, 3], [6, 7], [1, 2]]]
    assert _shards(batches, 2, even=False) == [[[0, 1], [4, 5], [8]], [[2, 3], [6, 7]]]
    assert _shards(batches[:4] + [[8, 9]], 2, drop_last=True) == \
        [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]


def test_split_between_processes():
    assert [_split(list(range(5)), 2, r, False) for r in range(2)] == [[0, 1, 2], [3, 4]]
    assert _split(list(range(5)), 2, 1, True) == [3, 4, 4]
    assert _split({"a": [1, 2]}, 2, 1, False) == {"a": [2]}


def test_config_file(tmp_path):
    path = tmp_path / "default_config.yaml"
    path.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\n"
                    "mixed_precision: bf16\nnum_processes: 2\nfsdp_config:\n"
                    "  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_offload_params: false\n"
                    "gpu_ids: all\n")
    cfg = load_config_from_file(str(path))
    assert cfg["distributed_type"] == "FSDP" and cfg["num_processes"] == 2
    assert cfg["fsdp_config"] == {"fsdp_sharding_strategy": "SHARD_GRAD_OP",
                                  "fsdp_offload_params": False}
    path.write_text("distributed_type: NO\nnum_procs: 2\n")
    with pytest.raises(ValueError, match="num_procs"):
        load_config_from_file(str(path))
    assert parse_yaml("a:\n  b:\n    c: [1, 2]\nd: 'x'") == {"a": {"b": {"c": [1, 2]}}, "d": "x"}


def test_fsdp_from_a_config_file_matches_one_process(tmp_path):
    """distributed_type FSDP in the YAML file (ACCELERATE_CONFIG_FILE): prepare wraps the model
    in FSDP FULL_SHARD and points the optimizer at the flat shards."""
    cfg = tmp_path / "fsdp.yaml"
    cfg.write_text("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                   "  fsdp_sharding_strategy: FULL_SHARD\n")
    run(PROG, "--batch", "16", "--out", str(tmp_path / "one.st"))
    run(PROG, "--batch", "8", "--out", str(tmp_path / "fsdp.st"), nproc=2,
        env={"ACCELERATE_CONFIG_FILE": str(cfg)})
    assert_close(weights(tmp_path / "one.st"), weights(tmp_path / "fsdp.st"))


def test_unsupported_options_are_clear_errors():
    import tensorbrain as tb
    from tensorbrain.accelerate import Accelerator

    class Stream(tb.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(4))

    acc = Accelerator(cpu=True)
    with pytest.raises(ValueError, match="IterableDataset"):
        acc.prepare(tb.utils.data.DataLoader(Stream(), batch_size=2))
    with pytest.raises(ValueError, match="split_batches=True is not supported"):
        Accelerator(cpu=True, split_batches=True).prepare(
            tb.utils.data.DataLoader(list(range(4)), batch_size=2))
    with pytest.raises(ValueError, match="trackers are not supported"):
        Accelerator(cpu=True, log_with="wandb")
    with pytest.raises(ValueError, match="fp8"):
        Accelerator(cpu=True, mixed_precision="fp8")


def test_accumulation_restarts_after_the_loaders_last_batch():
    """5 batches, accumulation 2: steps at batches 2, 4 and 5 in every epoch (Accelerate resets
    its counter at the end of the loader; without that epoch 2 stepped at batches 1, 3, 5)."""
    import tensorbrain as tb
    from tensorbrain.accelerate import Accelerator
    acc = Accelerator(cpu=True, gradient_accumulation_steps=2)
    model, loader = acc.prepare(tb.nn.Linear(1, 1),
                                tb.utils.data.DataLoader(list(range(5)), batch_size=1))
    for _ in range(2):
        pattern = []
        for _batch in loader:
            with acc.accumulate(model):
                pattern.append(acc.sync_gradients)
        assert pattern == [False, True, False, True, True]


def test_gather_for_metrics_keeps_a_drop_last_loader_whole():
    import tensorbrain as tb
    from tensorbrain.accelerate import Accelerator
    acc = Accelerator(cpu=True)
    data = tb.utils.data.TensorDataset(tb.arange(10))
    loader = acc.prepare(tb.utils.data.DataLoader(data, batch_size=4, drop_last=True))
    assert [acc.gather_for_metrics(x).tolist() for (x,) in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    loader = acc.prepare(tb.utils.data.DataLoader(data, batch_size=4))
    assert [len(acc.gather_for_metrics(x)) for (x,) in loader] == [4, 4, 2]


def test_prepared_scheduler_stops_at_the_end_of_one_cycle():
    """With n processes the prepared scheduler steps n times per step; OneCycleLR sized for
    fewer steps would raise past its end, so it stops there (as Accelerate)."""
    import tensorbrain as tb
    from tensorbrain.accelerate._wrappers import AcceleratedScheduler
    from tensorbrain.accelerate.accelerator import GradientState
    opt = tb.optim.SGD([tb.zeros(1, requires_grad=True)], lr=0.1)
    sched = tb.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=5)
    wrapped = AcceleratedScheduler(sched, [], GradientState(1), num_processes=2)
    for _ in range(4):
        opt.step()
        wrapped.step()
    assert sched.last_epoch == 5


def test_kwargs_handlers_project_configuration_and_logger(tmp_path, caplog):
    import logging

    import tensorbrain as tb
    from tensorbrain.accelerate import (Accelerator, DistributedDataParallelKwargs,
                                        GradScalerKwargs, ProjectConfiguration)
    from tensorbrain.accelerate.logging import get_logger
    acc = Accelerator(cpu=True, mixed_precision="fp16", kwargs_handlers=[
        DistributedDataParallelKwargs(find_unused_parameters=True),
        GradScalerKwargs(init_scale=1024.0)],
        project_config=ProjectConfiguration(str(tmp_path), automatic_checkpoint_naming=True,
                                            total_limit=2))
    assert acc._ddp_kwargs == {"find_unused_parameters": True}
    assert acc.scaler.get_scale() == 1024.0
    model = tb.nn.Linear(2, 1)
    acc.prepare(model, tb.optim.SGD(model.parameters(), lr=0.1))
    written = [acc.save_state() for _ in range(3)]
    assert [os.path.basename(w) for w in written] == [f"checkpoint_{i}" for i in range(3)]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["checkpoint_1", "checkpoint_2"]
    again = Accelerator(cpu=True, project_config=ProjectConfiguration(
        str(tmp_path), automatic_checkpoint_naming=True))
    model2 = tb.nn.Linear(2, 1)
    again.prepare(model2, tb.optim.SGD(model2.parameters(), lr=0.1))
    again.load_state()                                    # the newest: checkpoint_2
    np.testing.assert_array_equal(model2.weight._data, model.weight._data)
    assert again.project_configuration.iteration == 3
    with pytest.raises(ValueError, match="AutocastKwargs is not supported"):
        Accelerator(cpu=True, kwargs_handlers=[type("AutocastKwargs", (), {})()])
    with caplog.at_level(logging.INFO):
        get_logger("train").info("hello %s", "main")
    assert [r.getMessage() for r in caplog.records] == ["hello main"]


FSDP_CONFIG_WITH_BLOCK_LISTS = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap:
  - BertLayer
  - GPT2Block
  fsdp_sharding_strategy: FULL_SHARD
gpu_ids: all
num_processes: 2
tpu_env: []
commands:
    - echo one
    - 'echo: two'
use_cpu: true
"""


def test_block_lists_read_as_pyyaml_reads_them():
    """`accelerate config` writes lists in block style (PyYAML's dump): our subset reader (used
    without PyYAML) gives what PyYAML gives, and parse() uses PyYAML when it is installed."""
    from tensorbrain import _yaml
    ours = _yaml.parse_subset(FSDP_CONFIG_WITH_BLOCK_LISTS)
    assert ours["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] == ["BertLayer", "GPT2Block"]
    assert ours["downcast_bf16"] == "no" and ours["commands"] == ["echo one", "echo: two"]
    yaml = pytest.importorskip("yaml")
    assert ours == yaml.safe_load(FSDP_CONFIG_WITH_BLOCK_LISTS)
    assert parse_yaml(FSDP_CONFIG_WITH_BLOCK_LISTS) == ours


def test_a_config_written_by_real_accelerate_reads_the_same(tmp_path):
    """The file real Accelerate writes (ClusterConfig.to_yaml_file, what `accelerate config`
    calls) reads the same with the subset reader as with PyYAML."""
    yaml = pytest.importorskip("yaml")
    config_args = pytest.importorskip("accelerate.commands.config.config_args")
    path = tmp_path / "default_config.yaml"
    config_args.ClusterConfig(
        compute_environment="LOCAL_MACHINE", distributed_type="FSDP", mixed_precision="no",
        use_cpu=True, debug=False, num_processes=2,
        fsdp_config={"fsdp_transformer_layer_cls_to_wrap": ["BertLayer", "GPT2Block"],
                     "fsdp_sharding_strategy": "FULL_SHARD"},
        tpu_env=["A=1", "B=2"]).to_yaml_file(str(path))
    from tensorbrain import _yaml
    text = path.read_text()
    assert "- BertLayer" in text                      # block style, as the reader must handle
    assert _yaml.parse_subset(text) == yaml.safe_load(text)


def test_outside_the_subset_is_a_named_line_error():
    from tensorbrain import _yaml
    with pytest.raises(ValueError, match="line 2.*pyyaml"):
        _yaml.parse_subset("a:\n- b: 1\n")
    with pytest.raises(ValueError, match="line 1"):
        _yaml.parse_subset("just words\n")
