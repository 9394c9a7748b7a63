"""The small torch namespaces added for issue 29: tb.func (against torch.func), tb.xpu /
tb.mps / tb.version (what torch's build without them answers), tb.futures, tb.overrides,
and the namespaces refused by name (fx, library, quantization, nested,
utils.cpp_extension)."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn
from tensorbrain.testing import api_coverage as cov


def test_func_transforms_match_torch():
    torch = pytest.importorskip("torch")
    x0 = np.random.default_rng(0).standard_normal((3, 4))
    outs = []
    for lib in (tb, torch):
        x = lib.tensor(x0)
        g = lib.func.grad(lambda v: (v.sin() * v).sum())(x)
        gv = lib.func.grad_and_value(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, x * 2)
        vm = lib.func.vmap(lambda row, w: (row * w).sum(), in_dims=(0, None))(x, x[0])
        jac = lib.func.jacrev(lambda v: v * v)(x[0])
        outs.append([g, gv[0][0], gv[0][1], gv[1], vm, jac])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)


def test_functional_call_swaps_and_restores():
    torch = pytest.importorskip("torch")
    w0 = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    res = []
    for lib in (tb, torch):
        m = lib.nn.Linear(3, 2)
        before = m.weight.detach().numpy().copy()
        out = lib.func.functional_call(m, {"weight": lib.tensor(w0), "bias": lib.zeros(2)},
                                       (lib.ones(1, 3),))
        assert np.array_equal(m.weight.detach().numpy(), before)
        res.append(out.detach().numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-6)
    with pytest.raises(AttributeError, match="no parameter or buffer 'nope'"):
        tb.func.functional_call(nn.Linear(1, 1), {"nope": tb.ones(1)}, (tb.ones(1, 1),))


def test_absent_accelerators_answer_as_torch_without_them():
    assert tb.xpu.is_available() is False and tb.xpu.device_count() == 0
    assert tb.xpu.memory_allocated() == 0 and tb.xpu.manual_seed(1) is None
    assert tb.mps.is_available() is False
    for call in (tb.xpu.current_device, tb.xpu.synchronize, tb.mps.empty_cache,
                 tb.mps.current_allocated_memory):
        with pytest.raises(RuntimeError, match="no (XPU|MPS) backend"):
            call()
    assert tb.version.hip is None and tb.version.__version__ == tb.__version__
    assert tb.version.cuda is None or tb.cuda.is_available()
    torch = pytest.importorskip("torch")
    assert torch.xpu.is_available() is False and torch.xpu.memory_allocated() == 0
    with pytest.raises(RuntimeError):
        torch.mps.empty_cache()


def test_futures_and_overrides():
    f = tb.futures.Future.completed(2).then(lambda fut: fut.value() + 1)
    assert f.wait() == 3
    assert tb.futures.wait_all([tb.futures.Future.completed(1), f]) == [1, 3]
    both = tb.futures.collect_all([f])
    assert both.wait()[0] is f
    assert tb.overrides.has_torch_function((tb.ones(1),)) is False
    assert tb.overrides.is_tensor_like(tb.ones(1)) and not tb.overrides.is_tensor_like([1])


@pytest.mark.parametrize("name", ["torch.fx.replace_pattern",
                                  "torch.library.wrap_triton", "torch.quantization.quantize_dynamic",
                                  "torch.nested.narrow",
                                  "torch.utils.cpp_extension.CUDAExtension",
                                  "torch.utils.cpp_extension.load",
                                  "torch.overrides.TorchFunctionMode",
                                  "torch.utils.mobile_optimizer.optimize_for_mobile",
                                  "torch.utils.hipify.hipify_python.hipify",
                                  "torch.fx.passes.regional_inductor.regional_inductor",
                                  "torch.fx.passes.runtime_assert.insert_deferred_runtime_asserts",
                                  "torch.profiler.ExecutionTraceObserver",
                                  "torch.distributed.checkpoint.quantized_hf_storage."
                                  "QuantizedHuggingFaceStorageReader"])
def test_refused_namespaces_name_themselves(name):
    assert cov.status(name) == cov.REFUSING
    import importlib
    module, _, attr = name.replace("torch", "tensorbrain", 1).rpartition(".")
    obj = getattr(importlib.import_module(module), attr)
    with pytest.raises(NotImplementedError, match=f"{name} is not supported by TensorBrain"):
        obj()
    if isinstance(obj, type):
        assert not isinstance(nn.Linear(1, 1), obj)   # isinstance checks go on


def test_distributed_config_schedule_kinds_and_rpc_api_match_torch():
    import tensorbrain.distributed.config as dist_config
    from tensorbrain.distributed.pipelining import schedules
    from tensorbrain.distributed.rpc import api
    pytest.importorskip("torch")
    import torch.distributed.config as tconfig
    import torch.distributed.pipelining.schedules as tsched
    for name in ("compile_on_one_rank", "use_torchcomms"):
        assert getattr(dist_config, name) == getattr(tconfig, name)
    with dist_config.patch(use_torchcomms=True):
        assert dist_config.use_torchcomms is True
    assert dist_config.use_torchcomms is False
    with pytest.raises(AttributeError, match="no setting 'nope'"):
        dist_config.patch(nope=1)
    assert [(k.name, k.value) for k in schedules._ComputationType] == \
        [(k.name, k.value) for k in tsched._ComputationType]
    for name in ("FORWARD", "FULL_BACKWARD", "BACKWARD_INPUT", "BACKWARD_WEIGHT", "UNSHARD",
                 "RESHARD", "OVERLAP_F_B", "REDUCE_GRAD"):
        assert getattr(schedules, name).value == getattr(tsched, name).value
    assert schedules._ComputationType.from_str("B") is schedules.FULL_BACKWARD
    with pytest.raises(RuntimeError, match="Invalid computation type X"):
        schedules._ComputationType.from_str("X")
    assert api.rpc_sync is tb.distributed.rpc.rpc_sync


def test_sobol_engine_matches_torch():
    torch = pytest.importorskip("torch")
    pytest.importorskip("scipy")
    for dim in (1, 3, 40):
        ours, theirs = tb.quasirandom.SobolEngine(dim), torch.quasirandom.SobolEngine(dim)
        np.testing.assert_array_equal(ours.draw(5).numpy(), theirs.draw(5).numpy())
        ours.fast_forward(3), theirs.fast_forward(3)
        np.testing.assert_array_equal(ours.draw(4, dtype=tb.float64).numpy(),
                                      theirs.draw(4, dtype=torch.float64).numpy())
        assert ours.num_generated == theirs.num_generated == 12
        ours.reset(), theirs.reset()
        np.testing.assert_array_equal(ours.draw_base2(3).numpy(), theirs.draw_base2(3).numpy())
    with pytest.raises(ValueError, match="require n to be a power of 2"):
        e = tb.quasirandom.SobolEngine(2)
        e.draw(3)
        e.draw_base2(2)
    with pytest.raises(ValueError, match=r"\[1, 21201\]"):
        tb.quasirandom.SobolEngine(0)
    pts = tb.quasirandom.SobolEngine(2, scramble=True, seed=1).draw(64).numpy()
    assert ((pts >= 0) & (pts < 1)).all() and abs(pts.mean() - 0.5) < 0.05


def test_benchmark_task_spec_matches_torch():
    torch = pytest.importorskip("torch")
    from tensorbrain.utils.benchmark.utils.common import Measurement, TaskSpec
    from torch.utils.benchmark.utils.common import TaskSpec as TTaskSpec
    for kw in ({"stmt": "x + 1", "setup": "pass"},
               {"stmt": "a\nb", "setup": "x = 1\ny = 2", "label": "L", "sub_label": "s",
                "description": "d"}):
        ours, theirs = TaskSpec(**kw), TTaskSpec(**kw)
        assert (ours.title, ours.setup_str(), ours.summarize()) == \
            (theirs.title, theirs.setup_str(), theirs.summarize())
    m = Measurement(10, [1.0, 2.0, 3.0], TaskSpec("x", "pass", label="lab"))
    assert m.median == pytest.approx(0.2) and m.label == "lab"
    assert torch is not None


def test_elastic_metrics_and_std_match_torch(capsys):
    pytest.importorskip("torch")
    from torch.distributed.elastic.multiprocessing import Std as TStd

    from tensorbrain.distributed.elastic import metrics
    from tensorbrain.distributed.elastic.multiprocessing import Std
    for s in ("0", "3", "0:3,1:0,2:1"):
        ours, theirs = Std.from_str(s), TStd.from_str(s)
        if isinstance(ours, dict):
            assert {k: int(v) for k, v in ours.items()} == {k: int(v) for k, v in theirs.items()}
        else:
            assert int(ours) == int(theirs)
    with pytest.raises(ValueError, match="does not match"):
        Std.from_str("7")
    metrics.put_metric("dropped", 1, "tb-test-null")
    assert capsys.readouterr().out == ""
    metrics.configure(metrics.ConsoleMetricHandler(), "tb-test")
    metrics.put_metric("restarts", 2, "tb-test")
    assert capsys.readouterr().out.rstrip().endswith("[tb-test]: restarts=2")


def test_rendezvous_parameters_match_torch():
    pytest.importorskip("torch")
    from torch.distributed.elastic.rendezvous import RendezvousParameters as TP

    from tensorbrain.distributed.elastic.rendezvous import RendezvousParameters as P
    for cls in (P, TP):
        p = cls("c10d", "host:29400", "job", 1, 2, timeout="30", fast="yes", n=1)
        assert (p.get_as_int("timeout"), p.get_as_bool("fast"), p.get_as_bool("n"),
                p.get("missing", 5)) == (30, True, True, 5)
        for bad in ({"backend": ""}, {"min_nodes": 0}, {"max_nodes": 0}):
            args = {"backend": "c10d", "endpoint": "", "run_id": "r", "min_nodes": 1,
                    "max_nodes": 1, **bad}
            with pytest.raises(ValueError, match="rendezvous"):
                cls(**args)
        with pytest.raises(ValueError, match="valid boolean"):
            cls("c10d", "", "r", 1, 1, x="maybe").get_as_bool("x")


def test_register_multi_grad_hook_matches_torch():
    torch = pytest.importorskip("torch")
    out = []
    for T in (torch, tb):
        seen = []
        a, b, c = (T.tensor([1.0, 2.0], requires_grad=True) for _ in range(3))
        h = T.autograd.graph.register_multi_grad_hook(
            (a, b, c), lambda gs: seen.append([None if g is None else g.tolist() for g in gs]))
        (a * 3 + b * b).sum().backward()
        (c * 2).sum().backward()
        h.remove()
        (a * 5).sum().backward()
        anys = []
        T.autograd.graph.register_multi_grad_hook((a, b), lambda g: anys.append(g.tolist()),
                                                  mode="any")
        (a * b).sum().backward()
        out.append((seen, len(anys)))
    assert out[0] == out[1]
    with pytest.raises(ValueError, match="Expects mode"):
        tb.autograd.graph.register_multi_grad_hook((), print, mode="some")


def test_classes_namespaces_as_torch():
    """torch.classes: namespaces made on use and kept; an unregistered class is torch's
    RuntimeError (TensorBrain registers none); load_library refuses by name."""
    torch = pytest.importorskip("torch")
    from tensorbrain._unsupported import NotSupportedError
    for lib in (tb, torch):
        ns = lib.classes.NativeInterpretation
        assert ns is lib.classes.NativeInterpretation and ns.name == "NativeInterpretation"
        with pytest.raises(RuntimeError, match="'pyg.CPUHashMap', but it does not exist"):
            _ = lib.classes.pyg.CPUHashMap
    assert tb.classes.loaded_libraries == set()
    with pytest.raises(NotSupportedError, match="torch.classes.load_library"):
        tb.classes.load_library("libcustom.so")
    assert cov.status("torch.classes.pyg") == "present"
    assert cov.status("torch.classes.load_library") == "refusing"


@pytest.mark.parametrize("kind,kwargs", [
    ("MinMaxObserver", {}),
    ("MinMaxObserver", {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}),
    ("MinMaxObserver", {"dtype": "quint8", "qscheme": "per_tensor_symmetric"}),
    ("MinMaxObserver", {"quant_min": 0, "quant_max": 15}),
    ("MinMaxObserver", {"dtype": "qint8", "reduce_range": True}),
    ("PerChannelMinMaxObserver", {"ch_axis": -1, "dtype": "qint8",
                                  "qscheme": "per_channel_symmetric"}),
    ("PerChannelMinMaxObserver", {"ch_axis": 0}),
    ("PerChannelMinMaxObserver", {"qscheme": "per_channel_affine_float_qparams"}),
])
def test_observers_match_torch(kind, kwargs):
    """Observers' running ranges and torch's scale/zero-point formulas, two batches in."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 6)).astype(np.float32) * s for s in (1.0, 3.0)]
    res = []
    for lib, mod in ((tb, tb.quantization.observer), (torch, torch.ao.quantization.observer)):
        kw = {k: getattr(lib, v) if isinstance(v, str) else v for k, v in kwargs.items()}
        obs = getattr(mod, kind)(**kw)
        for x in xs:
            out = obs(lib.tensor(x))
            assert np.array_equal(out.numpy(), x)
        scale, zp = obs.calculate_qparams()
        res.append((scale.numpy(), zp.numpy(), obs.min_val.numpy(), obs.max_val.numpy()))
    for got, want in zip(*res):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_qconfigs_and_refusals_as_torch():
    torch = pytest.importorskip("torch")
    from tensorbrain.ao.quantization import qconfig as q
    from tensorbrain._torch_extras import dtype_name
    from tensorbrain.quantization.observer import PlaceholderObserver
    for name in ("default_dynamic_qconfig", "per_channel_dynamic_qconfig"):
        ours, theirs = getattr(q, name), getattr(torch.ao.quantization.qconfig, name)
        for field in ("activation", "weight"):
            a, b = getattr(ours, field)(), getattr(theirs, field)()
            assert type(a).__name__ == type(b).__name__ and a.is_dynamic == b.is_dynamic
            assert dtype_name(a.dtype) == str(b.dtype).split(".")[-1]
            if hasattr(b, "qscheme"):
                assert a.qscheme.name == str(b.qscheme).split(".")[-1]
    with pytest.raises(ValueError, match="observer instance"):
        q.QConfig(activation=PlaceholderObserver(), weight=PlaceholderObserver)
    with pytest.raises(Exception, match="should not be called"):
        PlaceholderObserver().calculate_qparams()
    assert tb.quantization.observer is tb.ao.quantization.observer
    assert cov.status("torch.quantization.observer.HistogramObserver") == "refusing"
    assert repr(tb.per_channel_symmetric) == "tb.per_channel_symmetric"
    assert tb.qint8.itemsize == torch.qint8.itemsize and tb.qint32.itemsize == 4


def test_elastic_agent_types_match_torch():
    """WorkerSpec/Worker/WorkerGroup/WorkerState/RunResult: torch's fields, defaults, checks and
    strings; LocalElasticAgent refused by name."""
    pytest.importorskip("torch")
    from torch.distributed.elastic.agent.server import api as tapi

    from tensorbrain._unsupported import NotSupportedError
    from tensorbrain.distributed.elastic.agent.server import api
    from tensorbrain.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    got = []
    for mod in (api, tapi):
        spec = mod.WorkerSpec("trainer", 3, None, entrypoint="/bin/train.py", args=("--x",))
        group = mod.WorkerGroup(spec)
        group.workers[2].global_rank = 5
        res = mod.RunResult(mod.WorkerState.FAILED, {0: 1})
        got.append((spec.get_entrypoint_name(), spec.max_restarts, spec.monitor_interval,
                    [str(w) for w in group.workers], group.state.value, group.group_rank,
                    res.is_failed(), res.failures, mod.WorkerState.is_running(
                        mod.WorkerState.UNHEALTHY), [s.value for s in mod.WorkerState],
                    mod.WorkerSpec("r", 1, None, entrypoint=len).get_entrypoint_name()))
        for bad in ({"local_world_size": 0}, {"monitor_interval": 0}, {"entrypoint": None}):
            kw = {"role": "r", "local_world_size": 1, "rdzv_handler": None, "entrypoint": "a"}
            kw.update(bad)
            with pytest.raises(AssertionError):
                mod.WorkerSpec(**kw)
    assert got[0] == got[1]
    with pytest.raises(NotSupportedError, match="tbrun"):
        LocalElasticAgent(None)


def test_rendezvous_registry_static_backend_as_torch():
    """get_rendezvous_handler: the static TCP backend gives a working store prefixed by the run
    id (a real TCPStore served on this node); torch's argument errors; a registered creator is
    used; the dynamic backends refuse by name."""
    pytest.importorskip("torch")
    import socket

    from tensorbrain._unsupported import NotSupportedError
    from tensorbrain.distributed.elastic.rendezvous import RendezvousParameters as P
    from tensorbrain.distributed.elastic.rendezvous import registry
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    h = registry.get_rendezvous_handler(P("static", f"127.0.0.1:{port}", "job7", 1, 1, rank=0))
    info = h.next_rendezvous()
    info.store.set("k", b"v")
    assert info.store.get("k") == b"v" and (info.rank, info.world_size) == (0, 1)
    assert (info.bootstrap_store_info.master_addr, info.bootstrap_store_info.master_port) == \
        ("127.0.0.1", port)
    assert h.get_backend() == "static" and h.use_agent_store and h.num_nodes_waiting() == 0
    from torch.distributed.elastic.rendezvous import RendezvousParameters as TP
    from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler as tget
    for kw in ({"endpoint": "127.0.0.1:1"}, {"endpoint": "127.0.0.1", "rank": 0}):
        for cls, get in ((P, registry.get_rendezvous_handler), (TP, tget)):
            with pytest.raises(ValueError):
                get(cls("static", kw["endpoint"], "job", 1, 1,
                        **{k: v for k, v in kw.items() if k == "rank"}))
    with pytest.raises(NotSupportedError, match="tbrun"):
        registry.get_rendezvous_handler(P("c10d", "127.0.0.1:1", "job", 1, 2))
    with pytest.raises(ValueError, match="not registered"):
        registry.get_rendezvous_handler(P("mine", "x", "job", 1, 1))

    class Mine(registry.RendezvousHandler):
        def get_backend(self):
            return "mine"
    registry.handler_registry.register("mine", lambda params: Mine())
    assert isinstance(registry.get_rendezvous_handler(P("mine", "x", "job", 1, 1)), Mine)
