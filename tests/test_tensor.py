"""Tensor: creation, dtypes and promotion, devices, conversions, indexing, in-place ops, errors."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorbrain as tb

try:
    import torch
except ImportError:
    torch = None


# ***** creation *****
def test_defaults_follow_torch_float32_and_int64():
    assert tb.tensor(1.5).dtype == tb.float32
    assert tb.tensor(3).dtype == tb.int64
    assert tb.tensor([1, 2.5]).dtype == tb.float32
    assert tb.tensor(True).dtype == tb.bool
    assert tb.tensor(np.arange(3, dtype=np.float64)).dtype == tb.float64   # arrays keep their dtype
    assert tb.zeros(2).dtype == tb.ones(2).dtype == tb.empty(2).dtype == tb.float32
    assert tb.full((2,), 3).dtype == tb.int64 and tb.full((2,), 3.0).dtype == tb.float32
    assert tb.arange(5).dtype == tb.int64 and tb.arange(0, 1, 0.25).dtype == tb.float32
    assert tb.rand(2).dtype == tb.randn(2).dtype == tb.eye(2).dtype == tb.float32
    assert tb.randint(0, 5, (3,)).dtype == tb.int64
    assert tb.float32 is np.dtype("float32")


def test_creation_functions_match_numpy():
    np.testing.assert_array_equal(tb.zeros(2, 3).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(tb.ones((2, 3)).numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(tb.full((2, 2), 7.0).numpy(), np.full((2, 2), 7.0))
    np.testing.assert_array_equal(tb.arange(1, 10, 3).numpy(), np.arange(1, 10, 3))
    np.testing.assert_allclose(tb.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    np.testing.assert_array_equal(tb.eye(3, 2).numpy(), np.eye(3, 2))
    x = tb.tensor([[1, 2], [3, 4]], dtype=tb.int32)
    for like, fill in ((tb.zeros_like, 0), (tb.ones_like, 1)):
        y = like(x)
        assert y.dtype == tb.int32 and y.shape == (2, 2) and (y.numpy() == fill).all()
    assert tb.full_like(x, 5).numpy().tolist() == [[5, 5], [5, 5]]
    assert tb.empty_like(x).shape == (2, 2) and tb.rand_like(tb.ones(3)).shape == (3,)
    assert tb.randn_like(tb.ones(2, 2)).dtype == tb.float32
    assert x.new_zeros(3).dtype == tb.int32 and x.new_ones((1, 2)).shape == (1, 2)
    assert x.new_tensor([1.0]).dtype == tb.int32 and x.new_full((2,), 9).tolist() == [9, 9]


def test_tensor_copies_but_from_numpy_shares():
    a = np.zeros(3, dtype=np.float32)
    t, s = tb.tensor(a), tb.from_numpy(a)
    a[0] = 1.0
    assert t.numpy()[0] == 0.0 and s.numpy()[0] == 1.0
    with pytest.raises(TypeError, match="numpy.ndarray"):
        tb.from_numpy([1, 2])


def test_manual_seed_reproduces_random_tensors():
    tb.manual_seed(7)
    a = (tb.rand(5), tb.randn(5), tb.randint(0, 100, (5,)), tb.randperm(5))
    tb.manual_seed(7)
    b = (tb.rand(5), tb.randn(5), tb.randint(0, 100, (5,)), tb.randperm(5))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    g = tb.Generator().manual_seed(1)
    assert tb.rand(3, generator=g).tolist() == tb.rand(3, generator=tb.Generator().manual_seed(1)).tolist()
    r = tb.rand(10_000).numpy()
    assert 0 <= r.min() and r.max() < 1 and abs(r.mean() - 0.5) < 0.02


# ***** dtypes and promotion *****
PROMOTION = [  # (a dtype or python value, b dtype or python value, expected)
    ("float32", "float64", "float64"), ("int32", "int64", "int64"), ("uint8", "int32", "int32"),
    ("bool", "int32", "int32"), ("float16", "float32", "float32"), ("int64", "float32", "float32"),
    ("float32", 2.0, "float32"), ("float16", 3, "float16"), ("int32", 3, "int32"),
    ("bool", 1, "int64"), ("int64", 1.5, "float32"), ("uint8", 2.5, "float32"),
]


@pytest.mark.parametrize("a,b,want", PROMOTION, ids=str)
def test_promotion_is_numpys_weak_scalar_rule_with_torch_defaults(a, b, want):
    ta = tb.ones(2, dtype=a)
    tbb = tb.ones(2, dtype=b) if isinstance(b, str) else b
    assert (ta + tbb).dtype == np.dtype(want)
    assert (tbb * ta).dtype == np.dtype(want)
    if torch is not None:   # the same answer as torch
        tta = torch.ones(2, dtype=getattr(torch, a))
        ttb = torch.ones(2, dtype=getattr(torch, b)) if isinstance(b, str) else b
        assert str((tta + ttb).dtype) == "torch." + want


def test_true_division_of_integers_gives_float32_and_rounding_modes():
    a, b = tb.tensor([7, -7]), tb.tensor([2, 2])
    assert (a / b).dtype == tb.float32 and (a / 2).dtype == tb.float32
    assert tb.div(a, b, rounding_mode="floor").tolist() == [3, -4]
    assert tb.div(a, b, rounding_mode="trunc").tolist() == [3, -3]
    assert (a // 2).tolist() == [3, -4]


def test_to_and_conversions():
    x = tb.tensor([1.5, 2.5])
    assert x.to(tb.float64).dtype == tb.float64 and x.to("float16").dtype == tb.float16
    assert x.to("cpu") is x and x.cpu() is x
    assert x.to("cpu", tb.int32).tolist() == [1, 2]
    assert x.double().dtype == tb.float64 and x.long().dtype == tb.int64 and x.half().dtype == tb.float16
    assert x.int().dtype == tb.int32 and x.bool().dtype == tb.bool and x.float() is x
    assert x.to(tb.zeros(1, dtype=tb.float64)).dtype == tb.float64
    assert x.tolist() == [1.5, 2.5] and tb.tensor(3.0).item() == 3.0
    assert isinstance(tb.tensor(3).item(), int)
    assert np.asarray(x).dtype == np.float32
    assert float(tb.tensor(2.0)) == 2.0 and int(tb.tensor(3)) == 3


def test_properties():
    x = tb.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tb.Size) and x.shape.numel() == 24
    assert x.ndim == x.dim() == 3 and x.numel() == 24 and x.size(1) == 3 and len(x) == 2
    assert x.device == tb.device("cpu") and not x.is_cuda and x.is_leaf
    assert x.is_contiguous() and not x.transpose(0, 2).is_contiguous()
    assert x.transpose(0, 2).contiguous().is_contiguous()
    assert x.data_ptr() == x.numpy().__array_interface__["data"][0]
    assert x.stride() == (12, 4, 1) and x.element_size() == 4
    assert repr(tb.Size([2, 3])) == "tb.Size([2, 3])"
    assert "requires_grad=True" in repr(tb.ones(1, requires_grad=True))
    assert "dtype=float64" in repr(tb.ones(1, dtype=tb.float64))


# ***** errors *****
def test_item_on_many_elements_says_so():
    with pytest.raises(RuntimeError, match=r"3 elements.*\(3,\)"):
        tb.ones(3).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(tb.ones(2))


def test_shape_errors_name_both_shapes():
    with pytest.raises(RuntimeError, match=r"\(2, 3\) and \(4,\)"):
        tb.ones(2, 3) + tb.ones(4)
    with pytest.raises(RuntimeError, match=r"2x3 and 4x5"):
        tb.ones(2, 3) @ tb.ones(4, 5)
    with pytest.raises(RuntimeError, match=r"\[4, 2\].*size 6"):
        tb.ones(2, 3).reshape(4, 2)
    with pytest.raises(RuntimeError, match=r"\(2, 3\).*\(2, 4\)"):
        tb.cat([tb.ones(2, 3), tb.ones(2, 4)], dim=0)
    with pytest.raises(RuntimeError, match="reshape"):
        tb.ones(2, 3).T.view(6)
    with pytest.raises(IndexError, match=r"\(2, 3\)"):
        tb.ones(2, 3)[5]
    with pytest.raises(RuntimeError, match="negative integer powers"):
        tb.tensor([2]) ** -1


def test_cuda_answers_honestly_without_a_gpu():
    if tb.cuda.is_available():
        pytest.skip("a GPU is present")
    assert tb.cuda.device_count() == 0
    for bad in (lambda: tb.ones(2).cuda(), lambda: tb.zeros(2, device="cuda"),
                lambda: tb.ones(2).to("cuda:0"), tb.cuda.synchronize, tb.cuda.current_device):
        with pytest.raises(RuntimeError, match=r"CUDA is not available.*pip install"):
            bad()


def test_device_parsing():
    assert tb.device("cuda:1").index == 1 and tb.device("cpu").type == "cpu"
    assert str(tb.device("cuda", 0)) == "cuda:0"
    with pytest.raises(ValueError, match="unknown device"):
        tb.device("tpu")


# ***** indexing (no grad; differentiable reads are in test_ops) *****
def test_indexing_matches_numpy():
    a = np.arange(24).reshape(2, 3, 4)
    t = tb.tensor(a)
    for idx in [1, (1, 2), (slice(None), 0), (Ellipsis, 1), (None, 0), (slice(None, None, 2),),
                ([0, 1, 1],), (np.array([True, False]),), (slice(None), [2, 0])]:
        idx = idx if isinstance(idx, tuple) else (idx,)
        key = tuple(tb.tensor(i) if isinstance(i, (list, np.ndarray)) else i for i in idx)
        np.testing.assert_array_equal(t[key].numpy(), a[idx])
    np.testing.assert_array_equal(t[t > 10].numpy(), a[a > 10])


def test_setitem_and_in_place_ops():
    t = tb.zeros(2, 3)
    t[0] = 1.0
    t[1, 1:] = tb.tensor([2.0, 3.0])
    assert t.tolist() == [[1, 1, 1], [0, 2, 3]]
    t.add_(1).mul_(2).sub_(1)
    assert t.tolist() == [[3, 3, 3], [1, 5, 7]]
    t.add_(tb.ones(3), alpha=2)
    t.div_(tb.tensor(2.0))
    assert t.tolist() == [[2.5, 2.5, 2.5], [1.5, 3.5, 4.5]]
    t.clamp_(max=3.0).fill_(4.0)
    assert (t.numpy() == 4).all()
    t.zero_()
    assert (t.numpy() == 0).all()
    t.copy_(tb.arange(3))
    assert t.tolist() == [[0, 1, 2], [0, 1, 2]] and t.dtype == tb.float32
    with pytest.raises(RuntimeError, match=r"\(4,\).*\(2, 3\)"):
        t.copy_(tb.ones(4))
    v = t[0]
    v.fill_(9.0)      # a view writes through, as in torch
    assert t.tolist()[0] == [9, 9, 9]


def test_operators_and_comparisons():
    a, b = tb.tensor([1.0, 2.0, 3.0]), tb.tensor([3.0, 2.0, 1.0])
    assert (a < b).tolist() == [True, False, False] and (a == b).tolist() == [False, True, False]
    assert (a >= 2).tolist() == [False, True, True] and (2 < a).tolist() == [False, False, True]
    assert (-a).tolist() == [-1, -2, -3] and abs(-a).tolist() == [1, 2, 3]
    assert ((a > 1) & (b > 1)).tolist() == [False, True, False] and (~(a > 1)).tolist() == [True, False, False]
    assert (a % 2).tolist() == [1, 0, 1]
    x = tb.ones(2)
    x += 1
    x *= 3
    assert x.tolist() == [6, 6]


def test_max_min_return_values_and_indices():
    x = tb.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    v, i = x.max(dim=1)
    assert v.tolist() == [5, 7] and i.tolist() == [1, 0]
    assert x.min(0).indices.tolist() == [0, 1, 0] and x.argmax().item() == 3
    assert tb.max(x, tb.full((2, 3), 4.0)).tolist() == [[4, 5, 4], [7, 4, 4]]


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_shape_ops_match_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t = tb.tensor(a)
    perm = data.draw(st.permutations(range(len(shape))))
    np.testing.assert_array_equal(t.permute(*perm).numpy(), a.transpose(perm))
    d = data.draw(st.integers(0, len(shape) - 1))
    np.testing.assert_array_equal(t.unsqueeze(d).squeeze(d).numpy(), a)
    np.testing.assert_array_equal(t.flatten().numpy(), a.ravel())
    np.testing.assert_array_equal(t.transpose(0, -1).numpy(), np.swapaxes(a, 0, -1))
    parts = t.chunk(2, d)
    np.testing.assert_array_equal(tb.cat(parts, d).numpy(), a)
    np.testing.assert_array_equal(tb.stack([t, t], d).numpy(), np.stack([a, a], d))


# ***** GPU: the same checks on CuPy *****
@pytest.mark.gpu
def test_pin_memory_is_page_locked_and_copies_exactly():
    x = tb.randn(1000, 3)
    p = x.pin_memory()
    assert p is not x and p.is_pinned() and not x.is_pinned() and p.pin_memory() is p
    np.testing.assert_array_equal(p.numpy(), x.numpy())
    np.testing.assert_array_equal(p.to("cuda").cpu().numpy(), x.numpy())
    with pytest.raises(RuntimeError, match="cannot pin a CUDA tensor"):
        x.cuda().pin_memory()


@pytest.mark.gpu
def test_gpu_tensor_roundtrip_and_errors():
    x = tb.arange(6, dtype=tb.float32).reshape(2, 3).cuda()
    assert x.is_cuda and x.device.type == "cuda" and x.device == tb.device("cuda:0")
    assert (x * 2 + 1).cpu().tolist() == [[1, 3, 5], [7, 9, 11]]
    assert x.sum().item() == 15.0
    with pytest.raises(RuntimeError, match=r"cpu.*cuda|cuda.*cpu"):
        x + tb.ones(2, 3)
    with pytest.raises(TypeError, match="cpu"):
        x.numpy()
    y = tb.zeros(2, 3, device="cuda", requires_grad=True)
    ((y + 1) ** 2).sum().backward()
    assert y.grad.is_cuda and y.grad.cpu().tolist() == [[2, 2, 2], [2, 2, 2]]
    tb.cuda.synchronize()


@pytest.mark.parametrize("module", ["tensorbrain", "tensorbrain.tensor", "tensorbrain.autograd",
                                    "tensorbrain.autograd.function", "tensorbrain.autograd.grad_mode",
                                    "tensorbrain.nn.functional", "tensorbrain.testing.gradcheck",
                                    "tensorbrain._ops.loss", "tensorbrain._ops.norm", "tensorbrain._device",
                                    "tensorbrain._factories", "tensorbrain._ops.softmax"])
def test_docstring_examples_run(module):
    import doctest
    import importlib
    import sys
    importlib.import_module(module)
    res = doctest.testmod(sys.modules[module])
    assert res.failed == 0


def test_tensor_method_docstring_examples_run():
    # Tensor's methods are defined in the class and its bases (TensorBase, the op table's
    # TableMethods, Adapters, LegacyMethods); the finder reads one class's own definitions, so
    # run the examples of each of them.
    import doctest
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    tests = [t for cls in tb.Tensor.__mro__ if cls.__module__.startswith("tensorbrain")
             for t in finder.find(cls, cls.__name__, module=False, globs={}) if t.examples]
    assert len(tests) >= 4   # data, item, copy_, the class: the examples are found
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0


def test_generated_table_methods_are_current():
    """tensorbrain/_ops/generated.py and functions.py are what the op table gives: after adding
    an op to tensorbrain/_ops/table.py, run ``python tensorbrain/_ops/generate.py``."""
    from tensorbrain._ops import generate
    for kind, text in generate.render().items():
        assert generate.OUTPUTS[kind].read_text(encoding="utf-8") == text, \
            f"{generate.OUTPUTS[kind]} is stale: run python tensorbrain/_ops/generate.py"


def test_every_tensor_method_is_an_ordinary_definition():
    """Every Tensor method is defined in the class or one of its bases (grep finds it): nothing
    is set on the class after its body ran."""
    import inspect
    from tensorbrain._ops import table
    table_ops = {entry[0] for entry in table.OPS.values()}
    own = {name for cls in tb.Tensor.__mro__ for name in vars(cls)}
    assert set(dir(tb.Tensor)) <= own | set(dir(object))
    for cls in tb.Tensor.__mro__[:-1]:
        for name, value in vars(cls).items():
            fn = getattr(value, "fget", None) or getattr(value, "__func__", value)
            if inspect.isfunction(fn) and (fn.__module__.startswith("tensorbrain._ops") or
                                           fn in table_ops):
                continue   # an op of the table (or an operator), the function itself
            if inspect.isfunction(fn) and not name.startswith("__"):
                # defined in that class's body (an alias, ``nelement = numel``, included), or
                # assigned there by name from a shared maker (``is_xla = _false_flag("is_xla")``,
                # ``q_scale = unsupported(...)``): grep finds ``name =`` in the class
                assert fn.__qualname__.startswith(f"{cls.__name__}.") or \
                    re.search(rf"^    {name}(, [\w, ]+)? = |^    [\w, ]+, {name}(, [\w, ]+)? = ",
                              inspect.getsource(cls), re.M), (cls, name, fn.__qualname__)


def test_operators_go_through_the_op_table():
    """//, %, &, |, ^, ~ are tb.floor_divide, remainder and the bitwise ops (NumPy's values);
    % has torch's gradient, the others none."""
    a, b = tb.tensor([7, -7, 5]), tb.tensor([2, 3, -4])
    na, nb = a.numpy(), b.numpy()
    assert (a // b).tolist() == (na // nb).tolist() == tb.floor_divide(a, b).tolist()
    assert (a % b).tolist() == (na % nb).tolist() == tb.remainder(a, b).tolist()
    assert (a & b).tolist() == (na & nb).tolist() and (a | 1).tolist() == (na | 1).tolist()
    assert (a ^ b).tolist() == (na ^ nb).tolist() and (~a).tolist() == (~na).tolist()
    assert (7 // b).tolist() == (7 // nb).tolist() and (7 % b).tolist() == (7 % nb).tolist()
    x = tb.tensor([5.5, -3.2], requires_grad=True)
    y = tb.tensor([2.0, 1.5], requires_grad=True)
    (x % y).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    assert y.grad.tolist() == [-2.0, 3.0]   # -floor(x / y)
    assert not (x // 2).requires_grad

