"""tb.nested against torch.nested: construction, sizes, unbind, to_padded_tensor, elementwise
ops, and gradients through nested_tensor / as_nested_tensor."""
import numpy as np
import pytest

import tensorbrain as tb

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)
A, B = rng.standard_normal((2, 3)), rng.standard_normal((4, 3))


def _same(got, want):
    np.testing.assert_allclose(np.asarray(got.tolist()), want.detach().numpy(), rtol=1e-12)


def test_structure_and_padding_match_torch():
    nt = tb.nested.nested_tensor([tb.tensor(A), tb.tensor(B)])
    tnt = torch.nested.nested_tensor([torch.tensor(A), torch.tensor(B)])
    assert (nt.is_nested, nt.dim(), nt.size(0), nt.size(2), nt.size(-1)) == \
        (tnt.is_nested, tnt.dim(), tnt.size(0), tnt.size(2), tnt.size(-1))
    assert isinstance(nt, tb.Tensor) and repr(nt.layout) == repr(tnt.layout)
    for f in (lambda t: t.size(1), lambda t: t.size(), lambda t: t.shape,
              lambda t: t + t.unbind()[0]):
        errs = []
        for t in (nt, tnt):
            with pytest.raises(RuntimeError) as e:
                f(t)
            errs.append(str(e.value))
        assert errs[0] == errs[1]
    for u, tu in zip(nt.unbind(), tnt.unbind()):
        _same(u, tu)
    for args in ((0.0,), (-1.5, (2, 6, 5))):
        _same(nt.to_padded_tensor(*args), tnt.to_padded_tensor(*args))
        _same(tb.nested.to_padded_tensor(nt, *args), torch.nested.to_padded_tensor(tnt, *args))
    with pytest.raises(RuntimeError, match="Truncation is not supported"):
        nt.to_padded_tensor(0.0, (2, 3, 3))
    with pytest.raises(RuntimeError, match="Truncation is not supported"):
        tnt.to_padded_tensor(0.0, (2, 3, 3))
    with pytest.raises(NotImplementedError, match="to_padded_tensor"):
        tb.ones(2).to_padded_tensor(0.0)
    ragged = tb.nested.nested_tensor([[1.0, 2.0], [3.0]])
    _same(ragged.to_padded_tensor(9.0),
          torch.nested.nested_tensor([[1.0, 2.0], [3.0]]).to_padded_tensor(9.0))
    with pytest.raises(RuntimeError, match="same dimension"):
        tb.nested.nested_tensor([tb.ones(2), tb.ones(2, 2)])


def test_elementwise_ops_and_gradients_match_torch():
    x, tx = tb.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    nt = tb.nested.nested_tensor([tb.tensor(A), tb.tensor(B)], requires_grad=True)
    tnt = torch.nested.nested_tensor([torch.tensor(A), torch.tensor(B)], requires_grad=True)
    ant = tb.nested.as_nested_tensor([x, tb.tensor(B)])
    tant = torch.nested.as_nested_tensor([tx, torch.tensor(B)])
    assert (nt.is_leaf, nt.requires_grad, ant.is_leaf) == (tnt.is_leaf, tnt.requires_grad,
                                                           tant.is_leaf)

    def f(n, a):
        y = (n.relu() * 2 + n.sin() - a / 3) * n + 1.0
        return (y.to_padded_tensor(0.5) ** 2).sum()
    f(nt, ant).backward()
    f(tnt, tant).backward()
    for g, tg in zip(nt.grad.unbind(), tnt.grad.unbind()):
        _same(g, tg)
    _same(x.grad, tx.grad)
    assert nt.unbind()[0].requires_grad
