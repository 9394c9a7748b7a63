"""torch FSDP idioms beyond the strategies of test_fsdp.py, each checked against one process on
the full batch (real processes): activation checkpointing inside FSDP units, FSDP2's explicit
prefetching / registered forward methods / HSDP accumulation / gradient divide factor, full
state dicts into fully_shard (also broadcast from rank 0), ShardedGradScaler; and torch's import
paths for these names."""
import numpy as np
import pytest

import tensorbrain as tb

from . import _fsdp_compat_cases as C

CASES = "tests.distributed._fsdp_compat_cases"


def _assert_matches(sd, ref, atol=2e-6, rtol=1e-5, err=""):
    assert list(sd) == list(ref), f"{err}: keys {list(sd)} vs {list(ref)}"
    for k, v in ref.items():
        np.testing.assert_allclose(np.array(sd[k]), v, atol=atol, rtol=rtol, err_msg=f"{err} {k}")


def test_activation_checkpointing_inside_units_matches_one_process(workers):
    ref = C.reference()
    for out in workers(f"{CASES}:checkpointed", 2, timeout=240):
        assert sorted(out) == ["fsdp1_orig=False", "fsdp1_orig=True", "fsdp2"]
        for name, sd in out.items():   # keys are the plain model's: the wrappers are hidden
            _assert_matches(sd, ref, err=name)


@pytest.mark.parametrize("world,mesh", [(2, (2,)), (4, (2, 2))])
def test_fully_shard_setters_match_one_process(workers, world, mesh):
    ref, ref_decode, grads = C.reference(), C.reference(method="decode"), C.reference_grads()
    for out in workers(f"{CASES}:fsdp2_setters", world, mesh, timeout=300):
        _assert_matches(out["prefetch_decode"], ref_decode)
        _assert_matches(out["all_reduce_accum"], ref)
        assert out["held"] == [len(mesh) == 2] * C.STEPS
        for n, g in grads.items():   # divide factor 1: the sum over ranks = world x the mean
            np.testing.assert_allclose(np.array(out["sum_grads"][n]), world * g, atol=1e-5,
                                       rtol=1e-5, err_msg=n)


def test_full_state_dicts_into_fully_shard_and_from_rank0(workers):
    res = workers(f"{CASES}:full_into_fully_shard", 2, timeout=240)
    want = res[0]["want"]
    for out in res:
        assert out["want"] == want
        for mode in ("every_rank", "rank0"):
            assert out[mode]["model"] == want["model"], mode
            assert out[mode]["optim"] == want["optim"], mode
            assert out[mode]["local_rows"] == 8   # Linear(8, 16).weight: 16 rows over 2 ranks
        assert out["fsdp1"] == want["model"]


def test_sharded_grad_scaler_skips_on_every_rank(workers):
    for out in workers(f"{CASES}:sharded_scaler", 2, timeout=120):
        assert out == {"unchanged": True, "scale": 512.0}


def test_torch_import_paths_and_checkpoint_wrapper_in_one_process():
    import tensorbrain.distributed as dist
    import tensorbrain.distributed.fsdp as fsdp
    import tensorbrain.distributed.tensor as dtensor
    from tensorbrain.distributed._composable.fsdp import fully_shard
    from tensorbrain.distributed._tensor import DTensor
    from tensorbrain.distributed.algorithms._checkpoint import checkpoint_wrapper as cw
    from tensorbrain.distributed.fsdp import fully_sharded_data_parallel as fsdp_mod
    from tensorbrain.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
    assert fully_shard is fsdp.fully_shard and DTensor is dtensor.DTensor
    for name in ("FullStateDictConfig", "ShardingStrategy", "StateDictType", "MixedPrecision",
                 "CPUOffload", "BackwardPrefetch", "LocalStateDictConfig"):
        assert getattr(fsdp_mod, name) is getattr(fsdp, name)
    assert issubclass(ShardedGradScaler, tb.amp.GradScaler)
    # checkpoint_wrapper: the same gradients as the bare module, the plain model's keys
    tb.manual_seed(0)
    plain = C.Net()
    wrapped = C.Net()
    wrapped.load_state_dict(plain.state_dict())
    cw.apply_activation_checkpointing(
        wrapped, checkpoint_wrapper_fn=cw.checkpoint_wrapper,
        check_fn=lambda m: isinstance(m, C.Block))
    assert [type(b).__name__ for b in wrapped.blocks] == ["CheckpointWrapper"] * 3
    assert list(wrapped.state_dict()) == list(plain.state_dict())
    # as torch: the wrapper's own named_parameters() hide it, a parent's show it
    assert [n for n, _ in wrapped.blocks[0].named_parameters()] == \
        [n for n, _ in plain.blocks[0].named_parameters()]
    assert "blocks.0._checkpoint_wrapped_module.norm.weight" in dict(wrapped.named_parameters())
    x = tb.randn(4, 5)
    for m in (plain, wrapped):
        m(x).sum().backward()
    for (n, p), q in zip(plain.named_parameters(), wrapped.parameters(), strict=True):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), atol=1e-6, err_msg=n)
    sd = {k: v * 0 + 1 for k, v in plain.state_dict().items()}
    keys = list(sd)
    wrapped.load_state_dict(sd)             # the caller's dict is not renamed
    assert list(sd) == keys and all(float(v.sum()) == v.numel() for v in
                                    wrapped.state_dict().values())
    # fully_shard(reshard_after_forward=None) (torch's default) and the state-dict settings
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    try:
        m = fully_shard(tb.nn.Linear(3, 2), reshard_after_forward=None)
        m(tb.ones(1, 3)).sum().backward()
        f = fsdp.FullyShardedDataParallel(tb.nn.Linear(3, 2))
        prev = fsdp.FullyShardedDataParallel.set_state_dict_type(
            f, fsdp.StateDictType.SHARDED_STATE_DICT)
        assert prev.state_dict_type == fsdp.StateDictType.FULL_STATE_DICT
        now = fsdp.FullyShardedDataParallel.get_state_dict_type(f)
        assert now.state_dict_type == fsdp.StateDictType.SHARDED_STATE_DICT
        with pytest.raises(ValueError, match="expected modules passed to fully_shard"):
            m.set_modules_to_forward_prefetch([tb.nn.Linear(1, 1)])
        with pytest.raises(ValueError, match="broadcast_from_rank0=True\\) needs full_state"):
            from tensorbrain.distributed.checkpoint.state_dict import (StateDictOptions,
                                                                       set_model_state_dict)
            set_model_state_dict(m, {}, options=StateDictOptions(broadcast_from_rank0=True))
    finally:
        dist.destroy_process_group()


def test_rekey_optim_state_dict_and_mesh_dims_match_torch():
    """FSDP.rekey_optim_state_dict on a plain model's Adam state, both ways, against torch's
    (no process group needed); DataParallelMeshDims' names and check."""
    torch = pytest.importorskip("torch")
    from torch.distributed import fsdp as tfsdp

    from tensorbrain.distributed import fsdp as fsdp
    got = []
    for lib, mod in ((tb, fsdp), (torch, tfsdp)):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
        opt = lib.optim.Adam([{"params": [model[2].weight]},
                              {"params": [model[0].weight, model[0].bias], "lr": 0.1}])
        model(lib.ones(2, 3)).sum().backward()
        opt.step()
        osd = opt.state_dict()
        FSDP = mod.FullyShardedDataParallel
        named = FSDP.rekey_optim_state_dict(osd, mod.OptimStateKeyType.PARAM_NAME, model,
                                            optim=opt)
        back = FSDP.rekey_optim_state_dict(named, mod.OptimStateKeyType.PARAM_ID, model,
                                           optim=opt)
        assert FSDP.rekey_optim_state_dict(back, mod.OptimStateKeyType.PARAM_ID, model,
                                           optim=opt) is back
        got.append((sorted(named["state"]), [g["params"] for g in named["param_groups"]],
                    sorted(back["state"]), [g["params"] for g in back["param_groups"]],
                    {k: float(v["step"]) for k, v in named["state"].items()}))
        with pytest.raises(ValueError, match="Invalid parameter keys"):
            FSDP.rekey_optim_state_dict({"state": {0: {}, "a": {}}, "param_groups": []},
                                        mod.OptimStateKeyType.PARAM_ID, model, optim=opt)
    assert got[0] == got[1]
    for lib_mod in (fsdp, tfsdp):
        d = lib_mod.DataParallelMeshDims(shard=("dp", "cp"), replicate="rep")
        assert d.shard_names == ("dp", "cp") and d.replicate_names == ("rep",)
        with pytest.raises(ValueError, match="At least one"):
            lib_mod.DataParallelMeshDims()
    with pytest.raises(ValueError, match="needs mesh="):
        fsdp.fully_shard(tb.nn.Linear(2, 2), dp_mesh_dims=fsdp.DataParallelMeshDims(shard="dp"))
    with pytest.raises(NotImplementedError, match="flattening"):
        fsdp.fully_shard(tb.nn.Linear(2, 2), mesh=object(),
                         dp_mesh_dims=fsdp.DataParallelMeshDims(shard=("dp", "cp")))
