"""Slices' gradients reach the engine as SliceGrad (zero but the slice) and sibling slices are
written into one array the engine owns (autograd/engine.py _sum_into): the gradients must equal
the dense sums, whatever mix of slices, full-size gradients, hooks and retained gradients meets
at one tensor. Reference: the same sums written out in NumPy."""
import numpy as np

import tensorbrain as tb

rng = np.random.default_rng(11)


def test_split_siblings_mixed_with_full_gradients_and_retained_grads():
    a = rng.standard_normal((4, 9)).astype(np.float32)
    x = tb.tensor(a, requires_grad=True)
    y = x * 2.0                                   # non-leaf: its pending sum is the engine's
    y.retain_grad()
    q, k, v = y.split(3, dim=1)
    seen = []
    k.register_hook(lambda g: seen.append(g.numpy().copy()))
    w1, w2, w3 = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3))
    w4 = rng.standard_normal((4, 9)).astype(np.float32)
    loss = (q * tb.tensor(w1)).sum() + (k * tb.tensor(w2)).sum() + (q * tb.tensor(w3)).sum() \
        + (y * tb.tensor(w4)).sum() + y[1:3, 2:7].sum()
    loss.backward()
    gy = w4.copy()
    gy[:, 0:3] += w1 + w3
    gy[:, 3:6] += w2
    gy[1:3, 2:7] += 1.0
    np.testing.assert_allclose(y.grad.numpy(), gy, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * gy, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(seen[0], w2)          # the hook saw its own slice's gradient


def test_only_one_slice_used_and_leaf_slices():
    a = rng.standard_normal((6, 5)).astype(np.float32)
    x = tb.tensor(a, requires_grad=True)
    parts = x.chunk(3, dim=0)
    (parts[1] * 3.0).sum().backward()                   # one slice: its dense form only
    want = np.zeros_like(a)
    want[2:4] = 3.0
    np.testing.assert_array_equal(x.grad.numpy(), want)
    x.grad = None
    sum(p.sum() * (i + 1) for i, p in enumerate(x.unbind(0))).backward()   # six slices of a leaf
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(np.arange(1, 7, dtype=np.float32)[:, None], 5, 1))


def test_autograd_grad_of_sliced_nonleaf():
    x = tb.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    y = x + 1.0
    a, b = y[:, :2], y[:, 2:]
    (gy,) = tb.autograd.grad((a * 2).sum() + (b * 5).sum() + (a * 7).sum(), [y])
    np.testing.assert_array_equal(gy.numpy(), np.array([[9, 9, 5, 5]] * 3, np.float32))


def test_slices_that_tile_gaps_overlaps_and_strides_sum_like_numpy():
    """Every mix the engine meets: parts that tile an axis (written out in one concatenate, in
    any order of arrival, int indices included), parts with a gap, overlapping parts, strided
    parts and parts on two axes (written into zeros)."""
    a = rng.standard_normal((6, 8, 5)).astype(np.float32)
    cases = {
        "split last axis, reversed use": lambda y: [(y[:, :, 3:], 2.0), (y[:, :, :3], 3.0)],
        "uneven chunk on axis 1": lambda y: [(p, i + 1.0) for i, p in enumerate(y.chunk(3, dim=1))],
        "unbind axis 0": lambda y: [(p, i - 2.0) for i, p in enumerate(y.unbind(0))],
        "negative ints and a band": lambda y: [(y[-1], 5.0), (y[0:5], 7.0)],
        "a gap": lambda y: [(y[:, 0:2], 1.5), (y[:, 5:8], 2.5)],
        "overlap": lambda y: [(y[:, 0:5], 1.0), (y[:, 3:8], 4.0)],
        "strided": lambda y: [(y[::2], 1.0), (y[1::2], 3.0)],
        "two axes": lambda y: [(y[0:3], 1.0), (y[3:6, :, 0:2], 2.0), (y[3:6, :, 2:5], 6.0)],
        "one slice": lambda y: [(y[:, 2:4, 1], 9.0)],
    }
    for name, parts_of in cases.items():
        x = tb.tensor(a, requires_grad=True)
        y = x * 1.0
        parts = parts_of(y)
        sum((p * w).sum() for p, w in parts).backward()
        want = np.zeros_like(a)
        ref = np.arange(a.size).reshape(a.shape)          # locate each part by its elements
        parts_np = parts_of(tb.tensor(ref))
        for (p, w) in parts_np:
            np.add.at(want.reshape(-1), p.numpy().reshape(-1), w)
        np.testing.assert_array_equal(x.grad.numpy(), want, err_msg=name)


def test_sums_of_scalar_and_large_gradients():
    """A 0-d result used three times: its pending sum is a NumPy scalar, which cannot be added
    into in place; a large float32 one used three times: the native in-place adds. Both against
    the derivative written out."""
    x = tb.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    s = x.sum()
    (s * s + s * 3.0 + s.exp()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2 * 6.0 + 3.0 + np.exp(6.0)), rtol=1e-12)
    a = rng.standard_normal((300, 300)).astype(np.float32)
    t = tb.tensor(a, requires_grad=True)
    y = t * 1.0
    (y * y + y * 3.0 + y.sin()).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), 2 * a + 3.0 + np.cos(a), rtol=1e-5, atol=1e-5)


def test_joint_gradient_views_are_handed_on_once_in_place_of_a_concatenation():
    """graph.joint_views: gradients laid out as views of one array come back through the split
    as that array itself (no concatenation), once; anything else is concatenated as before."""
    from tensorbrain.autograd.graph import SliceGrad, joint_views
    base = rng.standard_normal((2, 5, 9)).astype(np.float32)
    q, k, v = (base[..., i * 3:(i + 1) * 3] for i in range(3))
    gq, gk, gv = joint_views((q, k, v))
    for i, g in enumerate((gq, gk, gv)):
        assert g.shape == q.shape and g.strides == q.strides
        g[...] = i + 1.0
    want = np.concatenate([np.full(q.shape, i + 1.0, np.float32) for i in range(3)], axis=2)

    def slices(a, b, c):
        index = [(slice(None), slice(None), slice(i * 3, (i + 1) * 3)) for i in range(3)]
        return SliceGrad(base.shape, index[0], a).plus(SliceGrad(base.shape, index[2], c)).plus(
            SliceGrad(base.shape, index[1], b))
    whole = slices(gq, gk, gv).dense()
    np.testing.assert_array_equal(whole, want)
    assert np.shares_memory(whole, gq) and np.shares_memory(whole, gv)       # handed on, not copied
    again = slices(gq, gk, gv).dense()                                       # only once
    np.testing.assert_array_equal(again, want)
    assert not np.shares_memory(again, gq)
    gq2, gk2, gv2 = joint_views((q, k, v))
    gq2[...], gk2[...], gv2[...] = gq, gk, gv
    swapped = slices(gq2, gv2.copy(), gk2).dense()                           # a piece from elsewhere
    assert not np.shares_memory(swapped, gq2)
    np.testing.assert_array_equal(swapped[..., 3:6], gv)
    assert joint_views((q, base[..., 2:5])) is None                          # overlapping views
    assert joint_views((q, rng.standard_normal(q.shape).astype(np.float32))) is None
