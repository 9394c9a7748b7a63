"""tensorbrain.deepspeed: a DeepSpeed-style program (tests/frontdoors/programs) run unchanged
under tbrun --as-torch at 2 ranks, at every ZeRO stage, ends with the weights one process
reaches on the full batch; fp16/bf16 stay finite and close; checkpoints resume bit-identically."""
import json
import os
import re
import warnings

import numpy as np
import pytest

from tensorbrain.deepspeed import DynamicLossScaler
from tensorbrain.deepspeed.config import DeepSpeedConfigError, check

from ._run import assert_close, assert_identical, run

PROG = "deepspeed_train.py"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _no_group_left_behind():
    """deepspeed.initialize in this process forms a group of one: leave none to later tests."""
    import tensorbrain.distributed as dist
    had = dist.is_initialized()
    yield
    if dist.is_initialized() and not had:
        dist.destroy_process_group()


def _config(tmp_path, name, world, micro=None, **extra):
    cfg = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": micro or 16 // world,
           "optimizer": {"type": "Adam", "params": {"lr": 0.01, "weight_decay": 0.01}},
           "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0,
                                                        "warmup_max_lr": 0.01,
                                                        "warmup_num_steps": 4}},
           "gradient_clipping": 1.0, "zero_optimization": {"stage": 0}}
    cfg.update(extra)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _weights(save_dir, tag="final"):
    import tensorbrain as tb
    state = tb.load(os.path.join(save_dir, tag, "mp_rank_00_model_states.safetensors"))
    return {k: np.asarray(v._data, dtype=np.float64) for k, v in state["module"].items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ds_ref")
    run(PROG, "--deepspeed_config", _config(tmp, "one", 1), "--save-dir", str(tmp / "one"))
    return _weights(str(tmp / "one"))


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_every_zero_stage_at_two_ranks_matches_one_process(tmp_path, reference, stage):
    cfg = _config(tmp_path, "two", 2, zero_optimization={"stage": stage})
    run(PROG, "--deepspeed_config", cfg, "--save-dir", str(tmp_path / "two"), nproc=2)
    assert_close(reference, _weights(str(tmp_path / "two")), rtol=1e-4, atol=1e-5)


def test_gradient_accumulation_and_cpu_offload_match_one_process(tmp_path, reference):
    # 2 ranks x 2 micro-batches of 4 = 16, ZeRO-3 with parameters offloaded to the CPU
    cfg = _config(tmp_path, "gas", 2, micro=4,
                  zero_optimization={"stage": 3, "offload_param": {"device": "cpu"}})
    text = run(PROG, "--deepspeed_config", cfg, "--save-dir", str(tmp_path / "gas"), nproc=2)
    assert "step 8 " in text     # 8 optimizer steps for 16 micro-steps per rank
    assert_close(reference, _weights(str(tmp_path / "gas")), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precision_stays_finite_and_close(tmp_path, reference, precision):
    cfg = _config(tmp_path, precision, 2, **{precision: {"enabled": True}})
    run(PROG, "--deepspeed_config", cfg, "--save-dir", str(tmp_path / "low"), nproc=2)
    low = _weights(str(tmp_path / "low"))
    for k in low:
        assert np.isfinite(low[k]).all(), k
    assert_close(reference, low, rtol=0, atol=0.05)


@pytest.mark.parametrize("power", [16, 18])
def test_fp16_overflow_skips_steps_and_never_gives_nan(tmp_path, power):
    """The guide's bare {"fp16": {"enabled": true}} (2**16), and 2**18, where float16 gradients
    overflow: those steps are skipped and the weights stay finite."""
    cfg = _config(tmp_path, "guide", 1, fp16={"enabled": True, "initial_scale_power": power})
    text = run(PROG, "--deepspeed_config", cfg, "--save-dir", str(tmp_path / "g"))
    skipped = [int(v) for v in re.findall(r"skipped (\d+)", text)]
    assert "loss nan" not in text and skipped
    if power == 18:
        assert 0 < skipped[-1] < 8, text
    for v in _weights(str(tmp_path / "g")).values():
        assert np.isfinite(v).all()


def test_checkpoint_round_trip_resumes_bit_identically(tmp_path):
    cfg = _config(tmp_path, "ckpt", 2, zero_optimization={"stage": 1}, fp16={"enabled": True})
    run(PROG, "--deepspeed_config", cfg, "--save-dir", str(tmp_path / "straight"), nproc=2)
    run(PROG, "--deepspeed_config", cfg, "--epochs", "1", "--save-dir", str(tmp_path / "half"),
        nproc=2)
    run(PROG, "--deepspeed_config", cfg, "--start-epoch", "1", "--load-dir",
        str(tmp_path / "half"), "--save-dir", str(tmp_path / "resumed"), nproc=2)
    assert_identical(_weights(str(tmp_path / "straight")), _weights(str(tmp_path / "resumed")))


def test_batch_size_arithmetic_and_errors():
    cfg = check({"train_batch_size": 32, "gradient_accumulation_steps": 2}, 4)
    assert cfg["train_micro_batch_size_per_gpu"] == 4
    cfg = check({"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2}, 2)
    assert cfg["train_batch_size"] == 12
    with pytest.raises(DeepSpeedConfigError, match=r"32 != 8 \* 1 \* 2"):
        check({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 8,
               "gradient_accumulation_steps": 1}, 2)
    with pytest.raises(DeepSpeedConfigError, match="train_batch_sizee"):
        check({"train_batch_sizee": 8}, 1)
    with pytest.raises(DeepSpeedConfigError, match="zero_optimization.offload_param"):
        check({"train_batch_size": 8, "zero_optimization": {"stage": 2,
                                                            "offload_param": {"device": "cpu"}}}, 1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check({"train_batch_size": 8, "zero_optimization": {"stage": 2, "overlap_comm": True}}, 1)
    assert any("overlap_comm" in str(w.message) for w in seen)


def test_dynamic_loss_scaler_hysteresis_and_window():
    s = DynamicLossScaler(init_scale=2.0 ** 16, scale_window=3, min_scale=1, delayed_shift=2)
    s.update_scale(True)           # first overflow: absorbed by the hysteresis
    assert s.loss_scale == 2.0 ** 16
    s.update_scale(True)           # second: halved
    assert s.loss_scale == 2.0 ** 15
    for _ in range(3):
        s.update_scale(False)      # 3 clean steps after the overflow: doubled
    assert s.loss_scale == 2.0 ** 16


def test_schedules_follow_deepspeeds_formulas():
    """The lr each optimizer step runs at (read before the step, as the engine steps the
    schedule after the optimizer): construction sets iteration -1's lr, so a warm-up's first two
    steps both run at its minimum, as DeepSpeed's lr_schedules.py (since its PR #6597)."""
    import math

    import tensorbrain as tb
    from tensorbrain.deepspeed.lr_schedules import (LRRangeTest, OneCycle, WarmupCosineLR,
                                                    WarmupDecayLR, WarmupLR)

    def lrs(sched, n, key="lr"):
        out = []
        for _ in range(n):
            group = sched.optimizer.param_groups[0]
            out.append(group[key] if key == "lr" else group[key][0])
            sched.step()
        return out

    def opt(lr=0.5, cls=tb.optim.SGD):
        return cls([tb.zeros(1, requires_grad=True)], lr=lr)

    got = lrs(WarmupLR(opt(), warmup_min_lr=0.1, warmup_max_lr=1.0, warmup_num_steps=5), 8)
    want = [0.1] + [0.1 + 0.9 * math.log(k + 1) / math.log(5) for k in range(5)] + [1.0, 1.0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(lrs(WarmupLR(opt(), 0.0, 1.0, 4, warmup_type="linear"), 6),
                               [0, 0, 0.25, 0.5, 0.75, 1.0])
    got = lrs(WarmupDecayLR(opt(), total_num_steps=8, warmup_min_lr=0, warmup_max_lr=1.0,
                            warmup_num_steps=4, warmup_type="linear"), 11)
    np.testing.assert_allclose(got, [0, 0, 0.25, 0.5, 0.75, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0])
    # the peak is the optimizer's lr; 0 before the first step; the cosine counts from 1
    got = lrs(WarmupCosineLR(opt(2.0), total_num_steps=6, warmup_min_ratio=0.0,
                             warmup_num_steps=2, cos_min_ratio=0.0, warmup_type="linear"), 8)
    want = [0.0, 0.0, 1.0] + [2.0 * 0.5 * (1 + math.cos(math.pi * min(1, k / 4)))
                              for k in range(1, 6)]
    np.testing.assert_allclose(got, want, atol=1e-12)
    # OneCycle: up 2 steps, down 2, then cycle_min_lr / (1 + rate * k); Adam's beta1 cycles
    # the other way (DeepSpeed also sets beta2 to 0.99)
    s = OneCycle(opt(cls=tb.optim.Adam), cycle_min_lr=0.1, cycle_max_lr=1.0,
                 cycle_first_step_size=2, decay_lr_rate=1.0, decay_step_size=1)
    np.testing.assert_allclose(lrs(s, 7), [0.1, 0.55, 1.0, 0.55, 0.1, 0.05, 0.1 / 3])
    s = OneCycle(opt(cls=tb.optim.Adam), 0.1, 1.0, cycle_first_step_size=2)
    np.testing.assert_allclose(lrs(s, 6, key="betas"), [0.8, 0.85, 0.8, 0.85, 0.9, 0.9])
    assert s.optimizer.param_groups[0]["betas"][1] == 0.99
    s = OneCycle(opt(), 0.1, 1.0, cycle_first_step_size=4, cycle_first_stair_count=2)
    np.testing.assert_allclose(lrs(s, 5), [0.1, 0.1, 0.55, 0.55, 1.0])   # stairs
    assert not s.cycle_momentum   # SGD has no betas: DeepSpeed leaves its momentum alone
    np.testing.assert_allclose(lrs(LRRangeTest(opt(), 0.1, 2, 1.0), 4), [0.1, 0.15, 0.2, 0.25])
    np.testing.assert_allclose(lrs(LRRangeTest(opt(), 0.1, 2, 1.0, True), 4),
                               [0.1, 0.1, 0.2, 0.2])
    # resuming: the state is the iteration
    a = WarmupLR(opt(), 0.0, 1.0, 10, warmup_type="linear")
    for _ in range(3):
        a.step()
    b = WarmupLR(opt(), 0.0, 1.0, 10, warmup_type="linear")
    b.load_state_dict(a.state_dict())
    a.step()
    b.step()
    assert a.get_last_lr() == b.get_last_lr() == [0.3]


def test_initialize_in_one_process_with_client_optimizer_and_errors():
    import tensorbrain as tb
    import tensorbrain.deepspeed as deepspeed
    model = tb.nn.Linear(3, 1)
    opt = tb.optim.SGD(model.parameters(), lr=0.1)
    engine, optimizer, loader, sched = deepspeed.initialize(
        model=model, optimizer=opt, config={"train_batch_size": 4},
        lr_scheduler=lambda o: tb.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5))
    assert optimizer is opt and loader is None and engine.gradient_accumulation_steps() == 1
    w0 = model.weight.detach().clone()
    x, y = tb.randn(4, 3), tb.randn(4, 1)
    engine.backward(((engine(x) - y) ** 2).mean())
    g = model.weight.grad.detach().clone()
    engine.step()
    np.testing.assert_allclose(model.weight._data, (w0 - 0.1 * g)._data, rtol=1e-6)
    assert engine.get_lr() == [0.05] and model.weight.grad is None and engine.global_steps == 1
    with pytest.raises(ValueError, match="client optimizer and a config optimizer"):
        deepspeed.initialize(model=model, optimizer=opt, config={
            "train_batch_size": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})
    with pytest.raises(ValueError, match="'Lamb' is not supported"):
        deepspeed.initialize(model=model, config={
            "train_batch_size": 4, "optimizer": {"type": "Lamb", "params": {"lr": 0.1}}})
    with pytest.raises(ValueError, match="'Noam' is not supported"):
        deepspeed.initialize(model=model, optimizer=opt, config={
            "train_batch_size": 4, "scheduler": {"type": "Noam", "params": {}}})
    # "Adam" is AdamW unless adam_w_mode is false
    e, o, _, _ = deepspeed.initialize(model=model, config={
        "train_batch_size": 4, "optimizer": {"type": "Adam", "params": {"lr": 0.1}}})
    assert type(o) is tb.optim.AdamW
    e, o, _, _ = deepspeed.initialize(model=model, config={
        "train_batch_size": 4, "optimizer": {"type": "Adam",
                                             "params": {"lr": 0.1, "adam_w_mode": False}}})
    assert type(o) is tb.optim.Adam


def test_accelerator_comm_and_was_step_applied(monkeypatch):
    import tensorbrain as tb
    import tensorbrain.deepspeed as deepspeed
    from tensorbrain.deepspeed import accelerator as ds_accelerator
    from tensorbrain.deepspeed.accelerator import get_accelerator
    acc = get_accelerator()
    kind = "cuda" if tb.cuda.is_available() else "cpu"
    assert acc.device_name() == kind and acc.device_name(0) == ("cuda:0" if kind == "cuda" else "cpu")
    assert acc.communication_backend_name() == ("nccl" if kind == "cuda" else "gloo")
    assert acc.is_fp16_supported() and acc.on_accelerator(tb.zeros(1).to(acc.device_name()))
    monkeypatch.setattr(ds_accelerator, "_ACCELERATOR", None)
    monkeypatch.setenv("DS_ACCELERATOR", "xpu")
    with pytest.raises(ValueError, match="'xpu'"):
        get_accelerator()
    monkeypatch.setattr(ds_accelerator, "_ACCELERATOR", None)
    monkeypatch.delenv("DS_ACCELERATOR")
    assert deepspeed.comm.all_reduce is tb.distributed.all_reduce
    model = tb.nn.Linear(3, 1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        engine, *_ = deepspeed.initialize(model=model, config={
            "train_batch_size": 2, "gradient_accumulation_steps": 2,
            "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
            "wall_clock_breakdown": False, "zero_optimization": {"stage": 0, "overlap_comm": True}})
    msgs = [str(w.message) for w in seen if "only tune GPUs" in str(w.message)]
    assert len(msgs) == 1 and "wall_clock_breakdown" in msgs[0] and "overlap_comm" in msgs[0]
    applied = []
    for _ in range(4):
        engine.backward(engine(tb.randn(1, 3)).sum())
        engine.step()
        applied.append(engine.was_step_applied())
    assert applied == [False, True, False, True]
    assert deepspeed.comm.get_world_size() == 1    # initialize joined a group of one
    deepspeed.comm.destroy_process_group()
