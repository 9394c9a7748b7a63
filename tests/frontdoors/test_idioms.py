"""Programs in each front end's own idiom, modelled on the originals' example scripts (written
here): Accelerate's nlp_example (accumulate, gather_for_metrics, step checkpoints resumed with
skip_first_batches), DeepSpeed's cifar10_deepspeed (get_accelerator, deepspeed.comm,
inputs.to(half), a ds_config with fp16 dynamic scaling, clipping, a schedule and ZeRO), Horovod's
pytorch_mnist (DistributedOptimizer, broadcast_parameters/optimizer_state, lr * hvd.size(),
metric_average) and ezpz's minimal example (get_logger, setup_torch, timeitlogit,
dist.wrap_model_for_ddp). With only their imports changed (no alias) they run at 2 ranks under
tbrun and end with the weights of one process on the full batch."""
import os
import re

import numpy as np
import pytest

from ._run import assert_close, assert_identical, run, weights
from .test_imports_changed import _rewrite

pytestmark = pytest.mark.timeout(300)


def _ds_weights(folder):
    import tensorbrain as tb
    with open(os.path.join(folder, "latest")) as f:
        tag = f.read().strip()
    state = tb.load(os.path.join(folder, tag, "mp_rank_00_model_states.safetensors"))
    return {k: np.asarray(v._data, dtype=np.float64) for k, v in state["module"].items()}


def _finite_and_close(ref, low, atol):
    for k, v in low.items():
        assert np.isfinite(v).all(), k
    assert_close(ref, low, rtol=0, atol=atol)


def test_accelerate_nlp_example(tmp_path):
    prog = _rewrite("accelerate_nlp_example.py", str(tmp_path))
    model = "model/model.safetensors"
    run(prog, "--cpu", "--batch_size", "16", "--output_dir", str(tmp_path / "one"), alias=False)
    text = run(prog, "--cpu", "--batch_size", "8", "--output_dir", str(tmp_path / "two"), nproc=2,
               alias=False)
    assert "accuracy 24/45" in text        # gather_for_metrics: every eval sample once
    assert_close(weights(tmp_path / "one" / model), weights(tmp_path / "two" / model))
    # stopped at step 10 of 18 (in epoch 2), resumed from step_10 with skip_first_batches
    # (the loader is shuffled and the program never calls set_epoch): identical bits
    run(prog, "--cpu", "--batch_size", "8", "--output_dir", str(tmp_path / "half"),
        "--checkpointing_steps", "5", "--stop_at_step", "10", nproc=2, alias=False)
    run(prog, "--cpu", "--batch_size", "8", "--output_dir", str(tmp_path / "resumed"),
        "--resume_from_checkpoint", str(tmp_path / "half" / "step_10"), nproc=2, alias=False)
    assert_identical(weights(tmp_path / "two" / model), weights(tmp_path / "resumed" / model))


def test_deepspeed_cifar(tmp_path):
    prog = _rewrite("deepspeed_cifar.py", str(tmp_path))
    common = ("--scheduler", "OneCycle", "--stage", "2")
    # one process without a launcher: a group of one, so deepspeed.comm works there too
    one = run(prog, *common, "--dtype", "fp32", "--save_dir", str(tmp_path / "one"), alias=False)
    two = run(prog, *common, "--dtype", "fp32", "--save_dir", str(tmp_path / "two"), nproc=2,
              alias=False)
    ref = _ds_weights(str(tmp_path / "one"))
    assert_close(ref, _ds_weights(str(tmp_path / "two")), rtol=1e-4, atol=1e-6)
    # the all-reduced epoch loss of 2 ranks is the one process's loss
    mean = re.compile(r"\[2\] all-rank loss ([0-9.]+)")
    assert mean.search(one).group(1) == mean.search(two).group(1)
    run(prog, *common, "--dtype", "fp16", "--save_dir", str(tmp_path / "fp16"), nproc=2,
        alias=False)
    _finite_and_close(ref, _ds_weights(str(tmp_path / "fp16")), atol=0.02)


def test_horovod_mnist(tmp_path):
    prog = _rewrite("horovod_mnist.py", str(tmp_path))
    # dropout off: its random masks differ between 1 and 2 processes in any framework
    run(prog, "--dropout", "0", "--batch-size", "16", "--lr", "0.02", "--out",
        str(tmp_path / "one.st"), alias=False)
    text = run(prog, "--dropout", "0", "--batch-size", "8", "--lr", "0.01", "--out",
               str(tmp_path / "two.st"), nproc=2, alias=False)    # lr * hvd.size()
    assert text.count("Test set: Average loss") == 2                  # rank 0 only
    ref = weights(tmp_path / "one.st")
    assert_close(ref, weights(tmp_path / "two.st"))
    run(prog, "--dropout", "0", "--batch-size", "8", "--lr", "0.01", "--fp16-allreduce",
        "--gradient-predivide-factor", "2", "--out", str(tmp_path / "fp16.st"), nproc=2,
        alias=False)
    _finite_and_close(ref, weights(tmp_path / "fp16.st"), atol=1e-3)


def test_ezpz_minimal(tmp_path):
    prog = _rewrite("ezpz_minimal.py", str(tmp_path))
    run(prog, env={"BATCH_SIZE": "16", "OUT": str(tmp_path / "one.st")}, alias=False)
    text = run(prog, env={"BATCH_SIZE": "8", "OUT": str(tmp_path / "two.st")}, nproc=2,
               alias=False)
    assert "[rank 0] " in text and "[rank 1] " not in text     # get_logger: rank 0 speaks
    assert "`setup`() took: dt=" in text and "iter=5 loss=" in text
    assert_close(weights(tmp_path / "one.st"), weights(tmp_path / "two.st"))
