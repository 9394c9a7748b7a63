"""DataParallel on CPU device lists (replicas in threads) against one replica on the whole batch."""
import threading

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn as nn
import tensorbrain.nn.functional as F
from tensorbrain.nn.parallel import (DataParallel, data_parallel, gather, parallel_apply,
                                     replicate, scatter)


def _model():
    tb.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))


def _grads(model):
    return [p.grad._data.copy() for p in model.parameters()]


@pytest.mark.parametrize("n_dev,batch", [(2, 8), (3, 10), (4, 3)])
def test_gradients_equal_a_single_replica(n_dev, batch):
    rng = np.random.default_rng(0)
    x = tb.from_numpy(rng.standard_normal((batch, 5)).astype(np.float32))
    y = tb.from_numpy(rng.integers(0, 3, batch))
    model = _model()
    dp = DataParallel(model, device_ids=["cpu"] * n_dev)
    out = dp(x)
    assert out.shape == (batch, 3)
    F.cross_entropy(out, y).backward()
    got = _grads(model)
    ref = _model()
    ref_out = ref(x)
    F.cross_entropy(ref_out, y).backward()
    np.testing.assert_allclose(out._data, ref_out._data, rtol=1e-6, atol=1e-7)
    for g, w in zip(got, _grads(ref)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)


def test_replicas_really_run_in_threads():
    seen, modes = set(), []

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            seen.add(threading.current_thread().name)
            modes.append(tb.is_grad_enabled())  # thread-local: the worker inherits the caller's
            return self.lin(x)
    DataParallel(Probe(), device_ids=["cpu", "cpu"])(tb.randn(4, 2))
    assert len(seen) == 2 and modes == [True, True]
    modes.clear()
    with tb.no_grad():
        out = DataParallel(Probe(), device_ids=["cpu", "cpu"])(tb.randn(4, 2))
    assert not out.requires_grad and modes == [False, False]


def test_one_device_or_none_is_a_pass_through():
    model = _model()
    x = tb.randn(4, 5)
    for ids in ([], ["cpu"]):
        np.testing.assert_array_equal(DataParallel(model, device_ids=ids)(x)._data, model(x)._data)
    np.testing.assert_array_equal(data_parallel(model, x, device_ids=["cpu", "cpu"])._data,
                                  model(x)._data)


def test_kwargs_tuples_and_dicts_are_scattered_and_gathered():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x, scale=1.0, extra=None):
            y = self.lin(x) * scale
            return {"y": y, "pair": (y, y.sum(1))}
    dp = DataParallel(Two(), device_ids=["cpu", "cpu"])
    x, extra = tb.randn(6, 3), tb.randn(6, 1)
    out = dp(x, scale=2.0, extra=extra)
    ref = dp.module(x, scale=2.0)
    assert set(out) == {"y", "pair"}
    np.testing.assert_allclose(out["y"]._data, ref["y"]._data, rtol=1e-6)
    np.testing.assert_allclose(out["pair"][1]._data, ref["pair"][1]._data, rtol=1e-6)


def test_building_blocks():
    x = tb.arange(10.0).reshape(5, 2)
    parts = scatter(x, ["cpu", "cpu", "cpu"])
    assert [tuple(p.shape) for p in parts] == [(2, 2), (2, 2), (1, 2)]
    np.testing.assert_array_equal(gather(parts, "cpu")._data, x._data)
    assert gather([tb.tensor(1.0), tb.tensor(2.0)], "cpu").tolist() == [1.0, 2.0]  # 0-d: stacked
    model = _model()
    reps = replicate(model, ["cpu", "cpu"])
    assert reps[0] is not model and reps[0][0].weight is model[0].weight  # same device: shared
    outs = parallel_apply(reps, [(tb.randn(2, 5),), (tb.randn(3, 5),)])
    assert [tuple(o.shape) for o in outs] == [(2, 3), (3, 3)]


def test_batchnorm_buffers_replica0_updates_are_kept():
    tb.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    dp = DataParallel(model, device_ids=["cpu", "cpu"])
    x = tb.randn(8, 3)
    dp(x)
    ref = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    ref.load_state_dict({k: v for k, v in model.state_dict().items()})
    ref[1].reset_running_stats()
    ref(x[:4])  # replica 0 saw the first half of the batch
    np.testing.assert_allclose(model[1].running_mean._data, ref[1].running_mean._data, rtol=1e-5)


def test_error_in_a_replica_names_it():
    class Boom(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            if x.shape[0] == 1:
                raise ValueError("tiny batch")
            return self.lin(x)
    with pytest.raises(ValueError, match=r"replica 1 on device cpu: tiny batch"):
        DataParallel(Boom(), device_ids=["cpu", "cpu"])(tb.randn(3, 2))
