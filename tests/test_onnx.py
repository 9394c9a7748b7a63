"""tb.onnx.export: the files it writes validate (onnx.checker), run in onnxruntime with the
values of our forward and of torch's forward of the same weights, and have the ops torch's own
exporter writes; the custom symbolic registry, the helpers, and bad input."""
from __future__ import annotations

import io
import os
import warnings
from collections import Counter

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn as nn
import tensorbrain.nn.functional as F
from tensorbrain.fx import wrap

onnx = pytest.importorskip("onnx")


def my_clip(x, lo, hi):
    """A function the tracer records as one node (tb.fx.wrap): exported only through a
    registered symbolic (``test_onnx::my_clip``)."""
    return tb.clamp(x, lo, hi)


def widen(x, n):
    """``x`` (a vector) as ``n`` columns; exported through ``test_onnx::widen``."""
    return x.unsqueeze(-1).expand(-1, n)


wrap("my_clip")
wrap("widen")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(4, 8), nn.Linear(8, 3), nn.Dropout(0.5)

    def forward(self, x):
        return F.log_softmax(self.fc2(self.drop(F.relu(self.fc1(x)))), dim=-1)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.pool, self.gap, self.fc = nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Linear(4, 2)

    def forward(self, x):
        x = self.gap(self.pool(tb.relu(self.bn(self.conv(x)))))
        return F.gelu(self.fc(tb.flatten(x, 1))).softmax(-1)


class Block(nn.Module):
    """A pre-norm transformer block (causal attention, GELU MLP) over token embeddings."""

    def __init__(self, d=8, heads=2):
        super().__init__()
        self.heads = heads
        self.emb, self.ln1, self.ln2 = nn.Embedding(10, d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, idx):
        x = self.emb(idx)
        B, T, C = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        x = x + self.ff2(F.gelu(self.ff1(self.ln2(x))))
        return x.mean(dim=1)


def _torch_twin(name):
    """The same model in torch (same parameter names), or None without torch."""
    torch = pytest.importorskip("torch")
    tnn, TF = torch.nn, torch.nn.functional

    class TMLP(tnn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.drop = tnn.Linear(4, 8), tnn.Linear(8, 3), tnn.Dropout(0.5)

        def forward(self, x):
            return TF.log_softmax(self.fc2(self.drop(TF.relu(self.fc1(x)))), dim=-1)

    class TConvNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = tnn.Conv2d(3, 4, 3, padding=1), tnn.BatchNorm2d(4)
            self.pool, self.gap = tnn.MaxPool2d(2), tnn.AdaptiveAvgPool2d(1)
            self.fc = tnn.Linear(4, 2)

        def forward(self, x):
            x = self.gap(self.pool(torch.relu(self.bn(self.conv(x)))))
            return TF.gelu(self.fc(torch.flatten(x, 1))).softmax(-1)

    class TBlock(tnn.Module):
        def __init__(self, d=8, heads=2):
            super().__init__()
            self.heads = heads
            self.emb, self.ln1, self.ln2 = tnn.Embedding(10, d), tnn.LayerNorm(d), tnn.LayerNorm(d)
            self.qkv, self.proj = tnn.Linear(d, 3 * d), tnn.Linear(d, d)
            self.ff1, self.ff2 = tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d)

        def forward(self, idx):
            x = self.emb(idx)
            B, T, C = x.size()
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                       for t in (q, k, v))
            y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            x = x + self.ff2(TF.gelu(self.ff1(self.ln2(x))))
            return x.mean(dim=1)
    return torch, {"MLP": TMLP, "ConvNet": TConvNet, "Block": TBlock}[name]()


def _batchnorm_stats(m):
    """Give BatchNorm non-trivial running statistics, so eval mode is really tested."""
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.copy_(tb.randn(*mod.running_mean.shape))
            mod.running_var.copy_(tb.rand(*mod.running_var.shape) + 0.5)


CASES = [
    ("MLP", MLP, lambda n: tb.randn(n, 4)),
    ("ConvNet", ConvNet, lambda n: tb.randn(n, 3, 8, 8)),
    ("Block", Block, lambda n: tb.tensor(np.random.default_rng(n).integers(0, 10, (n, 5)))),
]


@pytest.mark.parametrize("name,cls,make", CASES, ids=[c[0] for c in CASES])
def test_export_runs_in_onnxruntime_like_our_forward_and_torchs(tmp_path, name, cls, make):
    ort = pytest.importorskip("onnxruntime")
    tb.manual_seed(0)
    model = cls()
    _batchnorm_stats(model)
    x = make(2)
    path = tmp_path / f"{name}.onnx"
    program = tb.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"],
                             dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    assert model.training, "export must put the model back in the mode it was in"
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    assert proto.SerializeToString() == program.model_proto.SerializeToString()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model.eval()
    x5 = make(5)                                         # a batch size the trace never saw
    got = sess.run(["y"], {"x": x5.numpy()})[0]
    want = model(x5).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    torch, twin = _torch_twin(name)
    twin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    twin.eval()
    with torch.no_grad():
        np.testing.assert_allclose(got, twin(torch.tensor(x5.numpy())).numpy(), rtol=1e-5,
                                   atol=1e-5)


#: The ops that compute (not the size plumbing, which the exporters write differently: torch's
#: Shape/Slice/Constant against our Shape/Gather/Unsqueeze/initializers).
COMPUTE = {"MatMul", "Gemm", "Conv", "LayerNormalization", "Softmax", "LogSoftmax", "Erf",
           "ReduceMean", "Split", "Transpose", "Relu", "MaxPool", "GlobalAveragePool"}


@pytest.mark.parametrize("name,cls,make", CASES, ids=[c[0] for c in CASES])
def test_the_ops_are_the_ones_torchs_exporter_writes(name, cls, make):
    """torch's TorchScript exporter (dynamo=False, offline) on the same model and opset: for the
    MLP and the conv net the same op types in the same order (Constant nodes aside: we write
    constants as initializers; both fold BatchNorm into the Conv before it); for the
    transformer block the same count of each computing op."""
    tb.manual_seed(0)
    model = cls().eval()
    torch, twin = _torch_twin(name)
    twin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    twin.eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(twin, (torch.tensor(make(2).numpy()),), buf, dynamo=False,
                              opset_version=18)
        except Exception as exc:   # noqa: BLE001 - e.g. an exporter that needs onnxscript
            pytest.skip(f"torch's exporter did not run here: {exc}")
    theirs = [n.op_type for n in onnx.load_from_string(buf.getvalue()).graph.node
              if n.op_type != "Constant"]
    mine = [n.op_type for n in
            tb.onnx.export(model, (make(2),), opset_version=18).model_proto.graph.node]
    if name == "Block":
        assert Counter(o for o in mine if o in COMPUTE) == \
            Counter(o for o in theirs if o in COMPUTE)
    else:
        assert mine == theirs


class Mixed(nn.Module):
    """The shape ops, indexing, reductions and the other layers of the table, with sizes read
    from the input (``x.size(0)``) so the batch axis stays dynamic."""

    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.BatchNorm1d(4), nn.Tanh(),
                                 nn.AvgPool1d(2))
        self.ct, self.fl = nn.ConvTranspose2d(4, 2, 2, stride=2), nn.Flatten()
        self.sig, self.norm = nn.Sigmoid(), nn.RMSNorm(1, eps=1e-3)

    def forward(self, x, y):
        a = self.seq(x)                                              # (N, 4, 4)
        b = self.ct(a.unsqueeze(-1).expand(-1, -1, -1, 3))           # (N, 2, 8, 6)
        c = self.fl(b).view(x.size(0), -1)
        d = tb.cat([c[:, :5], c[:, -3:]], dim=1) ** 2 - 1
        e, f = d.chunk(2, dim=1)
        g = (e * f).sum(dim=1, keepdim=True) / 3 + y.permute(1, 0).squeeze(0).unsqueeze(1)
        h = self.sig(g) + x.mean() + tb.stack([g, g], dim=0).sum(0) + self.norm(g)
        return h, x[:, 0, 1:3].transpose(0, 1)


def test_more_ops_and_a_dynamic_batch_against_our_forward(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    tb.manual_seed(1)
    model = Mixed().eval()
    model.seq[1].running_var.copy_(tb.rand(4) + 0.5)
    path = str(tmp_path / "mixed.onnx")
    tb.onnx.export(model, (tb.randn(3, 2, 8), tb.randn(3, 1)), path,
                   dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    x, y = tb.randn(5, 2, 8), tb.randn(5, 1)
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy(), "y": y.numpy()})
    for g, w in zip(got, model(x, y)):
        np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-5, atol=1e-6)


class SelfAttention(nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=batch_first)

    def forward(self, x, pad):
        return self.mha(x, x, x, key_padding_mask=pad)


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_and_transformer_encoder_layer_match_torch(batch_first):
    """nn.MultiheadAttention (output and head-averaged weights, a key padding mask) and
    nn.TransformerEncoderLayer (relu and gelu, post- and pre-norm) against torch's layers with
    the same weights, at a batch size the trace never saw."""
    ort = pytest.importorskip("onnxruntime")
    torch = pytest.importorskip("torch")
    tb.manual_seed(2)
    model = SelfAttention(batch_first).eval()
    n_axis = 0 if batch_first else 1
    shape = lambda n: (n, 5, 8) if batch_first else (5, n, 8)   # noqa: E731
    pad = lambda n: tb.tensor(np.arange(5)[None, :].repeat(n, 0) >= 4 - np.arange(n)[:, None] % 3)  # noqa: E731
    proto = tb.onnx.export(model, (tb.randn(*shape(2)), pad(2)),
                           dynamic_axes={"x": {n_axis: "n"}, "pad": {0: "n"}}).model_proto
    x, p = tb.randn(*shape(3)), pad(3)
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]
                               ).run(None, {"x": x.numpy(), "pad": p.numpy()})
    twin = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first).eval()
    twin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.mha.state_dict().items()})
    tx = torch.tensor(x.numpy())
    with torch.no_grad():
        want = twin(tx, tx, tx, key_padding_mask=torch.tensor(p.numpy()))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
    for act, norm_first in (("relu", False), ("gelu", True)):
        kw = dict(dim_feedforward=16, dropout=0.0, activation=act, norm_first=norm_first,
                  batch_first=batch_first)
        layer = nn.TransformerEncoderLayer(8, 2, **kw).eval()
        proto = tb.onnx.export(layer, (tb.randn(*shape(2)),),
                               dynamic_axes={"src": {n_axis: "n"}}).model_proto
        got = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, {"src": x.numpy()})
        twin = torch.nn.TransformerEncoderLayer(8, 2, **kw).eval()
        twin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in layer.state_dict().items()})
        with torch.no_grad():
            np.testing.assert_allclose(got[0], twin(tx).numpy(), rtol=1e-5, atol=1e-5)


class SizesAndTwice(nn.Module):
    def forward(self, x):
        y = x * x.size(1) + x.shape[0] / 2      # a float tensor times traced integer sizes
        return y, y, x


def test_mixed_dtypes_and_an_output_returned_twice():
    ort = pytest.importorskip("onnxruntime")
    proto = tb.onnx.export(SizesAndTwice(), (tb.randn(2, 3),),
                           dynamic_axes={"x": {0: "n", 1: "m"}}).model_proto
    assert [o.name for o in proto.graph.output] == ["output_0", "output_1", "output_2"]
    x = tb.randn(4, 5)
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]
                               ).run(None, {"x": x.numpy()})
    for g, w in zip(got, SizesAndTwice()(x)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6)


def test_f_may_be_a_file_object_and_dynamo_false_returns_none():
    ort = pytest.importorskip("onnxruntime")
    model, x = MLP().eval(), tb.randn(3, 4)
    buf = io.BytesIO()
    assert tb.onnx.export(model, x, buf, dynamo=False) is None
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], model(x).detach().numpy(),
                               rtol=1e-6)


def test_onnx_program_save_and_call(tmp_path):
    pytest.importorskip("onnxruntime")
    model, x = ConvNet().eval(), tb.randn(2, 3, 8, 8)
    program = tb.onnx.export(model, (x,))
    assert isinstance(program, tb.onnx.ONNXProgram)
    np.testing.assert_allclose(program(x)[0].numpy(), model(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    program.save(tmp_path / "m.onnx")
    assert onnx.load(str(tmp_path / "m.onnx")).graph.node
    assert not [p for p in os.listdir(tmp_path) if p != "m.onnx"], "a temp file was left"


def test_export_params_false_makes_the_weights_inputs():
    model, x = MLP().eval(), tb.randn(3, 4)
    proto = tb.onnx.export(model, (x,), export_params=False).model_proto
    assert not proto.graph.initializer
    assert {i.name for i in proto.graph.input} == {"x", "fc1.weight", "fc1.bias", "fc2.weight",
                                                   "fc2.bias"}


# ***** the custom symbolic registry, and the helpers symbolic functions use *****
class Clipper(nn.Module):
    def forward(self, x):
        return my_clip(x, -0.5, 0.5) * 2


def test_register_custom_op_symbolic_is_used_and_unregister_removes_it():
    ort = pytest.importorskip("onnxruntime")
    from tensorbrain.onnx.symbolic_helper import parse_args

    @parse_args("v", "f", "f")
    def clip(g, x, lo, hi):
        assert isinstance(lo, float) and isinstance(hi, float)
        assert x.type().sizes() == [4, 3] and x.type().scalarType() == "Float"
        return g.op("Clip", x, g.constant(np.float32(lo)), g.constant(np.float32(hi)))

    x = tb.randn(4, 3) * 2
    tb.onnx.register_custom_op_symbolic("test_onnx::my_clip", clip, 13)
    try:
        proto = tb.onnx.export(Clipper(), (x,)).model_proto
    finally:
        tb.onnx.unregister_custom_op_symbolic("test_onnx::my_clip", 13)
    assert [n.op_type for n in proto.graph.node] == ["Clip", "Mul"]
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0],
                               np.clip(x.numpy(), -0.5, 0.5) * 2, rtol=1e-6)
    with pytest.raises(tb.onnx.errors.UnsupportedOperatorError, match="test_onnx::my_clip"):
        tb.onnx.export(Clipper(), (x,))


def test_a_registered_symbolic_overrides_a_built_in_op():
    tb.onnx.register_custom_op_symbolic("aten::relu", lambda g, x: g.op("Sigmoid", x), 9)
    try:
        proto = tb.onnx.export(MLP().eval(), (tb.randn(2, 4),)).model_proto
    finally:
        tb.onnx.unregister_custom_op_symbolic("aten::relu", 9)
    assert "Sigmoid" in [n.op_type for n in proto.graph.node]
    proto = tb.onnx.export(MLP().eval(), (tb.randn(2, 4),)).model_proto
    assert "Relu" in [n.op_type for n in proto.graph.node]


def test_symbolic_opset9_expand_and_unsqueeze_match_torch():
    ort = pytest.importorskip("onnxruntime")
    torch = pytest.importorskip("torch")
    from tensorbrain.onnx import symbolic_opset9 as s9

    def sym(g, x, n):     # x: (3,) -> unsqueeze(-1) -> (3, 1) -> expand(-1, n) -> (3, n)
        return s9.expand(g, s9.unsqueeze(g, x, -1), [-1, n], False)

    class Widen(nn.Module):
        def forward(self, x):
            return widen(x, 4) * 2

    tb.onnx.register_custom_op_symbolic("test_onnx::widen", sym, 13)
    try:
        proto = tb.onnx.export(Widen(), (tb.randn(3),)).model_proto
    finally:
        tb.onnx.unregister_custom_op_symbolic("test_onnx::widen", 13)
    assert [n.op_type for n in proto.graph.node] == ["Unsqueeze", "Expand", "Mul"]
    x = np.arange(3, dtype=np.float32)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = (torch.tensor(x).unsqueeze(-1).expand(-1, 4) * 2).numpy()
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)


def test_symbolic_helper_tables_are_torchs():
    pytest.importorskip("torch")
    import torch.onnx.symbolic_helper as tsh
    from tensorbrain.onnx import symbolic_helper as sh
    assert {k: int(v) for k, v in sh.cast_pytorch_to_onnx.items()} == \
        {k: int(v) for k, v in tsh.cast_pytorch_to_onnx.items()}
    assert [int(v) for v in sh.scalar_type_to_onnx] == [int(v) for v in tsh.scalar_type_to_onnx]
    assert int(sh.cast_pytorch_to_onnx["Float"]) == onnx.TensorProto.FLOAT


def test_a_custom_domain_op_and_custom_opsets():
    tb.onnx.register_custom_op_symbolic(
        "test_onnx::my_clip", lambda g, x, lo, hi: g.op("mydomain::SoftClip", x, lo_f=lo, hi_f=hi),
        13)
    try:
        proto = tb.onnx.export(Clipper(), (tb.randn(3),), custom_opsets={"mydomain": 2}
                               ).model_proto
    finally:
        tb.onnx.unregister_custom_op_symbolic("test_onnx::my_clip", 13)
    node = proto.graph.node[0]
    assert (node.domain, node.op_type) == ("mydomain", "SoftClip")
    assert {a.name: a.f for a in node.attribute} == {"lo": -0.5, "hi": 0.5}
    assert {o.domain: o.version for o in proto.opset_import}["mydomain"] == 2


def test_register_rejects_a_name_without_a_namespace():
    with pytest.raises(ValueError, match="domain::name"):
        tb.onnx.register_custom_op_symbolic("relu", lambda g, x: x, 13)


def test_operators_shape_as_tensor_and_reshape_from_tensor_shape_match_torch():
    torch = pytest.importorskip("torch")
    from torch.onnx import operators as tops
    from tensorbrain.onnx import operators as ops
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    s = ops.shape_as_tensor(tb.tensor(x))
    np.testing.assert_array_equal(s.numpy(), tops.shape_as_tensor(torch.tensor(x)).numpy())
    assert s.dtype == tb.int64
    y = ops.reshape_from_tensor_shape(tb.tensor(x), tb.tensor([6, -1]))
    np.testing.assert_array_equal(
        y.numpy(), tops.reshape_from_tensor_shape(torch.tensor(x), torch.tensor([6, -1])).numpy())


# ***** bad input *****
class Inner(nn.Module):
    def forward(self, x):
        return tb.cumsum(x, 0)


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.inner = nn.Linear(3, 3), Inner()

    def forward(self, x):
        return self.inner(self.fc(x))


def test_an_unsupported_op_names_the_op_and_the_module():
    with pytest.raises(tb.onnx.errors.UnsupportedOperatorError) as info:
        tb.onnx.export(Outer(), (tb.randn(2, 3),))
    assert "aten::cumsum" in str(info.value) and "module 'inner' (Inner)" in str(info.value)


def test_a_layer_that_cannot_be_traced_is_named():
    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(4, 4)

        def forward(self, x):
            return self.gru(x)[0]
    with pytest.raises(tb.onnx.errors.UnsupportedOperatorError,
                       match="module 'gru' \\(GRU\\) cannot be traced"):
        tb.onnx.export(Recurrent(), (tb.randn(3, 2, 4),))
    with pytest.raises(tb.onnx.errors.UnsupportedOperatorError,
                       match="forward of GRU cannot be traced"):
        tb.onnx.export(nn.GRU(4, 4), (tb.randn(3, 2, 4),))


def test_a_model_exported_in_training_mode_is_refused_where_it_would_differ():
    """TrainingMode.PRESERVE keeps train mode: BatchNorm's batch statistics and an active
    dropout are not what an inference graph computes, so the export says so."""
    for model in (MLP(), ConvNet()):
        with pytest.raises(tb.onnx.OnnxExporterError, match="eval"):
            tb.onnx.export(model.train(), (CASES[0][2](2) if isinstance(model, MLP)
                                           else CASES[1][2](2),),
                           training=tb.onnx.TrainingMode.PRESERVE)

    class FunctionalDropout(nn.Module):
        def forward(self, x):
            return F.dropout(x, 0.1)            # torch's default: training=True, even in eval
    with pytest.raises(tb.onnx.OnnxExporterError, match="training=True is random"):
        tb.onnx.export(FunctionalDropout(), (tb.randn(3),))


def test_dynamic_axes_naming_an_unknown_input_is_refused():
    with pytest.raises(ValueError, match="'batch_x'.*inputs: \\['x'\\]"):
        tb.onnx.export(MLP(), (tb.randn(2, 4),), dynamic_axes={"batch_x": {0: "n"}})
    with pytest.raises(ValueError, match="axis 5"):
        tb.onnx.export(MLP(), (tb.randn(2, 4),), dynamic_axes={"x": [5]})


def test_f_in_a_missing_folder_fails_before_tracing_and_writes_nothing(tmp_path):
    target = tmp_path / "no" / "such" / "m.onnx"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tb.onnx.export(MLP(), (tb.randn(2, 4),), str(target))
    assert list(tmp_path.iterdir()) == []


def test_without_the_onnx_package_the_error_says_how_to_install_it(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match="pip install onnx"):
        tb.onnx.export(MLP(), (tb.randn(2, 4),))


def test_is_in_onnx_export_is_true_only_during_export():
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(tb.onnx.is_in_onnx_export())
            return x + 1
    tb.onnx.export(Probe(), (tb.randn(2),))
    assert seen and all(seen) and not tb.onnx.is_in_onnx_export()
