"""Interop: DLPack both ways (zero-copy), NumPy ufuncs returning Tensors, torch state dicts,
torch.as_tensor through the array protocol, rng state."""
import numpy as np
import pytest

import tensorbrain as tb


# ***** DLPack *****
def test_numpy_from_dlpack_shares_memory_both_ways():
    t = tb.tensor([1.0, 2.0, 3.0])
    a = np.from_dlpack(t)
    a[0] = 10.0
    assert t.tolist() == [10.0, 2.0, 3.0]
    t[1] = 20.0
    assert a.tolist() == [10.0, 20.0, 3.0]
    assert t.__dlpack_device__() == (1, 0)


def test_tb_from_dlpack_numpy_shares_memory():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = tb.from_dlpack(a)
    assert t.dtype == tb.int32 and tuple(t.shape) == (2, 3)
    t[1, 2] = -1
    assert a[1, 2] == -1
    a[0, 0] = 7
    assert t[0, 0].item() == 7


def test_from_dlpack_rejects_other_objects():
    with pytest.raises(TypeError, match="__dlpack__"):
        tb.from_dlpack([1, 2, 3])


def test_dlpack_refuses_tensor_that_requires_grad_as_torch():
    x = tb.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        np.from_dlpack(x)
    assert np.from_dlpack(x.detach()).tolist() == [1.0, 1.0]


def test_torch_dlpack_round_trip_zero_copy():
    torch = pytest.importorskip("torch")
    for dtype in (torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool):
        src = torch.zeros(4, dtype=dtype)
        t = tb.from_dlpack(src)
        assert t.dtype == np.dtype(str(src.numpy().dtype))
        t[1] = 1
        assert src[1].item() == 1  # written through tb, read through torch
        src[2] = 1
        assert t[2].item() == 1   # written through torch, read through tb
    t = tb.arange(5).float()
    back = torch.from_dlpack(t)
    back[0] = 42.0
    assert t[0].item() == 42.0
    t[4] = -3.0
    assert back[4].item() == -3.0


def test_utils_dlpack_capsules():
    torch = pytest.importorskip("torch")
    from tensorbrain.utils.dlpack import from_dlpack, to_dlpack
    t = tb.tensor([1.0, 2.0, 3.0])
    back = torch.utils.dlpack.from_dlpack(to_dlpack(t))
    back[1] = 5.0
    assert t.tolist() == [1.0, 5.0, 3.0]
    src = torch.arange(3.0)
    u = from_dlpack(torch.utils.dlpack.to_dlpack(src))
    src[0] = 9.0  # legacy capsules import read-only on the host (NumPy's rule), still shared
    assert u[0].item() == 9.0


def test_torch_as_tensor_and_tensor_through_the_protocol():
    torch = pytest.importorskip("torch")
    t = tb.tensor([1.5, 2.5])
    shared = torch.as_tensor(t)
    shared[0] = 0.0
    assert t[0].item() == 0.0  # as_tensor shares, as with NumPy arrays
    copied = torch.tensor(t)
    copied[1] = 9.0
    assert t[1].item() == 2.5  # torch.tensor copies
    zero_d = tb.tensor(3.0)
    assert torch.as_tensor(zero_d).item() == 3.0 and torch.as_tensor(zero_d).dim() == 0
    assert torch.tensor(zero_d).item() == 3.0
    assert torch.as_tensor(tb.tensor([1, 2])).dtype == torch.int64


# ***** NumPy ufuncs *****
def test_numpy_binary_ops_return_tensors():
    t = tb.tensor([1.0, 2.0, 3.0])
    for result in (np.ones(3) + t, t + np.ones(3), np.ones(3) * t, np.float32(2) * t):
        assert isinstance(result, tb.Tensor)
    np.testing.assert_allclose((np.ones(3) + t).numpy(), [2.0, 3.0, 4.0])
    np.testing.assert_allclose((np.arange(3.0) - t).numpy(), [-1.0, -1.0, -1.0])
    assert isinstance(np.ones(3) > t, tb.Tensor)


def test_numpy_unary_ufuncs_match_numpy():
    data = np.array([0.5, 1.0, 2.0], dtype=np.float32)
    t = tb.tensor(data)
    for fn in (np.exp, np.log, np.sqrt, np.sin, np.tanh, np.floor, np.arctan, np.cbrt):
        out = fn(t)
        assert isinstance(out, tb.Tensor), fn
        np.testing.assert_allclose(out.numpy(), fn(data), rtol=1e-6)
    assert isinstance(np.add.reduce(t), tb.Tensor)
    assert np.add.reduce(t).item() == pytest.approx(3.5)


def test_ufunc_with_tb_op_keeps_the_graph():
    x = tb.tensor([0.5, 1.0], requires_grad=True)
    y = np.exp(x) * np.ones(2)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0]), rtol=1e-6)


def test_ufunc_without_tb_op_on_grad_tensor_raises():
    x = tb.tensor([0.5, 1.0], requires_grad=True)
    with pytest.raises(TypeError, match="np.arctan.*requires grad"):
        np.arctan(x)
    with pytest.raises(TypeError, match="np.add.reduce"):
        np.add.reduce(x)
    with tb.no_grad():
        assert isinstance(np.arctan(x), tb.Tensor)
    assert isinstance(np.arctan(x.detach()), tb.Tensor)


# ***** state dicts from torch and NumPy *****
def test_load_state_dict_from_torch_and_numpy():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    ref.eval()
    model = tb.nn.Sequential(tb.nn.Linear(4, 3), tb.nn.BatchNorm1d(3))
    model.eval()
    model.load_state_dict(ref.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    want = ref(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(model(tb.tensor(x)).numpy(force=True), want, rtol=1e-5, atol=1e-6)
    as_numpy = {k: v.numpy() for k, v in ref.state_dict().items()}
    model2 = tb.nn.Sequential(tb.nn.Linear(4, 3), tb.nn.BatchNorm1d(3))
    model2.eval()
    model2.load_state_dict(as_numpy)
    np.testing.assert_allclose(model2(tb.tensor(x)).numpy(force=True), want, rtol=1e-5, atol=1e-6)


def test_load_state_dict_bfloat16_torch_values():
    torch = pytest.importorskip("torch")
    ref = torch.nn.Linear(3, 2)
    sd = {k: v.to(torch.bfloat16) for k, v in ref.state_dict().items()}
    model = tb.nn.Linear(3, 2)
    model.load_state_dict(sd)
    assert model.weight.dtype == tb.float32
    np.testing.assert_array_equal(model.weight.detach().numpy(), sd["weight"].float().numpy())


def test_load_state_dict_unsupported_type_is_named():
    model = tb.nn.Linear(2, 1)
    sd = {"weight": np.zeros((1, 2), np.float32), "bias": object()}
    with pytest.raises(RuntimeError, match=r"state_dict\['bias'\]: unsupported type builtins.object"):
        model.load_state_dict(sd)


# ***** rng state *****
def test_rng_state_round_trip():
    tb.manual_seed(3)
    state = tb.get_rng_state()
    assert state.dtype == tb.uint8 and state.dim() == 1
    a = tb.rand(4)
    tb.set_rng_state(state)
    assert tb.equal(a, tb.rand(4))
    assert tb.random.get_rng_state is tb.get_rng_state
    with tb.random.fork_rng():
        tb.rand(10)
    after_fork = tb.rand(2)
    tb.set_rng_state(state)
    tb.rand(4)
    assert tb.equal(after_fork, tb.rand(2))


def test_set_rng_state_rejects_bad_input():
    with pytest.raises(TypeError, match="uint8"):
        tb.set_rng_state(tb.zeros(3))
    with pytest.raises(ValueError, match="get_rng_state"):
        tb.set_rng_state(tb.tensor([1, 2, 3], dtype=tb.uint8))


def test_generator_state_round_trip():
    g = tb.Generator().manual_seed(5)
    s = g.get_state()
    a = tb.rand(3, generator=g)
    g.set_state(s)
    assert tb.equal(a, tb.rand(3, generator=g))


def test_save_needs_no_extra(tmp_path):
    tb.save({"w": tb.ones(2)}, tmp_path / "x.safetensors")  # safetensors is a core dependency
    assert tb.load(tmp_path / "x.safetensors")["w"].tolist() == [1.0, 1.0]


@pytest.mark.gpu
def test_cupy_dlpack_zero_copy_both_ways():
    cp = pytest.importorskip("cupy")
    t = tb.zeros(4, device="cuda")
    assert t.__dlpack_device__()[0] == 2
    c = cp.from_dlpack(t)
    c[0] = 5.0
    assert t[0].item() == 5.0
    src = cp.zeros(3, dtype=cp.float32)
    u = tb.from_dlpack(src)
    assert u.is_cuda
    u[1] = 2.0
    assert float(src[1]) == 2.0
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        g = torch.from_dlpack(t)
        g[3] = 7.0
        assert t[3].item() == 7.0


def test_bfloat16_crosses_dlpack_both_ways_with_torch():
    torch = pytest.importorskip("torch")
    t = tb.tensor([1.5, -2.0, 3.25], dtype=tb.bfloat16)
    x = torch.from_dlpack(t)
    assert x.dtype == torch.bfloat16 and x.tolist() == [1.5, -2.0, 3.25]
    x[0] = 7.0  # the same memory
    assert t.tolist() == [7.0, -2.0, 3.25]
    y = torch.tensor([0.5, 2.5], dtype=torch.bfloat16)
    u = tb.from_dlpack(y)
    assert u.dtype == tb.bfloat16 and u.tolist() == [0.5, 2.5]
    u[1] = 9.0
    assert y.tolist() == [0.5, 9.0]
    legacy = tb.from_dlpack(torch.utils.dlpack.to_dlpack(y))
    assert legacy.dtype == tb.bfloat16 and legacy.tolist() == [0.5, 9.0]
    strided = tb.ones(2, 3, dtype=tb.bfloat16).t()
    assert torch.from_dlpack(strided).shape == (3, 2)


def test_bfloat16_capsule_says_bfloat16():
    from tensorbrain import _interop
    capsule = tb.utils.dlpack.to_dlpack(tb.tensor([1.0, 2.0], dtype=tb.bfloat16))
    assert _interop._code_byte(capsule).value == 4  # dlpack.h: kDLBfloat
    back = tb.utils.dlpack.from_dlpack(capsule)
    assert back.dtype == tb.bfloat16 and back.tolist() == [1.0, 2.0]


def test_load_state_dict_bfloat16_into_a_bfloat16_model_stays_bfloat16():
    torch = pytest.importorskip("torch")
    ref = torch.nn.Linear(3, 2).to(torch.bfloat16)
    model = tb.nn.Linear(3, 2).to(tb.bfloat16)
    model.load_state_dict(ref.state_dict())
    assert model.weight.dtype == tb.bfloat16
    np.testing.assert_array_equal(model.weight.detach().numpy().astype(np.float32),
                                  ref.weight.detach().float().numpy())
