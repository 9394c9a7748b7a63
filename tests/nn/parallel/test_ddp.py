"""DistributedDataParallel in real processes against single-process references.

One launched world runs many checks (``_ddp_workers.suite``) because starting processes is the
slow part; each check's reference is computed here, in one process, on the concatenated
batches. Worlds of 2, 3 and 4 ranks (4 ranks oversubscribe a 2-core box; still a few seconds).
"""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain.testing.distributed import run_workers

from . import _ddp_workers as W

FN = "tests.nn.parallel._ddp_workers:suite"
ALL = list(W.CHECKS)


@pytest.fixture(scope="module")
def world2():
    return run_workers(FN, 2, ALL, timeout=90)


@pytest.fixture(scope="module")
def world3():
    return run_workers(FN, 3, ["equiv_sgd", "equiv_adam", "join", "bucket_order"], timeout=90)


@pytest.fixture(scope="module")
def world4():
    return run_workers(FN, 4, ["equiv_sgd", "equiv_adam_view"], timeout=90)


# ***** references (one process, the whole batch) *****
def ref_train(world, opt_name, steps=W.STEPS):
    X, Y = W.dataset(world, steps)
    model = W.mlp(seed=0)
    opt = W.make_opt(opt_name, model.parameters())
    for s in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(tb.from_numpy(X[s])), tb.from_numpy(Y[s])).backward()
        opt.step()
    return W.params_of(model)


def assert_same_on_every_rank(per_rank):
    for r, arrays in enumerate(per_rank[1:], 1):
        for a, b in zip(per_rank[0], arrays):
            assert np.array_equal(a, b), f"rank {r} differs from rank 0 (bitwise)"


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# ***** equivalence *****
@pytest.mark.parametrize("world", [2, 3, 4])
def test_equivalence_sgd(world, request):
    res = request.getfixturevalue(f"world{world}")
    per_rank = [r["equiv_sgd"]["params"] for r in res]
    assert res[0]["equiv_sgd"]["buckets"] == 6  # one bucket per parameter: several in flight
    assert_same_on_every_rank(per_rank)
    assert_close(per_rank[0], ref_train(world, "sgd"))


def test_overlapped_and_inline_buckets_give_the_same_bits(world2):
    # the reducer picks one of the two by the cores per rank (_spare_core_per_rank); both must
    # equal the one-process reference, and each other bit for bit
    runs = {k: [r[k]["params"] for r in world2] for k in ("equiv_sgd_overlap", "equiv_sgd_inline")}
    for per_rank in runs.values():
        assert_same_on_every_rank(per_rank)
    assert_same_on_every_rank([runs["equiv_sgd_overlap"][0], runs["equiv_sgd_inline"][0]])
    assert_close(runs["equiv_sgd_inline"][0], ref_train(2, "sgd"))
    # inline: after the bucket rebuild, one all_reduce (AVG) of the whole arena per step
    assert world2[0]["equiv_sgd_inline"]["fused"] and not world2[0]["equiv_sgd_overlap"]["fused"]


@pytest.mark.parametrize("check", ["mixed_dtypes", "mixed_dtypes_view"])
def test_fused_reduction_keeps_each_dtype_apart(world2, check):
    # float32, float64, float32 buckets: three arenas reduced in bucket order; each gradient is
    # the average of the ranks' inputs, in its own dtype, before and after fusing
    res = [r[check] for r in world2]
    assert res[0]["fused"] and res[0]["arenas"] == 3
    for step, got in enumerate(res[0]["grads"]):
        want = [np.mean([x[k] for x in (W.mixed_inputs(r, step) for r in range(2))], axis=0)
                for k in range(3)]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-6 if g.dtype == np.float32 else 1e-12)
    assert_same_on_every_rank([r["grads"][-1] for r in res])


@pytest.mark.parametrize("world,check", [(2, "equiv_adam"), (2, "equiv_adam_view"),
                                         (3, "equiv_adam"), (4, "equiv_adam_view")])
def test_equivalence_adam(world, check, request):
    res = request.getfixturevalue(f"world{world}")
    per_rank = [r[check]["params"] for r in res]
    assert_same_on_every_rank(per_rank)
    assert_close(per_rank[0], ref_train(world, "adam"), atol=1e-5)
    # gradient_as_bucket_view: every .grad lives in a bucket (also after the rebuild); else none
    assert all(res[0][check]["views"]) if check.endswith("view") else \
        not any(res[0][check]["views"])


@pytest.mark.parametrize("check", ["no_sync", "no_sync_view"])
def test_no_sync_accumulation_equals_one_big_batch(world2, check):
    k = 3
    X, Y = W.dataset(2, k)
    model = W.mlp(seed=0)
    for i in range(k):  # sum over micro-batches of the gradient of each (global) micro-batch
        F.cross_entropy(model(tb.from_numpy(X[i])), tb.from_numpy(Y[i])).backward()
    assert_same_on_every_rank([r[check] for r in world2])
    assert_close(world2[0][check], W.grads_of(model))


# ***** unused parameters *****
def _branch_grads(use, x):
    model = W.Branches()
    (model(tb.from_numpy(x), use=use) ** 2).mean().backward()
    return W.grads_of(model)


def test_unused_parameters_with_the_flag(world2):
    X, _ = W.dataset(2, 1)
    xs = [np.ascontiguousarray(X[0, r * W.B:(r + 1) * W.B, :4]) for r in range(2)]
    g0, g1 = _branch_grads(("a", "b"), xs[0]), _branch_grads(("a",), xs[1])
    for r in range(2):
        got = world2[r]["unused"]["flag"]
        assert_close(got[0:2], [(a + b) / 2 for a, b in zip(g0[0:2], g1[0:2])])  # a: both ranks
        assert_close(got[2:4], [a / 2 for a in g0[2:4]])   # b: used on rank 0 only, averaged
        assert got[4] is None and got[5] is None           # c: unused everywhere -> None


def test_static_graph_learns_the_unused_set(world2):
    X, _ = W.dataset(2, 1)
    gs = [_branch_grads(("a", "b"), np.ascontiguousarray(X[0, r * W.B:(r + 1) * W.B, :4]))
          for r in range(2)]
    got = world2[0]["unused"]["static"]
    assert_close(got[:4], [(a + b) / 2 for a, b in zip(gs[0][:4], gs[1][:4])])
    assert got[4] is None and got[5] is None


def test_unused_parameter_without_the_flag_is_a_clear_error_not_a_hang(world2):
    for r in range(2):
        msg = world2[r]["unused"]["error"]
        assert msg is not None
        assert "'c.weight'" in msg and "'c.bias'" in msg
        assert "find_unused_parameters=True" in msg and f"rank {r}" in msg
        assert world2[r]["unused"]["after"] == 2.0  # the group still works afterwards


# ***** comm hooks *****
def test_allreduce_hook_equals_default(world2):
    h = world2[0]["hooks"]
    assert_close(h["allreduce"], h["none"], rtol=1e-6, atol=1e-9)


def test_fp16_and_bf16_hooks_are_close_to_fp32(world2):
    h = world2[0]["hooks"]
    assert_close(h["fp16"], h["none"], rtol=1e-2, atol=2e-5)
    assert_close(h["bf16"], h["none"], rtol=2e-2, atol=2e-4)
    assert any(not np.array_equal(a, b) for a, b in zip(h["fp16"], h["none"]))  # really compressed
    assert_same_on_every_rank([r["hooks"]["fp16"] for r in world2])


def test_powersgd_converges_and_keeps_replicas_identical(world2):
    h = world2[0]["hooks"]
    loss = h["losses"]["powersgd"]
    assert loss[-1] < 1e-2 * loss[0], loss[::10]
    assert h["powersgd_rate"] > 1.0
    assert_same_on_every_rank([r["hooks"]["powersgd_params"] for r in world2])
    assert "only be called once" in h["twice"]


def test_powersgd_state_validates_like_torch():
    from tensorbrain.nn.parallel.comm_hooks import PowerSGDState
    with pytest.raises(ValueError, match="start_powerSGD_iter"):
        PowerSGDState(None, start_powerSGD_iter=1)


def test_bf16_rounding_matches_torch():
    torch = pytest.importorskip("torch")
    from tensorbrain.nn.parallel.comm_hooks import bf16_round
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(20000) * 10.0 ** rng.integers(-30, 30, 20000)).astype(np.float32)
    x = np.concatenate([x, np.array([np.nan, np.inf, -np.inf, 3.4e38, 0.0, 1.00390625],
                                    dtype=np.float32)])
    want = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    assert np.array_equal(bf16_round(x), want, equal_nan=True)


# ***** buffers, state dict, construction *****
def test_construction_broadcasts_rank0_state_and_buffers_follow_rank0(world2):
    r0, r1 = world2[0]["buffers"], world2[1]["buffers"]
    assert_same_on_every_rank([r0["init_params_True"], r1["init_params_True"]])
    assert np.all(r1["init_mean_True"] == 0) and np.all(r1["init_mean_False"] == 0)
    assert np.array_equal(r0["mean_True"], r1["mean_True"])
    assert np.array_equal(r0["var_True"], r1["var_True"])
    assert not np.array_equal(r0["mean_False"], r1["mean_False"])  # without: each rank's own
    assert r0["module_is_model"]
    assert r0["state_keys"] and all(k.startswith("module.") for k in r0["state_keys"])
    assert "module.1.running_mean" in r0["state_keys"]


def test_mismatched_models_name_the_parameter_and_rank(world2):
    for r in range(2):
        msg = world2[r]["mismatch"]
        assert msg and "'0.weight'" in msg and "rank 1" in msg and "(5, 4)" in msg


# ***** bucket order *****
@pytest.mark.parametrize("world", [2, 3])
def test_bucket_order_does_not_depend_on_hook_order(world, request):
    res = request.getfixturevalue(f"world{world}")
    assert res[0]["bucket_order"]["initial"] == [[5], [4], [3], [2], [1], [0]]
    rebuilt = [r["bucket_order"]["rebuilt"] for r in res]
    assert all(b == rebuilt[0] for b in rebuilt)  # rank 0's arrival order, everywhere
    X, _ = W.dataset(world, W.STEPS)
    model = W.Branches()
    opt = tb.optim.SGD(model.parameters(), lr=0.1)
    for s in range(W.STEPS):
        opt.zero_grad()
        (model(tb.from_numpy(np.ascontiguousarray(X[s, :, :4]))) ** 2).mean().backward()
        opt.step()
    assert_same_on_every_rank([r["bucket_order"]["params"] for r in res])
    assert_close(res[0]["bucket_order"]["params"], W.params_of(model))


# ***** join (uneven inputs) *****
@pytest.mark.parametrize("world", [2, 3])
def test_join_uneven_inputs(world, request):
    res = request.getfixturevalue(f"world{world}")
    X, Y = W.dataset(world, W.join_batches(world - 1))
    model = W.mlp(seed=0)
    opt = tb.optim.SGD(model.parameters(), lr=0.1)
    for s in range(W.join_batches(world - 1)):
        active = [r for r in range(world) if s < W.join_batches(r)]
        opt.zero_grad()
        for r in active:  # joined ranks contribute zeros; divide by the initial world size
            sl = slice(r * W.B, (r + 1) * W.B)
            loss = F.cross_entropy(model(tb.from_numpy(np.ascontiguousarray(X[s, sl]))),
                                   tb.from_numpy(Y[s, sl]))
            (loss / world).backward()
        opt.step()
    assert_same_on_every_rank([r["join"]["params"] for r in res])
    assert_close(res[0]["join"]["params"], W.params_of(model))
    for r in res:
        assert "exhausted" in r["join"]["throw"]


# ***** SyncBatchNorm *****
def test_sync_batchnorm_equals_batchnorm_on_the_whole_batch(world2):
    X, Y = W.dataset(2, 2)
    tb.manual_seed(0)
    nn = tb.nn
    model = nn.Sequential(nn.Linear(W.IN, 5), nn.BatchNorm1d(5), nn.Tanh(), nn.Linear(5, W.OUT))
    opt = tb.optim.SGD(model.parameters(), lr=0.1)
    for s in range(2):
        opt.zero_grad()
        F.cross_entropy(model(tb.from_numpy(X[s])), tb.from_numpy(Y[s])).backward()
        opt.step()
    got = world2[0]["syncbn"]
    assert got["type"] == "SyncBatchNorm"
    assert_same_on_every_rank([r["syncbn"]["params"] for r in world2])
    assert_close(got["params"], W.params_of(model))
    np.testing.assert_allclose(got["mean"], model[1].running_mean._data, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["var"], model[1].running_var._data, rtol=1e-5, atol=1e-6)


def test_steps_reuse_freed_memory_instead_of_faulting_in_pages(world2):
    # a count, not a time: ~1,600 faults a step at this size with glibc's default thresholds
    for r in range(2):
        faults = world2[r]["page_faults"]
        if faults is None:
            pytest.skip("not glibc: DDP leaves malloc alone")
        assert faults < 100, f"rank {r}: {faults:.0f} minor page faults per step"


def test_sync_batchnorm_without_a_group_is_batchnorm():
    tb.manual_seed(0)
    bn = tb.nn.BatchNorm1d(3)
    sbn = tb.nn.SyncBatchNorm.convert_sync_batchnorm(tb.nn.Sequential(bn))[0]
    assert sbn.weight is bn.weight and sbn.running_mean is bn.running_mean
    x = tb.randn(5, 3)
    ref = tb.nn.BatchNorm1d(3)(x)
    np.testing.assert_allclose(sbn(x)._data, ref._data, rtol=1e-6)


def test_ddp_without_a_process_group_says_what_to_do():
    import tensorbrain.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        tb.nn.parallel.DistributedDataParallel(tb.nn.Linear(2, 2))


def test_bucket_assignment_rule():
    from tensorbrain.nn.parallel._reducer import compute_bucket_assignment_by_size
    ps = [tb.zeros(300), tb.zeros(256), tb.zeros(256), tb.zeros(10, dtype=tb.float64)]
    # reverse order; (dtype) groups; first limit 1 KiB, then 2 KiB
    assert compute_bucket_assignment_by_size(ps, [3, 2, 1, 0], [1024, 2048]) == [[3], [2], [1, 0]]
    # the MLP of the benchmark: fc3 + fc2 fill the first 1 MiB bucket, fc1 the second
    shapes = [(512, 784), (512,), (512, 512), (512,), (10, 512), (10,)]
    mlp = [tb.zeros(*s) for s in shapes]
    assert compute_bucket_assignment_by_size(mlp, [5, 4, 3, 2, 1, 0],
                                             [1 << 20, 25 << 20]) == [[5, 4, 3, 2], [1, 0]]
