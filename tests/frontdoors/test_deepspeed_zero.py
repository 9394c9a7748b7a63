"""deepspeed.zero.Init and GatheredParameters at 2 ranks: partitioned at construction, whole in
the block, rank r's edits kept with modifier_rank=r, dropped without, a named error when the
ranks pass different lists; ZeRO-2 keeps whole parameters after step (as DeepSpeed)."""
import numpy as np
import pytest

from tensorbrain.testing.distributed import WorkerFailure, run_workers

pytestmark = pytest.mark.timeout(120)


def _init_and_gather(rank, world_size):
    import tensorbrain as tb
    import tensorbrain.deepspeed as deepspeed
    tb.manual_seed(rank)                     # different values per rank: Init broadcasts rank 0's
    with deepspeed.zero.Init():
        layer = tb.nn.Linear(5, 3)           # 15 + 3 numbers
    w = layer.weight
    out = {"numel": w.numel(), "piece": int(w.ds_tensor.numel()), "shape": list(w.ds_shape)}
    with deepspeed.zero.GatheredParameters([layer.weight, layer.bias]):
        out["read"] = layer.weight.detach().numpy().tolist()
        layer.weight.data.fill_(-1.0)        # read-only block: dropped
    with deepspeed.zero.GatheredParameters([layer.weight, layer.bias], modifier_rank=1):
        if rank == 1:
            layer.weight.data.fill_(7.0)     # kept: broadcast from rank 1, partitioned again
    out["after"] = float(layer.weight.ds_tensor.sum().item())
    with deepspeed.zero.GatheredParameters(layer.weight):
        out["edited"] = layer.weight.detach().numpy().tolist()
    return out


def test_init_partitions_and_gathered_parameters_read_and_write():
    r0, r1 = run_workers("tests.frontdoors.test_deepspeed_zero:_init_and_gather", 2)
    for r in (r0, r1):
        assert r["numel"] == 0 and r["shape"] == [3, 5]
        assert r["read"] == r0["read"]           # rank 0's construction, on both ranks
        assert r["edited"] == [[7.0] * 5] * 3
    assert (r0["piece"], r1["piece"]) == (8, 7)   # torch.chunk's split of 15
    assert (r0["after"], r1["after"]) == (56.0, 49.0)
    assert not np.allclose(r0["read"], -1.0)


def _mismatched(rank, world_size):
    import tensorbrain as tb
    import tensorbrain.deepspeed as deepspeed
    with deepspeed.zero.Init():
        layer = tb.nn.Linear(4, 2)
    params = [layer.weight, layer.bias] if rank == 0 else [layer.weight]
    with deepspeed.zero.GatheredParameters(params):
        pass


def test_ranks_passing_different_parameter_lists_get_a_named_error():
    with pytest.raises(WorkerFailure) as info:
        run_workers("tests.frontdoors.test_deepspeed_zero:_mismatched", 2, timeout=60)
    text = str(info.value)
    assert "different parameter lists" in text and "rank 0: 2 parameters" in text and \
        "rank 1: 1 parameters" in text


def _zero2_whole_after_step(rank, world_size):
    import tensorbrain as tb
    import tensorbrain.deepspeed as deepspeed
    model = tb.nn.Linear(4, 3)
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config={
        "train_batch_size": 4, "zero_optimization": {"stage": 2},
        "optimizer": {"type": "Adam", "params": {"lr": 0.1}}})
    x = tb.ones(2, 4) * (rank + 1)
    engine.backward(engine(x).sum())
    engine.step()
    out = [p.detach().numpy().tolist() for p in engine.module.parameters()]
    tb.distributed.destroy_process_group()
    return out


def test_zero2_keeps_whole_parameters_after_step_on_every_rank():
    r0, r1 = run_workers("tests.frontdoors.test_deepspeed_zero:_zero2_whole_after_step", 2,
                         init=None)
    assert r0 == r1 and np.asarray(r0[0]).shape == (3, 4) and np.asarray(r0[1]).shape == (3,)
