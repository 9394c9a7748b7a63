"""torch semantics real programs rely on: .data, detach_, __format__, view strides, .to(int),
backends, accelerator and the small names."""
import itertools

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn


# ***** .data *****
def test_data_shares_storage_without_history():
    w = nn.Parameter(tb.ones(3))
    d = w.data
    assert isinstance(d, tb.Tensor) and not d.requires_grad and d.grad_fn is None
    d.add_(tb.tensor([1.0, 2.0, 3.0]), alpha=-0.5)   # no no_grad() needed, as in torch
    np.testing.assert_allclose(w.numpy(force=True), [0.5, 0.0, -0.5])
    w.data.fill_(2.0)
    assert w.tolist() == [2.0, 2.0, 2.0]
    w.data.copy_(tb.tensor([4.0, 5.0, 6.0]))
    assert w.tolist() == [4.0, 5.0, 6.0]
    tb.manual_seed(0)
    w.data.normal_()
    assert w.tolist() != [4.0, 5.0, 6.0] and w.requires_grad


def test_manual_sgd_through_data_matches_numpy():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 3)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    w = tb.zeros(3, requires_grad=True)
    wn = np.zeros(3, np.float32)
    for _ in range(5):
        loss = ((tb.from_numpy(x) @ w - tb.from_numpy(y)) ** 2).mean()
        loss.backward()
        w.data.add_(w.grad.data, alpha=-0.1)
        w.grad.data.zero_()
        wn -= 0.1 * (2 * x.T @ (x @ wn - y) / 16)
    np.testing.assert_allclose(w.numpy(force=True), wn, rtol=1e-5, atol=1e-6)


def test_assigning_data_replaces_the_storage():
    lin = nn.Linear(2, 2)
    lin.weight.data = tb.zeros(3, 2)
    assert lin.weight.shape == (3, 2) and isinstance(lin.weight, nn.Parameter)
    assert lin.weight.requires_grad
    with pytest.raises(TypeError, match="must be set to a Tensor"):
        lin.weight.data = [1, 2]


def test_detach_in_place():
    x = tb.ones(2, requires_grad=True)
    y = x * 2
    assert y.detach_() is y and y.grad_fn is None and not y.requires_grad
    with pytest.raises(RuntimeError, match="view"):
        (x * 1)[0:1].detach_()


# ***** formatting *****
def test_format_of_zero_dim_tensors_as_python_numbers():
    t = tb.tensor(0.123456)
    assert f"{t:.4f}" == "0.1235" and "{:5.2f}".format(t) == " 0.12"  # noqa: UP032 (str.format)
    assert f"{tb.tensor(7):03d}" == "007"
    assert f"{tb.ones(2)}" == str(tb.ones(2))
    with pytest.raises(TypeError):
        f"{tb.ones(2):.2f}"


# ***** view and strides *****
def test_view_after_transpose_contiguous():
    x = tb.randn(2, 3, 4, 5)
    y = x.transpose(1, 2).contiguous()
    assert y.is_contiguous()
    np.testing.assert_array_equal(y.view(2, 4, 15).numpy(),
                                  x.numpy().transpose(0, 2, 1, 3).reshape(2, 4, 15))


@pytest.mark.parametrize("shape,index,new,ok", [
    ((4, 6), (slice(None, 3),), (18,), True),              # rows cut: still one block
    ((4, 6), (slice(None), slice(None, 3)), (12,), False),  # columns cut: rows are apart
    ((2, 3, 4), (slice(None), slice(1, None)), (2, 8), True),  # merge the last two
    ((2, 3, 4), (slice(None), slice(1, None)), (4, 4), False),
])
def test_view_follows_torchs_stride_rule(shape, index, new, ok):
    x = tb.randn(*shape)[index]
    if ok:
        assert x.view(*new).shape == new
    else:
        with pytest.raises(RuntimeError, match="reshape"):
            x.view(*new)
    assert x.reshape(*new).shape == new


def test_view_stride_rule_agrees_with_torch():
    torch = pytest.importorskip("torch")
    for shape, perm, new in [((2, 3, 4), (0, 2, 1), (2, 12)), ((2, 3, 4), (1, 0, 2), (3, 8)),
                             ((1, 5, 1), (2, 1, 0), (5,)), ((3, 4), (1, 0), (12,))]:
        a = tb.zeros(*shape).permute(*perm)
        t = torch.zeros(*shape).permute(*perm)
        try:
            t.view(*new)
            torch_ok = True
        except RuntimeError:
            torch_ok = False
        try:
            a.view(*new)
            ours = True
        except RuntimeError:
            ours = False
        assert ours == torch_ok, (shape, perm, new)
        assert a.is_contiguous() == t.is_contiguous(), (shape, perm)


# ***** devices *****
def test_to_int_means_a_cuda_device_and_cpu_index_is_accepted():
    assert tb.device("cpu:1").index == 1 and str(tb.device("cpu:1")) == "cpu:1"
    assert tb.ones(2).to("cpu:1").device == tb.device("cpu")
    if not tb.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            tb.ones(2).to(0)
        with pytest.raises(RuntimeError, match="set_device"):
            tb.cuda.set_device(0)
    assert tb.ones(2).to(tb.float64).dtype == tb.float64


# ***** small names *****
def test_randint_forms():
    tb.manual_seed(0)
    a = tb.randint(5, (100,))
    b = tb.randint(2, 5, (100,))
    c = tb.randint(low=2, high=5, size=(3, 2))
    assert a.shape == (100,) and 0 <= int(a.min()) and int(a.max()) < 5
    assert 2 <= int(b.min()) and int(b.max()) < 5 and c.shape == (3, 2)
    assert a.dtype == tb.int64


def test_random_sampler_with_replacement_is_lazy():
    from tensorbrain.utils.data import RandomSampler
    s = RandomSampler(range(10), replacement=True, num_samples=10 ** 10)
    assert len(s) == 10 ** 10
    first = list(itertools.islice(iter(s), 1000))
    assert len(first) == 1000 and set(first) <= set(range(10))
    s = RandomSampler(range(4), num_samples=10)
    drawn = list(s)
    assert len(drawn) == 10 and sorted(drawn[:4]) == [0, 1, 2, 3] and sorted(drawn[4:8]) == [0, 1, 2, 3]


def test_small_names():
    t = tb.ones(2)
    assert not t.is_pinned() and not t.is_xpu and not t.is_mps
    if not tb.cuda.is_available():   # nothing to pin for (with CUDA: tests/test_tensor.py)
        assert t.pin_memory() is t
    tb.cuda.manual_seed_all(1)
    tb.cuda.manual_seed(1)
    assert tb.accelerator.is_available() == tb.cuda.is_available()
    if not tb.cuda.is_available():
        assert tb.accelerator.current_accelerator() is None and tb.accelerator.device_count() == 0
    import tensorbrain.distributed as dist
    assert dist.reduce_op.SUM == dist.ReduceOp.SUM
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device(tb.device("cuda:1")) == "nccl"
    assert tb.utils.data.distributed.DistributedSampler.__name__ == "DistributedSampler"
    from tensorbrain.utils.data import DataLoader, TensorDataset
    batches = list(DataLoader(TensorDataset(tb.arange(4)), batch_size=2, pin_memory=True))
    assert [b[0].tolist() for b in batches] == [[0, 1], [2, 3]]


def test_backends_answer_honestly():
    b = tb.backends
    assert not b.cudnn.is_available() and not b.mps.is_available() and not b.mps.is_built()
    assert not b.mkldnn.is_available() and not b.openmp.is_available()
    b.cudnn.benchmark, b.cudnn.deterministic = True, True
    b.cuda.matmul.allow_tf32 = True
    with b.cudnn.flags(enabled=False):
        assert b.cudnn.enabled is False
    assert b.cudnn.enabled is True
    b.cudnn.benchmark, b.cudnn.deterministic = False, False
    b.cuda.matmul.allow_tf32 = False


def test_float32_matmul_precision_follows_torch():
    """build-nanogpt-style trainers call it first thing; stored, tied to allow_tf32 as torch."""
    try:
        seq = ["highest", "high", "medium", "bogus", "highest"]
        ours = []
        for p in seq:
            if p == "bogus":
                with pytest.warns(UserWarning, match="no effect"):
                    tb.set_float32_matmul_precision(p)
            else:
                tb.set_float32_matmul_precision(p)
            ours.append((tb.get_float32_matmul_precision(), tb.backends.cuda.matmul.allow_tf32))
        tb.backends.cuda.matmul.allow_tf32 = True
        ours.append((tb.get_float32_matmul_precision(), True))
        assert ours == [("highest", False), ("high", True), ("medium", True), ("medium", True),
                        ("highest", False), ("high", True)]
    finally:
        tb.set_float32_matmul_precision("highest")


@pytest.mark.parametrize("shape, wrap", [((3, 3), False), ((2, 4), False), ((7, 3), False),
                                         ((7, 3), True), ((3, 3, 3), False)])
def test_fill_diagonal_matches_numpy(shape, wrap):
    # a metric-learning program masks self-similarity with sim.fill_diagonal_(-1)
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    want = a.copy()
    np.fill_diagonal(want, -1.5, wrap=wrap)
    t = tb.tensor(a.copy())
    assert t.fill_diagonal_(-1.5, wrap=wrap) is t
    np.testing.assert_array_equal(t.numpy(), want)


def test_fill_diagonal_gradient_and_errors():
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    x = tb.tensor(a, requires_grad=True)
    y = x * 2
    y.fill_diagonal_(0.0)
    (y * y).sum().backward()
    want = 8 * a
    np.fill_diagonal(want, 0.0)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)
    with pytest.raises(RuntimeError, match="dimensions must larger than 1"):
        tb.zeros(3).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="equal length"):
        tb.zeros(2, 2, 3).fill_diagonal_(1)
