"""DDP's gradient arena resident in shared memory (issue 31; docs/ddp.md, "Towards 0.97").

Against references computed in the same processes: the resident arena's gradients are bitwise
those of the fused all_reduce through the transport's buffers (``resident=False``), which the
DDP suite holds to one process on the whole batch; a rank that is late in backward (asleep after
publishing its first bucket) gets the same bits while the early rank reduces what it published;
a rank killed during backward is named by the survivor within seconds; without shared
memory or the native module the reducer keeps its private arena (the fallback); and the
reduction runs on the op queue's latency path, or through the queue when that path declines,
with the same bits either way.
"""
import os
import signal
import time

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.distributed._shm import native_available
from tensorbrain.testing.distributed import run_workers

HERE = "tests.distributed.test_ddp_resident"


def _model(seed=0):
    tb.manual_seed(seed)
    # 2 buckets with small caps: the first fills well before the end of backward
    return tb.nn.Sequential(tb.nn.Linear(64, 256), tb.nn.ReLU(), tb.nn.Linear(256, 256),
                            tb.nn.ReLU(), tb.nn.Linear(256, 10))


class _Nap(tb.nn.Module):
    """Identity forward; its backward sleeps on one rank (after the last layer's gradients
    are in their bucket, before the first layer's are computed)."""

    def __init__(self, secs):
        super().__init__()
        self.secs = secs

    def forward(self, x):
        if self.secs:
            x.register_hook(lambda g: (time.sleep(self.secs), g)[1])
        return x


def _ddp(resident, nap=0.0, **kw):
    m = _model()
    seq = tb.nn.Sequential(m[0], m[1], _Nap(nap), *list(m)[2:])
    ddp = tb.nn.parallel.DistributedDataParallel(seq, bucket_cap_mb=0.1, **kw)
    ddp.reducer.size_limits = [64 << 10, 100 << 10]
    ddp.reducer.resident = resident
    return ddp


def _batch(rank, step):
    rng = np.random.default_rng(100 * step + rank)
    return (tb.from_numpy(rng.standard_normal((16, 64)).astype(np.float32)),
            tb.from_numpy(rng.integers(0, 10, 16)))


def _grads(ddp, rank, step):
    x, y = _batch(rank, step)
    for p in ddp.parameters():
        p.grad = None
    tb.nn.functional.cross_entropy(ddp(x), y).backward()
    return [p.grad.numpy().copy() for p in ddp.parameters()]


def same_bits_worker(rank, world, as_view, nap_rank):
    nap = 0.3 if rank == nap_rank else 0.0
    res = _ddp(True, nap, gradient_as_bucket_view=as_view)
    ref = _ddp(False, gradient_as_bucket_view=as_view)
    out, reduced = [], []
    for step in range(4):
        a, b = _grads(res, rank, step), _grads(ref, rank, step)
        out.append(all(np.array_equal(u, v) for u, v in zip(a, b)))
        arena = res.reducer._resident
        reduced.append(arena.reduced if arena is not None and step else 0)
    return {"resident": res.reducer._resident is not None,
            "ref_resident": ref.reducer._resident is not None, "same": out,
            "buckets": len(res.reducer.buckets), "reduced": reduced,
            "chunks": -(-arena.count // arena.chunk) if arena is not None else 0}


needs_native = pytest.mark.skipif(not native_available(), reason="needs the native module")


@needs_native
@pytest.mark.parametrize("world,as_view,nap_rank", [(2, False, -1), (2, True, 1), (3, False, 2)])
def test_resident_arena_gives_the_bits_of_the_fused_all_reduce(world, as_view, nap_rank):
    results = run_workers(f"{HERE}:same_bits_worker", world, as_view, nap_rank, timeout=90)
    for r in results:
        assert r["resident"] and not r["ref_resident"], r
        assert r["buckets"] >= 2, r
        # step 0 runs before the bucket rebuild (no arena yet): steps 1-3 are the resident ones
        assert all(r["same"]), r
    # every chunk is reduced once, by one rank or another
    assert [sum(c) for c in zip(*(r["reduced"] for r in results))] == \
        [0] + [results[0]["chunks"]] * 3, results
    if nap_rank >= 0:
        # the late rank sleeps after publishing its first bucket: the others reduce it (and,
        # claiming on, every chunk) while it sleeps. Timing-based, so once in three steps.
        assert results[nap_rank]["chunks"] >= 2, results
        assert any(r == 0 for r in results[nap_rank]["reduced"][1:]), results


def fallback_worker(rank, world):
    ddp = _ddp(True)
    for step in range(3):
        _grads(ddp, rank, step)
    return ddp.reducer._resident is not None


@pytest.mark.parametrize("env", [{"TB_SHM": "0"}, {"TB_NATIVE": "0"}])
def test_without_shared_memory_or_native_module_the_arena_stays_private(env):
    assert run_workers(f"{HERE}:fallback_worker", 2, timeout=90, env=env) == [False, False]


def killed_worker(rank, world, victim):
    ddp = _ddp(True, 0.5 if rank == victim else 0.0)
    for step in range(2):  # step 1 uses the resident arena
        _grads(ddp, rank, step)
    assert ddp.reducer._resident is not None
    if rank == victim:  # die in backward, after publishing the first bucket
        def die(_module, _inputs, out):
            out.register_hook(lambda g: os.kill(os.getpid(), signal.SIGKILL))
        ddp.module[2].secs = 0.0
        ddp.module[2].register_forward_hook(die)
    t0 = time.monotonic()
    try:
        _grads(ddp, rank, 2)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return {"type": type(exc).__name__, "msg": str(exc), "secs": time.monotonic() - t0}
    return {"type": None, "secs": time.monotonic() - t0}


@needs_native
def test_a_rank_killed_in_backward_is_named_by_the_survivor():
    results = run_workers(f"{HERE}:killed_worker", 2, 1, timeout=60, group_timeout=30,
                          raise_on_error=False)
    obs = results[0].value
    assert obs is not None and obs["type"] is not None, results[0].describe()
    assert "rank 1" in obs["msg"] and "all_reduce" in obs["msg"], obs
    assert obs["secs"] < 5, obs
    assert not results[1].ok and results[1].exitcode == -signal.SIGKILL, results[1].describe()


class _Tied(tb.nn.Module):
    """Three linear layers; the first layer's weight is used twice (two gradient
    contributions that the engine sums)."""

    def __init__(self):
        super().__init__()
        tb.manual_seed(1)
        self.a, self.b = tb.nn.Linear(64, 64), tb.nn.Linear(64, 10)

    def forward(self, x):
        h = tb.relu(self.a(x))
        return self.b(tb.relu(tb.nn.functional.linear(h, self.a.weight)))


def offers_worker(rank, world, as_view):
    import tensorbrain.nn.functional as F
    taken, take = [0, 0], F.take_grad_dest

    def counting(leaf, *args):  # how often backward wrote straight into the arena: [W, b]
        d = take(leaf, *args)
        taken[leaf.dim() == 1] += d is not None
        return d
    F.take_grad_dest = counting

    def make(resident):
        ddp = tb.nn.parallel.DistributedDataParallel(_Tied(), gradient_as_bucket_view=as_view)
        ddp.reducer.size_limits = [16 << 10, 16 << 10]
        ddp.reducer.resident = resident
        return ddp
    res, ref = make(True), make(False)
    same, held, no_alias = [], None, None
    for step in range(5):
        a, b = _grads(res, rank, step), _grads(ref, rank, step)
        same.append(all(np.array_equal(u, v) for u, v in zip(a, b)))
        if step == 2:
            held = [(p.grad, p.grad.numpy().copy()) for p in res.parameters()]
        if step == 3:  # autograd.grad after a DDP forward: its arrays are the caller's own
            x, y = _batch(rank, step)
            for p in res.parameters():
                p.grad = None
            gs = tb.autograd.grad(tb.nn.functional.cross_entropy(res(x), y),
                                  list(res.parameters()))
            arena = res.reducer._resident.array
            no_alias = not any(np.shares_memory(g.numpy(), arena) for g in gs)
    # torch's default: last step's .grad is the rank's own array, untouched by later steps
    unchanged = as_view or all(np.array_equal(t.numpy(), v) for t, v in held)
    return {"same": same, "taken": taken, "unchanged": unchanged, "no_alias": no_alias,
            "resident": res.reducer._resident is not None}


@needs_native
@pytest.mark.parametrize("as_view", [False, True])
def test_gradients_written_straight_into_the_arena(as_view):
    """The weight-gradient GEMM and the bias-gradient sum write into the arena slot
    (``offer_grad_dests``): the same bits as the reference (which copies), a weight used twice
    still sums both contributions, an earlier step's ``.grad`` keeps its values, and
    ``autograd.grad`` never returns an arena slot."""
    for r in run_workers(f"{HERE}:offers_worker", 2, as_view, timeout=90):
        assert r["resident"] and all(r["same"]) and r["unchanged"] and r["no_alias"], r
        # offered in steps 1-4 (step 0 comes before the bucket rebuild): per step both weights
        # once (the tied weight's second contribution is summed by the engine), both biases
        assert r["taken"][0] >= 4 and r["taken"][1] == 8, r


def lend_worker(rank, world):
    """torch's default (no bucket view): the gradients are reduced in place in the arena's
    region and the average lent to ``.grad`` while nothing holds an earlier one; held, the step
    reduces in the slot and copies into ``.grad``'s own array."""
    res, ref = _ddp(True), _ddp(False)
    lent, same, kept = [], [], []

    def step(i, keep_grads=False):
        x, y = _batch(rank, i)
        for ddp in (res, ref):
            if not keep_grads:
                for p in ddp.parameters():
                    p.grad = None
            tb.nn.functional.cross_entropy(ddp(x), y).backward()
        region = res.reducer._resident.region if res.reducer._resident is not None else None
        lent.append(region is not None and all(  # the weights: the GEMMs wrote their slots
            np.shares_memory(p.grad.numpy(), region) for p in res.parameters() if p.dim() == 2))
        same.append(all(np.array_equal(a.grad.numpy(), b.grad.numpy())
                        for a, b in zip(res.parameters(), ref.parameters())))

    for i in range(3):                  # 0: before the rebuild; 1, 2: lent
        step(i)
    held = [p.grad.numpy()[1:] for p in res.parameters()]   # NumPy views of lent gradients
    values = [h.copy() for h in held]
    step(3)                             # held: not lent, the held views keep their values
    step(4)
    kept.append(all(np.array_equal(h, v) for h, v in zip(held, values)))
    del held
    step(5)                             # nothing held: lent again
    old = [p.grad for p in res.parameters()]                  # the tensors themselves
    values = [t.numpy().copy() for t in old]
    step(6)
    kept.append(all(np.array_equal(t.numpy(), v) for t, v in zip(old, values)))
    del old, values
    step(7)
    step(8, keep_grads=True)            # accumulated in place into the lent .grad, as torch
    step(9, keep_grads=True)
    # one rank holds, the other does not: in one reduction rank 0's inputs and result are in
    # its region, rank 1's in its slot
    old = [p.grad for p in res.parameters()] if rank == 1 else []
    values = [t.numpy().copy() for t in old]
    step(10)
    kept.append(all(np.array_equal(t.numpy(), v) for t, v in zip(old, values)))
    return {"lent": lent, "same": same, "kept": kept}


@needs_native
def test_the_average_is_lent_to_grad_while_nothing_holds_the_last_one():
    for rank, r in enumerate(run_workers(f"{HERE}:lend_worker", 2, timeout=90)):
        assert all(r["same"]) and all(r["kept"]), r
        assert r["lent"] == [False, True, True, False, False, True, False, True, True, True,
                             rank == 0], r


def latency_path_worker(rank, world):
    import tensorbrain.distributed as dist
    ops = dist.distributed_c10d._default("test").backend._ops
    inline = ops.run_inline
    took: list = []

    def counting(op, fn, *args):
        done = inline(op, fn, *args)
        took.append(bool(done))
        return done

    def declining(op, fn, *args):  # as when an op is queued: the caller must queue behind it
        return False
    res, ref = _ddp(True), _ddp(False)
    same = []
    # step 1 makes the resident arena (its set-up all_reduce takes the latency path too);
    # step 2 reduces in it through the latency path; steps 3 and 4 through the queue
    for step, run_inline in enumerate((inline, inline, counting, declining, declining)):
        ops.run_inline = run_inline
        a = _grads(res, rank, step)
        ops.run_inline = inline
        same.append(all(np.array_equal(u, v) for u, v in zip(a, _grads(ref, rank, step))))
    return {"same": same, "took": took, "resident": res.reducer._resident is not None}


@needs_native
def test_the_arena_reduction_takes_the_latency_path_and_queues_when_it_declines():
    for r in run_workers(f"{HERE}:latency_path_worker", 2, timeout=90):
        assert r["resident"] and r["took"] == [True], r   # one reduction, in this thread
        assert r["same"] == [True] * 5, r
