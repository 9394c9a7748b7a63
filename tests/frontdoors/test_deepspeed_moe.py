"""deepspeed.moe: MoE with ep_size=2 at 2 ranks (experts split over the ranks, tokens moved by
all_to_all) equals the same experts computed in one process: outputs, the auxiliary loss and
the gradients of every expert and of the gate; the optimizer helper's groups."""
import numpy as np
import pytest

from tensorbrain.testing.distributed import run_workers

pytestmark = pytest.mark.timeout(120)

D, E = 4, 4


def _moe(tb, ep_size, k):
    from tensorbrain.deepspeed.moe.layer import MoE
    tb.manual_seed(0)
    moe = MoE(D, tb.nn.Sequential(tb.nn.Linear(D, 6), tb.nn.Tanh(), tb.nn.Linear(6, D)),
              num_experts=E, ep_size=ep_size, k=k, capacity_factor=1.0, min_capacity=1,
              use_rts=False, top2_2nd_expert_sampling=False)
    rank = tb.distributed.get_rank() if ep_size > 1 else 0
    rng = np.random.default_rng(5)
    every = [[rng.standard_normal(tuple(p.shape)).astype(np.float32)
              for p in moe.deepspeed_moe.experts.deepspeed_experts[0].parameters()]
             for _ in range(E)]
    with tb.no_grad():
        for i, expert in enumerate(moe.deepspeed_moe.experts.deepspeed_experts):
            glob = rank * moe.num_local_experts + i       # this expert's number in all
            for p, v in zip(expert.parameters(), every[glob]):
                p.copy_(tb.tensor(v))
        moe.deepspeed_moe.gate.wg.weight.copy_(tb.tensor(rng.standard_normal((E, D)) * 2.0))
    return moe


def _batch(rank):
    return np.random.default_rng(100 + rank).standard_normal((3, 5, D)).astype(np.float32)


def _two_ranks(rank, world_size, k):
    import tensorbrain as tb
    moe = _moe(tb, 2, k)
    out, l_aux, counts = moe(tb.tensor(_batch(rank)))
    ((out ** 2).sum() + l_aux).backward()
    grads = {f"expert{rank * 2 + i}": [p.grad.numpy().copy() for p in e.parameters()]
             for i, e in enumerate(moe.deepspeed_moe.experts.deepspeed_experts)}
    return {"out": out.detach().numpy(), "l_aux": float(l_aux.item()),
            "counts": counts.numpy().tolist(), "grads": grads,
            "gate": moe.deepspeed_moe.gate.wg.weight.grad.numpy(),
            "groups": [p.group_name for p in moe.deepspeed_moe.experts.parameters()]}


@pytest.mark.parametrize("k", [1, 2])
def test_expert_parallel_moe_equals_the_same_experts_in_one_process(k):
    import tensorbrain as tb
    two = run_workers("tests.frontdoors.test_deepspeed_moe:_two_ranks", 2, k)
    one = _moe(tb, 1, k)
    total = {}
    for rank in (0, 1):
        one.zero_grad()
        out, l_aux, counts = one(tb.tensor(_batch(rank)))
        ((out ** 2).sum() + l_aux).backward()
        np.testing.assert_allclose(two[rank]["out"], out.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert abs(two[rank]["l_aux"] - float(l_aux.item())) < 1e-6
        assert two[rank]["counts"] == counts.numpy().tolist()
        np.testing.assert_allclose(two[rank]["gate"], one.deepspeed_moe.gate.wg.weight.grad.numpy(),
                                   rtol=1e-5, atol=1e-6)
        for i, e in enumerate(one.deepspeed_moe.experts.deepspeed_experts):
            for j, p in enumerate(e.parameters()):
                total[(i, j)] = total.get((i, j), 0) + p.grad.numpy()
        assert set(two[rank]["groups"]) == {"ep_size_2"}
    for rank in (0, 1):   # an expert's gradient: from both ranks' tokens that reached it
        for name, grads in two[rank]["grads"].items():
            i = int(name[len("expert"):])
            for j, g in enumerate(grads):
                np.testing.assert_allclose(g, total[(i, j)], rtol=1e-4, atol=1e-5, err_msg=name)


def test_capacity_drops_tokens_and_the_optimizer_helper_splits_groups():
    import tensorbrain as tb
    from tensorbrain.deepspeed.moe.sharded_moe import top1gating
    from tensorbrain.deepspeed.moe.utils import (
        is_moe_param, split_params_into_different_moe_groups_for_optimizer)
    logits = tb.tensor([[5.0, 0.0], [4.0, 0.0], [3.0, 0.0], [0.0, 1.0]])
    l_aux, combine, dispatch, counts = top1gating(logits, 0.5, 1, use_rts=False)
    assert counts.tolist() == [3, 1]           # counted before dropping
    assert combine.shape == (4, 2, 1)          # capacity ceil(4 / 2 * 0.5) = 1
    assert dispatch.numpy()[:, 0, 0].tolist() == [True, False, False, False]   # first token kept
    gates = np.exp([5.0, 4, 3, 0]) / (np.exp([5.0, 4, 3, 0]) + np.exp([0.0, 0, 0, 1]))
    me = np.array([gates.mean(), 1 - gates.mean()])
    assert abs(float(l_aux.item()) - 2 * (me * [0.75, 0.25]).sum()) < 1e-6
    moe = _moe(tb, 1, 1)
    params = list(moe.parameters())
    groups = split_params_into_different_moe_groups_for_optimizer(
        [{"params": params, "name": "main", "lr": 0.1, "weight_decay": 0.0}])
    assert [g["name"] for g in groups] == ["main", "ep_size_1"]
    assert groups[0]["params"] == [p for p in params if not is_moe_param(p)]
    assert groups[1]["moe"] and groups[1]["lr"] == 0.1 and len(groups[1]["params"]) == 4 * E
    tb.optim.AdamW(groups)                      # the groups an optimizer takes
