"""torch's names around the DDP hooks: batched_powerSGD_hook (against the power-iteration
algebra it stands for), fp16/bf16_compress_wrapper, DDPCommHookType and
register_ddp_comm_hook on a real one-process DDP model."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.algorithms import ddp_comm_hooks as H
from tensorbrain.nn.parallel.comm_hooks import default_hooks

P = H.powerSGD_hook   # the module (the package exports the function under that name)


class _Bucket:
    def __init__(self, data):
        self.t = tb.tensor(data)

    def buffer(self):
        return self.t

    def index(self):
        return 0

    def is_last(self):
        return True


@pytest.fixture
def world1():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_batched_powerSGD_is_rank_r_power_iteration(world1):
    rng = np.random.default_rng(0)
    square = rng.standard_normal(36).astype(np.float32)
    full = P.PowerSGDState(None, matrix_approximation_rank=6, start_powerSGD_iter=2)
    full.iter = 2
    out = P.batched_powerSGD_hook(full, _Bucket(square.copy())).wait()
    np.testing.assert_allclose(out.numpy(), square, rtol=1e-4, atol=1e-5)   # full rank: exact
    data = rng.standard_normal(30).astype(np.float32)        # padded to a 6 x 6 matrix
    low = P.PowerSGDState(None, matrix_approximation_rank=1, start_powerSGD_iter=2)
    low.iter = 2
    b = _Bucket(data.copy())
    approx = P.batched_powerSGD_hook(low, b).wait().numpy()
    m = np.zeros(36, np.float32)
    m[:30] = data
    m = m.reshape(6, 6)
    p = m @ low.q_memory_dict[0]                               # Q after the step: M^T p
    a = np.zeros(36, np.float32)
    a[:30] = approx
    assert np.linalg.matrix_rank(a.reshape(6, 6), tol=1e-4) == 1
    np.testing.assert_allclose(low.error_dict[0], (m - a.reshape(6, 6)).reshape(-1), atol=1e-5)
    assert p.shape == (6, 1) and low.iter == 3 and low.compression_stats()[1] == 30


def test_compress_wrappers_round_the_hooks_values(world1):
    data = np.array([1.0001, 3.14159265, -2.5e-3, 6000.3], np.float32)
    out = default_hooks.fp16_compress_wrapper(default_hooks.allreduce_hook)(
        None, _Bucket(data.copy())).wait()
    np.testing.assert_array_equal(out.numpy(), data.astype(np.float16).astype(np.float32))
    out = default_hooks.bf16_compress_wrapper(default_hooks.allreduce_hook)(
        None, _Bucket(data.copy())).wait()
    np.testing.assert_array_equal(out.numpy(), default_hooks.bf16_round(data))


@pytest.mark.parametrize("kind", ["ALLREDUCE", "FP16_COMPRESS", "NOOP", "POWER_SGD"])
def test_register_ddp_comm_hook_by_type(world1, kind):
    model = tb.nn.parallel.DistributedDataParallel(tb.nn.Linear(4, 3))
    H.register_ddp_comm_hook(H.DDPCommHookType[kind], model)
    assert model.reducer.comm_hook is H.DDPCommHookType[kind].value.hook
    x = tb.randn(5, 4)
    model(x).sum().backward()
    ref = tb.nn.Linear(4, 3)
    ref.load_state_dict(model.module.state_dict())
    ref(x).sum().backward()
    rtol = 1e-3 if kind == "FP16_COMPRESS" else 1e-6
    np.testing.assert_allclose(model.module.weight.grad.numpy(), ref.weight.grad.numpy(),
                               rtol=rtol, atol=1e-3 if kind == "FP16_COMPRESS" else 1e-6)
    with pytest.raises(RuntimeError, match="only be called once"):
        H.register_ddp_comm_hook(H.DDPCommHookType.ALLREDUCE, model)


def test_names_match_torch():
    pytest.importorskip("torch")
    from torch.distributed.algorithms import ddp_comm_hooks as th
    ours = {m.name for m in H.DDPCommHookType}
    assert ours == {m.name for m in th.DDPCommHookType} - {"QUANTIZE_PER_TENSOR",
                                                           "QUANTIZE_PER_CHANNEL"}
    assert H.default is H.default_hooks
    assert H.post_localSGD_hook.PostLocalSGDState.__name__ == "PostLocalSGDState"
