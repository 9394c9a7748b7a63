"""tb.compile, tb._dynamo, tb.compiler and tb.jit: torch's entry points run eagerly with the same
results, accept torch's arguments, and refuse by name what needs a compiler's output format."""
import logging

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn


def _model():
    tb.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2))


def test_compile_a_module_keeps_its_results_and_torchs_state_dict_keys():
    m = _model()
    x = tb.randn(5, 3)
    c = tb.compile(m, mode="max-autotune", fullgraph=True, dynamic=False, backend="inductor")
    assert isinstance(c, tb._dynamo.OptimizedModule) and c._orig_mod is m
    np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())
    assert list(c.state_dict()) == ["_orig_mod." + k for k in m.state_dict()]
    assert getattr(c, "0") is m[0]               # attributes are the original's
    assert list(c.parameters()) == list(m.parameters())
    c(x).sum().backward()
    assert m[0].weight.grad is not None
    assert tb.compile(m, disable=True) is m
    torch = pytest.importorskip("torch")
    tm = torch.nn.Linear(3, 4)
    assert list(torch.compile(tm).state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]


def test_compile_functions_and_decorators():
    def f(x, y=1):
        return x * 2 + y
    g = tb.compile(f)
    assert g(tb.ones(2), y=3).tolist() == [5.0, 5.0] and g.__name__ == "f"

    @tb.compile(mode="reduce-overhead")
    def h(x):
        return x - 1
    assert h(tb.ones(1)).tolist() == [0.0]


def test_compile_rejects_what_torch_rejects():
    with pytest.raises(RuntimeError, match="Either mode or options"):
        tb.compile(_model(), mode="default", options={"x": 1})
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        tb.compile(_model(), mode="fastest")
    with pytest.raises(TypeError, match="callable"):
        tb.compile(3)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="Either mode or options"):
        torch.compile(torch.nn.Linear(1, 1), mode="default", options={"x": 1})


def test_compile_says_once_that_it_runs_eagerly(caplog):
    from tensorbrain import _dynamo
    _dynamo._said[0] = False
    logger = logging.getLogger("tensorbrain")
    logger.addHandler(caplog.handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        tb.compile(lambda x: x)
        tb.compile(lambda x: x)
    finally:
        logger.setLevel(old)
        logger.removeHandler(caplog.handler)
    said = [r for r in caplog.records if "runs eagerly" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO


def test_dynamo_config_and_helpers():
    cfg = tb._dynamo.config
    cfg.suppress_errors = True
    assert cfg.suppress_errors is True
    cfg.suppress_errors = False
    with pytest.raises(AttributeError, match="no setting 'no_such'"):
        cfg.no_such = 1
    with cfg.patch(cache_size_limit=64):
        assert cfg.cache_size_limit == 64
    assert cfg.cache_size_limit == 8
    tb._dynamo.reset()
    assert tb._dynamo.is_compiling() is False and tb.compiler.is_compiling() is False
    f = lambda x: x  # noqa: E731
    assert tb._dynamo.disable(f) is f and tb._dynamo.allow_in_graph(f) is f
    assert tb.compiler.disable(f) is f and tb.compiler.disable()(f) is f
    tb._dynamo.mark_dynamic(tb.ones(2), 0)
    tb.compiler.cudagraph_mark_step_begin()
    torch = pytest.importorskip("torch")
    assert torch._dynamo.config.cache_size_limit == 8   # the default we give


def test_jit_runs_eagerly_with_torchs_results():
    torch = pytest.importorskip("torch")

    def gelu_fused(x):
        return x * 0.5 * (1.0 + tb.erf(x / 1.41421))

    def gelu_torch(x):
        return x * 0.5 * (1.0 + torch.erf(x / 1.41421))
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    got = tb.jit.script(gelu_fused)(tb.tensor(x)).numpy()
    want = torch.jit.script(gelu_torch)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    m = _model()
    assert tb.jit.trace(m, tb.ones(1, 3)) is m and tb.jit.script(m) is m
    assert tb.jit.is_scripting() is False and tb.jit.is_tracing() is False
    assert tb.jit.fork(lambda a: a + 1, 1).wait() == 2
    assert tb.jit.annotate(list, [1]) == [1]
    assert issubclass(tb.jit.ScriptModule, nn.Module)

    @tb.jit.ignore
    def helper(x):
        return x
    assert helper(3) == 3 and tb.jit.unused(helper) is helper


def test_jit_save_and_load_are_refused_by_name(tmp_path):
    with pytest.raises(NotImplementedError, match="torch.jit.save is not supported.*state_dict"):
        tb.jit.save(_model(), str(tmp_path / "m.pt"))
    with pytest.raises(NotImplementedError, match="torch.jit.load is not supported"):
        tb.jit.load(str(tmp_path / "m.pt"))
