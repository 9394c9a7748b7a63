"""The tutorial's single-process Pipe and model parallel (layers on different devices): after K
steps the parameters equal a plain one-module run on the full batch."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.distributed.pipeline.sync import Pipe

STEPS = 3


def _net(seed=0, p=0.0):
    tb.manual_seed(seed)
    return tb.nn.Sequential(tb.nn.Linear(6, 16), tb.nn.Tanh(), tb.nn.Dropout(p),
                            tb.nn.Linear(16, 16), tb.nn.ReLU(), tb.nn.Linear(16, 3))


def _data():
    rng = np.random.default_rng(3)
    return (tb.tensor(rng.standard_normal((10, 6)).astype(np.float32)),
            tb.tensor(rng.integers(0, 3, 10)))


def _train(model, forward):
    opt = tb.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = _data()
    for _ in range(STEPS):
        opt.zero_grad()
        tb.nn.functional.cross_entropy(forward(x), y).backward()
        opt.step()
    return [p.detach().cpu().numpy() for p in model.parameters()]


def _same(a, b):
    for u, v in zip(a, b, strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("checkpoint", ["except_last", "always", "never"])
@pytest.mark.parametrize("chunks", [1, 3, 4])
def test_pipe_trains_like_one_module(chunks, checkpoint):
    plain = _net()
    ref = _train(plain, plain)
    pipe = Pipe(_net(), chunks=chunks, checkpoint=checkpoint, balance=[2, 2, 2],
                devices=["cpu", "cpu", "cpu"])
    got = _train(pipe, lambda x: pipe(x).local_value())
    _same(got, ref)
    assert len(list(pipe.parameters())) == 6
    assert "partitions.2.5.weight" in pipe.state_dict()


def test_pipe_partitions_by_device_and_errors():
    pipe = Pipe(_net(), chunks=2)            # every layer on cpu: one partition
    assert len(pipe.partitions) == 1 and pipe.devices == ["cpu"]
    with pytest.raises(ValueError, match="3 partitions"):
        Pipe(_net(), balance=[2, 2, 2], devices=["cpu"])
    with pytest.raises(ValueError, match="checkpoint='sometimes'"):
        Pipe(_net(), checkpoint="sometimes")
    with pytest.raises(TypeError, match="nn.Sequential"):
        Pipe(tb.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="fewer than chunks=8"):
        Pipe(_net(), chunks=8)(tb.zeros(4, 6))
    bad = Pipe(tb.nn.Sequential(tb.nn.Linear(6, 4), tb.nn.Linear(5, 2)), balance=[1, 1])
    with pytest.raises(RuntimeError, match="partition 1 on cpu failed on micro-batch 0"):
        bad(tb.zeros(4, 6))


def test_pipe_checkpoint_with_dropout_matches_plain_gradients():
    # one partition: the dropout masks are drawn in the same order as a plain run's
    x, y = _data()
    plain = _net(p=0.4)
    tb.manual_seed(5)
    tb.nn.functional.cross_entropy(plain(x), y).backward()
    pipe = Pipe(_net(p=0.4), chunks=1, checkpoint="always")
    tb.manual_seed(5)
    tb.nn.functional.cross_entropy(pipe(x).local_value(), y).backward()
    _same([p.grad.numpy() for p in pipe.parameters()], [p.grad.numpy() for p in plain.parameters()])


class ModelParallelNet(tb.nn.Module):
    """The tutorial's model parallel net: two halves on two devices, the activation moved."""

    def __init__(self, dev0, dev1):
        super().__init__()
        self.dev0, self.dev1 = dev0, dev1
        tb.manual_seed(0)
        self.net1 = tb.nn.Linear(6, 16).to(dev0)
        self.relu = tb.nn.ReLU()
        self.net2 = tb.nn.Linear(16, 3).to(dev1)

    def forward(self, x):
        x = self.relu(self.net1(x.to(self.dev0)))
        return self.net2(x.to(self.dev1))


def _mp_reference():
    tb.manual_seed(0)
    net = tb.nn.Sequential(tb.nn.Linear(6, 16), tb.nn.ReLU(), tb.nn.Linear(16, 3))
    return _train(net, net)


def _mp_run(dev0, dev1):
    net = ModelParallelNet(dev0, dev1)
    opt = tb.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x, y = _data()
    for _ in range(STEPS):
        opt.zero_grad()
        tb.nn.functional.cross_entropy(net(x), y.to(dev1)).backward()
        opt.step()
    return [p.detach().cpu().numpy() for p in net.parameters()]


def test_model_parallel_on_cpu_matches_one_module():
    _same(_mp_run("cpu", "cpu"), _mp_reference())


@pytest.mark.gpu
def test_model_parallel_cpu_and_gpu_matches_one_module():
    _same(_mp_run("cpu", "cuda:0"), _mp_reference())
    _same(_mp_run("cuda:0", "cpu"), _mp_reference())


@pytest.mark.gpu
def test_model_parallel_two_gpus_matches_one_module():
    from tensorbrain import cuda
    if cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    _same(_mp_run("cuda:0", "cuda:1"), _mp_reference())
    pipe = Pipe(_net(), chunks=4, balance=[3, 3], devices=["cuda:0", "cuda:1"])
    got = list(_train(pipe, lambda x: pipe(x).local_value().cpu()))
    plain = _net()
    _same(got, _train(plain, plain))


def test_pipe_dropout_in_every_partition_checkpoint_gradients_exact():
    # two random partitions run in a fixed order within each clock, so the masks are the same
    # with and without checkpointing, and each recomputation repeats its own masks
    x, y = _data()
    grads, outs = [], []
    for mode in ("always", "never", "except_last"):
        tb.manual_seed(11)
        net = tb.nn.Sequential(tb.nn.Linear(6, 16), tb.nn.Dropout(0.5), tb.nn.Linear(16, 16),
                               tb.nn.Dropout(0.5), tb.nn.Linear(16, 3))
        pipe = Pipe(net, chunks=4, checkpoint=mode, balance=[2, 3])
        tb.manual_seed(5)
        out = pipe(x).local_value()
        tb.nn.functional.cross_entropy(out, y).backward()
        outs.append(out.detach().numpy())
        grads.append([p.grad.numpy().copy() for p in net.parameters()])
    for k in (1, 2):
        np.testing.assert_array_equal(outs[k], outs[0])
        _same(grads[k], grads[0])


TUTORIAL = '''
import sys, tempfile
import numpy as np
import torch
import torch.nn as nn
import torch.distributed.rpc as rpc
from torch.distributed.pipeline.sync import Pipe

tmpfile = tempfile.NamedTemporaryFile()
rpc.init_rpc(name="worker", rank=0, world_size=1,
             rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
                 init_method="file://{}".format(tmpfile.name)))
torch.manual_seed(0)
model = Pipe(nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)), chunks=4,
             checkpoint="except_last")
x = torch.from_numpy(np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(x).local_value().pow(2).mean().backward()
    opt.step()
np.save(sys.argv[1], np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
rpc.shutdown()
'''


def test_the_tutorials_rpc_start_runs_unchanged_under_as_torch(tmp_path):
    """torch's Pipe tutorial calls rpc.init_rpc(world_size=1) first: run it as written under
    ``python -m tensorbrain.as_torch`` and compare with the plain module in this process."""
    import subprocess
    import sys
    prog, out = tmp_path / "tutorial.py", tmp_path / "params.npy"
    prog.write_text(TUTORIAL)
    r = subprocess.run([sys.executable, "-m", "tensorbrain.as_torch", "--quiet", str(prog),
                        str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    tb.manual_seed(0)
    plain = tb.nn.Sequential(tb.nn.Linear(6, 16), tb.nn.Tanh(), tb.nn.Linear(16, 3))
    x = tb.tensor(np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32))
    opt = tb.optim.SGD(plain.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        plain(x).pow(2).mean().backward()
        opt.step()
    want = np.concatenate([p.detach().numpy().ravel() for p in plain.parameters()])
    np.testing.assert_allclose(np.load(out), want, rtol=1e-5, atol=1e-6)


def test_the_tutorials_one_process_rpc_start():
    """The Pipe tutorial's init_rpc(world_size=1) / shutdown (RPC between processes:
    tests/distributed/test_rpc.py)."""
    import tensorbrain.distributed.rpc as rpc
    assert rpc.is_available()
    with pytest.raises(NotImplementedError, match="async_execution|functions"):
        rpc.functions  # noqa: B018
    rpc.init_rpc("w", rank=0, world_size=1)
    try:
        assert rpc.get_worker_info() == rpc.WorkerInfo("w", 0)
        with pytest.raises(RuntimeError, match="already initialized"):
            rpc.init_rpc("w", world_size=1)
    finally:
        rpc.shutdown()
    with pytest.raises(RuntimeError, match="not been initialized"):
        rpc.get_worker_info()
