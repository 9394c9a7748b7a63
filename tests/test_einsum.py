"""tb.einsum against NumPy (values) and torch (values and gradients) over torch's equation forms:
explicit and implicit outputs, ellipsis with broadcasting, size-1 broadcasting, summed-away
indices, three operands, the list form."""
import numpy as np
import pytest

import tensorbrain as tb

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bhid,bhjd->bhij", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("bhij,bhjd->bhid", [(2, 2, 3, 5), (2, 2, 5, 4)]),
    ("ij,jk", [(3, 4), (4, 5)]),                    # implicit output
    ("ba", [(3, 4)]),                                 # implicit: a transpose
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->j", [(3, 4)]),                              # a summed-away index
    ("ij,k->ij", [(3, 4), (5,)]),                     # k only in one operand
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),      # ellipsis, broadcast over the batch
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 5)]),
    ("b...,b->b...", [(2, 3, 4), (2,)]),
    ("bi,bi->b", [(1, 4), (3, 4)]),                   # size-1 broadcast of a letter
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
]


@pytest.mark.parametrize("eq, shapes", CASES)
def test_einsum_matches_torch_values_and_gradients(eq, shapes):
    rng = np.random.default_rng(len(eq))
    arrays = [rng.standard_normal(s).astype(np.float64) for s in shapes]
    ours = [tb.tensor(a, requires_grad=True) for a in arrays]
    out = tb.einsum(eq, *ours)
    weights = rng.standard_normal(out.shape)
    (out * tb.tensor(weights)).sum().backward()
    torch = pytest.importorskip("torch")
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = torch.einsum(eq, *theirs)
    (want * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_einsum_without_torch_matches_numpy_and_finite_differences():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    np.testing.assert_allclose(tb.einsum("bij,bjk->bik", [tb.tensor(a), tb.tensor(b)]).numpy(),
                               np.einsum("bij,bjk->bik", a, b), rtol=1e-12)
    x = tb.tensor(a, requires_grad=True)
    tb.einsum("bij,bjk->", x, tb.tensor(b)).backward()
    eps, k = 1e-6, (1, 2, 3)
    ap = a.copy()
    ap[k] += eps
    fd = (np.einsum("bij,bjk->", ap, b) - np.einsum("bij,bjk->", a, b)) / eps
    assert abs(x.grad.numpy()[k] - fd) < 1e-5


def test_einsum_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="2 operand"):
        tb.einsum("ij,jk->ik", tb.ones(2, 2))
    with pytest.raises(RuntimeError, match="size 4 for one operand and 3"):
        tb.einsum("ij,ij->i", tb.ones(2, 3), tb.ones(2, 4))
    with pytest.raises(RuntimeError, match="subscript"):
        tb.einsum("ij->i", tb.ones(2, 3, 4))
    with pytest.raises(NotImplementedError, match="repeated subscript"):
        tb.einsum("ii->i", tb.ones(3, 3, requires_grad=True))
    assert tb.einsum("ii->i", tb.eye(3)).tolist() == [1.0, 1.0, 1.0]
