"""tb.linalg and the torch-namespace linear algebra: values and gradients against torch (and
finite differences), batched inputs, LinAlgError on singular inputs."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.testing import gradcheck

R = np.random.default_rng(0)


def spd(*batch, n=3):
    m = R.standard_normal((*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


CASES = {
    "inv": (lambda L, a: L.linalg.inv(a), [R.standard_normal((2, 3, 3)) + 3 * np.eye(3)]),
    "det": (lambda L, a: L.linalg.det(a), [R.standard_normal((2, 3, 3))]),
    "slogdet": (lambda L, a: L.linalg.slogdet(a)[1], [R.standard_normal((3, 3))]),
    "logdet": (lambda L, a: L.logdet(a), [spd()]),
    "solve": (lambda L, a, b: L.linalg.solve(a, b), [spd(2), R.standard_normal((2, 3, 2))]),
    "solve_vec": (lambda L, a, b: L.linalg.solve(a, b), [spd(), R.standard_normal(3)]),
    "solve_right": (lambda L, a, b: L.linalg.solve(a, b, left=False),
                    [spd(), R.standard_normal((2, 3))]),
    "solve_triangular": (lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True),
                         [np.triu(R.standard_normal((3, 3))) + 3 * np.eye(3),
                          R.standard_normal((3, 2))]),
    "cholesky": (lambda L, a: L.linalg.cholesky(a), [spd(2)]),
    "cholesky_upper": (lambda L, a: L.linalg.cholesky(a, upper=True), [spd()]),
    "qr": (lambda L, a: L.linalg.qr(a), [R.standard_normal((4, 3))]),
    "eigh": (lambda L, a: L.linalg.eigh(a), [spd()]),
    "svd": (lambda L, a: L.linalg.svd(a, full_matrices=False), [R.standard_normal((4, 3))]),
    "svd_wide": (lambda L, a: L.linalg.svd(a, full_matrices=False), [R.standard_normal((2, 4))]),
    "svdvals": (lambda L, a: L.linalg.svdvals(a), [R.standard_normal((3, 5))]),
    "pinv": (lambda L, a: L.linalg.pinv(a), [R.standard_normal((4, 3))]),
    "matrix_power": (lambda L, a: L.linalg.matrix_power(a, 5), [R.standard_normal((3, 3)) / 2]),
    "matrix_power_neg": (lambda L, a: L.linalg.matrix_power(a, -2), [spd()]),
    "matrix_exp": (lambda L, a: L.linalg.matrix_exp(a), [R.standard_normal((2, 3, 3))]),
    "vector_norm": (lambda L, a: L.linalg.vector_norm(a, 3, dim=1), [R.standard_normal((2, 4))]),
    "vector_norm_inf": (lambda L, a: L.linalg.vector_norm(a, float("inf")), [R.standard_normal(5)]),
    "norm": (lambda L, a: L.linalg.norm(a), [R.standard_normal((3, 4))]),
    "matrix_norm_nuc": (lambda L, a: L.linalg.matrix_norm(a, "nuc"), [R.standard_normal((3, 4))]),
    "matrix_norm_1": (lambda L, a: L.linalg.matrix_norm(a, 1), [R.standard_normal((3, 4))]),
    "matrix_norm_2": (lambda L, a: L.linalg.matrix_norm(a, 2), [R.standard_normal((3, 4))]),
    "matrix_norm_inf": (lambda L, a: L.linalg.matrix_norm(a, float("inf"), keepdim=True),
                        [R.standard_normal((2, 3, 4))]),
    "cond": (lambda L, a: L.linalg.cond(a), [spd()]),
    "multi_dot": (lambda L, a, b, c: L.linalg.multi_dot([a, b, c]),
                  [R.standard_normal(3), R.standard_normal((3, 4)), R.standard_normal(4)]),
    "vecdot": (lambda L, a, b: L.linalg.vecdot(a, b), [R.standard_normal((2, 3)),
                                                        R.standard_normal(3)]),
    "lstsq": (lambda L, a, b: L.linalg.lstsq(a, b).solution, [R.standard_normal((5, 3)),
                                                               R.standard_normal((5, 2))]),
    "cholesky_solve": (lambda L, b, f: L.cholesky_solve(b, f),
                       [R.standard_normal((3, 2)), np.linalg.cholesky(spd())]),
    "cholesky_inverse": (lambda L, f: L.cholesky_inverse(f), [np.linalg.cholesky(spd())]),
    "torch_svd": (lambda L, a: L.svd(a), [R.standard_normal((4, 3))]),
    "torch_qr": (lambda L, a: a.qr(), [R.standard_normal((3, 3))]),
    "inverse": (lambda L, a: a.inverse(), [spd()]),
    "pinverse": (lambda L, a: L.pinverse(a), [R.standard_normal((2, 3))]),
}
# decompositions are unique up to signs: compare what is sign-free
SIGNLESS = {"qr": lambda out, L: (out[1].abs(), (out[0] @ out[1])),
            "torch_qr": lambda out, L: (out[1].abs(), out[0] @ out[1]),
            "eigh": lambda out, L: (out[0], (out[1] * out[1])),
            "svd": lambda out, L: (out[1], out[0] @ L.diag_embed(out[1]) @ out[2],
                                   (out[0] * out[0])),
            "svd_wide": lambda out, L: (out[1], out[0] @ L.diag_embed(out[1]) @ out[2]),
            "torch_svd": lambda out, L: (out[1], out[0] @ L.diag_embed(out[1]) @ out[2].mT)}


def _outs(name, out, lib):
    out = SIGNLESS[name](out, lib) if name in SIGNLESS else out
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_and_finite_differences(name):
    fn, arrays = CASES[name]
    # no finite differences where the function is not smooth (the max-type norms) or reads one
    # triangle only (cholesky, eigh: torch's symmetric gradient is compared instead)
    if name not in ("matrix_norm_inf", "vector_norm_inf", "matrix_norm_1", "cholesky",
                    "cholesky_upper", "eigh"):
        gradcheck(lambda *ts: _outs(name, fn(tb, *ts), tb), arrays, atol=1e-5, rtol=1e-4)
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tb, torch):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        outs = _outs(name, fn(lib, *ts), lib)
        cot = np.random.default_rng(1)
        loss = sum((o * lib.tensor(cot.standard_normal(tuple(o.shape)))).sum() for o in outs)
        loss.backward()
        res.append(([o.detach().numpy() for o in outs], [t.grad.numpy() for t in ts]))
    for a, b in zip(res[0][0] + res[0][1], res[1][0] + res[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9, err_msg=name)


def test_singular_inputs_raise_linalg_error():
    with pytest.raises(tb.linalg.LinAlgError, match="linalg.inv"):
        tb.linalg.inv(tb.zeros(2, 2))
    with pytest.raises(RuntimeError, match="positive-definite"):
        tb.linalg.cholesky(-tb.eye(2))
    assert issubclass(tb.linalg.LinAlgError, RuntimeError)
    torch = pytest.importorskip("torch")
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.inv(torch.zeros(2, 2))


def test_rank_eig_and_errors():
    a = tb.tensor([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]])
    assert tb.linalg.matrix_rank(a).item() == 1
    w = tb.linalg.eig(tb.tensor([[0.0, -1.0], [1.0, 0.0]])).eigenvalues
    assert sorted(v.imag for v in w.tolist()) == [-1.0, 1.0]
    with pytest.raises(NotImplementedError, match="eigh"):
        tb.linalg.eig(tb.eye(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="not supported"):
        tb.linalg.matrix_norm(tb.eye(2), 3)
    with pytest.raises(RuntimeError, match="floating point"):
        tb.linalg.inv(tb.eye(2, dtype=tb.int64))
