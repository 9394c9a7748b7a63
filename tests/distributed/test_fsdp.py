"""FSDP trains like one process: after K steps every rank's full state dict equals a single
process's parameters on the whole batch (real processes; references computed here)."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.distributed.fsdp.wrap import (ModuleWrapPolicy, enable_wrap,
                                               size_based_auto_wrap_policy,
                                               transformer_auto_wrap_policy, wrap)

from . import _fsdp_cases as C

CASES = "tests.distributed._fsdp_cases"


def _assert_matches(sd, ref, atol=2e-6, rtol=1e-5):
    assert list(sd) == list(ref), f"keys {list(sd)} vs {list(ref)}"
    for k, v in ref.items():
        np.testing.assert_allclose(np.array(sd[k]), v, atol=atol, rtol=rtol, err_msg=k)


CONFIGS_2 = [
    dict(strategy="FULL_SHARD"),
    dict(strategy="SHARD_GRAD_OP"),
    dict(strategy="NO_SHARD"),
    dict(strategy="FULL_SHARD", wrap=None),                 # one unit, no auto wrap
    dict(strategy="FULL_SHARD", opt="adam", orig=True),     # use_orig_params
    dict(strategy="FULL_SHARD", offload=True),              # CPUOffload(offload_params=True)
    dict(strategy="SHARD_GRAD_OP", offload=True, opt="adam"),
    dict(strategy="FULL_SHARD", mp="float64"),              # exact: upcast compute
    dict(strategy="FULL_SHARD", prefetch="BACKWARD_POST", forward_prefetch=True),
    dict(strategy="FULL_SHARD", prefetch=None),
]


def _eval_output(ref_sd):
    model = C.make_model()
    model.load_state_dict({k: tb.tensor(v) for k, v in ref_sd.items()})
    with tb.no_grad():
        return model(tb.tensor(C.data()[0][0])).numpy()


def test_strategies_train_like_one_process_2_ranks(workers):
    res = workers(f"{CASES}:train_many", 2, CONFIGS_2, timeout=240)
    refs = {opt: C.reference(opt) for opt in ("sgd", "adam")}
    evals = {opt: _eval_output(ref) for opt, ref in refs.items()}
    for i, cfg in enumerate(CONFIGS_2):
        for rank in range(2):
            _assert_matches(res[rank][i]["sd"], refs[cfg.get("opt", "sgd")])
            np.testing.assert_allclose(res[rank][i]["eval"], evals[cfg.get("opt", "sgd")],
                                       atol=1e-5, err_msg=str(cfg))


def test_mixed_precision_float16_close_to_float32(workers):
    res = workers(f"{CASES}:train_many", 2, [dict(mp="float16", opt="adam")], timeout=120)
    ref = C.reference("adam")
    for rank in range(2):
        # compute in float16 (about 3 decimal digits) against a float32 reference
        _assert_matches(res[rank][0]["sd"], ref, atol=5e-3, rtol=5e-3)
        # and it is really lower precision: not bit-identical to float32
    assert any(not np.array_equal(np.array(res[0][0]["sd"][k]), v) for k, v in ref.items())


CONFIGS_4 = [
    dict(strategy="HYBRID_SHARD", mesh_shape=(2, 2), opt="adam"),
    dict(strategy="_HYBRID_SHARD_ZERO2", mesh_shape=(2, 2)),
    dict(strategy="HYBRID_SHARD", mesh_shape=(2, 2), mp="float64", offload=True),
    dict(strategy="FULL_SHARD", opt="adam"),
]


def test_hybrid_shard_2d_mesh_4_ranks(workers):
    res = workers(f"{CASES}:train_many", 4, CONFIGS_4, timeout=300)
    refs = {opt: C.reference(opt) for opt in ("sgd", "adam")}
    for i, cfg in enumerate(CONFIGS_4):
        for rank in range(4):
            _assert_matches(res[rank][i]["sd"], refs[cfg.get("opt", "sgd")])


@pytest.mark.parametrize("orig", [False, True])
def test_state_dicts_full_sharded_and_optimizer(workers, orig):
    res = workers(f"{CASES}:state_dicts", 2, orig, timeout=180)
    ref = C.reference("adam")
    ref_state = C.reference_adam_state()
    r0, r1 = res
    assert r0["full_keys"] == list(ref) and r1["full"] == {}   # rank0_only
    _assert_matches(r0["full"], ref)
    # the full state dict loads into a plain model
    plain = C.make_model(seed=9)
    plain.load_state_dict({k: tb.tensor(np.array(v, dtype=np.float32))
                           for k, v in r0["full"].items()})
    for k, v in plain.state_dict().items():
        np.testing.assert_allclose(v.numpy(), ref[k], atol=2e-6)
    # optimizer state by parameter name equals the single process's Adam state
    for rank in range(2):
        osd = res[rank]["optim"]
        assert sorted(osd) == sorted(ref_state)
        for name, st in ref_state.items():
            for key in ("exp_avg", "exp_avg_sq"):
                np.testing.assert_allclose(np.array(osd[name][key]), st[key], atol=1e-7,
                                           rtol=1e-5, err_msg=f"{name}.{key}")
            assert float(np.asarray(osd[name]["step"])) == float(st["step"])
        assert sorted(sum(res[rank]["optim_groups"], [])) == sorted(ref_state)
        # sharded: DTensor Shard(0) whose shards follow torch.chunk and reassemble the value
        for k, (kind, shard0, shape, local, whole) in res[rank]["sharded"].items():
            assert kind == "DTensor" and shard0 and tuple(shape) == ref[k].shape
            np.testing.assert_allclose(np.array(whole), ref[k], atol=2e-6)
            rows = -(-shape[0] // 2)
            expect = ref[k][rank * rows:(rank + 1) * rows]
            np.testing.assert_allclose(np.array(local).reshape(expect.shape), expect, atol=2e-6)
        # reloaded into a fresh model + optimizer, one more step continues the run exactly
        _assert_matches(res[rank]["resumed"], C.reference_resumed())


@pytest.mark.parametrize("orig", [False, True])
def test_full_optim_state_dict_id_keyed_round_trip(workers, orig):
    """torch's deprecated full_optim_state_dict / shard_ / scatter_full_optim_state_dict."""
    r0, r1 = workers(f"{CASES}:full_optim_id_keyed", 2, orig, timeout=180)
    assert r1["empty_off_rank0"]
    ref_state = C.reference_adam_state()
    # IDs follow the plain model's parameters(): a plain Adam loads it and holds the
    # single process's Adam state under each parameter's name
    assert sorted(r0["plain_state"]) == sorted(ref_state)
    for name, st in ref_state.items():
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(np.array(r0["plain_state"][name][key]), st[key],
                                       atol=1e-7, rtol=1e-5, err_msg=f"{name}.{key}")
    for r in (r0, r1):
        assert r["shard_equals_scatter"]
        _assert_matches(r["resumed"], C.reference_resumed())


def test_full_state_dict_loads_into_torch(workers):
    torch = pytest.importorskip("torch")
    res = workers(f"{CASES}:train_many", 2, [dict()], timeout=120)
    sd = res[0][0]["sd"]
    model = torch.nn.Sequential(torch.nn.Linear(6, 9), torch.nn.Tanh(), torch.nn.Linear(9, 7),
                                torch.nn.Tanh(), torch.nn.Linear(7, 3))
    model.load_state_dict({k: torch.tensor(np.array(v, dtype=np.float32)) for k, v in sd.items()})
    ours = C.make_model()
    ours.load_state_dict({k: tb.tensor(np.array(v, dtype=np.float32)) for k, v in sd.items()})
    x = np.random.RandomState(3).randn(4, 6).astype(np.float32)
    np.testing.assert_allclose(model(torch.tensor(x)).detach().numpy(),
                               ours(tb.tensor(x)).detach().numpy(), atol=1e-5)


def test_no_sync_accumulates_and_clip_uses_global_norm(workers):
    res = workers(f"{CASES}:no_sync_and_clip", 2, timeout=120)
    norm, ref = C.reference_no_sync_and_clip(2)
    for got_norm, sd in res:
        assert got_norm == pytest.approx(norm, rel=1e-5)
        _assert_matches(sd, ref)


def test_different_wrapping_raises_naming_rank_and_unit(workers):
    from tensorbrain.testing.distributed import WorkerFailure
    with pytest.raises(WorkerFailure) as info:
        workers(f"{CASES}:different_wrapping", 2, timeout=60)
    msg = str(info.value)
    assert "rank 1 wraps the model differently from rank 0" in msg
    assert "unit #0" in msg and "'(root)'" in msg


def test_parameter_replaced_outside_flat_parameter_raises(workers):
    from tensorbrain.testing.distributed import WorkerFailure
    with pytest.raises(WorkerFailure) as info:
        workers(f"{CASES}:replaced_param", 2, timeout=60)
    assert "unit '2' on rank" in str(info.value)
    assert "parameter 'weight' was replaced outside the flat parameter" in str(info.value)


def test_rank_skipping_a_unit_fails_on_every_rank_naming_the_unit(workers):
    from tensorbrain.testing.distributed import run_workers
    res = run_workers(f"{CASES}:skipped_unit", 2, timeout=60, raise_on_error=False)
    for r in res:
        assert not r.ok and not r.timed_out, r.describe()
        assert r.error_type == "DistBackendError"
        assert f"on rank {r.rank}: the " in r.message and "FSDP unit '" in r.message
    assert "FSDP unit 'b' on rank 0: the all-gather" in res[0].message


def test_sync_module_states_ignored_modules_and_summon_full_params(workers):
    res = workers(f"{CASES}:extras", 2, timeout=120)
    ref = C.make_model(seed=0)                       # rank 0's initial model
    for rank, (names, w, w0_after, w4) in enumerate(res):
        assert names == ["_fsdp_wrapped_module.0._fsdp_wrapped_module._flat_param",
                         "_fsdp_wrapped_module.2._fsdp_wrapped_module._flat_param",
                         "_fsdp_wrapped_module.4.weight", "_fsdp_wrapped_module.4.bias"]
        np.testing.assert_allclose(w, ref[0].weight.detach().numpy(), rtol=1e-6)   # rank 0
        np.testing.assert_array_equal(w0_after, np.ones((9, 6)))            # written back
        # the ignored module keeps this rank's own values: FSDP leaves it alone
        np.testing.assert_array_equal(w4, C.make_model(seed=rank)[4].weight.detach().numpy())


def test_unit_with_a_parameter_that_gets_no_gradient(workers):
    ref = C.reference_partly_used()
    for sd in workers(f"{CASES}:partly_used", 2, timeout=120):
        _assert_matches(sd, ref)


# ***** FSDP2: fully_shard *****
def _check_fsdp2(res, cfgs, world, shard_size):
    refs = {opt: C.reference(opt) for opt in ("sgd", "adam")}
    for i, cfg in enumerate(cfgs):
        for rank in range(world):
            kinds, grads, cls, full, local = res[rank][i]
            assert kinds == ["DTensor"] and grads == ["DTensor"] and cls == "FSDPSequential"
            _assert_matches(full, refs[cfg.get("opt", "sgd")])
            shard_rank = rank % shard_size        # row-major mesh: the shard dim is the last
            for name, shape in local.items():
                n = refs["sgd"][name].shape[0]
                rows = -(-n // shard_size)
                assert shape[0] == max(0, min(rows, n - shard_rank * rows)), (name, shape)


FSDP2_2 = [dict(), dict(opt="adam", reshard=False), dict(mp="float64", offload=True),
           dict(accumulate=True)]


def test_fully_shard_trains_like_one_process_2_ranks(workers):
    res = workers(f"{CASES}:train_fsdp2", 2, FSDP2_2, timeout=240)
    _check_fsdp2(res, FSDP2_2, 2, 2)


FSDP2_4 = [dict(mesh=(2, 2), opt="adam"), dict(mesh=(2, 2), mp="float64", accumulate=True)]


def test_fully_shard_2d_mesh_4_ranks(workers):
    res = workers(f"{CASES}:train_fsdp2", 4, FSDP2_4, timeout=300)
    _check_fsdp2(res, FSDP2_4, 4, 2)


def test_fully_shard_state_dict_round_trip(workers):
    ref = {k: v.detach().numpy() for k, v in C.make_model(0).state_dict().items()}
    for out_a, out_b, full in workers(f"{CASES}:fsdp2_state_dict", 2, timeout=120):
        np.testing.assert_array_equal(out_a, out_b)
        _assert_matches(full, ref, atol=0, rtol=0)


@pytest.mark.parametrize("world,mesh", [(2, (2,)), (4, (2, 2))])
def test_clip_grad_norm_on_dtensor_gradients_is_global(workers, world, mesh):
    norm, ref = C.reference_clip()
    for got, full in workers(f"{CASES}:fsdp2_clip", world, mesh, timeout=120):
        assert got == pytest.approx(norm, rel=1e-5)
        _assert_matches(full, ref)


def test_dtensor_parameters_fsdp_cannot_shard_are_refused():
    """Tensor-parallel (1-D mesh) DTensor parameters are sharded (tests/distributed/
    test_tp_fsdp.py); one on a 2-D mesh, or a Partial one, is refused with what to do."""
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard
    from tensorbrain.distributed.tensor import (Partial, Shard, distribute_tensor,
                                                init_device_mesh)
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for mesh, pl, err, words in (((1, 1), [Shard(0), Shard(0)], NotImplementedError,
                                      "'weight' is a DTensor on a 2-D mesh"),
                                     ((1,), [Partial()], ValueError,
                                      "'weight' is a DTensor with placement Partial")):
            for wrap_it in (FSDP, fully_shard):
                lin = tb.nn.Linear(4, 4)
                lin.weight = tb.nn.Parameter(distribute_tensor(
                    lin.weight.detach(), init_device_mesh("cpu", mesh), pl))
                with pytest.raises(err, match=words):
                    wrap_it(lin)
    finally:
        dist.destroy_process_group()


# ***** wrap policies (no processes) *****
def test_policies_follow_torch_semantics():
    lin = tb.nn.Linear(10, 10)
    assert size_based_auto_wrap_policy(lin, recurse=False, nonwrapped_numel=110,
                                       min_num_params=100)
    assert not size_based_auto_wrap_policy(lin, recurse=False, nonwrapped_numel=99,
                                           min_num_params=100)
    ml = tb.nn.ModuleList([lin])
    assert not size_based_auto_wrap_policy(ml, recurse=False, nonwrapped_numel=1000,
                                           min_num_params=100)
    assert size_based_auto_wrap_policy(ml, recurse=True, nonwrapped_numel=1000,
                                       min_num_params=100)
    assert transformer_auto_wrap_policy(lin, False, 0, transformer_layer_cls={tb.nn.Linear})
    assert not transformer_auto_wrap_policy(tb.nn.Tanh(), False, 0,
                                            transformer_layer_cls={tb.nn.Linear})
    assert ModuleWrapPolicy({tb.nn.Linear})(lin, recurse=False, nonwrapped_numel=0)


def test_wrap_and_enable_wrap():
    class Box:
        def __init__(self, module, **kw):
            self.module, self.kw = module, kw
    lin = tb.nn.Linear(2, 2)
    assert wrap(lin) is lin
    with enable_wrap(wrapper_cls=Box, a=1):
        boxed = wrap(lin, b=2)
    assert isinstance(boxed, Box) and boxed.module is lin and boxed.kw == {"a": 1, "b": 2}


def _unit_numels(rank, world):
    from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP
    model = FSDP(C.make_model(), auto_wrap_policy=ModuleWrapPolicy({tb.nn.Linear}))
    return [[n, p.numel()] for n, p in model.named_parameters()]


def test_each_rank_keeps_one_padded_shard_per_unit(workers):
    res = workers(f"{__name__}:_unit_numels", 2)
    # units: Linear(6,9)=63 -> 32 per rank, Linear(9,7)=70 -> 35, Linear(7,3)=24 -> 12
    want = [[f"_fsdp_wrapped_module.{i}._fsdp_wrapped_module._flat_param", n]
            for i, n in ((0, 32), (2, 35), (4, 12))]
    assert res == [want, want]
