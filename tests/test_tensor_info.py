"""Tensor attributes that describe a tensor (is_cpu, nbytes, layout, storage_offset, the
always-False kind flags...), against torch when installed."""
import pytest

import tensorbrain as tb


def _pair(torch):
    return tb.arange(12, dtype=tb.float32).reshape(3, 4), torch.arange(12.0).reshape(3, 4)


def test_attributes_match_torch():
    torch = pytest.importorskip("torch")
    x, t = _pair(torch)
    for view in (lambda a: a, lambda a: a[1:], lambda a: a[:, 2], lambda a: a.t(),
                 lambda a: a[1:, 1:].t()):
        a, b = view(x), view(t)
        assert a.storage_offset() == b.storage_offset()
        assert a.dim_order() == b.dim_order()
        assert (a.nbytes, a.itemsize, a.ndimension(), a.get_device(), a.is_cpu) == \
            (b.nbytes, b.itemsize, b.ndimension(), b.get_device(), b.is_cpu)
    for dtype in ("float32", "int64", "uint8", "bool", "int8"):
        assert tb.zeros(1, dtype=getattr(tb, dtype if dtype != "bool" else "bool_")).is_signed() \
            == torch.zeros(1, dtype=getattr(torch, dtype)).is_signed()
    # torch's flags that are False for every tensor TensorBrain makes (True: a property)
    always_false = {"is_quantized": True, "is_nested": True, "is_mkldnn": True, "is_vulkan": True,
                    "is_xla": True, "is_ipu": True, "is_maia": True, "is_mtia": True,
                    "is_sparse_csr": True, "volatile": True, "is_distributed": False,
                    "is_conj": False, "is_neg": False, "is_inference": False}
    for name, is_property in always_false.items():
        if name == "volatile":
            continue   # torch warns that it was removed
        got = getattr(x, name) if is_property else getattr(x, name)()
        want = getattr(t, name) if is_property else getattr(t, name)()
        assert got is False and want is False, name
    assert x.is_same_size(x.clone()) and not x.is_same_size(x.t())
    assert x.is_set_to(x) and not x.is_set_to(x.clone())
    assert str(x.layout) == str(t.layout) == "torch.strided"
    assert tb.tensor([3.0]).is_nonzero() and not tb.tensor([0.0]).is_nonzero()
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        x.is_nonzero()
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        t.is_nonzero()
    assert x.is_complex() is False and x.const_data_ptr() == x.data_ptr()
    x.record_stream(None)   # accepted
