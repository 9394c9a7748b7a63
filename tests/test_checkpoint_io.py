"""tb.save/tb.load on file objects and whole objects (torch 2.6+ weights_only semantics)."""
import io
import pickle

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def _weights(m):
    return {k: v.numpy(force=True).copy() for k, v in m.state_dict().items()}


@pytest.mark.parametrize("kind", ["bytesio", "file", "path"])
def test_state_dict_round_trip_through_paths_and_file_objects(tmp_path, kind):
    m = Net()
    ckpt = {"model": m.state_dict(), "epoch": 7, "lr": 0.1}
    path = tmp_path / "ckpt.pt"
    if kind == "bytesio":
        f = io.BytesIO()
        tb.save(ckpt, f)
        f.seek(0)
        back = tb.load(f, map_location="cpu")
    elif kind == "file":
        with open(path, "wb") as f:
            tb.save(ckpt, f)
        with open(path, "rb") as f:
            back = tb.load(f)
    else:
        tb.save(ckpt, path)
        back = tb.load(path)
    assert back["epoch"] == 7 and back["lr"] == 0.1
    for k, v in _weights(m).items():
        np.testing.assert_array_equal(back["model"][k].numpy(), v)


def test_state_dict_in_a_file_object_stays_safetensors_for_torch(tmp_path):
    import safetensors.numpy as st  # a core dependency: no skip
    m = Net()
    with open(tmp_path / "m.safetensors", "wb") as f:
        tb.save(m.state_dict(), f)
    loaded = st.load_file(tmp_path / "m.safetensors")
    assert sorted(loaded) == ["fc.bias", "fc.weight"]
    np.testing.assert_array_equal(loaded["fc.weight"], m.fc.weight.numpy(force=True))


def test_two_objects_one_after_the_other_in_one_stream():
    f = io.BytesIO()
    tb.save({"a": tb.ones(2)}, f)
    tb.save([1, 2, 3], f)
    f.seek(0)
    assert tb.load(f)["a"].tolist() == [1.0, 1.0]
    assert tb.load(f) == [1, 2, 3]


def test_whole_module_needs_weights_only_false_and_warns():
    m = Net()
    f = io.BytesIO()
    tb.save(m, f)
    f.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False.*add_safe_globals"):
        tb.load(f)
    f.seek(0)
    with pytest.warns(UserWarning, match="arbitrary code"):
        back = tb.load(f, weights_only=False)
    assert isinstance(back, Net) and isinstance(back.fc.weight, nn.Parameter)
    for k, v in _weights(m).items():
        np.testing.assert_array_equal(back.state_dict()[k].numpy(), v)
    x = tb.randn(4, 3)
    np.testing.assert_allclose(back(x).detach().numpy(), m(x).detach().numpy())


def test_safe_globals_allow_named_classes_only_inside_the_block():
    f = io.BytesIO()
    tb.save(Net(), f)
    with tb.serialization.safe_globals([Net, nn.Linear]):
        f.seek(0)
        assert isinstance(tb.load(f), Net)
    f.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Net"):
        tb.load(f)
    tb.serialization.add_safe_globals([Net, nn.Linear])
    try:
        f.seek(0)
        assert isinstance(tb.load(f), Net)
    finally:
        tb.serialization.clear_safe_globals()


def test_shared_tensors_stay_shared_after_a_whole_object_load():
    w = tb.randn(3)
    f = io.BytesIO()
    tb.save({"a": w, "b": w, "obj": Net()}, f)
    f.seek(0)
    with pytest.warns(UserWarning):
        back = tb.load(f, weights_only=False)
    assert back["a"] is back["b"]


def test_garbage_in_a_file_object_is_a_clear_error():
    with pytest.raises(ValueError, match="not a readable TensorBrain checkpoint"):
        tb.load(io.BytesIO(b"\x05\x00\x00\x00\x00\x00\x00\x00{bad"))


def test_torch_reads_the_state_dict_tb_wrote_to_a_file_object(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file
    m = Net()
    with open(tmp_path / "m.safetensors", "wb") as f:
        tb.save(m.state_dict(), f)
    tm = torch.nn.Module()
    tm.fc = torch.nn.Linear(3, 2)
    tm.load_state_dict(load_file(tmp_path / "m.safetensors"))
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(tm.fc(torch.from_numpy(x)).detach().numpy(),
                               m(tb.from_numpy(x)).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_a_whole_object_save_also_removes_a_dead_writers_temp_file(tmp_path):
    # whole-object files and safetensors state dicts share one atomic writer (tensorbrain/_atomic.py)
    import os
    import socket
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()                                  # its pid is now free: a writer that died
    host = socket.gethostname().replace("-", "_").replace(os.sep, "_")
    stale = tmp_path / f".model.pt.tbtmp-{host}-{dead.pid}-abc.tmp"
    stale.write_bytes(b"half a checkpoint")
    tb.save(tb.nn.Linear(2, 3), tmp_path / "model.pt")   # a whole module: not plain data
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]
