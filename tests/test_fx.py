"""tb.fx against torch.fx: the same module traced by both gives the same nodes (kind, name,
target), and the GraphModules compute the module's values and gradients; graph edits,
Interpreter and Transformer behave as torch's."""
import copy
import operator

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.fx.proxy import TraceError


def make_models(T):
    """The same modules written against ``T`` (torch or tensorbrain)."""
    nn, F = T.nn, T.nn.functional

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.body = nn.Sequential(nn.ReLU(), nn.Linear(8, 8))
            self.fc2 = nn.Linear(8, 3)
            self.scale = nn.Parameter(T.ones(3) * 0.5)
            self.register_buffer("shift", T.arange(3, dtype=T.float32))

        def forward(self, x, y=None):
            b = x.shape[0]
            h = F.gelu(self.fc1(x.view(b, -1)))
            h = self.body(h) + h
            h = T.cat([h, -h], dim=1)[:, :8]
            out = self.fc2(h).softmax(dim=-1) * self.scale + self.shift
            return out.sum(1), T.tanh(out)

    class Conv(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x):
            h = F.relu(self.bn(self.conv(x)))
            return T.flatten(F.max_pool2d(h, 2), 1).mean(dim=1, keepdim=True) ** 2
    return MLP, Conv


def _describe(gm, T):
    out = []
    for n in gm.graph.nodes:
        t = n.target
        if callable(t):
            t = getattr(t, "__name__", str(t))
        out.append((n.op, n.name, t))
    return out


@pytest.mark.parametrize("which", [0, 1])
def test_symbolic_trace_matches_torch(which):
    torch = pytest.importorskip("torch")
    tm = make_models(torch)[which]()
    bm = make_models(tb)[which]()
    bm.load_state_dict({k: tb.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tgm, bgm = torch.fx.symbolic_trace(tm), tb.fx.symbolic_trace(bm)
    assert _describe(bgm, tb) == _describe(tgm, torch)
    assert list(bgm.state_dict()) == list(tgm.state_dict())
    assert type(bgm).__name__ == type(tgm).__name__
    shape = (5, 6) if which == 0 else (3, 2, 6, 6)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for mode in ("train", "eval"):
        getattr(tgm, mode)(), getattr(bgm, mode)(), getattr(bm, mode)()
        tx, bx = torch.tensor(x, requires_grad=True), tb.tensor(x, requires_grad=True)
        tout, bout = tgm(tx), bgm(bx)
        tout, bout = (tout, bout) if which else (tout[0] + tout[1].sum(1), bout[0] + bout[1].sum(1))
        np.testing.assert_allclose(bout.detach().numpy(), tout.detach().numpy(),
                                   rtol=1e-4, atol=1e-5)
        tout.sum().backward()
        bout.sum().backward()
        np.testing.assert_allclose(bx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
        for (name, tp), bp in zip(tgm.named_parameters(), bgm.parameters()):
            np.testing.assert_allclose(bp.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=name)
        tgm.zero_grad(), bgm.zero_grad()


def test_graph_edit_recompile_matches_torch():
    torch = pytest.importorskip("torch")
    results = []
    for T in (torch, tb):
        gm = T.fx.symbolic_trace(lambda x: T.relu(x) + x * 2)
        for node in gm.graph.nodes:    # relu -> neg, then add an abs before the output
            if node.op == "call_function" and node.target is T.relu:
                node.target = T.neg
            if node.op == "output":
                with gm.graph.inserting_before(node):
                    a = gm.graph.call_function(T.abs, (node.args[0],))
                node.args = (a,)
        gm.graph.lint()
        gm.recompile()
        x = T.tensor([-1.5, 0.0, 2.0])
        results.append((gm(x).tolist(), [n.name for n in gm.graph.nodes],
                        {n.name: sorted(u.name for u in n.users) for n in gm.graph.nodes}))
    assert results[0] == results[1]


def test_interpreter_and_transformer_match_torch():
    torch = pytest.importorskip("torch")
    outs = []
    for T in (torch, tb):
        class AddToMul(T.fx.Transformer):
            def call_function(self, target, args, kwargs):
                if target is operator.add:
                    target = operator.mul
                return super().call_function(target, args, kwargs)

        class Log(T.fx.Interpreter):
            seen: list = []

            def run_node(self, n):
                self.seen.append(n.op)
                return super().run_node(n)
        gm = T.fx.symbolic_trace(lambda x, y: T.sigmoid(x + y) + 1)
        x, y = T.tensor([0.5, -1.0]), T.tensor([2.0, 3.0])
        interp = Log(gm)
        outs.append((interp.run(x, y).tolist(), interp.seen,
                     AddToMul(gm).transform()(x, y).tolist()))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6)
    assert outs[1][1] == outs[0][1]
    np.testing.assert_allclose(outs[1][2], outs[0][2], rtol=1e-6)


def _mine(x):
    return x.sum() * 3


tb.fx.wrap("_mine")


def test_wrap_custom_tracer_and_errors():
    def f(x):
        return _mine(x) + 1
    gm = tb.fx.symbolic_trace(f)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"][0] is _mine
    assert gm(tb.ones(2)).item() == 7.0

    class Leafy(tb.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, tb.nn.Sequential) or super().is_leaf_module(m, qualname)
    seq = tb.nn.Sequential(tb.nn.Linear(2, 2), tb.nn.ReLU())
    wrapper = tb.nn.Sequential(seq)
    graph = Leafy().trace(wrapper)
    assert [n.op for n in graph.nodes] == ["placeholder", "call_module", "output"]

    def branchy(x):
        return x if x.sum() > 0 else -x
    with pytest.raises(TraceError, match="control flow"):
        tb.fx.symbolic_trace(branchy)
    with pytest.raises(RuntimeError, match="'len' is not supported"):
        tb.fx.symbolic_trace(lambda x: len(x))
    g = tb.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(tb.relu, (x,))
    with pytest.raises(RuntimeError, match="still had 1 users"):
        g.erase_node(x)
    g.output(y)
    assert tb.relu is not None and tb.fx.GraphModule(tb.nn.Module(), g)(tb.tensor([-1.0])).item() == 0


def test_unpacking_deepcopy_and_ops_restored():
    def f(x):
        a, b = x.chunk(2)
        return a - b
    gm = tb.fx.symbolic_trace(f)
    assert gm(tb.tensor([5.0, 2.0])).item() == 3.0
    m = tb.nn.Sequential(tb.nn.Linear(3, 3))
    gm2 = copy.deepcopy(tb.fx.symbolic_trace(m))
    x = tb.randn(2, 3)
    np.testing.assert_allclose(gm2(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    assert gm2.get_submodule("0").weight is not m[0].weight
    # after a trace every patched function and operator is the original again
    assert getattr(tb.relu, "__fx_orig__", None) is None
    assert getattr(tb.nn.functional.relu, "__fx_orig__", None) is None
    assert tb.Tensor.__add__ is tb.Tensor.__dict__["__add__"] and (tb.ones(1) + 1).item() == 2
    assert not tb.fx._symbolic_trace.is_fx_tracing()


def test_symbolic_shape_helpers_match_torch_on_concrete_values():
    pytest.importorskip("torch")
    from torch.fx.experimental import symbolic_shapes as ts

    from tensorbrain.fx.experimental import symbolic_shapes as bs
    assert [(m.name, m.value) for m in bs.DimDynamic] == [(m.name, m.value) for m in ts.DimDynamic]
    for v in (True, False, 3 == 3):
        assert bs.guard_or_false(v) == ts.guard_or_false(v)
        assert bs.statically_known_true(v) == ts.statically_known_true(v)
    assert list(bs.free_symbols(tb.ones(2))) == list(ts.free_symbols(3)) == []
    assert str(bs.DivideByKey(4)) == str(ts.DivideByKey(4)) and bs.DivideByKey(4).get(9) == 2
    with pytest.raises(NotImplementedError, match="ShapeEnv is not supported"):
        bs.ShapeEnv()
    with pytest.raises(NotImplementedError, match="make_fx is not supported"):
        tb.fx.experimental.proxy_tensor.make_fx(lambda x: x)


def test_split_by_tags_matches_torch():
    """split_by_tags on the same traced module under both libraries: the same parts, the
    same top graph (ops and targets), the same values and gradients; a part using a later
    part's value is torch's AssertionError."""
    torch = pytest.importorskip("torch")
    from torch.fx.passes.split_utils import split_by_tags as t_split

    from tensorbrain.fx.passes.split_utils import split_by_tags

    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = lib.nn.Linear(4, 4)
                self.b = lib.nn.Linear(4, 4)
                self.scale = lib.nn.Parameter(lib.ones(4) * 0.5)

            def forward(self, x):
                h = self.a(x).relu()
                y = self.b(h) * self.scale
                return y + h, h.sum()
        lib.manual_seed(0)
        return Net()
    tnet, net = build(torch), build(tb)
    net.load_state_dict({k: tb.tensor(v.detach().numpy()) for k, v in tnet.state_dict().items()})
    x0 = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    res = []
    for lib, trace, split, model in ((tb, tb.fx.symbolic_trace, split_by_tags, net),
                                     (torch, torch.fx.symbolic_trace, t_split, tnet)):
        gm = trace(model)
        for node in gm.graph.nodes:
            node.tag = "first" if node.name in ("a", "relu") else "second"
        out, mapping = split(gm, ["first", "second"], return_fqn_mapping=True)
        x = lib.tensor(x0, requires_grad=True)
        y, s = out(x)
        (y.sum() + s).backward()
        top = [(n.op, str(n.target)) for n in out.graph.nodes]
        res.append((top, sorted(mapping.items()), [c for c, _ in out.named_children()],
                    y.detach().numpy(), s.item(), x.grad.numpy()))
        with pytest.raises(AssertionError, match="order must be"):
            split(gm, ["second", "first"])
    got, want = res
    assert got[:3] == want[:3]
    for a, b in zip(got[3:], want[3:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
