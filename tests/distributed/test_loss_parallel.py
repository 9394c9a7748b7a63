"""loss_parallel: cross-entropy over logits sharded on the class dimension, on 2 real tcp
ranks, against torch's cross-entropy of the whole logits in one process (loss and gradient)."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh
from tensorbrain.distributed.tensor.parallel import loss_parallel

HERE = "tests.distributed.test_loss_parallel"
N, C = 6, 7   # 7 classes over 2 ranks: uneven shards (4 + 3)
rng = np.random.default_rng(3)
LOGITS = rng.standard_normal((N, C)) * 3
TARGET = np.array([0, 6, 3, 4, -100, 2])


def _rank(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    out = {}
    for reduction in ("mean", "sum", "none"):
        x = tb.tensor(LOGITS, requires_grad=True)
        dx = distribute_tensor(x, mesh, [Shard(1)])
        target = distribute_tensor(tb.tensor(TARGET), mesh, [Replicate()])
        with loss_parallel():
            loss = tb.nn.functional.cross_entropy(dx, target, reduction=reduction)
            assert loss.placements == (Replicate(),)
            w = tb.tensor(np.arange(1.0, N + 1)) if reduction == "none" else 1.0
            (loss.to_local() * w).sum().backward()
        assert dx.grad.placements == (Shard(1),)
        out[reduction] = (loss.to_local().tolist(), dx.grad.full_tensor().tolist())
    with pytest.raises(NotImplementedError, match="label smoothing"):
        with loss_parallel():
            tb.nn.functional.cross_entropy(dx, target, label_smoothing=0.1)
    with pytest.raises(NotImplementedError):   # outside the block: sharded logits are refused
        tb.nn.functional.cross_entropy(dx, target)
    return out


def test_loss_parallel_matches_one_process_torch(workers):
    torch = pytest.importorskip("torch")
    res = workers(f"{HERE}:_rank", 2)
    for reduction in ("mean", "sum", "none"):
        x = torch.tensor(LOGITS, requires_grad=True)
        loss = torch.nn.functional.cross_entropy(x, torch.tensor(TARGET), reduction=reduction)
        w = torch.arange(1.0, N + 1, dtype=torch.float64) if reduction == "none" else 1.0
        (loss * w).sum().backward()
        for r in res:
            got_loss, got_grad = r[reduction]
            np.testing.assert_allclose(got_loss, loss.detach().numpy(), rtol=1e-12)
            np.testing.assert_allclose(got_grad, x.grad.numpy(), rtol=1e-12, atol=1e-15)
