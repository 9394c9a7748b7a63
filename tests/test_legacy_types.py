"""torch's legacy typed classes (tb.FloatTensor, tb.cuda.LongTensor, ...) and Tensor.type(),
against torch when installed."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain._legacy_types import TYPES


def test_constructors_follow_torchs_rules():
    assert tb.FloatTensor().shape == (0,)
    assert tb.FloatTensor(2, 3).shape == (2, 3) and tb.FloatTensor(2, 3).dtype == tb.float32
    assert tb.LongTensor(tb.Size([4])).shape == (4,)
    x = tb.LongTensor([1, 2, 3])
    assert x.dtype == tb.int64 and x.tolist() == [1, 2, 3]
    assert tb.FloatTensor((2, 3)).tolist() == [2.0, 3.0]          # a tuple is data, as torch
    assert tb.ByteTensor(np.array([1, 255])).tolist() == [1, 255]
    assert tb.BoolTensor([True, False]).dtype == tb.bool
    with pytest.raises(TypeError, match="expected int64"):
        tb.LongTensor(tb.ones(2))
    torch = pytest.importorskip("torch")
    for name in TYPES:
        want = getattr(torch, name)([1, 0]).dtype
        assert str(getattr(tb, name)([1, 0]).dtype) == str(want).replace("torch.", ""), name
    assert torch.FloatTensor((2, 3)).tolist() == [2.0, 3.0]
    with pytest.raises(TypeError):
        torch.LongTensor(torch.ones(2))


def test_isinstance_checks_dtype_and_device():
    x = tb.ones(2)
    assert isinstance(x, tb.FloatTensor) and not isinstance(x, tb.DoubleTensor)
    assert not isinstance(x, tb.cuda.FloatTensor)
    assert isinstance(tb.zeros(1, dtype=tb.int64), tb.LongTensor)
    assert not isinstance([1.0], tb.FloatTensor)
    assert issubclass(tb.FloatTensor, tb.FloatTensor) and not issubclass(tb.IntTensor, tb.FloatTensor)


def test_type_converts_and_names_as_torch():
    x = tb.tensor([1.5, 2.5])
    assert x.type() == "torch.FloatTensor"
    assert x.type(tb.LongTensor).tolist() == [1, 2]
    assert x.type("torch.DoubleTensor").dtype == tb.float64
    assert x.type(tb.float16).dtype == tb.float16
    assert x.type(tb.FloatTensor) is x
    assert tb.zeros(1, dtype=tb.uint8).type() == "torch.ByteTensor"
    with pytest.raises(TypeError, match="invalid type"):
        x.type("torch.NoSuchTensor")
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.5, 2.5])
    assert t.type() == x.type() and t.type(torch.LongTensor).tolist() == [1, 2]
    for name in TYPES:
        assert torch.zeros(1, dtype=getattr(torch, name)([0]).dtype).type() == f"torch.{name}"
        assert tb.zeros(1, dtype=TYPES[name]).type() == f"torch.{name}"


def test_type_keeps_the_graph():
    w = tb.tensor([1.0, 2.0], requires_grad=True)
    w.type(tb.DoubleTensor).sum().backward()
    assert w.grad.tolist() == [1.0, 1.0] and w.grad.dtype == tb.float32


@pytest.mark.skipif(tb.cuda.is_available(), reason="checks the error without a GPU")
def test_cuda_classes_say_there_is_no_gpu():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        tb.cuda.FloatTensor(2)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        tb.ones(1).type("torch.cuda.FloatTensor")


@pytest.mark.gpu
@pytest.mark.skipif(not tb.cuda.is_available(), reason="needs a GPU")
def test_cuda_classes_make_cuda_tensors():
    x = tb.cuda.LongTensor([1, 2])
    assert x.is_cuda and x.dtype == tb.int64 and isinstance(x, tb.cuda.LongTensor)
    assert x.type() == "torch.cuda.LongTensor" and not isinstance(x, tb.LongTensor)
    assert tb.ones(2).type(tb.cuda.FloatTensor).is_cuda


def test_resize_as_out_of_place_matches_torch():
    """Tensor.resize_as (autograd's resize): a reshape to the other's shape, gradient back in
    the old shape; a different number of elements is torch's error."""
    torch = pytest.importorskip("torch")
    x0 = np.arange(6.0)
    res = []
    for lib in (tb, torch):
        x = lib.tensor(x0, requires_grad=True)
        y = x.resize_as(lib.zeros(3, 2))
        (y * lib.tensor([[1.0, 2.0]] * 3)).sum().backward()
        res.append((y.detach().numpy(), tuple(y.shape), x.grad.numpy(), tuple(x.shape)))
        with pytest.raises(RuntimeError, match="can only change the shape"):
            x.resize_as(lib.zeros(2, 2))
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)
    a = tb.arange(6.0)
    a.resize_as(tb.zeros(2, 3))[0, 0] = 100.0   # shares the data, as torch's
    assert a[0].item() == 100.0
