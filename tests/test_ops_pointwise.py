"""The elementwise long tail (tensorbrain/_ops/pointwise.py) and the in-place forms the table
adds: forward and gradients against finite differences, and against torch when installed;
method and in-place forms against the function."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain._ops import pointwise as P
from tensorbrain._ops import table
from tensorbrain.testing import gradcheck

RNG = np.random.default_rng(0)
# inputs inside each function's domain (shape (2, 3))
DOMAIN = {"acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.1, 3.0),
          "log2": (0.1, 3.0), "log10": (0.1, 3.0), "erfinv": (-0.95, 0.95),
          "lgamma": (0.2, 4.0), "digamma": (0.2, 4.0), "tan": (-1.2, 1.2)}
DIFFERENTIABLE = sorted(n for n, (_, d, _) in P.UNARY.items() if d is not None)


def _x(name, shape=(2, 3)):
    lo, hi = DOMAIN.get(name, (-2.0, 2.0))
    return RNG.uniform(lo, hi, shape)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_unary_values_and_gradients(name):
    def torch_fn(x):
        return getattr(__import__("torch"), name)(x)
    gradcheck(getattr(tb, name), [_x(name)], torch_fn=torch_fn, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(n for n, (_, d, _) in P.UNARY.items() if d is None))
def test_unary_without_gradient_match_torch(name):
    torch = pytest.importorskip("torch")
    x = np.array([-2.5, -0.0, 0.0, 1.5, np.inf, -np.inf], dtype=np.float32)
    if name == "bitwise_not":
        x = np.array([0, 5, -3], dtype=np.int64)
    got = getattr(tb, name)(tb.tensor(x))
    want = getattr(torch, name)(torch.tensor(x))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")


def test_logit_and_hardshrink():
    gradcheck(lambda x: tb.logit(x, eps=0.2), [RNG.uniform(0.05, 0.95, (7,))],
              torch_fn=lambda x: __import__("torch").logit(x, eps=0.2))
    gradcheck(lambda x: x.hardshrink(0.3), [np.array([-1.0, -0.1, 0.2, 0.9])],
              torch_fn=lambda x: x.hardshrink(0.3))


BIN_DOMAIN = {"xlogy": ((-1, 2), (0.2, 3)), "float_power": ((0.2, 2), (-1, 2)),
              "fmod": ((-3, 3), (0.5, 2)), "remainder": ((-3, 3), (0.5, 2)),
              "copysign": ((0.2, 2), (-1, 1))}


@pytest.mark.parametrize("name", sorted(n for n, r in P.BINARY.items()
                                        if r[1] is not None and n != "ldexp"))
def test_binary_values_and_gradients(name):
    (alo, ahi), (blo, bhi) = BIN_DOMAIN.get(name, ((-2, 2), (-2, 2)))
    a, b = RNG.uniform(alo, ahi, (2, 3)), RNG.uniform(blo, bhi, (3,))   # broadcast
    gradcheck(getattr(tb, name), [a, b],
              torch_fn=lambda x, y: getattr(__import__("torch"), name)(x, y), atol=1e-6)


def test_ldexp_and_integer_ops_match_torch():
    torch = pytest.importorskip("torch")
    # torch's ldexp gradient is 0 for negative integer exponents (it computes 2 ** b in
    # integers): finite differences check those, torch the others
    gradcheck(lambda a: tb.ldexp(a, tb.tensor([1, -2, 3])), [RNG.uniform(-2, 2, (3,))])
    gradcheck(lambda a: tb.ldexp(a, tb.tensor([1, 0, 3])), [RNG.uniform(-2, 2, (3,))],
              torch_fn=lambda a: torch.ldexp(a, torch.tensor([1, 0, 3])))
    a, b = np.array([12, -9, 7, 0]), np.array([8, 6, -3, 5])
    for name in ("gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor", "floor_divide"):
        got = getattr(tb, name)(tb.tensor(a), tb.tensor(b))
        want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
    for name in ("bitwise_left_shift", "bitwise_right_shift"):
        got = getattr(tb, name)(tb.tensor([1, 8, 40]), 2).numpy()
        np.testing.assert_array_equal(got, getattr(torch, name)(torch.tensor([1, 8, 40]), 2))
    x = np.array([-1.0, 0.0, 2.0], dtype=np.float32)
    np.testing.assert_array_equal(tb.heaviside(tb.tensor(x), tb.tensor(0.5)).numpy(),
                                  torch.heaviside(torch.tensor(x), torch.tensor(0.5)).numpy())
    np.testing.assert_array_equal(
        tb.nextafter(tb.tensor(x), tb.tensor(3.0)).numpy(),
        torch.nextafter(torch.tensor(x), torch.tensor(3.0)).numpy())
    assert tb.float_power(tb.tensor([2.0]), 3).dtype == tb.float64
    assert tb.atan2(tb.tensor([1]), tb.tensor([1])).dtype == tb.float32


def test_integer_inputs_give_the_default_float_as_torch():
    torch = pytest.importorskip("torch")
    for name in ("log2", "sinh", "erfc", "exp2", "lgamma"):
        got = getattr(tb, name)(tb.tensor([1, 2, 3]))
        want = getattr(torch, name)(torch.tensor([1, 2, 3]))
        assert str(got.dtype) == str(want.dtype).replace("torch.", ""), name
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_aliases_methods_and_inplace_forms():
    x = RNG.uniform(0.1, 0.9, (4,)).astype(np.float32)
    for alias, name in (("arccos", "acos"), ("arcsinh", "asinh"), ("arctan2", "atan2"),
                        ("greater", "gt"), ("less_equal", "le"), ("not_equal", "ne")):
        assert table.OPS[alias][0] is table.OPS[name][0]
    t = tb.tensor(x)
    np.testing.assert_array_equal(t.acos().numpy(), tb.acos(t).numpy())
    u = tb.tensor(x)
    assert u.erfinv_() is u
    np.testing.assert_array_equal(u.numpy(), tb.erfinv(tb.tensor(x)).numpy())
    for name, args in (("log2_", ()), ("cos_", ()), ("sign_", ()), ("fmod_", (0.3,)),
                       ("remainder_", (0.3,)), ("atan2_", (tb.tensor(0.5),)), ("lt_", (0.5,)),
                       ("multiply_", (2.0,)), ("true_divide_", (2.0,)), ("clip_", (0.2, 0.5)),
                       ("rsqrt_", ()), ("square_", ()), ("logical_not_", ())):
        v = tb.tensor(x)
        getattr(v, name)(*args)
        want = getattr(tb.tensor(x), name[:-1])(*args)
        np.testing.assert_allclose(v.numpy(), want.numpy().astype(np.float32), err_msg=name)


def test_inplace_forms_record_gradients_as_torch():
    torch = pytest.importorskip("torch")
    x = RNG.uniform(0.1, 0.9, (5,))
    a = tb.tensor(x, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    for v in (a, ta):
        y = v * 2
        y.asin_().sinh_().log2_()
        (y * y).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-10)


def test_special_functions_against_torch():
    torch = pytest.importorskip("torch")
    x = np.concatenate([RNG.uniform(-4.5, 6, 50), [0.001, 1.0, 2.0, 25.0, 1e4]])
    x = x[np.abs(x - np.round(x)) > 1e-3]   # away from digamma's poles
    for name in ("digamma", "lgamma"):
        np.testing.assert_allclose(getattr(tb, name)(tb.tensor(x)).numpy(),
                                   getattr(torch, name)(torch.tensor(x)).numpy(), rtol=1e-10,
                                   atol=1e-10, err_msg=name)
    y = np.concatenate([RNG.uniform(-1, 1, 50), [0.0, 0.999999, -0.99999999, 1.0, -1.0]])
    np.testing.assert_allclose(tb.erfinv(tb.tensor(y)).numpy(),
                               torch.erfinv(torch.tensor(y)).numpy(), rtol=1e-12)
