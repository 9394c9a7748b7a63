"""torch.distributed.nn on real processes: the differentiable collectives' values and gradients
against the sums worked out by hand over every rank's inputs; RemoteModule over RPC against the
same module run locally; distribute_module's DTensor parameters and hooks."""
import numpy as np
import pytest

from tensorbrain.testing.distributed import run_workers

pytestmark = pytest.mark.timeout(120)
W, SHAPE = 3, (2, 3)


def _x(rank):
    return np.arange(6, dtype=np.float32).reshape(SHAPE) * (rank + 1) + rank


def _c(r, j):   # rank r's loss weight on the piece that came from rank j
    return float(1 + r + 10 * j)


def _collectives(rank, world_size):
    import tensorbrain as tb
    import tensorbrain.distributed as dist
    import tensorbrain.distributed.nn.functional as F
    out = {}

    def leaf():
        return tb.tensor(_x(rank), requires_grad=True)

    x = leaf()   # all_gather: loss_r = sum_j c(r, j) * gathered[j]
    parts = F.all_gather(x)
    sum(_c(rank, j) * p.sum() for j, p in enumerate(parts)).backward()
    out["all_gather"] = ([p.detach().numpy() for p in parts], x.grad.numpy())
    x = leaf()   # all_reduce: loss_r = c(r, 0) * sum(y)
    y = F.all_reduce(x)
    (_c(rank, 0) * y.sum()).backward()
    out["all_reduce"] = (y.detach().numpy(), x.grad.numpy())
    x = leaf()   # broadcast from 1
    y = F.broadcast(x, src=1)
    (_c(rank, 0) * y.sum()).backward()
    out["broadcast"] = (y.detach().numpy(), x.grad.numpy())
    x = leaf()   # reduce to 2, loss on every rank
    y = F.reduce(x, dst=2)
    (_c(rank, 0) * y.sum()).backward()
    out["reduce"] = (y.detach().numpy(), x.grad.numpy())
    x = leaf()   # gather to 0
    parts = F.gather(x, dst=0)
    sum(_c(rank, j) * p.sum() for j, p in enumerate(parts)).backward()
    out["gather"] = ([p.detach().numpy() for p in parts], x.grad.numpy())
    xs = [tb.tensor(_x(rank) + 100 * j, requires_grad=True) for j in range(world_size)]
    y = F.scatter(xs, src=0)
    (_c(rank, 0) * y.sum()).backward()
    out["scatter"] = (y.detach().numpy(), [t.grad.numpy() for t in xs])
    xs = [tb.tensor(_x(rank) + 100 * j, requires_grad=True) for j in range(world_size)]
    y = F.reduce_scatter(tb.empty(SHAPE), xs)
    (_c(rank, 0) * y.sum()).backward()
    out["reduce_scatter"] = (y.detach().numpy(), [t.grad.numpy() for t in xs])
    xs = [tb.tensor(_x(rank) + 100 * j, requires_grad=True) for j in range(world_size)]
    parts = F.all_to_all([tb.empty(SHAPE)] * world_size, xs)
    sum(_c(rank, j) * p.sum() for j, p in enumerate(parts)).backward()
    out["all_to_all"] = ([p.detach().numpy() for p in parts], [t.grad.numpy() for t in xs])
    x = tb.tensor(np.arange(world_size * 2, dtype=np.float32) + 10 * rank, requires_grad=True)
    y = F.all_to_all_single(tb.empty(world_size * 2), x)
    (tb.arange(world_size * 2.0) * (rank + 1) * y).sum().backward()
    out["all_to_all_single"] = (y.detach().numpy(), x.grad.numpy())
    try:
        F.scatter([tb.ones(2), tb.ones(3)], src=0)
    except ValueError as exc:
        out["error"] = str(exc)
    dist.barrier()
    return out


def test_differentiable_collectives_match_hand_sums():
    outs = run_workers("tests.distributed.test_dist_nn:_collectives", W)
    xs = [_x(r) for r in range(W)]
    ones = np.ones(SHAPE, np.float32)
    for r, out in enumerate(outs):
        parts, g = out["all_gather"]
        np.testing.assert_allclose(np.stack(parts), np.stack(xs))
        np.testing.assert_allclose(g, sum(_c(q, r) for q in range(W)) * ones)
        y, g = out["all_reduce"]
        np.testing.assert_allclose(y, sum(xs))
        np.testing.assert_allclose(g, sum(_c(q, 0) for q in range(W)) * ones)
        y, g = out["broadcast"]
        np.testing.assert_allclose(y, xs[1])
        np.testing.assert_allclose(g, (sum(_c(q, 0) for q in range(W)) if r == 1 else 0) * ones)
        y, g = out["reduce"]
        if r == 2:
            np.testing.assert_allclose(y, sum(xs))
        np.testing.assert_allclose(g, _c(2, 0) * ones)   # d(loss on dst) / dx, broadcast
        parts, g = out["gather"]
        if r == 0:
            np.testing.assert_allclose(np.stack(parts), np.stack(xs))
        np.testing.assert_allclose(g, _c(0, r) * ones)
        y, gs = out["scatter"]
        np.testing.assert_allclose(y, xs[0] + 100 * r)
        for j, gj in enumerate(gs):
            np.testing.assert_allclose(gj, (_c(j, 0) if r == 0 else 0) * ones)
        y, gs = out["reduce_scatter"]
        np.testing.assert_allclose(y, sum(x + 100 * r for x in xs))
        for j, gj in enumerate(gs):
            np.testing.assert_allclose(gj, _c(j, 0) * ones)
        parts, gs = out["all_to_all"]
        for j, p in enumerate(parts):
            np.testing.assert_allclose(p, xs[j] + 100 * r)
        for j, gj in enumerate(gs):   # my piece j went to rank j as its piece r
            np.testing.assert_allclose(gj, _c(j, r) * ones)
        y, g = out["all_to_all_single"]
        np.testing.assert_allclose(y, [2 * r + 10 * q + k for q in range(W) for k in range(2)])
        # my rows 2j..2j+1 went to rank j, which weighs its row 2r+k by (2r+k)*(j+1)
        np.testing.assert_allclose(g, [(2 * r + k) * (j + 1) for j in range(W) for k in range(2)])
        assert "tensors must be a non-empty list of tensors of one shape" in out["error"]


# ***** RemoteModule *****
class Affine:   # built on the remote worker by name
    pass


def _remote_module(rank, world_size):
    import tensorbrain as tb
    import tensorbrain.distributed.autograd as dist_autograd
    import tensorbrain.distributed.rpc as rpc
    from tensorbrain.distributed.nn import RemoteModule
    from tensorbrain.distributed.optim import DistributedOptimizer
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=world_size,
                 rpc_backend_options=rpc.TensorPipeRpcBackendOptions(rpc_timeout=40))
    out = None
    if rank == 0:
        tb.manual_seed(0)
        rm = RemoteModule("w1/cpu", tb.nn.Linear, args=(3, 2))
        x = tb.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        before = [p.to_here().detach().numpy() for p in rm.remote_parameters()]
        y = rm(x)
        fut = rm.forward_async(x).wait()
        with dist_autograd.context() as ctx:
            loss = rm(x).pow(2).sum()
            dist_autograd.backward(ctx, [loss])
            opt = DistributedOptimizer(tb.optim.SGD, rm.remote_parameters(), lr=0.1)
            opt.step(ctx)
        after = [p.to_here().detach().numpy() for p in rm.remote_parameters()]
        errors = []
        for call in (lambda: rm.parameters(), lambda: RemoteModule("w1", tb.nn.Linear)):
            try:
                call()
            except ValueError as exc:
                errors.append(str(exc))
        out = {"before": before, "y": y.detach().numpy(), "fut": fut.detach().numpy(), "after": after,
               "errors": errors, "loss": float(loss.item())}
    rpc.shutdown()
    return out


def test_remote_module_runs_and_trains_like_a_local_one():
    import tensorbrain as tb
    out, _ = run_workers("tests.distributed.test_dist_nn:_remote_module", 2, init=None)
    w, b = out["before"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(out["y"], x @ w.T + b, rtol=1e-5)
    np.testing.assert_allclose(out["fut"], out["y"])
    lin = tb.nn.Linear(3, 2)
    with tb.no_grad():
        lin.weight.copy_(tb.tensor(w))
        lin.bias.copy_(tb.tensor(b))
    lin(tb.tensor(x)).pow(2).sum().backward()
    np.testing.assert_allclose(out["after"][0], w - 0.1 * lin.weight.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(out["after"][1], b - 0.1 * lin.bias.grad.numpy(), rtol=1e-5)
    assert "Method ``parameters`` not supported for RemoteModule" in out["errors"][0]
    assert "expected '<worker name>/<device>'" in out["errors"][1]


# ***** distribute_module *****
def _distribute_module(rank, world_size):
    import tensorbrain as tb
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.tensor import (DTensor, Replicate, Shard, distribute_module,
                                                distribute_tensor)
    mesh = init_device_mesh("cpu", (world_size,))
    tb.manual_seed(0)
    model = tb.nn.Sequential(tb.nn.Linear(4, 4), tb.nn.Linear(4, 2))
    full = [p.detach().numpy().copy() for p in model.parameters()]

    def shard_first(name, sub, m):
        if name == "0":
            sub.weight = tb.nn.Parameter(distribute_tensor(sub.weight.detach(), m, [Shard(0)]))
    distribute_module(model, mesh, shard_first)
    seen = []
    plain = tb.nn.Sequential(tb.nn.Linear(4, 4), tb.nn.Linear(4, 2))   # replicated: runs
    plain_full = [p.detach().numpy().copy() for p in plain.parameters()]
    distribute_module(plain, mesh, input_fn=lambda mod, inputs, m: seen.append(len(inputs)),
                      output_fn=lambda mod, outputs, m: outputs * 2)
    out = plain(distribute_tensor(tb.ones(3, 4), mesh, [Replicate()]))
    placements = {n: str(p.placements[0]) for n, p in model.named_parameters()}
    kinds = {n: isinstance(p, DTensor) for n, p in model.named_parameters()}
    again = None
    try:
        distribute_module(model, mesh)
    except RuntimeError as exc:
        again = str(exc)
    return {"placements": placements, "kinds": kinds, "seen": seen, "again": again,
            "local0": model[0].weight.to_local().detach().numpy(), "full": full,
            "plain_full": plain_full,
            "out": (out.full_tensor() if isinstance(out, DTensor) else out).detach().numpy()}


def test_distribute_module_places_parameters_and_runs_hooks():
    outs = run_workers("tests.distributed.test_dist_nn:_distribute_module", 2)
    for r, out in enumerate(outs):
        assert out["kinds"] == {"0.weight": True, "0.bias": True, "1.weight": True,
                                "1.bias": True}
        assert out["placements"]["0.weight"].startswith("Shard")
        assert out["placements"]["1.weight"].startswith("Replicate")
        np.testing.assert_allclose(out["local0"], out["full"][0][2 * r:2 * r + 2])
        assert out["seen"] == [1]
        w0, b0, w1, b1 = out["plain_full"]
        want = 2 * ((np.ones((3, 4)) @ w0.T + b0) @ w1.T + b1)
        np.testing.assert_allclose(out["out"], want, rtol=1e-5)
        assert "only be called once" in out["again"]
