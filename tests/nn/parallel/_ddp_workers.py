"""Worker functions for the DDP tests: run in real processes by ``run_workers``.

Every check builds what it needs, trains on this rank's shard of a dataset generated from a
fixed seed, and returns plain data (NumPy arrays, strings). The test module computes the
single-process reference on the concatenated batches and compares. Many checks share one
launched world (``suite``), because launching processes is the slow part on a 2-core CI box.
"""
from __future__ import annotations

import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist
import tensorbrain.nn as nn
import tensorbrain.nn.functional as F

B, STEPS, IN, OUT = 4, 3, 6, 3


# ***** shared by workers and the reference in the test process *****
def mlp(seed=0):
    tb.manual_seed(seed)
    return nn.Sequential(nn.Linear(IN, 16), nn.Tanh(), nn.Linear(16, 12), nn.Tanh(),
                         nn.Linear(12, OUT))


def dataset(world, steps=STEPS, batch=B, seed=123):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((steps, world * batch, IN)).astype(np.float32)
    Y = rng.integers(0, OUT, (steps, world * batch))
    return X, Y


def shard(X, Y, step, rank, batch=B):
    sl = slice(rank * batch, (rank + 1) * batch)
    return tb.from_numpy(np.ascontiguousarray(X[step, sl])), tb.from_numpy(Y[step, sl])


def make_opt(name, params):
    if name == "sgd":
        return tb.optim.SGD(params, lr=0.1, momentum=0.9)
    return tb.optim.Adam(params, lr=0.01)


def params_of(model):
    return [p._data.copy() for p in model.parameters()]


def grads_of(model):
    return [None if p.grad is None else p.grad._data.copy() for p in model.parameters()]


class Branches(nn.Module):
    """Three parallel layers; which ones take part, and in which order, is chosen per call."""

    def __init__(self, seed=0):
        super().__init__()
        tb.manual_seed(seed)
        self.a, self.b, self.c = nn.Linear(4, 3), nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x, use=("a", "b", "c")):
        out = None
        for name in use:
            y = getattr(self, name)(x)
            out = y if out is None else out + y
        return out


def small_buckets():
    """Make every parameter its own bucket (PyTorch's first bucket is 1 MiB; tests shrink it)."""
    import tensorbrain.nn.parallel.distributed as ddp_mod
    ddp_mod._DEFAULT_FIRST_BUCKET_BYTES = 1
    return 1e-9  # bucket_cap_mb: close a bucket after every parameter


# ***** checks *****
def check_equivalence(rank, world, opt_name, as_view, steps=STEPS, overlap=None):
    """Train with DDP on shards; each rank starts from a different init (rank 0's wins).
    ``overlap``: force buckets onto the backend's thread (True) or all inline (False)."""
    X, Y = dataset(world, steps)
    model = mlp(seed=rank)
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=small_buckets(),
                                              gradient_as_bucket_view=as_view)
    if overlap is not None:
        ddp.reducer.overlap = overlap
    opt = make_opt(opt_name, ddp.parameters())
    for s in range(steps):
        x, y = shard(X, Y, s, rank)
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    # the buckets the gradients are reduced in (with torch's default and shared memory, a step
    # that lends .grad the region's array reduces in the region's buckets, not these)
    slot = ddp.reducer._sets[0][0] if ddp.reducer._sets else ddp.reducer.buckets
    views = [any(np.shares_memory(p.grad._data, b.buffer._data) for b in slot)
             for p in model.parameters()]
    return {"params": params_of(model), "buckets": len(ddp.reducer.buckets), "views": views,
            "fused": ddp.reducer._fused}


class Mixed(nn.Module):
    """float32, float64, float32 parameters: with one bucket each, three arenas (runs of one
    dtype in bucket order), reduced one after another by the fused end of backward."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(tb.from_numpy(np.ones(5, np.float32)))
        self.b = nn.Parameter(tb.from_numpy(np.ones(7, np.float64)))
        self.c = nn.Parameter(tb.from_numpy(np.ones(3, np.float32)))

    def forward(self, xs):
        return sum((x * p).sum() for x, p in zip(xs, (self.a, self.b, self.c)))


def mixed_inputs(rank, step):
    """This rank's inputs at ``step``; d(loss)/d(param) is the input itself."""
    rng = np.random.default_rng(100 * step + rank)
    return [rng.standard_normal(n).astype(dt)
            for n, dt in ((5, np.float32), (7, np.float64), (3, np.float32))]


def check_mixed_dtypes(rank, world, steps=3, as_view=False):
    ddp = nn.parallel.DistributedDataParallel(Mixed(), bucket_cap_mb=small_buckets(),
                                              gradient_as_bucket_view=as_view)
    out = []
    for s in range(steps):
        ddp.zero_grad()
        ddp([tb.from_numpy(x) for x in mixed_inputs(rank, s)]).backward()
        out.append(grads_of(ddp.module))
    return {"grads": out, "fused": ddp.reducer._fused, "arenas": len(ddp.reducer._arenas)}


def check_no_sync(rank, world, as_view, k=3):
    X, Y = dataset(world, k)
    model = mlp(seed=0)
    ddp = nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=as_view)
    ddp(shard(X, Y, 0, rank)[0])  # a synchronised forward whose output is dropped: harmless
    for i in range(k):
        x, y = shard(X, Y, i, rank)
        if i < k - 1:
            with ddp.no_sync():
                F.cross_entropy(ddp(x), y).backward()
        else:
            F.cross_entropy(ddp(x), y).backward()
    return grads_of(model)


def check_unused(rank, world):
    out = {}
    X, Y = dataset(world, 1)
    x = tb.from_numpy(np.ascontiguousarray(X[0, rank * B:(rank + 1) * B, :4]))
    # With the flag: 'c' unused everywhere, 'b' used on rank 0 only.
    model = Branches()
    ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    use = ("a", "b") if rank == 0 else ("a",)
    for _ in range(2):  # twice: the second iteration runs after the bucket rebuild step
        model.zero_grad()
        (ddp(x, use=use) ** 2).mean().backward()
    out["flag"] = grads_of(model)
    # static_graph: the unused set is learned in iteration 1 and reused.
    model_s = Branches()
    ddp_s = nn.parallel.DistributedDataParallel(model_s, static_graph=True)
    for _ in range(3):
        model_s.zero_grad()
        (ddp_s(x, use=("a", "b")) ** 2).mean().backward()
    out["static"] = grads_of(model_s)
    # Without the flag: a clear error naming the parameters and the flag, and no hang.
    model2 = Branches()
    ddp2 = nn.parallel.DistributedDataParallel(model2)
    try:
        (ddp2(x, use=("a", "b")) ** 2).mean().backward()
        out["error"] = None
    except RuntimeError as exc:
        out["error"] = str(exc)
    t = tb.tensor([1.0])
    dist.all_reduce(t)  # the group still works: every rank issued the same collectives
    out["after"] = t.item()
    return out


def check_hooks(rank, world):
    from tensorbrain.nn.parallel.comm_hooks import (PowerSGDState, allreduce_hook,
                                                    bf16_compress_hook, fp16_compress_hook,
                                                    powerSGD_hook)
    X, Y = dataset(world, 1)
    x, y = shard(X, Y, 0, rank)
    out = {}
    for name, hook in (("none", None), ("allreduce", allreduce_hook),
                       ("fp16", fp16_compress_hook), ("bf16", bf16_compress_hook)):
        model = mlp(seed=0)
        ddp = nn.parallel.DistributedDataParallel(model)
        if hook is not None:
            ddp.register_comm_hook(None, hook)
        F.cross_entropy(ddp(x), y).backward()
        out[name] = grads_of(model)
    # PowerSGD on a small regression: y = A x with A 16x16, rank-2 compression.
    rng = np.random.default_rng(7)
    A = rng.standard_normal((16, 16)).astype(np.float32) / 4
    losses = {}
    for name in ("allreduce", "powersgd"):
        tb.manual_seed(1)
        model = nn.Linear(16, 16, bias=False)
        ddp = nn.parallel.DistributedDataParallel(model)
        state = None
        if name == "powersgd":
            state = PowerSGDState(None, matrix_approximation_rank=2, start_powerSGD_iter=2,
                                  min_compression_rate=1)
            ddp.register_comm_hook(state, powerSGD_hook)
        opt = tb.optim.SGD(ddp.parameters(), lr=0.2, momentum=0.5)
        data = np.random.default_rng(100 + rank)
        hist = []
        for _ in range(80):
            xs = data.standard_normal((16, 16)).astype(np.float32)
            xt = tb.from_numpy(xs)
            yt = tb.from_numpy(xs @ A.T)
            opt.zero_grad()
            loss = ((ddp(xt) - yt) ** 2).mean()
            loss.backward()
            opt.step()
            hist.append(loss.item())
        losses[name] = hist
        if state is not None:
            out["powersgd_rate"] = state.compression_stats()[0]
            out["powersgd_params"] = params_of(model)
    out["losses"] = losses
    # Registering twice is an error, as in PyTorch.
    try:
        ddp.register_comm_hook(None, allreduce_hook)
        out["twice"] = None
    except RuntimeError as exc:
        out["twice"] = str(exc)
    return out


def check_buffers(rank, world):
    out = {}
    for bb in (True, False):
        tb.manual_seed(rank)  # different init per rank: construction must broadcast rank 0's
        model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Tanh(), nn.Linear(5, 2))
        model[1].running_mean._data[...] = rank  # differs until broadcast
        ddp = nn.parallel.DistributedDataParallel(model, broadcast_buffers=bb)
        out[f"init_params_{bb}"] = params_of(model)
        out[f"init_mean_{bb}"] = model[1].running_mean._data.copy()
        rng = np.random.default_rng(rank + 10)
        for _ in range(2):
            x = tb.from_numpy(rng.standard_normal((6, 4)).astype(np.float32) + rank)
            ddp(x).sum().backward()
        ddp.eval()
        ddp(tb.zeros(2, 4))  # an eval forward also broadcasts rank 0's buffers
        out[f"mean_{bb}"] = model[1].running_mean._data.copy()
        out[f"var_{bb}"] = model[1].running_var._data.copy()
    out["state_keys"] = sorted(ddp.state_dict())
    out["module_is_model"] = ddp.module is model
    return out


def check_bucket_order(rank, world):
    """Hooks fire in a different order on each rank; buckets must still pair up."""
    X, Y = dataset(world, STEPS)
    model = Branches()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=small_buckets())
    initial = ddp._get_bucket_indices()
    use = ("a", "b", "c") if rank % 2 == 0 else ("c", "b", "a")
    opt = tb.optim.SGD(ddp.parameters(), lr=0.1)
    for s in range(STEPS):
        x = tb.from_numpy(np.ascontiguousarray(X[s, rank * B:(rank + 1) * B, :4]))
        opt.zero_grad()
        (ddp(x, use=use) ** 2).mean().backward()
        opt.step()
    return {"initial": initial, "rebuilt": ddp._get_bucket_indices(),
            "params": params_of(model)}


def check_mismatch(rank, world):
    tb.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4 if rank == 0 else 5))
    try:
        nn.parallel.DistributedDataParallel(model)
        return None
    except RuntimeError as exc:
        return str(exc)


def join_batches(rank):
    return 2 + rank


def check_join(rank, world):
    X, Y = dataset(world, join_batches(world - 1))
    model = mlp(seed=0)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = tb.optim.SGD(ddp.parameters(), lr=0.1)
    with ddp.join():
        for s in range(join_batches(rank)):
            x, y = shard(X, Y, s, rank)
            opt.zero_grad()
            F.cross_entropy(ddp(x), y).backward()
            opt.step()
    out = {"params": params_of(model)}
    # throw_on_early_termination: every rank raises once one runs out.
    model2 = mlp(seed=0)
    ddp2 = nn.parallel.DistributedDataParallel(model2)
    try:
        with ddp2.join(throw_on_early_termination=True):
            for s in range(join_batches(rank)):
                x, y = shard(X, Y, s, rank)
                F.cross_entropy(ddp2(x), y).backward()
        out["throw"] = None
    except RuntimeError as exc:
        out["throw"] = str(exc)
    return out


def check_syncbn(rank, world):
    X, Y = dataset(world, 2)
    tb.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN, 5), nn.BatchNorm1d(5), nn.Tanh(), nn.Linear(5, OUT))
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = tb.optim.SGD(ddp.parameters(), lr=0.1)
    for s in range(2):
        x, y = shard(X, Y, s, rank)
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    return {"params": params_of(model), "mean": model[1].running_mean._data.copy(),
            "var": model[1].running_var._data.copy(), "type": type(model[1]).__name__}


def check_page_faults(rank, world, steps=4):
    """Minor page faults per DDP step at MLP 784-512-512-10, B=512 (1-2 MiB arrays): DDP
    keeps freed blocks in glibc's heap, so steps reuse pages instead of faulting fresh ones in
    (about 1,600 a step without it)."""
    import platform
    import resource
    if platform.libc_ver()[0] != "glibc":
        return None
    tb.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)))
    opt = tb.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = tb.from_numpy(np.random.default_rng(rank).standard_normal((512, 784)).astype(np.float32))
    y = tb.from_numpy(np.arange(512) % 10)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    for _ in range(3):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


CHECKS = {
    "equiv_sgd": lambda r, w: check_equivalence(r, w, "sgd", False),
    "equiv_adam_view": lambda r, w: check_equivalence(r, w, "adam", True),
    "equiv_adam": lambda r, w: check_equivalence(r, w, "adam", False),
    "equiv_sgd_overlap": lambda r, w: check_equivalence(r, w, "sgd", False, overlap=True),
    "equiv_sgd_inline": lambda r, w: check_equivalence(r, w, "sgd", False, overlap=False),
    "mixed_dtypes": check_mixed_dtypes,
    "mixed_dtypes_view": lambda r, w: check_mixed_dtypes(r, w, as_view=True),
    "no_sync": lambda r, w: check_no_sync(r, w, False),
    "no_sync_view": lambda r, w: check_no_sync(r, w, True),
    "unused": check_unused,
    "hooks": check_hooks,
    "buffers": check_buffers,
    "bucket_order": check_bucket_order,
    "mismatch": check_mismatch,
    "join": check_join,
    "syncbn": check_syncbn,
    "page_faults": check_page_faults,
}


def suite(rank, world, names):
    """Run the named checks in order in this world; returns {name: result}."""
    return {name: CHECKS[name](rank, world) for name in names}


def sampler_epochs(rank, world, n=23, epochs=3):
    """DistributedSampler with rank and size taken from the process group."""
    from tensorbrain.utils.data.distributed import DistributedSampler
    s = DistributedSampler(range(n), seed=5)
    out = []
    for epoch in range(epochs):
        s.set_epoch(epoch)
        out.append(list(s))
    return {"rank": s.rank, "replicas": s.num_replicas, "epochs": out}
