"""The long tail of names the scanned repositories use once each (issue 29, after the list of
names used twice was done): torch-namespace functions, autograd.functional, global module
hooks, CyclicLR, pruning method classes, GPU monitoring, and the small modules (types,
torch_version, __future__, mtia, backends). Values and gradients against torch where torch has
them; skipped without torch."""
import importlib
import typing

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain._unsupported import NotSupportedError

R = np.random.default_rng(0)


@pytest.mark.parametrize("spacing,dim,edge_order", [
    (1, None, 1), (2.0, 1, 2), ((0.5, 2.0), None, 2), (3, -1, 1), ((1.5,), 0, 1)])
def test_gradient_values_and_gradients_match_torch(spacing, dim, edge_order):
    torch = pytest.importorskip("torch")
    a = R.standard_normal((4, 5))
    x = tb.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    out = tb.gradient(x, spacing=spacing, dim=dim, edge_order=edge_order)
    tout = torch.gradient(tx, spacing=spacing, dim=dim, edge_order=edge_order)
    assert len(out) == len(tout)
    for u, v in zip(out, tout):
        np.testing.assert_allclose(u.detach().numpy(), v.detach().numpy(), rtol=1e-6, atol=1e-9)
    sum(u.sum() * (i + 1) for i, u in enumerate(out)).backward()
    sum(u.sum() * (i + 1) for i, u in enumerate(tout)).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-9)


def test_gradient_with_coordinates_and_errors():
    torch = pytest.importorskip("torch")
    f, c = [1.0, 4.0, 9.0, 16.0, 20.0], [0.0, 1.0, 1.5, 3.0, 4.0]
    for eo in (1, 2):
        got = tb.gradient(tb.tensor(f), spacing=(tb.tensor(c),), edge_order=eo)[0]
        want = torch.gradient(torch.tensor(f), spacing=(torch.tensor(c),), edge_order=eo)[0]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    assert tb.gradient(tb.tensor([1, 4, 9]))[0].tolist() == [3.0, 4.0, 5.0]
    with pytest.raises(RuntimeError, match="edge_order"):
        tb.gradient(tb.ones(3), edge_order=3)
    with pytest.raises(RuntimeError, match="at least edge_order"):
        tb.gradient(tb.ones(2), edge_order=2)
    with pytest.raises(RuntimeError, match="spacing"):
        tb.gradient(tb.ones(3, 3), spacing=[1.0, 2.0, 3.0])


def test_small_torch_functions_match_torch():
    torch = pytest.importorskip("torch")
    x = tb.tensor([[1.0], [2.0]], requires_grad=True)
    tx = torch.tensor([[1.0], [2.0]], requires_grad=True)
    y, ty = tb.expand_copy(x, (2, 3)), torch.expand_copy(tx, (2, 3))
    assert y.tolist() == ty.tolist()
    (y * tb.arange(3.0)).sum().backward()
    (ty * torch.arange(3.0)).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()
    v = tb.tensor(2.0, requires_grad=True)
    tv = torch.tensor(2.0, requires_grad=True)
    tb.fill(tb.zeros(3), v).sum().backward()
    torch.fill(torch.zeros(3), tv).sum().backward()
    assert tb.fill(tb.zeros(2), 3.0).tolist() == [3.0, 3.0] and v.grad.item() == tv.grad.item()
    with pytest.raises(RuntimeError, match="0-dimension"):
        tb.fill(tb.zeros(2), tb.ones(2))
    assert tb.is_nonzero(tb.tensor([0.5])) and not tb.tensor(0).is_nonzero()
    for bad in (tb.tensor([1, 2]), tb.tensor([])):
        with pytest.raises(RuntimeError, match="ambiguous"):
            tb.is_nonzero(bad)
    a, w = R.standard_normal((2, 3, 4)), np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(tb.tensor(a).prelu(tb.tensor(w)).numpy(),
                               torch.tensor(a).prelu(torch.tensor(w)).numpy())
    assert tuple(tb.swapaxes(tb.zeros(2, 3, 4), 0, 2).shape) == (4, 3, 2)
    assert tuple(tb.swapdims(tb.zeros(2, 3), 0, 1).shape) == (3, 2)
    b = R.standard_normal((3, 4))
    np.testing.assert_allclose(tb.cosine_similarity(tb.tensor(a[0]), tb.tensor(b), dim=1).numpy(),
                               torch.cosine_similarity(torch.tensor(a[0]), torch.tensor(b),
                                                       dim=1).numpy(), rtol=1e-6)
    for args, kw in [((3,), {}), ((True,), {}), ((3,), {"dtype": "int64"})]:
        kw_tb = {"dtype": tb.int64} if kw else {}
        kw_t = {"dtype": torch.int64} if kw else {}
        got, want = tb.scalar_tensor(*args, **kw_tb), torch.scalar_tensor(*args, **kw_t)
        assert got.item() == want.item() and str(got.dtype) == str(want.dtype).split(".")[1]
    with pytest.raises(RuntimeError, match="overflow"):
        tb.scalar_tensor(2 + 1j)
    assert tb.cond(tb.tensor(True), lambda t: t + 1, lambda t: t - 1, (tb.ones(2),)).tolist() \
        == [2.0, 2.0]
    assert tb.cond(False, lambda: 1, lambda: 2) == 2
    with pytest.raises(RuntimeError, match="single-element"):
        tb.cond(tb.tensor([1, 2]), lambda: 1, lambda: 2)
    assert tb.sym_ite(False, 1, 2) == 2
    t = tb.ones(1000)
    tb.manual_seed(0)
    assert tb.dropout_(t, 0.5, True) is t and set(np.unique(t.numpy())) <= {0.0, 2.0}
    assert tb.dropout_(tb.ones(3), 0.5, False).tolist() == [1.0, 1.0, 1.0]
    assert tb.vmap is tb.func.vmap
    assert tb.legacy_contiguous_format is tb.contiguous_format and str(tb.jagged) == "torch.jagged"


def test_set_default_tensor_type():
    try:
        tb.set_default_tensor_type(tb.DoubleTensor)
        assert tb.get_default_dtype() == tb.float64 and tb.tensor([1.5]).dtype == tb.float64
        tb.set_default_tensor_type("torch.FloatTensor")
        assert tb.get_default_dtype() == tb.float32
        with pytest.raises(TypeError, match="floating-point"):
            tb.set_default_tensor_type(tb.LongTensor)
        with pytest.raises(NotSupportedError, match="CUDA"):
            tb.set_default_tensor_type("torch.cuda.FloatTensor")
    finally:
        tb.set_default_dtype(tb.float32)


def test_autograd_functional_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.autograd import functional as TF

    from tensorbrain.autograd import functional as F
    a, b = R.standard_normal(3), R.standard_normal(3)

    def fn(L):
        return lambda x, y: (x * y, x.sum() * y.exp(), (x ** 2).sum())
    got = F.jacobian(fn(tb), (tb.tensor(a), tb.tensor(b)))
    want = TF.jacobian(fn(torch), (torch.tensor(a), torch.tensor(b)))
    for i in range(3):
        for j in range(2):
            np.testing.assert_allclose(got[i][j].numpy(), want[i][j].numpy(), rtol=1e-12)
    one = F.jacobian(lambda x: x.sin() * 2, tb.tensor(a))
    np.testing.assert_allclose(one.numpy(), TF.jacobian(lambda x: x.sin() * 2,
                                                        torch.tensor(a)).numpy())
    tup = F.jacobian(lambda x: (x, x * 2), tb.tensor(a))
    assert isinstance(tup, tuple) and len(tup) == 2 and tuple(tup[1].shape) == (3, 3)
    ins = F.jacobian(lambda x, y: x * y, (tb.tensor(a), tb.tensor(b)))
    assert isinstance(ins, tuple) and np.allclose(ins[0].numpy(), np.diag(b))
    zero = F.jacobian(lambda x, y: x * 2, (tb.tensor(a), tb.tensor(b)))
    assert not zero[1].numpy().any()
    with pytest.raises(RuntimeError, match="independent"):
        F.jacobian(lambda x, y: x * 2, (tb.tensor(a), tb.tensor(b)), strict=True)
    out, g = F.vjp(lambda x: (x ** 3).sum(), tb.tensor(a))
    tout, tg = TF.vjp(lambda x: (x ** 3).sum(), torch.tensor(a))
    np.testing.assert_allclose(g.numpy(), tg.numpy())
    assert abs(out.item() - tout.item()) < 1e-12 and not g.requires_grad
    v = R.standard_normal(3)
    _, g2 = F.vjp(lambda x, y: x * y, (tb.tensor(a), tb.tensor(b)), tb.tensor(v))
    _, tg2 = TF.vjp(lambda x, y: x * y, (torch.tensor(a), torch.tensor(b)), torch.tensor(v))
    for u, w in zip(g2, tg2):
        np.testing.assert_allclose(u.numpy(), w.numpy())
    with pytest.raises(RuntimeError, match="v can only be None"):
        F.vjp(lambda x: x * 2, tb.tensor(a))
    with pytest.raises(TypeError, match="Tensor"):
        F.jacobian(lambda x: x, [1.0])
    with pytest.raises(ValueError, match="strategy"):
        F.jacobian(lambda x: x, tb.tensor(a), strategy="sideways")
    for name in ("hessian", "hvp", "vhp"):
        with pytest.raises(NotSupportedError, match=name):
            getattr(F, name)(lambda x: x, tb.tensor(a))
    with pytest.raises(NotImplementedError, match="create_graph"):
        F.jacobian(lambda x: x, tb.tensor(a), create_graph=True)


def test_jvp_matches_torch():
    """autograd.functional.jvp and func.jvp: exact Jacobian-vector products (one backward pass
    per output element) against torch's forward mode; func.jvp's primal output keeps its graph
    to the closure's parameters as torch's does."""
    torch = pytest.importorskip("torch")
    from torch.autograd import functional as TF

    from tensorbrain.autograd import functional as F
    a, b, v, u = (R.standard_normal(3) for _ in range(4))
    w0 = R.standard_normal((4, 3))

    def two(x, y):
        return x * y.sin(), (x.exp() * y).sum()
    got = F.jvp(two, (tb.tensor(a), tb.tensor(b)), (tb.tensor(v), tb.tensor(u)))
    want = TF.jvp(two, (torch.tensor(a), torch.tensor(b)), (torch.tensor(v), torch.tensor(u)))
    for g, t in zip(got[0] + got[1], want[0] + want[1]):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)
    one = F.jvp(lambda x: x ** 3, tb.tensor(a), tb.tensor(v))[1]
    np.testing.assert_allclose(one.numpy(), 3 * a ** 2 * v, rtol=1e-12)
    with pytest.raises(RuntimeError, match="v can only be None"):
        F.jvp(lambda x: x * 2, tb.tensor(a))
    with pytest.raises(RuntimeError, match="different size"):
        F.jvp(lambda x: x * 2, tb.tensor(a), tb.tensor(v[:2]))
    res = []
    for lib in (tb, torch):
        W = lib.tensor(w0, requires_grad=True)
        out, tan, aux = lib.func.jvp(lambda x, y: ((W @ x).tanh() * y.sum(), y * 2),
                                     (lib.tensor(a), lib.tensor(b)),
                                     (lib.tensor(v), lib.tensor(u)), has_aux=True)
        assert np.allclose(aux.detach().numpy(), 2 * b)
        (out ** 2).sum().backward()
        res.append((out.detach().numpy(), tan.detach().numpy(), W.grad.numpy()))
    for g, t in zip(*res):
        np.testing.assert_allclose(g, t, rtol=1e-12, atol=1e-14)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        tb.func.jvp(lambda x: x, tb.tensor(a), (tb.tensor(v),))


def test_autograd_graph_stream_switches_as_torch():
    torch = pytest.importorskip("torch")
    for name in ("set_override_stale_capture_stream",
                 "set_warn_on_accumulate_grad_stream_mismatch"):
        for value in (True, False, 1, None):
            errors = []
            for lib in (tb, torch):
                try:
                    getattr(lib.autograd.graph, name)(value)
                    errors.append(None)
                except RuntimeError as e:
                    errors.append(str(e))
            assert errors[0] == errors[1], (name, value)
    tb.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(True)
    assert tb.autograd.graph.stream_switches["override_stale_capture_stream"] is False


def test_autograd_graph_and_multithreading_switch():
    x = tb.ones(2, requires_grad=True)
    before = x._version[0]
    tb.autograd.graph.increment_version(x)
    assert x._version[0] == before + 1
    with tb.autograd.set_multithreading_enabled(False):
        assert not tb.autograd.is_multithreading_enabled()
    assert tb.autograd.is_multithreading_enabled()


def test_global_module_hooks_run_in_torchs_order():
    torch = pytest.importorskip("torch")
    orders = []
    for L in (tb, torch):
        order = []
        m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.ReLU())
        m[0].register_forward_pre_hook(lambda mod, a: order.append("local_pre"))
        m[0].register_forward_hook(lambda mod, a, o: order.append("local"))
        mm = L.nn.modules.module
        h1 = mm.register_module_forward_pre_hook(
            lambda mod, a: order.append(f"pre:{type(mod).__name__}"))
        h2 = mm.register_module_forward_hook(
            lambda mod, a, kw, o: order.append(f"post:{type(mod).__name__}"), with_kwargs=True)
        m(L.ones(2))
        h1.remove()
        h2.remove()
        m(L.ones(2))
        orders.append(order)
    assert orders[0] == orders[1]
    doubled = tb.nn.modules.module.register_module_forward_hook(lambda mod, a, o: o * 2)
    try:
        assert tb.nn.Identity()(tb.ones(1)).tolist() == [2.0]
    finally:
        doubled.remove()
    assert tb.nn.Identity()(tb.ones(1)).tolist() == [1.0]


@pytest.mark.parametrize("mode,opt,kw", [("triangular", "SGD", {"momentum": 0.9}),
                                         ("triangular2", "Adam", {}),
                                         ("exp_range", "SGD", {"momentum": 0.5})])
def test_cyclic_lr_matches_torch(mode, opt, kw):
    torch = pytest.importorskip("torch")
    runs = []
    for L in (tb, torch):
        o = getattr(L.optim, opt)([L.nn.Parameter(L.zeros(2))], lr=0.1, **kw)
        s = L.optim.lr_scheduler.CyclicLR(o, 0.01, [0.1], step_size_up=3, step_size_down=2,
                                          mode=mode, gamma=0.9)
        seen = []
        for _ in range(14):
            o.step()
            s.step()
            g = o.param_groups[0]
            seen.append((s.get_last_lr()[0], g.get("momentum", g.get("betas", (0,))[0])))
        runs.append(seen)
    np.testing.assert_allclose(runs[0], runs[1])
    o = tb.optim.Adagrad([tb.nn.Parameter(tb.zeros(1))])
    with pytest.raises(ValueError, match="momentum"):
        tb.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1)
    with pytest.raises(ValueError, match="mode"):
        tb.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, mode="zigzag", cycle_momentum=False)


def test_pruning_method_classes_match_torch():
    torch = pytest.importorskip("torch")
    importlib.import_module("torch.nn.utils.prune")
    importlib.import_module("tensorbrain.nn.utils.prune")
    w = R.standard_normal((4, 6)).astype(np.float32)

    def linear(L):
        m = L.nn.Linear(6, 4)
        with L.no_grad():
            m.weight.copy_(L.tensor(w))
        return m
    for cls, args in [("L1Unstructured", (0.3,)), ("LnStructured", (2, 2, 0)),
                      ("LnStructured", (1, 1, 1))]:
        masks = []
        for L in (tb, torch):
            m = linear(L)
            getattr(L.nn.utils.prune, cls).apply(m, "weight", *args)
            masks.append(m.weight_mask.numpy())
        assert (masks[0] == masks[1]).all()
    results = []
    for L in (tb, torch):
        class EveryOther(L.nn.utils.prune.BasePruningMethod):
            PRUNING_TYPE = "unstructured"

            def compute_mask(self, t, default_mask):
                mask = default_mask.clone()
                mask.view(-1)[::2] = 0
                return mask
        m = linear(L)
        EveryOther.apply(m, "weight")
        results.append((m.weight_mask.numpy(), m.weight.detach().numpy(),
                        EveryOther().prune(L.ones(4)).tolist()))
    assert (results[0][0] == results[1][0]).all() and results[0][2] == results[1][2]
    np.testing.assert_allclose(results[0][1], results[1][1])
    m = linear(tb)
    tb.nn.utils.prune.random_structured(m, "weight", 2, 1)
    assert sorted(m.weight_mask.sum(0).tolist()) == [0.0, 0.0, 4.0, 4.0, 4.0, 4.0]
    m = linear(tb)
    tb.nn.utils.prune.RandomStructured.apply(m, "weight", 1, dim=0)
    assert sorted(m.weight_mask.sum(1).tolist()) == [0.0, 6.0, 6.0, 6.0]
    with pytest.raises(NotImplementedError):
        tb.nn.utils.prune.BasePruningMethod().compute_mask(tb.ones(1), tb.ones(1))


def test_upsample_aliases_match_torch():
    torch = pytest.importorskip("torch")
    a = R.standard_normal((1, 2, 3, 3))
    import tensorbrain.nn.functional as F
    TF = torch.nn.functional
    np.testing.assert_allclose(F.upsample_nearest(tb.tensor(a), scale_factor=2).numpy(),
                               TF.upsample_nearest(torch.tensor(a), scale_factor=2).numpy())
    np.testing.assert_allclose(F.upsample_bilinear(tb.tensor(a), size=(5, 4)).numpy(),
                               TF.upsample_bilinear(torch.tensor(a), size=(5, 4)).numpy(),
                               rtol=1e-6)
    assert not F.has_torch_function((tb.ones(1),))
    with pytest.raises(NotSupportedError):
        F.handle_torch_function(None, (), tb.ones(1))


def test_gpu_monitoring_and_cuda_helpers_without_a_gpu():
    if tb.cuda.is_available():
        pytest.skip("checks the answers of a machine without a GPU")
    try:
        import pynvml  # noqa: F401
        has_nvml = True
    except ImportError:
        has_nvml = False
    for name in ("utilization", "temperature", "power_draw", "clock_rate", "device_memory_used"):
        if not has_nvml:
            with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py"):
                getattr(tb.cuda, name)(0)
    if not has_nvml:
        assert tb.cuda.list_gpu_processes() == "pynvml module not found, please install " \
                                              "nvidia-ml-py"
    with tb.cuda.device_of(tb.zeros(1)):   # a CPU tensor: nothing to switch
        pass
    tb.cuda.check_error(0)
    with pytest.raises(tb.cuda.CudaError):
        tb.cuda.check_error(2)
    for refused in (tb.cuda.memory_snapshot, tb.cuda.MemPool, tb.cuda.use_mem_pool,
                    tb.cuda.ExternalStream, tb.cuda.memory.CUDAPluggableAllocator,
                    tb.cuda.comm.broadcast):
        with pytest.raises(NotSupportedError):
            refused()
    assert tb.cuda.graphs.CUDAGraph is tb.cuda.CUDAGraph
    assert tb.cuda.amp.common.amp_definitely_not_available()
    from tensorbrain.cuda.amp.grad_scaler import GradScaler
    assert GradScaler is tb.cuda.amp.GradScaler
    assert [s.name for s in tb.amp.grad_scaler.OptState] == ["READY", "UNSCALED", "STEPPED"]


def test_small_modules_answer_as_torch():
    torch = pytest.importorskip("torch")
    from tensorbrain.torch_version import TorchVersion as V
    TV = torch.torch_version.TorchVersion
    import operator as op
    for a, cmp, b in [("2.10.0", op.gt, "2.9.1"), ("2.1.0", op.ge, (2, 0)),
                      ("2.1.0", op.eq, "2.1"), ("2.0.0a0+git1", op.gt, "1.13"),
                      ("2.1.0.dev20230101", op.lt, "2.1.0"), ("2.1.0rc1", op.lt, "2.1.0"),
                      ("1.10.0a", op.gt, (1, 2, 1)), ("parrot", op.lt, "zebra"),
                      ("2.1.0", op.lt, "2.1.0.post1"), ("2.1", op.ne, "2.2")]:
        assert cmp(V(a), b) == cmp(TV(a), b), (a, b)
    assert isinstance(V("2.1"), str)
    assert tb.types.Number == torch.types.Number
    assert tb.__future__.get_overwrite_module_params_on_conversion() is False
    tb.__future__.set_swap_module_params_on_conversion(True)
    assert tb.__future__.get_swap_module_params_on_conversion()
    tb.__future__.set_swap_module_params_on_conversion(False)
    assert (tb.mtia.is_available(), tb.mtia.device_count(), tb.mtia.memory_stats()) == \
        (torch.mtia.is_available(), torch.mtia.device_count(), torch.mtia.memory_stats())
    with pytest.raises(RuntimeError, match="MTIA"):
        tb.mtia.synchronize()
    assert tb.xpu.random.manual_seed(0) is None
    for mod in ("opt_einsum", "cusparselt"):
        assert tb.backends.__dict__[mod].is_available() == \
            getattr(torch.backends, mod).is_available()
    assert tb.backends.opt_einsum.enabled is False and tb.backends.cusparselt.version() is None
    with pytest.raises(RuntimeError, match="MPS"):
        tb.backends.mps.is_macos_or_newer(14, 0)
    assert tb.utils.deterministic.fill_uninitialized_memory is True
    assert tb.overrides.get_default_nowrap_functions() == set()
    from tensorbrain.utils import checkpoint as ck
    assert [p.name for p in ck.CheckpointPolicy] == \
        [p.name for p in torch.utils.checkpoint.CheckpointPolicy]
    with pytest.raises(NotSupportedError, match="selective"):
        ck.create_selective_checkpoint_contexts(lambda *a: None)
    assert issubclass(tb.jit.TracedModule, tb.jit.ScriptModule)
    assert tb.jit.annotations.List is getattr(typing, "List")  # noqa: B009  (not an annotation)
    from tensorbrain.utils import collect_env
    assert collect_env.run("echo hi")[:2] == (0, "hi")
    assert collect_env.run(["no-such-program-29"])[0] != 0
    assert collect_env.get_nvidia_driver_version(lambda cmd: (0, "| Driver Version: 550.54 "
                                                                 "CUDA", "")) == "550.54"
    assert collect_env.get_nvidia_driver_version(lambda cmd: (1, "", "")) is None
    assert tb.nn.modules.SyncBatchNorm is tb.nn.SyncBatchNorm
