"""tb.library custom operators against torch.library: the same operator written with both, values
and gradients compared; the registry's errors against torch's."""
import itertools

import numpy as np
import pytest

import tensorbrain as tb

torch = pytest.importorskip("torch")
_ns = itertools.count()


def _fresh():
    """A namespace no other test used (registrations are global in both libraries)."""
    return f"tbtest{next(_ns)}"


def _both(data, grad=True):
    return (tb.tensor(data, requires_grad=grad),
            torch.tensor(data, dtype=torch.float64, requires_grad=grad))


def _make_softclip(lib, ns, T):
    @lib.custom_op(f"{ns}::softclip", mutates_args=())
    def softclip(x: T, scale: float = 1.0) -> T:
        return (x / scale).tanh() * scale

    def setup(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.scale = inputs[1]

    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - (y / ctx.scale) ** 2), None
    softclip.register_autograd(backward, setup_context=setup)
    return softclip


def test_custom_op_values_and_gradients_match_torch():
    ns = _fresh()
    tb_op = _make_softclip(tb.library, ns, tb.Tensor)
    th_op = _make_softclip(torch.library, ns, torch.Tensor)
    data = np.linspace(-3, 3, 7)
    x, tx = _both(data)
    for got, want in ((getattr(tb.ops, ns).softclip(x, 2.0), getattr(torch.ops, ns).softclip(tx, 2.0)),
                      (tb_op(x * 1.5, scale=0.5), th_op(tx * 1.5, scale=0.5))):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        (got * tb.tensor(data)).sum().backward()
        (want * torch.tensor(data)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    assert str(getattr(tb.ops, ns).softclip.default._schema).replace("1.0", "1.") == \
        str(getattr(torch.ops, ns).softclip.default._schema)
    assert tb_op._opoverload.name() == th_op._opoverload.name()


def test_two_outputs_and_a_list_input_get_their_gradients():
    ns = _fresh()
    for lib, T in ((tb.library, tb.Tensor), (torch.library, torch.Tensor)):
        @lib.custom_op(f"{ns}::mix", mutates_args=())
        def mix(xs: list[T], w: T) -> tuple[T, T]:
            return xs[0] * w + xs[1], xs[0] - xs[1] * w

        def setup(ctx, inputs, output):
            ctx.save_for_backward(*inputs[0], inputs[1])

        def backward(ctx, ga, gb):
            a, b, w = ctx.saved_tensors
            return [ga * w + gb, ga - gb * w], ga * a - gb * b
        mix.register_autograd(backward, setup_context=setup)
    a, ta = _both([1.0, 2.0])
    b, tbb = _both([3.0, -1.0])
    w, tw = _both([0.5, 4.0])
    p, q = getattr(tb.ops, ns).mix([a, b], w)
    tp, tq = getattr(torch.ops, ns).mix([ta, tbb], tw)
    (p * 2 + q * q).sum().backward()
    (tp * 2 + tq * tq).sum().backward()
    for got, want in ((a, ta), (b, tbb), (w, tw)):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-12)


def test_custom_op_without_autograd_refuses_backward_like_torch():
    ns = _fresh()
    msgs = []
    for lib, T, mod in ((tb.library, tb.Tensor, tb), (torch.library, torch.Tensor, torch)):
        @lib.custom_op(f"{ns}::twice", mutates_args=())
        def twice(x: T) -> T:
            return x * 2
        x = mod.ones(2, requires_grad=True)
        y = twice(x)
        assert y.requires_grad
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.filterwarnings("ignore:.*autograd kernel was not registered")
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_library_define_and_impl_differentiate_through_the_kernel():
    ns = _fresh()
    libs = []
    for mod in (tb, torch):
        lib = mod.library.Library(ns, "DEF")
        lib.define("cube(Tensor x, *, float k=1.) -> Tensor")
        lib.impl("cube", lambda x, *, k=1.0: x * x * x * k, "CPU")
        lib.define("addmul.Scalar(Tensor x, float y) -> Tensor")
        lib.define("addmul.Tensor(Tensor x, Tensor y) -> Tensor")
        lib.impl("addmul.Scalar", lambda x, y: x + y, "CompositeImplicitAutograd")
        lib.impl("addmul.Tensor", lambda x, y: x * y, "CompositeImplicitAutograd")
        libs.append(lib)
        with pytest.raises(RuntimeError, match="Only a single TORCH_LIBRARY"):
            mod.library.Library(ns, "DEF")
        with pytest.raises(RuntimeError, match="multiple times"):
            lib.define("cube(Tensor x, *, float k=1.) -> Tensor")
    x, tx = _both([0.5, -2.0])
    got = getattr(tb.ops, ns).cube(x, k=3.0) + getattr(tb.ops, ns).addmul(x, 2.0) \
        + getattr(tb.ops, ns).addmul(x, x)
    want = getattr(torch.ops, ns).cube(tx, k=3.0) + getattr(torch.ops, ns).addmul(tx, 2.0) \
        + getattr(torch.ops, ns).addmul(tx, tx)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy())
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    assert getattr(tb.ops, ns).addmul.overloads() == sorted(getattr(torch.ops, ns).addmul.overloads())
    for lib in libs:
        lib._destroy()
    assert not hasattr(getattr(tb.ops, ns), "cube") and not hasattr(getattr(torch.ops, ns), "cube")


def test_free_functions_define_impl_fake_and_a_mutating_op():
    ns = _fresh()
    for mod in (tb, torch):
        mod.library.define(f"{ns}::scale_", "(Tensor(a!) x, float k) -> ()")
        mod.library.impl(f"{ns}::scale_", "cpu", lambda x, k: (x.mul_(k), None)[1])
        mod.library.define(f"{ns}::pairsum", "(Tensor x) -> Tensor")
        mod.library.impl(f"{ns}::pairsum", "default", lambda x: x[..., ::2] + x[..., 1::2])
        mod.library.register_fake(f"{ns}::pairsum",
                                  lambda x: x.new_empty((*x.shape[:-1], x.shape[-1] // 2)))
    x, tx = _both([[1.0, 2.0, 3.0, 4.0]], grad=False)
    getattr(tb.ops, ns).scale_(x, 3.0)
    getattr(torch.ops, ns).scale_(tx, 3.0)
    np.testing.assert_allclose(x.numpy(), tx.numpy())
    np.testing.assert_allclose(getattr(tb.ops, ns).pairsum(x).numpy(),
                               getattr(torch.ops, ns).pairsum(tx).numpy())
    meta = getattr(tb.ops, ns).pairsum(tb.empty(5, 6, device="meta"))
    tmeta = getattr(torch.ops, ns).pairsum(torch.empty(5, 6, device="meta"))
    assert meta.device.type == "meta" and tuple(meta.shape) == tuple(tmeta.shape) == (5, 3)


def test_ops_namespaces_and_errors_match_torch():
    for mod in (tb, torch):
        ns = mod.ops.xformers_never_registered
        assert repr(ns) == "<module 'torch.ops.xformers_never_registered' from 'torch.ops'>"
        assert not hasattr(ns, "efficient_attention")
        with pytest.raises(AttributeError, match="'xformers_never_registered' object has no "
                                                 "attribute 'efficient_attention'"):
            ns.efficient_attention  # noqa: B018
    ns = _fresh()
    for lib, T in ((tb.library, tb.Tensor), (torch.library, torch.Tensor)):
        @lib.custom_op(f"{ns}::f", mutates_args=())
        def f(x: T, k: float = 1.0) -> T:
            return x * k
    for bad_args, bad_kw in (((1, 2.0, 3), {}), (("a",), {}), ((), {})):
        errs = []
        for mod in (tb, torch):
            args = tuple(mod.ones(1) if a == 1 else a for a in bad_args)
            with pytest.raises(RuntimeError) as e:
                getattr(mod.ops, ns).f(*args, **bad_kw)
            errs.append(str(e.value).split("Declaration")[0].split("\nValue")[0])
        assert errs[0].replace("1.0", "1.") == errs[1], errs
    with pytest.raises(ValueError, match="namespace"):
        tb.library.custom_op("nonamespace", mutates_args=())(lambda x: x)
    with pytest.raises(NotImplementedError, match="load_library"):
        tb.ops.load_library("libfoo.so")
    with pytest.raises(NotImplementedError, match="flex_attention is not supported"):
        tb.ops.higher_order.flex_attention(tb.ones(1))


@pytest.mark.parametrize("mutates", [(), ("out",)])
def test_infer_schema_matches_torch(mutates):
    def make(T):
        def f(x: T, out: T, n: int = 2, ys: list[int] | None = None, zs: list[T | None] = None,
              *, alpha: float = 0.5, mode: str = "sum", flag: bool = True) -> tuple[T, T]:
            raise AssertionError
        return f
    assert tb.library.infer_schema(make(tb.Tensor), mutates_args=mutates) == \
        torch.library.infer_schema(make(torch.Tensor), mutates_args=mutates)
