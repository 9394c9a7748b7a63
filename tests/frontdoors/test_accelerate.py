"""tensorbrain.accelerate: an Accelerate-style program (tests/frontdoors/programs) run unchanged
under tbrun --as-torch at 2 ranks ends with the weights one process reaches on the full batch."""
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
