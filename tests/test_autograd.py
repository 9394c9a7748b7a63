"""Autograd: the engine (iterative, frees the graph), in-place safety, hooks for DDP, grad modes and
thread safety, autograd.grad."""
import threading

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain.testing import gradcheck


def leaf(*shape, seed=0):
    return tb.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=tb.float64,
                     requires_grad=True)


# ***** the engine *****
def test_backward_through_a_10000_op_chain_is_iterative():
    x = tb.tensor([1.0], dtype=tb.float64, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()   # a recursive engine would overflow the stack here
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 10_000], rtol=1e-9)


def test_freed_graph_error_mentions_retain_graph():
    x = leaf(3)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_retain_graph_allows_a_second_backward_and_grads_accumulate():
    x = leaf(3)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.detach().numpy())


def test_shared_subexpression_sums_all_paths():
    x = leaf(4)
    gradcheck(lambda x: (lambda h: h * h + h.exp() * h)(x.sin()), [x.detach().numpy()],
              numpy_fn=lambda x: np.sin(x) ** 2 + np.exp(np.sin(x)) * np.sin(x))


def test_broadcasting_undone_in_gradient():
    w = tb.ones(1, 3, dtype=tb.float64, requires_grad=True)
    b = tb.tensor(2.0, dtype=tb.float64, requires_grad=True)
    x = tb.tensor(np.arange(12.0).reshape(4, 3))
    (x * w + b).sum().backward()
    assert w.grad.shape == (1, 3) and b.grad.shape == ()
    np.testing.assert_allclose(w.grad.numpy(), np.arange(12.0).reshape(4, 3).sum(0, keepdims=True))
    assert b.grad.item() == 12


def test_backward_needs_gradient_for_non_scalar_and_checks_its_shape():
    y = leaf(2, 3) * 2
    with pytest.raises(RuntimeError, match=r"scalar outputs.*\(2, 3\)"):
        y.backward()
    with pytest.raises(RuntimeError, match=r"\(3,\).*\(2, 3\)"):
        y.backward(tb.ones(3))
    y.backward(tb.ones(2, 3, dtype=tb.float64))


def test_no_grad_tensor_backward_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        tb.ones(2).sum().backward()


def test_autograd_grad_returns_without_touching_dot_grad():
    x, z = leaf(3), leaf(3, seed=1)
    h = x * 3
    y = (h * h).sum()
    gx, gh = tb.autograd.grad(y, [x, h], retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), 18 * x.detach().numpy())
    np.testing.assert_allclose(gh.numpy(), 2 * h.detach().numpy())
    assert x.grad is None
    with pytest.raises(RuntimeError, match="allow_unused"):
        tb.autograd.grad(y, [z], retain_graph=True)
    assert tb.autograd.grad(y, [z], allow_unused=True)[0] is None


def test_detach_and_requires_grad_():
    x = leaf(2)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d._data[0] = 5.0     # shares memory, as in torch
    assert x._data[0] == 5.0
    t = tb.ones(2)
    assert t.requires_grad_() is t and t.requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        tb.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).requires_grad_(False)


def test_retain_grad_on_non_leaf():
    x = leaf(3)
    h = x * 2
    h.retain_grad()
    (h * h).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy())


# ***** in-place safety *****
def test_inplace_on_leaf_requiring_grad_is_an_error():
    x = leaf(3)
    for op in (lambda: x.add_(1), lambda: x.mul_(2), lambda: x.zero_(), lambda: x.fill_(1.0),
               lambda: x.copy_(tb.ones(3)), lambda: x.__setitem__(0, 1.0)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            op()
    with tb.no_grad():
        x.add_(1)        # what an optimizer does
    v = x[1:]
    with pytest.raises(RuntimeError, match="view of a leaf"):
        v.mul_(2)


def test_modifying_a_saved_tensor_fails_at_backward():
    x = leaf(3)
    a = x * 1
    y = (a * a).sum()      # saves a
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_inplace_on_non_leaf_is_differentiated():
    x = leaf(3)

    def fn(x):
        y = x * 2
        y.add_(x)         # y = 3x
        y.mul_(x)         # y = 3x^2
        y[0] = y[1] * 1.0  # index put: y0 = 3 x1^2
        return y
    gradcheck(fn, [x.detach().numpy()],
              numpy_fn=lambda x: np.array([3 * x[1] ** 2, 3 * x[1] ** 2, 3 * x[2] ** 2]))


def test_inplace_on_indexing_views_of_a_non_leaf_reaches_the_base():
    def fn(x):
        y = x * 2
        y[0].mul_(3)          # an in-place op on a view: the base y must see it (CopySlices)
        y[1] += x[0]          # getitem, iadd on the view, setitem
        v = y[:, 1:]
        v.relu_()
        y[2, :2].zero_()
        y[2][2:].mul_(-1.5)   # a view of a view: written back through both
        return y * y

    def ref(x):
        y = x * 2
        y[0] *= 3
        y[1] += x[0]
        y[:, 1:] = np.maximum(y[:, 1:], 0)
        y[2, :2] = 0
        y[2, 2:] *= -1.5
        return y * y
    x = np.random.default_rng(4).standard_normal((3, 4))
    x[np.abs(x) < 0.1] = 0.5
    gradcheck(fn, [x], numpy_fn=ref)


def test_inplace_on_other_views_of_a_non_leaf_is_refused_not_silently_wrong():
    x = leaf(2, 3)
    y = x * 2
    with pytest.raises(RuntimeError, match="view"):
        y.reshape(6).mul_(2)
    with pytest.raises(RuntimeError, match="view"):
        y.t()[0].mul_(2)


# ***** hooks for the distributed stack *****
def test_register_hook_replaces_gradient_on_leaf_and_non_leaf():
    x = leaf(3)
    h = x * 2
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
    handle = x.register_hook(lambda g: g + 1)
    h.sum().backward()
    np.testing.assert_allclose(seen[0], np.ones(3))
    np.testing.assert_allclose(x.grad.numpy(), 20 + 1)
    handle.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2)


def test_post_accumulate_hooks_fire_once_per_leaf_in_engine_order_then_callback():
    w1, b1 = leaf(4, 3, seed=1), leaf(4, seed=2)
    w2, b2 = leaf(2, 4, seed=3), leaf(2, seed=4)
    x = tb.tensor(np.random.default_rng(5).standard_normal((6, 3)))
    events = []
    names = {id(w1): "w1", id(b1): "b1", id(w2): "w2", id(b2): "b2"}

    def hook(p):
        events.append(names[id(p)])
        assert p.grad is not None
        if len(events) == 1:
            tb.autograd.queue_callback(lambda: events.append("callback"))
    for p in (w1, b1, w2, b2):
        p.register_post_accumulate_grad_hook(hook)
    # w1 is used twice: its hook must still fire once, after both contributions are summed.
    h = F.relu(F.linear(x, w1, b1)) + F.linear(x, w1).sum() * 0.01
    F.linear(h, w2, b2).pow(2).sum().backward()
    assert sorted(events[:4]) == ["b1", "b2", "w1", "w2"] and events[4:] == ["callback"]
    # Engine order: the last layer's parameters are produced before the first layer's.
    assert max(events.index("w2"), events.index("b2")) < min(events.index("w1"), events.index("b1"))
    ref = w1.grad.numpy().copy()
    for p in (w1, b1, w2, b2):
        p.grad = None
    events.clear()
    h = F.relu(F.linear(x, w1, b1)) + F.linear(x, w1).sum() * 0.01
    F.linear(h, w2, b2).pow(2).sum().backward()
    assert events.count("w1") == 1 and events[-1] == "callback"
    np.testing.assert_allclose(w1.grad.numpy(), ref)


def test_queue_callback_runs_once_at_end_and_may_queue_more():
    x = leaf(3)
    order = []

    def hook(g):
        order.append("hook")
        tb.autograd.queue_callback(lambda: (order.append("cb1"),
                                            tb.autograd.queue_callback(lambda: order.append("cb2"))))
        return g
    y = x * 2
    y.register_hook(hook)
    (y * 3).sum().backward()
    assert order == ["hook", "cb1", "cb2"]
    with pytest.raises(RuntimeError, match="backward pass is running"):
        tb.autograd.queue_callback(lambda: None)


def test_reachable_leaves():
    a, b, c = leaf(2), leaf(2, seed=1), leaf(2, seed=2)
    out = (a * b).sum() + tb.ones(2).sum()
    got = {id(t) for t in tb.autograd.reachable_leaves([out])}
    assert got == {id(a), id(b)} and id(c) not in got


# ***** grad modes and threads *****
def test_no_grad_enable_grad_set_grad_enabled():
    x = leaf(2)
    with tb.no_grad():
        assert not (x * 2).requires_grad
        with tb.enable_grad():
            assert (x * 2).requires_grad
    with tb.set_grad_enabled(False):
        assert not tb.is_grad_enabled()
    assert tb.is_grad_enabled()

    @tb.no_grad()
    def f():
        return x * 2
    assert not f().requires_grad


def test_grad_mode_is_thread_local():
    seen = {}
    inside, release = threading.Event(), threading.Event()

    def worker():
        with tb.no_grad():
            inside.set()
            release.wait(10)
            seen["worker"] = tb.is_grad_enabled()
    t = threading.Thread(target=worker)
    t.start()
    inside.wait(10)
    seen["main"] = tb.is_grad_enabled()   # the worker's no_grad must not leak here
    release.set()
    t.join(10)
    assert seen == {"main": True, "worker": False}


def test_two_threads_run_backward_on_different_graphs_at_once():
    barrier = threading.Barrier(2, timeout=10)
    results, errors = {}, []

    def worker(k):
        try:
            x = tb.tensor(np.full(50, float(k + 1)), dtype=tb.float64, requires_grad=True)
            y = x
            for _ in range(300):
                y = y * 1.001 + 0.0
            calls = []

            def meet(g):   # both threads are inside backward at the same time
                barrier.wait()
            y.register_hook(meet)
            x.register_post_accumulate_grad_hook(
                lambda p: tb.autograd.queue_callback(lambda: calls.append(k)))
            y.sum().backward()
            results[k] = (x.grad.numpy().copy(), calls)
        except Exception as exc:  # surfaced below
            errors.append(exc)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert not errors, errors
    for k in range(2):
        np.testing.assert_allclose(results[k][0], 1.001 ** 300)
        assert results[k][1] == [k]   # each thread's callback ran in its own backward only


# ***** GPU *****
@pytest.mark.gpu
def test_engine_on_gpu_chain_and_hooks():
    x = tb.ones(3, device="cuda", requires_grad=True)
    y = x
    for _ in range(1000):
        y = y * 1.001
    fired = []
    x.register_post_accumulate_grad_hook(lambda p: fired.append(p.grad.device))
    y.sum().backward()
    assert fired and fired[0].type == "cuda"
    np.testing.assert_allclose(x.grad.cpu().numpy(), 1.001 ** 1000, rtol=1e-3)


def test_gradient_takes_the_inputs_dtype():
    w = tb.ones(2, requires_grad=True)                    # float32
    (w * tb.ones(2, dtype=tb.float64)).sum().backward()   # the product is float64
    assert w.grad.dtype == tb.float32


# ***** gradcheck catches what it is for *****
def test_gradcheck_catches_wrong_gradient_forward_and_torch_mismatch():
    from tensorbrain._ops.core import make
    from tensorbrain.testing import GradcheckError, torch_available

    def bad_square(a):   # forward right, backward off by a factor 2
        return make(a._data ** 2, (a,), lambda g: (g * a._data,), "BadSquareBackward")
    x = np.random.default_rng(0).random((2, 3))
    with pytest.raises(GradcheckError, match=r"gradient of input 0 .* finite differences"):
        gradcheck(bad_square, [x])
    with pytest.raises(GradcheckError, match="forward output 0 vs NumPy"):
        gradcheck(lambda a: a * 2, [x], numpy_fn=lambda a: a * 3)
    assert gradcheck(lambda a: a * a, [x], numpy_fn=lambda a: a * a)
    if torch_available():
        with pytest.raises(GradcheckError, match="vs torch"):
            gradcheck(lambda a: a * 2, [x], torch_fn=lambda a: a * 2.5)


def test_chain_of_in_place_ops_on_a_non_leaf():
    def f(x):
        y = x * 2
        y.relu_()
        y.add_(x)
        y.exp_()
        y.sub_(x, alpha=2)
        y.neg_()
        y.mul_(x)
        return y
    x = np.random.default_rng(3).standard_normal(5)
    gradcheck(f, [x], numpy_fn=lambda x: -(np.exp(np.maximum(2 * x, 0) + x) - 2 * x) * x)


# ***** custom functions *****
class _ClampedExp(tb.autograd.Function):
    @staticmethod
    def forward(ctx, x, limit):
        out = x.exp().clamp(max=limit)
        ctx.save_for_backward(out)
        ctx.limit = limit
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out * (out < ctx.limit), None


def test_custom_function_gradient_and_saved_tensor_check():
    x = np.array([0.1, 0.5, 2.0])
    gradcheck(lambda x: _ClampedExp.apply(x, 3.0), [x], numpy_fn=lambda x: np.minimum(np.exp(x), 3.0))
    t = tb.tensor(x, requires_grad=True)
    y = _ClampedExp.apply(t, 3.0)
    assert y.grad_fn.name == "_ClampedExpBackward"
    with tb.no_grad():
        y.mul_(2)   # the saved output changed: backward must refuse
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_backward_with_inputs_accumulates_only_into_those():
    a, b = leaf(3), leaf(3, seed=1)
    h = a * b
    (h * h).sum().backward(inputs=[a, h])
    assert b.grad is None
    np.testing.assert_allclose(a.grad.numpy(), 2 * (a * b * b).detach().numpy())
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy())


def test_inference_mode_and_bare_no_grad_decorators():
    @tb.no_grad                      # without parentheses, as torch 2.x
    def double(x):
        return x * 2

    @tb.inference_mode
    def triple(x):
        return x * 3, tb.is_inference_mode_enabled()

    x = tb.ones(2, requires_grad=True)
    assert not double(x).requires_grad
    y, inside = triple(x)
    assert not y.requires_grad and inside and not tb.is_inference_mode_enabled()
    with tb.inference_mode():
        assert not (x * 2).requires_grad and not tb.is_grad_enabled()
    with tb.inference_mode(False):
        assert (x * 2).requires_grad
    assert tb.is_grad_enabled()
    with tb.set_grad_enabled(False):        # a mode argument is not a function to wrap
        assert not tb.is_grad_enabled()
    assert tb.is_grad_enabled()
