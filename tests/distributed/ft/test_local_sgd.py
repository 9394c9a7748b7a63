"""LocalSGD, DiLoCo (``tb.distributed.ft``) and torch's PostLocalSGDOptimizer /
PeriodicModelAverager / post_localSGD_hook, on 2 real ranks, against the same algorithm run
for two replicas in one process (the reference: every average written out by hand)."""
import numpy as np
import pytest

import tensorbrain as tb

HERE = "tests.distributed.ft.test_local_sgd"
STEPS, B = 12, 8


def _model(seed=0):
    tb.manual_seed(seed)
    return tb.nn.Sequential(tb.nn.Linear(5, 7), tb.nn.Tanh(), tb.nn.Linear(7, 3))


def _batch(rank, step):
    rng = np.random.default_rng(100 * rank + step)
    return (tb.tensor(rng.standard_normal((B, 5)).astype(np.float32)),
            tb.tensor(rng.integers(0, 3, B)))


def _loss(model, rank, step):
    x, y = _batch(rank, step)
    return tb.nn.functional.cross_entropy(model(x), y)


def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def _set_mean(models):
    for ps in zip(*(m.parameters() for m in models)):
        mean = sum(p._data for p in ps) / len(ps)
        for p in ps:
            p._data[...] = mean


# ***** workers (2 ranks) *****
def diloco_worker(rank, world, algo, h):
    import tensorbrain.distributed.ft as ft
    model = _model()
    inner = tb.optim.AdamW(model.parameters(), lr=0.01)
    if algo == "diloco":
        outer = tb.optim.SGD(model.parameters(), lr=0.7, momentum=0.9, nesterov=True)
        opt = ft.DiLoCo(model, inner, outer, sync_every=h)
    else:
        opt = ft.LocalSGD(model, inner, sync_every=h)
    for step in range(STEPS):
        opt.zero_grad()
        _loss(model, rank, step).backward()
        opt.step()
    return [p.tolist() for p in _params(model)]


def post_local_worker(rank, world, period, warmup):
    from tensorbrain.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from tensorbrain.distributed.optim import PostLocalSGDOptimizer
    model = _model()
    opt = PostLocalSGDOptimizer(tb.optim.SGD(model.parameters(), lr=0.1),
                                PeriodicModelAverager(period=period, warmup_steps=warmup))
    for step in range(STEPS):
        opt.zero_grad()
        _loss(model, rank, step).backward()
        opt.step()
    assert opt.state_dict()["step"] == STEPS
    return [p.tolist() for p in _params(model)]


def hook_worker(rank, world, start):
    import os

    from tensorbrain.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
    from tensorbrain.distributed.optim import PostLocalSGDOptimizer
    from tensorbrain.nn.parallel import DistributedDataParallel as DDP
    from tensorbrain.nn.parallel.comm_hooks import PostLocalSGDState, post_localSGD_hook
    os.environ["LOCAL_WORLD_SIZE"] = "1"  # each rank its own "node": no talk in the local phase
    model = _model()
    ddp = DDP(model)
    ddp.register_comm_hook(PostLocalSGDState(None, None, start_localSGD_iter=start),
                           post_localSGD_hook)
    opt = PostLocalSGDOptimizer(tb.optim.SGD(ddp.parameters(), lr=0.1),
                                PeriodicModelAverager(period=4, warmup_steps=start))
    for step in range(STEPS):
        opt.zero_grad()
        x, y = _batch(rank, step)
        tb.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return [p.tolist() for p in _params(model)]


# ***** references: two replicas in one process *****
def _reference(algo, h):
    models = [_model(), _model()]
    inners = [tb.optim.AdamW(m.parameters(), lr=0.01) for m in models]
    if algo == "diloco":
        glob = _model()
        outer = tb.optim.SGD(glob.parameters(), lr=0.7, momentum=0.9, nesterov=True)
    for step in range(STEPS):
        for r, (m, o) in enumerate(zip(models, inners)):
            o.zero_grad()
            _loss(m, r, step).backward()
            o.step()
        if (step + 1) % h:
            continue
        if algo == "localsgd":
            _set_mean(models)
            continue
        for g, *ps in zip(glob.parameters(), *(m.parameters() for m in models)):
            g.grad = tb.tensor(sum(g._data - p._data for p in ps) / len(ps))
        outer.step()
        outer.zero_grad()
        for m in models:
            for p, g in zip(m.parameters(), glob.parameters()):
                p._data[...] = g._data
    return _params(models[0]), _params(models[1])


@pytest.mark.parametrize("algo", ["diloco", "localsgd"])
def test_diloco_and_local_sgd_match_two_replicas_in_one_process(workers, algo):
    h = 4
    got = workers(f"{HERE}:diloco_worker", 2, algo, h)
    ref0, ref1 = _reference(algo, h)
    for a, b, r in zip(got[0], got[1], ref0):
        np.testing.assert_allclose(np.asarray(a), r, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # in sync after the last


def _post_local_reference(period, warmup, global_grads_until=0):
    """Two replicas of SGD(lr 0.1): gradients averaged while ``step < global_grads_until``
    (DDP's global all_reduce), parameters averaged at ``step >= warmup`` every ``period``."""
    models = [_model(), _model()]
    opts = [tb.optim.SGD(m.parameters(), lr=0.1) for m in models]
    for step in range(STEPS):
        for r, (m, o) in enumerate(zip(models, opts)):
            o.zero_grad()
            _loss(m, r, step).backward()
        if step < global_grads_until:
            for ps in zip(*(m.parameters() for m in models)):
                mean = sum(p.grad._data for p in ps) / 2
                for p in ps:
                    p.grad._data[...] = mean
        for o in opts:
            o.step()
        if step >= warmup and (step - warmup) % period == 0:
            _set_mean(models)
    return [_params(m) for m in models]


def _assert_close(got, ref):
    for r in (0, 1):
        for a, b in zip(got[r], ref[r]):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-6)


def test_post_local_sgd_optimizer_averages_every_period_after_warmup(workers):
    period, warmup = 3, 2
    got = workers(f"{HERE}:post_local_worker", 2, period, warmup)
    _assert_close(got, _post_local_reference(period, warmup))


def test_post_local_sgd_hook_is_global_before_the_start_then_local(workers):
    start = 4  # STEPS - 1 = 11: the last average is at step 4 + 4 + ... = 8; steps 9-11 local
    got = workers(f"{HERE}:hook_worker", 2, start)
    _assert_close(got, _post_local_reference(4, start, global_grads_until=start))
    assert not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(*got))
