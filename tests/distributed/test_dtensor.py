"""DTensor: layouts and layout changes checked against NumPy slicing across real processes."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.tensor import (DTensor, Partial, Replicate, Shard, distribute_tensor,
                                            init_device_mesh)

HERE = "tests.distributed.test_dtensor"


def _chunk(a, dim, n, i):
    """torch.chunk's i-th of n chunks (an empty one past the end), written out with NumPy."""
    c = -(-a.shape[dim] // n)
    sl = [slice(None)] * a.ndim
    sl[dim] = slice(min(i * c, a.shape[dim]), min((i + 1) * c, a.shape[dim]))
    return a[tuple(sl)]


def _full(shape):
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)


def _one_d(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    full = _full((7, 3))
    out = {}
    for dim in (0, 1):
        d = distribute_tensor(tb.tensor(full), mesh, [Shard(dim)])
        out[f"shard{dim}"] = [list(d.shape), d.to_local().numpy().tolist(),
                              d.full_tensor().numpy().tolist()]
    d = distribute_tensor(tb.tensor(full), mesh, [Shard(0)])
    out["s0_s1"] = d.redistribute(mesh, [Shard(1)]).to_local().numpy().tolist()
    out["s0_r"] = d.redistribute(mesh, [Replicate()]).to_local().numpy().tolist()
    out["r_s1"] = d.redistribute(mesh, [Replicate()]).redistribute(
        mesh, [Shard(1)]).to_local().numpy().tolist()
    # Partial: each rank holds (rank + 1) x full; the value is their sum
    p = DTensor.from_local(tb.tensor(full * (rank + 1)), mesh, [Partial()])
    out["partial"] = p.full_tensor().numpy().tolist()
    out["partial_s0"] = p.redistribute(mesh, [Shard(0)]).to_local().numpy().tolist()
    # uneven from_local needs the global shape
    local = _chunk(full, 0, world, rank)
    back = DTensor.from_local(tb.tensor(local), mesh, [Shard(0)], shape=(7, 3))
    out["from_local"] = back.full_tensor().numpy().tolist()
    # src_data_rank=0: rank 0's values win
    d = distribute_tensor(tb.tensor(full + rank), mesh, [Shard(0)])
    out["src0"] = d.full_tensor().numpy().tolist()
    return out


def test_1d_mesh_uneven_shards_follow_torch_chunk(workers):
    world = 3
    full = _full((7, 3))
    res = workers(f"{HERE}:_one_d", world)
    for rank, r in enumerate(res):
        for dim in (0, 1):
            shape, local, whole = r[f"shard{dim}"]
            assert shape == [7, 3]
            np.testing.assert_array_equal(np.array(local).reshape(_chunk(full, dim, world, rank)
                                                                  .shape),
                                          _chunk(full, dim, world, rank))
            np.testing.assert_array_equal(whole, full)
        np.testing.assert_array_equal(np.array(r["s0_s1"]).reshape(7, -1),
                                      _chunk(full, 1, world, rank))
        np.testing.assert_array_equal(r["s0_r"], full)
        np.testing.assert_array_equal(np.array(r["r_s1"]).reshape(7, -1),
                                      _chunk(full, 1, world, rank))
        np.testing.assert_allclose(r["partial"], full * 6)
        np.testing.assert_allclose(r["partial_s0"], _chunk(full * 6, 0, world, rank))
        np.testing.assert_array_equal(r["from_local"], full)
        np.testing.assert_array_equal(r["src0"], full)


def _two_d(rank, world):
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    full = _full((5, 6))
    out = {}
    for name, pl in (("s0s1", [Shard(0), Shard(1)]), ("s0s0", [Shard(0), Shard(0)]),
                     ("rs1", [Replicate(), Shard(1)])):
        d = distribute_tensor(tb.tensor(full), mesh, pl)
        out[name] = [d.to_local().numpy().tolist(), d.full_tensor().numpy().tolist()]
    d = distribute_tensor(tb.tensor(full), mesh, [Shard(0), Shard(1)])
    out["to_s1s0"] = d.redistribute(mesh, [Shard(1), Shard(0)]).to_local().numpy().tolist()
    out["sub"] = distribute_tensor(tb.tensor(full), mesh["tp"], [Shard(0)]).to_local().tolist()
    return out


def test_2d_mesh_nested_shards(workers):
    full = _full((5, 6))
    res = workers(f"{HERE}:_two_d", 4)
    for rank, r in enumerate(res):
        row, col = divmod(rank, 2)
        want = {"s0s1": _chunk(_chunk(full, 0, 2, row), 1, 2, col),
                "s0s0": _chunk(_chunk(full, 0, 2, row), 0, 2, col),   # torch's nested rule
                "rs1": _chunk(full, 1, 2, col)}
        for name, expect in want.items():
            local, whole = r[name]
            np.testing.assert_array_equal(np.array(local).reshape(expect.shape), expect)
            np.testing.assert_array_equal(whole, full)
        expect = _chunk(_chunk(full, 1, 2, row), 0, 2, col)
        np.testing.assert_array_equal(np.array(r["to_s1s0"]).reshape(expect.shape), expect)
        np.testing.assert_array_equal(np.array(r["sub"]).reshape(-1, 6), _chunk(full, 0, 2, col))


def _grads(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    full = tb.tensor(_full((5, 2)))
    w = tb.tensor(_full((5, 2)) * 0.5 + 1)
    x = distribute_tensor(full, mesh, [Shard(0)])
    x.requires_grad_()
    (x.full_tensor() * w).sum().backward()
    local = tb.tensor(_chunk(_full((5, 2)), 0, world, rank), requires_grad=True)
    y = DTensor.from_local(local, mesh, [Shard(0)], shape=(5, 2))
    (y.full_tensor() * w).sum().backward()
    return [type(x.grad).__name__, x.grad.placements == (Shard(0),),
            x.grad.to_local().numpy().tolist(), local.grad.numpy().tolist()]


def test_gradients_flow_back_to_shards(workers):
    w = _full((5, 2)) * 0.5 + 1
    for rank, (kind, same_layout, xg, lg) in enumerate(workers(f"{HERE}:_grads", 2)):
        expect = _chunk(w, 0, 2, rank)
        assert kind == "DTensor" and same_layout
        np.testing.assert_allclose(np.array(xg).reshape(expect.shape), expect)
        np.testing.assert_allclose(np.array(lg).reshape(expect.shape), expect)


@pytest.fixture
def solo():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,))
    dist.destroy_process_group()


def test_errors_and_metadata(solo):
    mesh = solo
    d = distribute_tensor(tb.ones(4, 6), mesh, [Shard(-1)])
    assert d.placements == (Shard(1),) and d.shape == (4, 6) and d.numel() == 24
    assert d.stride() == (6, 1) and d.device_mesh is mesh and len(d) == 4
    assert "placements=(Shard(dim=1),)" in repr(d)
    with pytest.raises(TypeError, match="cannot be constructed directly"):
        DTensor(tb.ones(2))
    with pytest.raises(ValueError, match="got 2 placements"):
        distribute_tensor(tb.ones(4), mesh, [Shard(0), Shard(0)])
    with pytest.raises(ValueError, match="out of range for a 1-D tensor"):
        distribute_tensor(tb.ones(4), mesh, [Shard(1)])
    with pytest.raises(ValueError, match=r"rank 0's local tensor has shape \(4,\)"):
        DTensor.from_local(tb.ones(4), mesh, [Shard(0)], shape=(5,))
    with pytest.raises(TypeError, match="must be a DeviceMesh"):
        distribute_tensor(tb.ones(4), "cpu", [Shard(0)])
    with pytest.raises(ValueError, match="reduce_op 'prod'"):
        Partial("prod")
    f = tb.distributed.tensor.full((3, 2), 7.0, device_mesh=mesh, placements=[Shard(0)])
    assert f.full_tensor().tolist() == [[7.0, 7.0]] * 3
    p = DTensor._as_parameter(d)
    assert isinstance(p, tb.nn.Parameter) and isinstance(p, DTensor) and p.requires_grad
    assert p.placements == d.placements and p._data is d._data
    m = tb.nn.Module()
    m.w = p
    assert [n for n, _ in m.named_parameters()] == ["w"]


def test_chunk_rule_matches_torch():
    torch = pytest.importorskip("torch")
    for size in range(0, 12):
        for n in range(1, 6):
            chunks = torch.arange(size).chunk(n) if size else []
            for i in range(n):
                start, stop = Shard.local_range(size, n, i)
                got = list(range(start, stop))
                assert got == (chunks[i].tolist() if i < len(chunks) else [])


def test_parameter_of_a_dtensor_is_a_dtensor(solo):
    d = distribute_tensor(tb.ones(4, 2), solo, [Shard(0)])
    p = tb.nn.Parameter(d)
    assert isinstance(p, DTensor) and isinstance(p, tb.nn.Parameter)
    assert p.placements == (Shard(0),) and p.shape == (4, 2)


def _norms(rank, world):
    from tensorbrain.distributed.tensor._factories import _total_norm
    mesh = init_device_mesh("cpu", (2, 2))
    a = tb.tensor(_full((5, 3)) - 7)
    b = tb.tensor(_full((4,)) * 0.5)
    da = distribute_tensor(a, mesh, [Shard(0), Shard(1)])
    db = distribute_tensor(b, mesh, [Replicate(), Shard(0)])
    plain = tb.tensor([3.0, -4.0])          # a local (replicated) tensor counts once per rank
    return [_total_norm([da, db, plain], 2.0), _total_norm([da, db, plain], float("inf")),
            _total_norm([da, db], 1.0)]


def test_total_norm_counts_every_shard_once(workers):
    a, b = _full((5, 3)) - 7, _full((4,)) * 0.5
    two = np.sqrt((a ** 2).sum() + (b ** 2).sum() + 25)
    one = np.abs(a).sum() + np.abs(b).sum()
    for n2, ninf, n1 in workers(f"{HERE}:_norms", 4):
        assert n2 == pytest.approx(two) and ninf == pytest.approx(7.0)
        assert n1 == pytest.approx(one)


def _strided(rank, world):
    from tensorbrain.distributed.tensor.placement_types import _StridedShard
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    full = _full((13, 3))
    d = distribute_tensor(tb.tensor(full), mesh, [_StridedShard(0, split_factor=2), Shard(0)])
    moved = d.redistribute(mesh, [Shard(0), Shard(1)])
    back = moved.redistribute(mesh, [_StridedShard(0, split_factor=2), Shard(0)])
    return {"local": d.to_local().numpy().tolist(), "full": d.full_tensor().numpy().tolist(),
            "moved": moved.to_local().numpy().tolist(), "back": back.to_local().numpy().tolist(),
            "eq": [Shard(0) == _StridedShard(0, 2), _StridedShard(0, 2) == Shard(0)]}


def test_strided_shard_is_a_tp_chunk_then_a_dp_chunk(workers):
    """(_StridedShard(0, sf=tp), Shard(0)) on (dp, tp): rank (d, t) holds chunk d of chunk t,
    the layout FSDP gives a ColwiseParallel weight (13 rows: uneven at both levels)."""
    full = _full((13, 3))
    for rank, r in enumerate(workers(f"{HERE}:_strided", 4)):
        d, t = divmod(rank, 2)
        expect = _chunk(_chunk(full, 0, 2, t), 0, 2, d)
        np.testing.assert_array_equal(np.array(r["local"]).reshape(expect.shape), expect)
        np.testing.assert_array_equal(np.array(r["back"]).reshape(expect.shape), expect)
        np.testing.assert_array_equal(r["full"], full)
        moved = _chunk(_chunk(full, 0, 2, d), 1, 2, t)
        np.testing.assert_array_equal(np.array(r["moved"]).reshape(moved.shape), moved)
        assert r["eq"] == [False, False]


def _reductions(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    full = _full((6, 4))
    s0 = distribute_tensor(tb.tensor(full), mesh, [Shard(0)])
    rep = distribute_tensor(tb.tensor(full), mesh, [Replicate()])
    refused = {}
    for name, call in [("sum", lambda: s0.sum()), ("norm", lambda: s0.norm()),
                       ("mean0", lambda: s0.mean(dim=0)), ("amax", lambda: s0.amax((0, 1))),
                       ("max", lambda: s0.max()), ("grad_norm", lambda: _grad_of(s0).norm())]:
        try:
            call()
            refused[name] = None
        except NotImplementedError as e:
            refused[name] = str(e)
    return {"refused": refused,
            "sum_dim1": s0.sum(dim=1).to_local().numpy().tolist(),   # not over the sharded dim
            "sum_dim1_pl": repr(s0.sum(dim=1).placements),
            "max_other": s0.max(s0 * 0.5).to_local().numpy().tolist(),   # elementwise
            "rep_sum": float(rep.sum().item()), "rep_norm": float(rep.norm().item()),
            "full_sum": float(s0.full_tensor().sum().item())}


def _grad_of(d):
    """A leaf DTensor's gradient (a DTensor of the same layout) after a backward."""
    leaf = DTensor.from_local(d.to_local().detach(), d.device_mesh, d.placements)
    leaf.requires_grad_(True)
    (leaf.to_local() * 2).sum().backward()
    return leaf.grad


def test_reductions_over_a_sharded_dim_raise_instead_of_reading_the_shard(workers):
    full = _full((6, 4))
    for rank, r in enumerate(workers(f"{HERE}:_reductions", 2)):
        for name, msg in r["refused"].items():
            assert msg is not None and "full_tensor()" in msg, name
        assert "DTensor.sum()" in r["refused"]["sum"]
        mine = _chunk(full, 0, 2, rank)
        np.testing.assert_allclose(r["sum_dim1"], mine.sum(axis=1))
        np.testing.assert_allclose(r["max_other"], np.maximum(mine, mine * 0.5))
        assert r["sum_dim1_pl"] == "(Shard(dim=0),)"
        np.testing.assert_allclose(r["rep_sum"], full.sum())
        np.testing.assert_allclose(r["rep_norm"], np.linalg.norm(full))
        np.testing.assert_allclose(r["full_sum"], full.sum())


def _outcome(call):
    """(kind, placements, full value or error message) of ``call()``: kind is "dtensor",
    "tensor" or the exception's class name."""
    try:
        out = call()
    except (NotImplementedError, ValueError) as e:
        return [type(e).__name__, None, str(e)]
    if isinstance(out, DTensor):
        return ["dtensor", repr(out.placements), out.full_tensor().numpy().tolist()]
    return ["tensor", None, out.numpy().tolist()]


def _pos():
    return _full((6, 4)) / 4 + 0.5


# Each entry: (name, op on DTensors (and tb), op on the NumPy full array).
_POINTWISE = [
    ("neg", lambda x: -x, lambda a: -a), ("abs", lambda x: (x - 3).abs(), lambda a: abs(a - 3)),
    ("exp", lambda x: x.exp(), np.exp), ("tb.exp", lambda x: tb.exp(x), np.exp),
    ("log", lambda x: x.log(), np.log), ("sqrt", lambda x: x.sqrt(), np.sqrt),
    ("square", lambda x: x ** 2, lambda a: a ** 2), ("pow", lambda x: x.pow(3), lambda a: a ** 3),
    ("mul", lambda x: x * 2.5, lambda a: a * 2.5), ("rsub", lambda x: 3.0 - x, lambda a: 3 - a),
    ("div", lambda x: x / 4, lambda a: a / 4),
    ("clamp", lambda x: x.clamp(1.0, 3.0), lambda a: np.clip(a, 1.0, 3.0)),
    ("relu", lambda x: (x - 2).relu(), lambda a: np.maximum(a - 2, 0)),
    ("sigmoid", lambda x: x.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    ("tanh", lambda x: x.tanh(), np.tanh), ("x+x", lambda x: x + x * x, lambda a: a + a * a),
    ("maximum", lambda x: tb.maximum(x, 3.0 - x), lambda a: np.maximum(a, 3 - a)),
    ("gt", lambda x: (x > 2).float(), lambda a: (a > 2).astype(np.float64)),
    ("softmax_dim1", lambda x: tb.softmax(x, dim=1),
     lambda a: np.exp(a) / np.exp(a).sum(axis=1, keepdims=True)),
    ("sum_dim1", lambda x: (x ** 2).sum(dim=1), lambda a: (a ** 2).sum(axis=1)),
]


def _layout_ops(rank, world):
    mesh = init_device_mesh("cpu", (world,))
    full = _pos()
    out = {}
    for pl in (Shard(0), Replicate()):
        d = distribute_tensor(tb.tensor(full), mesh, [pl])
        out[repr(pl)] = {name: _outcome(lambda: f(d)) for name, f, _ in _POINTWISE}
    s0 = distribute_tensor(tb.tensor(full), mesh, [Shard(0)])
    s1 = distribute_tensor(tb.tensor(full), mesh, [Shard(1)])
    rep = distribute_tensor(tb.tensor(full), mesh, [Replicate()])
    w = tb.tensor(np.ones((4, 2)))
    out["refused"] = {name: _outcome(call) for name, call in [
        ("square_sum", lambda: (s0 ** 2).sum()), ("data_norm", lambda: s0.data.norm()),
        ("tb_norm", lambda: tb.norm(s0)), ("grad_square_sum", lambda: (_grad_of(s0) ** 2).sum()),
        ("matmul_plain", lambda: s0 @ w), ("index", lambda: s0[0]),
        ("flatten_shard1", lambda: s1.view(-1)), ("softmax_sharded", lambda: tb.softmax(s0, 0)),
        ("plus_plain", lambda: s0 + tb.tensor(full)), ("mixed_layouts", lambda: s0 + s1),
        ("tb_sum", lambda: tb.sum(s0 * 2))]}
    part = DTensor.from_local(tb.tensor(full * (rank + 1)), mesh, [Partial()])
    out["partial"] = {"mul": _outcome(lambda: part * 2.0), "neg": _outcome(lambda: -part),
                      "add": _outcome(lambda: part + part), "exp": _outcome(lambda: part.exp()),
                      "add_scalar": _outcome(lambda: part + 1.0)}
    out["kept"] = {name: _outcome(call) for name, call in [
        ("data", lambda: s0.data), ("clone", lambda: s1.clone()), ("detach", lambda: s0.detach()),
        ("zeros_like", lambda: tb.zeros_like(s0)), ("ones_like", lambda: tb.ones_like(s1)),
        ("full_like", lambda: tb.full_like(s0, 7.0)), ("empty_like_shape",
                                                       lambda: tb.empty_like(s0) * 0),
        ("rep_matmul_plain", lambda: rep @ w), ("view_split", lambda: s1.view(6, -1, 2)),
        ("view_flatten", lambda: s0.reshape(-1)), ("transpose", lambda: s0.transpose(0, 1)),
        ("batched_matmul", lambda: s0.view(2, 3, 4) @ s0.view(2, 3, 4).transpose(1, 2))]}
    r = tb.rand_like(rep)
    out["rand"] = [type(r).__name__, repr(r.placements), r.to_local().numpy().tolist(),
                   type(tb.randn_like(s0)).__name__, list(tb.randn_like(s0).shape)]
    x = DTensor.from_local(tb.tensor(_chunk(full, 0, world, rank)), mesh, [Shard(0)])
    x.requires_grad_(True)
    ((x * x * 3 + 1).to_local() * 1.0).sum().backward()   # d/dx of the local sum: 6x
    out["grad"] = _outcome(lambda: x.grad)
    return out


def test_pointwise_ops_keep_the_layout_and_other_ops_refuse_the_shard(workers):
    full = _pos()
    res = workers(f"{HERE}:_layout_ops", 2)
    for r in res:
        for pl in ("Shard(dim=0)", "Replicate()"):
            for name, _, ref in _POINTWISE:
                kind, placements, value = r[pl][name]
                if pl == "Replicate()" and name == "sum_dim1":
                    assert kind == "tensor"   # replicated reductions: a plain (global) Tensor
                else:
                    assert kind == "dtensor", (pl, name, value)
                    want = "(Shard(dim=0),)" if pl != "Replicate()" else "(Replicate(),)"
                    assert placements == want, (pl, name)
                np.testing.assert_allclose(value, ref(full), rtol=1e-12, err_msg=name)
        for name, (kind, _, msg) in r["refused"].items():
            assert kind in ("NotImplementedError", "ValueError"), (name, kind, msg)
            assert "full_tensor()" in msg or "DTensor" in msg, name
        assert r["refused"]["square_sum"][0] == "NotImplementedError"
        assert r["refused"]["plus_plain"][0] == "ValueError"
        assert r["refused"]["mixed_layouts"][0] == "ValueError"
        p = r["partial"]
        np.testing.assert_allclose(p["mul"][2], full * 3 * 2.0)
        np.testing.assert_allclose(p["neg"][2], -full * 3)
        np.testing.assert_allclose(p["add"][2], full * 6)
        assert p["mul"][1] == "(Partial(sum),)" or "Partial" in p["mul"][1]
        assert p["exp"][0] == "NotImplementedError" and p["add_scalar"][0] == "NotImplementedError"
        k = r["kept"]
        for name, want_pl, ref in [
                ("data", "(Shard(dim=0),)", full), ("clone", "(Shard(dim=1),)", full),
                ("detach", "(Shard(dim=0),)", full), ("zeros_like", "(Shard(dim=0),)", 0 * full),
                ("ones_like", "(Shard(dim=1),)", 0 * full + 1),
                ("full_like", "(Shard(dim=0),)", 0 * full + 7),
                ("empty_like_shape", "(Shard(dim=0),)", 0 * full),
                ("view_split", "(Shard(dim=1),)", full.reshape(6, 2, 2)),
                ("view_flatten", "(Shard(dim=0),)", full.reshape(-1)),
                ("transpose", "(Shard(dim=1),)", full.T),
                ("batched_matmul", "(Shard(dim=0),)",
                 full.reshape(2, 3, 4) @ full.reshape(2, 3, 4).transpose(0, 2, 1))]:
            assert k[name][:2] == ["dtensor", want_pl], (name, k[name])
            np.testing.assert_allclose(k[name][2], ref, err_msg=name)
        assert k["rep_matmul_plain"][0] == "tensor"   # replicated: the local value is global
        np.testing.assert_allclose(k["rep_matmul_plain"][2], full @ np.ones((4, 2)))
        assert r["rand"][:2] == ["DTensor", "(Replicate(),)"] and r["rand"][3] == "DTensor"
        assert r["rand"][4] == [6, 4]
        assert r["grad"][:2] == ["dtensor", "(Shard(dim=0),)"]
        np.testing.assert_allclose(r["grad"][2], 6 * full)
    assert res[0]["rand"][2] == res[1]["rand"][2]    # replicated copies agree
