"""tb.nn.Module: registration, traversal, state dicts, hooks, modes, device/dtype moves, repr."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.bn = nn.BatchNorm2d(2)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
        self.register_buffer("scale", tb.ones(1))
        self.register_buffer("cache", tb.zeros(2), persistent=False)
        self.extra = 5

    def forward(self, x):
        return self.head(self.bn(self.conv(x)) * self.scale)


TORCH_KEYS = ["conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
              "bn.running_var", "bn.num_batches_tracked", "head.1.weight", "head.1.bias"]


def test_parameter_is_a_leaf_tensor_sharing_memory():
    t = tb.zeros(3)
    p = nn.Parameter(t)
    assert isinstance(p, tb.Tensor) and p.requires_grad and p.is_leaf
    t._data[0] = 7
    assert p._data[0] == 7  # shares the array, as torch.nn.Parameter shares storage
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not nn.Parameter(tb.zeros(2), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(tb.tensor([1, 2]))


def test_registration_and_traversal_names():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "conv.weight", "conv.bias", "bn.weight", "bn.bias", "head.1.weight", "head.1.bias"]
    assert [n for n, _ in net.named_buffers()] == [
        "scale", "cache", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert [n for n, _ in net.named_modules()] == ["", "conv", "bn", "head", "head.0", "head.1"]
    assert [n for n, _ in net.named_children()] == ["conv", "bn", "head"]
    assert net.get_submodule("head.1") is net.head[1]
    assert net.get_parameter("head.1.bias") is net.head[1].bias
    assert net.extra == 5 and "extra" not in net._parameters
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        net.nope  # noqa: B018 (the attribute access is what raises)


def test_shared_parameter_listed_once():
    a = nn.Linear(2, 2)
    seq = nn.Sequential(a, nn.ReLU(), a)
    assert len(list(seq.parameters())) == 2
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_reassigning_attributes_moves_between_registries():
    m = nn.Module()
    m.w = nn.Parameter(tb.zeros(1))
    m.w = None
    assert m.w is None and "w" in m._parameters
    with pytest.raises(TypeError, match="Parameter or None"):
        m.w = tb.zeros(1)
    m.sub = nn.Linear(1, 1)
    del m.sub
    assert "sub" not in m._modules
    with pytest.raises(KeyError, match="buffer name"):
        m.register_buffer("a.b", tb.zeros(1))


def test_state_dict_keys_match_torch_names_and_exclude_non_persistent():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["scale"] + TORCH_KEYS
    assert "cache" not in sd
    assert sd["bn.num_batches_tracked"].dtype == tb.int64
    assert not sd["conv.weight"].requires_grad  # detached, shares memory
    assert np.shares_memory(sd["conv.weight"]._data, net.conv.weight._data)


def test_state_dict_round_trip_copies_in_place():
    tb.manual_seed(0)
    a = Net()
    tb.manual_seed(1)
    b = Net()
    w_before = b.conv.weight
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    assert b.conv.weight is w_before  # identity kept: optimizers keep working
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(b.state_dict()[k]._data, v._data)


def test_load_state_dict_strict_reports_missing_and_unexpected():
    net = Net()
    sd = dict(net.state_dict())
    del sd["conv.bias"]
    sd["head.1.extra"] = tb.zeros(1)
    sd["stray"] = tb.zeros(1)
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(sd)
    msg = str(err.value)
    assert 'Missing key(s) in state_dict: "conv.bias"' in msg
    assert '"head.1.extra"' in msg and '"stray"' in msg
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["conv.bias"]
    assert sorted(result.unexpected_keys) == ["head.1.extra", "stray"]


def test_load_state_dict_shape_mismatch_raises_even_when_not_strict():
    net = nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape "
                                           r"\(2, 4\) from checkpoint"):
        net.load_state_dict({"weight": tb.zeros(2, 4), "bias": tb.zeros(2)}, strict=False)


def test_load_state_dict_accepts_numpy_arrays_and_casts_dtype():
    net = nn.Linear(2, 1)
    net.load_state_dict({"weight": np.array([[1.0, 2.0]]), "bias": np.array([0.5])})
    assert net.weight.dtype == tb.float32 and net.weight.tolist() == [[1.0, 2.0]]


def test_batchnorm_without_num_batches_tracked_loads_like_torch():
    bn = nn.BatchNorm1d(2)
    sd = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
    assert bn.load_state_dict(sd).missing_keys == []


def test_safetensors_file_from_torch_loads_with_same_keys(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    tnet = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2),
                               torch.nn.Flatten(), torch.nn.Linear(32, 3))
    tnet(torch.randn(4, 1, 6, 6))  # update running stats
    path = tmp_path / "m.safetensors"
    st.save_file(tnet.state_dict(), str(path))
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(32, 3))
    net.load_state_dict(tb.load(path))
    x = np.random.default_rng(0).standard_normal((2, 1, 6, 6)).astype(np.float32)
    tnet.eval()
    net.eval()
    np.testing.assert_allclose(net(tb.from_numpy(x))._data,
                               tnet(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    # and back: a TensorBrain state dict saved with tb.save loads into torch by key
    tb.save(net.state_dict(), tmp_path / "back.safetensors")
    back = st.load_file(str(tmp_path / "back.safetensors"))
    assert tnet.load_state_dict(back).missing_keys == []


def test_forward_pre_and_post_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    out = lin(tb.ones(3, 2))
    np.testing.assert_allclose(out._data, np.broadcast_to(lin.bias._data + 1, (3, 2)), rtol=1e-6)
    assert calls == [tb.Size([3, 2])]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(lin(tb.ones(1, 2))._data,
                               (lin.weight._data.sum(1) + lin.bias._data)[None], rtol=1e-6)


def test_hooks_with_kwargs_prepend_and_context_manager():
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m = Scale()
    order = []
    m.register_forward_hook(lambda mod, a, o: order.append("late"))
    m.register_forward_hook(lambda mod, a, o: order.append("early"), prepend=True)
    with m.register_forward_pre_hook(lambda mod, a, kw: (a, {"factor": 3.0}), with_kwargs=True):
        assert m(tb.ones(1)).item() == 3.0
    assert m(tb.ones(1)).item() == 1.0
    assert order == ["early", "late", "early", "late"]


def test_train_eval_requires_grad_and_apply():
    net = Net()
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen[0] == "Conv2d"


def test_zero_grad_set_to_none_and_zeros():
    lin = nn.Linear(2, 1)
    lin(tb.ones(1, 2)).sum().backward()
    g = lin.weight.grad
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad is g and not g._data.any()
    lin.zero_grad()
    assert lin.weight.grad is None


def test_to_dtype_keeps_parameter_identity_and_int_buffers():
    net = Net()
    params = list(net.parameters())
    net.double()
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    assert net.conv.weight.dtype == tb.float64 and net.bn.running_mean.dtype == tb.float64
    assert net.bn.num_batches_tracked.dtype == tb.int64
    net.half()
    assert net.conv.weight.dtype == tb.float16
    net.to(tb.float32).to("cpu").cpu().float()
    assert net.conv.weight.dtype == tb.float32
    with pytest.raises(TypeError, match="floating point"):
        net.to(tb.int32)


def test_optimizer_built_before_to_still_updates_the_model():
    lin = nn.Linear(2, 1)
    opt = tb.optim.SGD(lin.parameters(), lr=0.1)
    lin.double()
    lin(tb.ones(1, 2, dtype=tb.float64)).sum().backward()
    before = lin.bias._data.copy()
    opt.step()
    assert lin.bias._data.dtype == np.float64 and lin.bias._data[0] == pytest.approx(before[0] - 0.1)


@pytest.mark.gpu
def test_cuda_moves_parameters_in_place():
    net = Net()
    p = net.conv.weight
    net.cuda()
    assert net.conv.weight is p and p.is_cuda and net.bn.running_var.is_cuda
    assert net(tb.randn(2, 1, 6, 6, device="cuda")).is_cuda
    net.cpu()
    assert not p.is_cuda


def test_repr_matches_torch_layout():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Dropout(0.5)))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Dropout(p=0.5, inplace=False)\n"
        "  )\n"
        ")")


def test_repr_matches_torch_when_installed():
    torch = pytest.importorskip("torch")

    def build(lib):
        return lib.Sequential(
            lib.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), lib.BatchNorm2d(8),
            lib.BatchNorm1d(3, affine=False), lib.ReLU(inplace=True), lib.MaxPool2d(2),
            lib.AvgPool2d(2), lib.AdaptiveAvgPool2d((1, 1)), lib.Flatten(), lib.Linear(8, 2),
            lib.GELU(), lib.LayerNorm(2), lib.LayerNorm(2, bias=False), lib.Embedding(5, 2),
            lib.Embedding(5, 2, padding_idx=0), lib.GroupNorm(2, 8), lib.Softmax(dim=1),
            lib.SiLU(), lib.Dropout(), lib.Identity(), lib.LeakyReLU(), lib.CrossEntropyLoss(),
            lib.TransformerEncoderLayer(4, 2, 8), lib.Unflatten(1, (2, 2)))
    assert repr(build(nn)) == repr(build(torch.nn))


def test_deepcopy_copies_weights_and_keeps_them_apart():
    import copy
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    c = copy.deepcopy(m)
    np.testing.assert_array_equal(c[0].weight.numpy(force=True), m[0].weight.numpy(force=True))
    assert isinstance(c[0].weight, nn.Parameter) and c[0].weight.requires_grad
    assert list(dict(c.named_buffers())) == list(dict(m.named_buffers()))
    with tb.no_grad():
        c[0].weight.fill_(5.0)
    assert not (m[0].weight == 5.0).any()


def test_containers():
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    ml.append(nn.ReLU())
    assert len(ml) == 4 and isinstance(ml[-1], nn.ReLU)
    del ml[0]
    assert list(ml._modules) == ["0", "1", "2"]
    md = nn.ModuleDict({"a": nn.Linear(1, 2), "b": nn.ReLU()})
    assert list(md.keys()) == ["a", "b"] and "a" in md
    assert list(md.state_dict()) == ["a.weight", "a.bias"]
    seq = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 1))
    assert isinstance(seq[1:], nn.Sequential) and len(seq[1:]) == 2
    pl = nn.ParameterList([tb.zeros(2), tb.ones(1)])
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pd = nn.ParameterDict({"x": tb.zeros(1)})
    assert isinstance(pd["x"], nn.Parameter)


def test_full_backward_hooks_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    theirs.load_state_dict({k: torch.from_numpy(np.array(v._data))
                            for k, v in ours.state_dict().items()})
    seen = {"ours": [], "theirs": []}

    def recorder(key):
        def hook(module, grad_input, grad_output):
            seen[key].append(([None if g is None else np.array(g.detach().numpy() if key ==
                                                                "theirs" else g._data)
                               for g in grad_input],
                              np.array(grad_output[0].detach().numpy() if key == "theirs"
                                       else grad_output[0]._data)))
            return tuple(None if g is None else g * 2 for g in grad_input)
        return hook

    ours.register_full_backward_hook(recorder("ours"))
    theirs.register_full_backward_hook(recorder("theirs"))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    xt, xr = tb.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (ours(xt) ** 2).sum().backward()
    (theirs(xr) ** 2).sum().backward()
    (gi_o, go_o), = seen["ours"]
    (gi_t, go_t), = seen["theirs"]
    np.testing.assert_allclose(go_o, go_t, rtol=1e-5)
    np.testing.assert_allclose(gi_o[0], gi_t[0], rtol=1e-5)
    np.testing.assert_allclose(xt.grad._data, xr.grad.numpy(), rtol=1e-5)  # doubled by the hook


def test_full_backward_pre_hook_and_hooks_without_input_grad():
    lin = nn.Linear(2, 2)
    calls = []
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 0,))
    lin.register_full_backward_hook(lambda m, gi, go: calls.append((gi, go[0].tolist())))
    lin(tb.ones(3, 2)).sum().backward()  # the input needs no grad: hook gets (None,)
    assert calls == [((None,), [[0.0, 0.0]] * 3)]
    assert not lin.weight.grad._data.any()  # the pre-hook zeroed grad_output
    with pytest.raises(NotImplementedError, match="one positional input"):
        class Add(nn.Module):
            def forward(self, a, b):
                return a + b
        m = Add()
        m.register_full_backward_hook(lambda *a: None)
        m(tb.ones(1, requires_grad=True), tb.ones(1, requires_grad=True))
