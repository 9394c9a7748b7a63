"""tb.ops.aten against torch.ops.aten: the same aten call (operator, overload, arguments in
aten's order) on the same values gives the same result; an operator outside the table refuses
by name."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.ops import ATEN

torch = pytest.importorskip("torch")
R = np.random.default_rng(0)
X = R.standard_normal((3, 4)).astype(np.float32)
Y = R.standard_normal((4, 2)).astype(np.float32)
Z = R.standard_normal((3, 4)).astype(np.float32)
S = R.standard_normal((3, 2)).astype(np.float32)

# (operator, overload, arguments: arrays become tensors of each library, lists of arrays too)
CASES = [
    ("_local_scalar_dense", "default", (np.array(2.5, np.float32),)),
    ("_to_copy", "default", (X,), {"dtype": "float64"}),
    ("_unsafe_view", "default", (X, [4, 3])), ("abs", "default", (X,)),
    ("add", "Tensor", (X, Z), {"alpha": 2}), ("add_", "Tensor", (X.copy(), Z)),
    ("addmm", "default", (S, X, Y), {"beta": 0.5, "alpha": 2}), ("alias", "default", (X,)),
    ("bmm", "default", (X[None], Y[None])), ("cat", "default", ([X, Z], 1)),
    ("clone", "default", (X,)), ("copy_", "default", (X.copy(), Z)), ("detach", "default", (X,)),
    ("div", "Tensor_mode", (X, Z), {"rounding_mode": "floor"}),
    ("embedding", "default", (X, np.array([2, 0, 1]))),
    ("exp", "default", (X,)), ("expand", "default", (X[:1], [3, 4])),
    ("gelu", "default", (X,)), ("gelu", "default", (X,), {"approximate": "tanh"}),
    ("gelu_backward", "default", (Z, X)),
    ("gelu_backward", "default", (Z, X), {"approximate": "tanh"}),
    ("is_same_size", "default", (X, Z)), ("lift_fresh", "default", (X,)),
    ("linear", "default", (X, Y.T, np.ones(2, np.float32))), ("log", "default", (np.abs(X),)),
    ("matmul", "default", (X, Y)), ("max", "default", (X,)), ("max", "dim", (X, 1)),
    ("mean", "dim", (X, [1], True)), ("mm", "default", (X, Y)), ("mul", "Tensor", (X, Z)),
    ("mul_", "Tensor", (X.copy(), Z)), ("neg", "default", (X,)),
    ("permute", "default", (X, [1, 0])), ("relu", "default", (X,)),
    ("reshape", "default", (X, [2, 6])), ("rsqrt", "default", (np.abs(X),)),
    ("select", "int", (X, 1, 2)), ("sigmoid", "default", (X,)), ("silu", "default", (X,)),
    ("silu_backward", "default", (Z, X)), ("slice", "Tensor", (X, 1, 1, 3)),
    ("softmax", "int", (X, 1)), ("split", "Tensor", (X, 2, 1)),
    ("split_with_sizes", "default", (X, [1, 3], 1)), ("sub", "Tensor", (X, Z), {"alpha": 3}),
    ("sum", "dim_IntList", (X, [0])), ("sym_size", "int", (X, 1)), ("t", "default", (X,)),
    ("tanh", "default", (X,)), ("threshold_backward", "default", (Z, X, 0.0)),
    ("topk", "default", (X, 2)), ("transpose", "int", (X, 0, 1)),
    ("unsqueeze", "default", (X, 0)), ("view", "default", (X, [12])),
    ("zeros_like", "default", (X,)), ("ones_like", "default", (X,), {"dtype": "float64"}),
]
UNINITIALISED = {"empty_like", "new_empty_strided"}   # compared by shape and dtype


def _conv(lib, a):
    if isinstance(a, np.ndarray):
        return lib.tensor(a)
    if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
        return [lib.tensor(x) for x in a]
    return a


def _np(v):
    if isinstance(v, (tuple, list)):
        return [_np(x) for x in v]
    if hasattr(v, "numpy"):
        return np.asarray(v.detach().numpy() if hasattr(v, "detach") else v.numpy())
    return v


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_matches_torch(case):
    name, overload, args = case[:3]
    kw = dict(case[3]) if len(case) > 3 else {}
    tkw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
    bkw = {k: getattr(tb, v) if k == "dtype" else v for k, v in kw.items()}
    want = getattr(getattr(torch.ops.aten, name), overload)(*[_conv(torch, a) for a in args],
                                                            **tkw)
    got = getattr(getattr(tb.ops.aten, name), overload)(*[_conv(tb, a) for a in args], **bkw)
    want, got = _np(want), _np(got)
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_every_table_entry_is_tested_and_handles_behave():
    assert {c[0] for c in CASES} | {"detach_"} | UNINITIALISED == set(ATEN)
    for got, want in ((tb.ops.aten.empty_like.default(tb.ones(2, 3), dtype=tb.float64),
                       torch.ops.aten.empty_like.default(torch.ones(2, 3), dtype=torch.float64)),
                      (tb.ops.aten.new_empty_strided.default(tb.ones(1), [2, 5], [5, 1]),
                       torch.ops.aten.new_empty_strided.default(torch.ones(1), [2, 5], [5, 1]))):
        assert tuple(got.shape) == tuple(want.shape)
        assert str(got.dtype) == str(want.dtype).split(".")[1]
    aten = tb.ops.aten
    assert aten.mm is aten.mm and aten.mm.default is aten.mm.default
    assert aten.mm.default.overloadpacket is aten.mm and aten.add.Tensor.name() == "aten::add.Tensor"
    assert {aten.mm: 1}[aten.mm] == 1
    x = tb.ones(2, requires_grad=True) * 1
    assert not aten.detach_(x).requires_grad
    with pytest.raises(NotImplementedError, match="torch.ops.aten._grouped_mm.default is not supported"):
        aten._grouped_mm.default(tb.ones(1))
    with pytest.raises(AttributeError, match="xformers::efficient_attention"):
        tb.ops.xformers.efficient_attention(tb.ones(1))   # unregistered: AttributeError, as torch
