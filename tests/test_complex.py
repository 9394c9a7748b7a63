"""Complex numbers (tensorbrain/_ops/complex.py and the complex-aware gradients of mul, div,
exp, matmul): values and gradients against torch (conjugate Wirtinger, torch's convention),
and LLaMA's rotary embedding end to end."""
import numpy as np
import pytest

import tensorbrain as tb

RNG = np.random.default_rng(0)


def _both(torch, arr, grad=True):
    return tb.tensor(arr, requires_grad=grad), torch.tensor(arr, requires_grad=grad)


def test_constructors_and_views():
    z = tb.tensor([1 + 2j, -3j])
    assert z.dtype == tb.complex64 and tb.is_complex(z) and z.is_complex()
    r = tb.view_as_real(z)
    assert r.tolist() == [[1.0, 2.0], [0.0, -3.0]] and r.dtype == tb.float32
    r[0, 0] = 5.0                                    # a view: the complex tensor sees it
    assert z.tolist()[0] == 5 + 2j
    back = tb.view_as_complex(r)
    assert back.shape == (2,) and back.tolist() == z.tolist()
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        tb.view_as_complex(tb.ones(3))
    with pytest.raises(RuntimeError, match="stride 1"):
        tb.view_as_complex(tb.ones(2, 3).t())
    with pytest.raises(RuntimeError, match="only supported for complex"):
        tb.view_as_real(tb.ones(2))
    assert tb.tensor([1.0]).cfloat().dtype == tb.cfloat and tb.ones(1).cdouble().dtype == tb.cdouble


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    r0, t0 = RNG.uniform(0.5, 2, (3, 4)), RNG.uniform(-3, 3, (3, 4))
    w0 = RNG.standard_normal((3, 4, 2))
    grads = []
    for lib in (tb, torch):
        r = lib.tensor(r0, requires_grad=True)
        t = lib.tensor(t0, requires_grad=True)
        w = lib.tensor(w0, requires_grad=True)
        z = lib.polar(r, t)                              # complex128
        u = lib.view_as_complex(w)
        v = z * u / (u + 3) + lib.complex(r, t).conj()
        v = v * lib.exp(z * 0.1)
        m = v @ v.mT
        loss = (lib.view_as_real(m) ** 2).sum() + v.abs().sum() + v.angle().sum() \
            + v.real.sum() * 2 - v.imag.sum()
        loss.backward()
        grads.append([x.grad.numpy() for x in (r, t, w)] + [loss.item()])
    for got, want in zip(grads[0], grads[1]):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def _rotary(lib, xq, dim, seq, theta=10000.0):
    """LLaMA's precompute_freqs_cis + apply_rotary_emb, written as the public code writes it."""
    freqs = 1.0 / (theta ** (lib.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = lib.arange(seq, device=freqs.device)
    freqs = lib.outer(t, freqs).float()
    freqs_cis = lib.polar(lib.ones_like(freqs), freqs)
    xq_ = lib.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    return lib.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq)


def test_llama_rotary_embedding_matches_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 5, 3, 8)).astype(np.float32)   # batch, seq, heads, head_dim
    cot = RNG.standard_normal(x.shape).astype(np.float32)
    a, b = _both(torch, x)
    out_a, out_b = _rotary(tb, a, 8, 5), _rotary(torch, b, 8, 5)
    np.testing.assert_allclose(out_a.detach().numpy(), out_b.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    (out_a * tb.tensor(cot)).sum().backward()
    (out_b * torch.tensor(cot)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert out_a.dtype == tb.float32


def test_real_tensors_pass_through():
    x = tb.tensor([-1.0, 2.0])
    assert tb.real(x) is x and tb.conj(x) is x and tb.resolve_conj(x) is x
    assert tb.angle(x).tolist() == [pytest.approx(np.pi), 0.0]
    with pytest.raises(RuntimeError, match="non-complex"):
        tb.imag(x)
    with pytest.raises(TypeError, match="same dtype"):
        tb.polar(tb.ones(1), tb.ones(1, dtype=tb.float64))
