"""The fused float32 kernels of csrc/kernels/fused.cpp (GELU, ...) against their NumPy twins in
tensorbrain/_ops (same names), on both CPU paths; the ops built on them against the twins' ops.
(The ops themselves are checked against torch and finite differences in tests/nn and
tests/test_gelu_erf.py.)"""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _native
from tensorbrain._ops import elementwise

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
rng = np.random.default_rng(0)
EPS = float(np.finfo(np.float32).eps)


@pytest.fixture(params=["baseline", "avx2+f16c"])
def cpu_path(request):
    C = _native.module()
    try:
        C._force_cpu_path(request.param)
    except ValueError:
        pytest.skip(f"this CPU cannot run the {request.param} loops")
    yield C
    C._force_cpu_path("auto")


def test_gelu_kernels_match_twins(cpu_path):
    C = cpu_path
    x = np.concatenate([rng.standard_normal(1001) * 3, [0.0, -0.0, 5.7, -5.7, 40.0, -40.0]])
    x = x.astype(np.float32).reshape(-1, 1)[:, 0]          # an odd length: the vector tail
    g = rng.standard_normal(x.shape).astype(np.float32)
    # the same erf rational in the same float32 operations: bit for bit
    assert np.array_equal(C.gelu_erf_forward(x), elementwise.gelu_erf_forward(x))
    np.testing.assert_allclose(C.gelu_erf_backward(x, g), elementwise.gelu_erf_backward(x, g),
                               rtol=8 * EPS, atol=8 * EPS)
    with pytest.raises(ValueError, match="differ in size"):
        C.gelu_erf_backward(x, g[:-1])


def test_gelu_op_native_matches_twin(monkeypatch):
    x = rng.standard_normal((4, 33)).astype(np.float32)
    g = rng.standard_normal((4, 33)).astype(np.float32)

    def run(native):
        monkeypatch.setattr(elementwise, "_NATIVE_FUSED", native)
        t = tb.tensor(x, requires_grad=True)
        out = tb.nn.functional.gelu(t)
        out.backward(tb.tensor(g))
        return out.detach().numpy(), t.grad.numpy()
    for a, b in zip(run(True), run(False)):
        np.testing.assert_allclose(a, b, rtol=8 * EPS, atol=8 * EPS)
