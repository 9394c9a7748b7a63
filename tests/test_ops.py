"""Every op: forward against NumPy, gradient against float64 finite differences, and both against
torch when it is installed (tensorbrain.testing.gradcheck). Hypothesis drives broadcasting."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tensorbrain as tb
from tensorbrain.testing import gradcheck

try:
    import torch
except ImportError:  # CI: the torch half of each check is skipped, the rest runs
    torch = None

rng = np.random.default_rng(0)


def T(fn):
    """A torch reference when torch is installed, else None."""
    return fn if torch is not None else None


def pos(*shape):
    return rng.random(shape) + 0.5


def any_(*shape):
    return rng.standard_normal(shape)


def distinct(*shape):
    """Values with no ties (max/min/sort gradients are ambiguous at ties)."""
    return rng.permutation(np.prod(shape)).reshape(shape) / 7.0 - 0.93   # never 0


def away(*shape):
    """Values away from the kinks of abs/relu/clamp (finite differences break at a kink)."""
    x = rng.standard_normal(shape)
    return np.where(np.abs(x) < 0.05, 0.3, x)


# (name, tb fn, numpy fn, torch fn, inputs)
UNARY = [
    ("neg", lambda a: -a, lambda a: -a, T(lambda a: -a), [any_(3, 4)]),
    ("exp", tb.exp, np.exp, T(lambda a: a.exp()), [any_(3, 4)]),
    ("log", tb.log, np.log, T(lambda a: a.log()), [pos(3, 4)]),
    ("sqrt", tb.sqrt, np.sqrt, T(lambda a: a.sqrt()), [pos(3, 4)]),
    ("rsqrt", tb.rsqrt, lambda a: 1 / np.sqrt(a), T(lambda a: a.rsqrt()), [pos(3, 4)]),
    ("abs", tb.abs, np.abs, T(lambda a: a.abs()), [away(3, 4)]),
    ("sin", tb.sin, np.sin, T(lambda a: a.sin()), [any_(3, 4)]),
    ("cos", tb.cos, np.cos, T(lambda a: a.cos()), [any_(3, 4)]),
    ("sigmoid", tb.sigmoid, lambda a: 1 / (1 + np.exp(-a)), T(lambda a: a.sigmoid()), [any_(3, 4) * 5]),
    ("tanh", tb.tanh, np.tanh, T(lambda a: a.tanh()), [any_(3, 4)]),
    ("relu", tb.relu, lambda a: np.maximum(a, 0), T(lambda a: a.relu()), [away(3, 4)]),
    ("gelu", tb.gelu, None, T(lambda a: torch.nn.functional.gelu(a)), [any_(3, 4)]),
    ("silu", tb.silu, lambda a: a / (1 + np.exp(-a)), T(lambda a: torch.nn.functional.silu(a)), [any_(3, 4)]),
    ("log1p", tb.log1p, np.log1p, T(lambda a: a.log1p()), [pos(3, 4)]),
    ("expm1", tb.expm1, np.expm1, T(lambda a: a.expm1()), [any_(3, 4)]),
    ("erf", tb.erf, None, T(lambda a: a.erf()), [any_(3, 4)]),
    ("square", tb.square, np.square, T(lambda a: a.square()), [any_(3, 4)]),
    ("reciprocal", tb.reciprocal, np.reciprocal, T(lambda a: a.reciprocal()), [pos(3, 4)]),
    ("clamp", lambda a: tb.clamp(a, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5),
     T(lambda a: a.clamp(-0.5, 0.5)), [np.where(np.abs(np.abs(away(3, 4)) - 0.5) < 0.05, 0.1, away(3, 4))]),
    ("clamp_min", lambda a: a.clamp(min=0.1), lambda a: np.maximum(a, 0.1), T(lambda a: a.clamp(min=0.1)),
     [away(3, 4) + 0.1]),
    ("pow2", lambda a: a ** 2, lambda a: a ** 2, T(lambda a: a ** 2), [any_(3, 4)]),
    ("pow_frac", lambda a: a ** 1.5, lambda a: a ** 1.5, T(lambda a: a ** 1.5), [pos(3, 4)]),
    ("rpow", lambda a: 2.0 ** a, lambda a: 2.0 ** a, T(lambda a: 2.0 ** a), [any_(3, 4)]),
    ("rsub", lambda a: 1.0 - a, lambda a: 1.0 - a, T(lambda a: 1.0 - a), [any_(3, 4)]),
    ("rdiv", lambda a: 1.0 / a, lambda a: 1.0 / a, T(lambda a: 1.0 / a), [pos(3, 4)]),
    ("masked_fill", lambda a: a.masked_fill(tb.tensor([True, False, True, False]), 2.0),
     lambda a: np.where([True, False, True, False], 2.0, a),
     T(lambda a: a.masked_fill(torch.tensor([True, False, True, False]), 2.0)), [any_(3, 4)]),
]

BINARY = [
    ("add", lambda a, b: a + b, np.add, T(lambda a, b: a + b)),
    ("sub", lambda a, b: a - b, np.subtract, T(lambda a, b: a - b)),
    ("mul", lambda a, b: a * b, np.multiply, T(lambda a, b: a * b)),
    ("div", lambda a, b: a / b, np.divide, T(lambda a, b: a / b)),
    ("pow", lambda a, b: a ** b, np.power, T(lambda a, b: a ** b)),
    ("maximum", tb.maximum, np.maximum, T(torch.maximum if torch else None)),
    ("minimum", tb.minimum, np.minimum, T(torch.minimum if torch else None)),
    ("add_alpha", lambda a, b: tb.add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b,
     T(lambda a, b: torch.add(a, b, alpha=2.5))),
]

REDUCE = [
    ("sum", lambda a: a.sum(), np.sum, T(lambda a: a.sum())),
    ("sum_dim", lambda a: a.sum(1), lambda a: a.sum(1), T(lambda a: a.sum(1))),
    ("sum_dims_keep", lambda a: a.sum((0, 2), keepdim=True), lambda a: a.sum((0, 2), keepdims=True),
     T(lambda a: a.sum((0, 2), keepdim=True))),
    ("mean", lambda a: a.mean(), np.mean, T(lambda a: a.mean())),
    ("mean_dim", lambda a: a.mean(-1, keepdim=True), lambda a: a.mean(-1, keepdims=True),
     T(lambda a: a.mean(-1, keepdim=True))),
    ("max", lambda a: a.max(), np.max, T(lambda a: a.max())),
    ("max_dim", lambda a: a.max(1).values, lambda a: a.max(1), T(lambda a: a.max(1).values)),
    ("min_dim_keep", lambda a: a.min(0, keepdim=True)[0], lambda a: a.min(0, keepdims=True),
     T(lambda a: a.min(0, keepdim=True)[0])),
    ("amax", lambda a: a.amax((1, 2)), lambda a: a.max((1, 2)), T(lambda a: a.amax((1, 2)))),
    ("var", lambda a: a.var(1), lambda a: a.var(1, ddof=1), T(lambda a: a.var(1))),
    ("var_biased", lambda a: a.var(unbiased=False), lambda a: a.var(), T(lambda a: a.var(unbiased=False))),
    ("std", lambda a: a.std(-1, keepdim=True), lambda a: a.std(-1, ddof=1, keepdims=True),
     T(lambda a: a.std(-1, keepdim=True))),
    ("logsumexp", lambda a: a.logsumexp(1), lambda a: np.log(np.exp(a).sum(1)), T(lambda a: a.logsumexp(1))),
    ("prod", lambda a: a.prod(2), lambda a: a.prod(2), T(lambda a: a.prod(2))),
    ("cumsum", lambda a: a.cumsum(1), lambda a: a.cumsum(1), T(lambda a: a.cumsum(1))),
    ("norm", lambda a: a.norm(), np.linalg.norm, T(lambda a: a.norm())),
    ("norm_dim", lambda a: a.norm(p=1, dim=1), lambda a: np.abs(a).sum(1),
     T(lambda a: torch.linalg.vector_norm(a, 1, dim=1))),
]

SHAPE = [
    ("reshape", lambda a: a.reshape(4, -1), lambda a: a.reshape(4, -1), T(lambda a: a.reshape(4, -1))),
    ("view", lambda a: a.view(6, 4), lambda a: a.reshape(6, 4), T(lambda a: a.view(6, 4))),
    ("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), T(lambda a: a.permute(2, 0, 1))),
    ("transpose", lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2), T(lambda a: a.transpose(0, 2))),
    ("T2d", lambda a: a.sum(0).T, lambda a: a.sum(0).T, T(lambda a: a.sum(0).T)),
    ("squeeze_unsqueeze", lambda a: a.unsqueeze(1).squeeze(1), lambda a: a, T(lambda a: a.unsqueeze(1).squeeze(1))),
    ("unsqueeze_neg", lambda a: a.unsqueeze(-1), lambda a: a[..., None], T(lambda a: a.unsqueeze(-1))),
    ("expand", lambda a: a[:, :1].expand(2, 5, 4), lambda a: np.broadcast_to(a[:, :1], (2, 5, 4)),
     T(lambda a: a[:, :1].expand(2, 5, 4))),
    ("flatten", lambda a: a.flatten(1), lambda a: a.reshape(2, -1), T(lambda a: a.flatten(1))),
    ("contiguous", lambda a: a.transpose(0, 1).contiguous(), lambda a: a.swapaxes(0, 1),
     T(lambda a: a.transpose(0, 1).contiguous())),
    ("slice", lambda a: a[1, 1:3, ::2], lambda a: a[1, 1:3, ::2], T(lambda a: a[1, 1:3, ::2])),
    ("ellipsis_none", lambda a: a[..., None, 0], lambda a: a[..., None, 0], T(lambda a: a[..., None, 0])),
    ("int_array_repeats", lambda a: a[tb.tensor([0, 1, 0, 0])], lambda a: a[[0, 1, 0, 0]],
     T(lambda a: a[torch.tensor([0, 1, 0, 0])])),
    ("int_array_2d", lambda a: a[tb.tensor([1, 1]), :, tb.tensor([3, 3])], lambda a: a[[1, 1], :, [3, 3]],
     T(lambda a: a[torch.tensor([1, 1]), :, torch.tensor([3, 3])])),
    ("bool_mask", lambda a: a[tb.tensor(a.detach().numpy() > 0)], lambda a: a[a > 0],
     T(lambda a: a[a.detach() > 0])),
    ("narrow", lambda a: a.narrow(2, 1, 2), lambda a: a[:, :, 1:3], T(lambda a: a.narrow(2, 1, 2))),
    ("split", lambda a: a.split(1, 1), lambda a: tuple(np.split(a, 3, 1)), T(lambda a: a.split(1, 1))),
    ("chunk", lambda a: a.chunk(2, 2), lambda a: tuple(np.split(a, 2, 2)), T(lambda a: a.chunk(2, 2))),
    ("gather", lambda a: a.gather(2, tb.tensor(np.array([[[0, 0], [3, 1], [2, 2]]] * 2))),
     lambda a: np.take_along_axis(a, np.array([[[0, 0], [3, 1], [2, 2]]] * 2), 2),
     T(lambda a: a.gather(2, torch.tensor(np.array([[[0, 0], [3, 1], [2, 2]]] * 2))))),
    ("index_select", lambda a: a.index_select(2, tb.tensor([3, 0, 3])), lambda a: a[:, :, [3, 0, 3]],
     T(lambda a: a.index_select(2, torch.tensor([3, 0, 3])))),
    ("tril", lambda a: a.tril(), lambda a: np.tril(a), T(lambda a: a.tril())),
    ("triu", lambda a: a.triu(1), lambda a: np.triu(a, 1), T(lambda a: a.triu(1))),
    ("repeat", lambda a: a.repeat(2, 1, 1, 2), lambda a: np.tile(a, (2, 1, 1, 2)), T(lambda a: a.repeat(2, 1, 1, 2))),
    ("flip", lambda a: a.flip((0, 2)), lambda a: np.flip(a, (0, 2)), T(lambda a: a.flip((0, 2)))),
    ("sort", lambda a: a.sort(2, descending=True).values, lambda a: -np.sort(-a, 2),
     T(lambda a: a.sort(2, descending=True).values)),
    ("topk", lambda a: a.topk(2, dim=1).values, lambda a: -np.sort(-a, 1)[:, :2],
     T(lambda a: a.topk(2, dim=1).values)),
]


@pytest.mark.parametrize("name,fn,ref,tfn,inputs", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, ref, tfn, inputs):
    gradcheck(fn, inputs, numpy_fn=ref, torch_fn=tfn)


@pytest.mark.parametrize("name,fn,ref,tfn", BINARY, ids=[b[0] for b in BINARY])
def test_binary(name, fn, ref, tfn):
    a, b = (pos(3, 4), pos(3, 4)) if name == "pow" else (distinct(3, 4), distinct(3, 4)[::-1].copy())
    gradcheck(fn, [a, b], numpy_fn=ref, torch_fn=tfn)


@pytest.mark.parametrize("name,fn,ref,tfn", REDUCE, ids=[r[0] for r in REDUCE])
def test_reduce(name, fn, ref, tfn):
    a = distinct(2, 3, 4) if name != "prod" else pos(2, 3, 4)
    gradcheck(fn, [a], numpy_fn=ref, torch_fn=tfn)


@pytest.mark.parametrize("name,fn,ref,tfn", SHAPE, ids=[s[0] for s in SHAPE])
def test_shape_and_indexing(name, fn, ref, tfn):
    gradcheck(fn, [distinct(2, 3, 4)], numpy_fn=ref, torch_fn=tfn)


def test_join_ops():
    a, b = any_(2, 3), any_(2, 3)
    gradcheck(lambda a, b: tb.cat([a, b], 1), [a, b], numpy_fn=lambda a, b: np.concatenate([a, b], 1),
              torch_fn=T(lambda a, b: torch.cat([a, b], 1)))
    gradcheck(lambda a, b: tb.stack([a, b], -1), [a, b], numpy_fn=lambda a, b: np.stack([a, b], -1),
              torch_fn=T(lambda a, b: torch.stack([a, b], -1)))
    c = np.array([[True, False, True], [False, False, True]])
    gradcheck(lambda a, b: tb.where(tb.tensor(c), a, b), [a, b], numpy_fn=lambda a, b: np.where(c, a, b),
              torch_fn=T(lambda a, b: torch.where(torch.tensor(c), a, b)))
    gradcheck(lambda a: tb.where(tb.tensor(c), a, 0.0), [a], numpy_fn=lambda a: np.where(c, a, 0.0))


MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                 ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul_batched_and_broadcast(sa, sb):
    gradcheck(lambda a, b: a @ b, [any_(*sa), any_(*sb)], numpy_fn=np.matmul,
              torch_fn=T(lambda a, b: a @ b))


def test_dot_outer_bmm():
    a, b = any_(4), any_(3)
    gradcheck(tb.outer, [a, b], numpy_fn=np.outer, torch_fn=T(torch.outer if torch else None))
    gradcheck(tb.dot, [a, any_(4)], numpy_fn=np.dot, torch_fn=T(torch.dot if torch else None))
    gradcheck(tb.bmm, [any_(2, 3, 4), any_(2, 4, 2)], numpy_fn=np.matmul)


# ***** broadcasting, by hypothesis *****
@settings(max_examples=40, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       op=st.sampled_from(["add", "sub", "mul", "div", "maximum"]))
def test_broadcasting_is_undone_in_gradients(shapes, op):
    sa, sb = shapes.input_shapes
    fn, ref = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
               "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
               "maximum": (tb.maximum, np.maximum)}[op]
    r = np.random.default_rng(len(sa) * 10 + len(sb))
    a = r.random(sa) + 1.0
    b = r.random(sb) + 2.5   # keeps maximum away from ties
    gradcheck(fn, [np.asarray(a), np.asarray(b)], numpy_fn=ref)


@settings(max_examples=30, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), data=st.data())
def test_reductions_over_any_dims(shape, data):
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1))
    keep = data.draw(st.booleans())
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    gradcheck(lambda a: a.sum(tuple(dims), keepdim=keep), [x],
              numpy_fn=lambda a: a.sum(tuple(dims), keepdims=keep))
    gradcheck(lambda a: a.mean(tuple(dims), keepdim=keep), [x],
              numpy_fn=lambda a: a.mean(tuple(dims), keepdims=keep))


def test_float32_forward_matches_numpy_float32():
    a, b = any_(5, 6).astype(np.float32), any_(6, 3).astype(np.float32)
    out = (tb.from_numpy(a) @ tb.from_numpy(b)).exp().sum(1)
    assert out.dtype == tb.float32
    np.testing.assert_allclose(out.numpy(), np.exp(a @ b).sum(1), rtol=1e-5)


# ***** the same checks on CuPy *****
@pytest.mark.gpu
@pytest.mark.parametrize("name,fn,ref,tfn,inputs", UNARY[:12], ids=[u[0] for u in UNARY[:12]])
def test_unary_gpu(name, fn, ref, tfn, inputs):
    gradcheck(fn, inputs, numpy_fn=ref, device="cuda")


# Table entries whose index tensors are built on the host are left out on the GPU (a CuPy array
# indexed by a host tensor is a device mix, an error by design); test_gpu_indexing covers them.
_HOST_INDEXED = {"int_array_repeats", "int_array_2d", "bool_mask", "gather", "index_select"}
_GPU_CASES = [c for c in BINARY + REDUCE + SHAPE if c[0] not in _HOST_INDEXED]


@pytest.mark.gpu
@pytest.mark.parametrize("name,fn,ref,tfn", _GPU_CASES, ids=[c[0] for c in _GPU_CASES])
def test_binary_reduce_shape_gpu(name, fn, ref, tfn):
    if name in [b[0] for b in BINARY]:
        args = [pos(3, 4), pos(3, 4)] if name == "pow" else [distinct(3, 4), distinct(3, 4)[::-1].copy()]
    else:
        args = [distinct(2, 3, 4) if name != "prod" else pos(2, 3, 4)]
    gradcheck(fn, args, numpy_fn=ref, device="cuda")


@pytest.mark.gpu
def test_gpu_indexing_with_device_index_tensors():
    a = distinct(2, 3, 4)
    i = tb.tensor([0, 1, 0, 0], device="cuda")
    gradcheck(lambda x: x[i], [a], numpy_fn=lambda x: x[[0, 1, 0, 0]], device="cuda")
    j = tb.tensor(np.array([[[0, 0], [3, 1], [2, 2]]] * 2), device="cuda")
    gradcheck(lambda x: x.gather(2, j), [a], device="cuda",
              numpy_fn=lambda x: np.take_along_axis(x, np.array([[[0, 0], [3, 1], [2, 2]]] * 2), 2))


@settings(max_examples=30, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), data=st.data())
def test_basic_and_integer_indexing_reads_are_differentiable(shape, data):
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    idx = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    gradcheck(lambda a: a[idx], [x], numpy_fn=lambda a: a[idx])
    rows = data.draw(st.lists(st.integers(-shape[0], shape[0] - 1), min_size=1, max_size=5))
    gradcheck(lambda a: a[tb.tensor(rows)], [x], numpy_fn=lambda a: a[rows])   # repeats add up
