"""tb.save / tb.load: round trips, atomicity, corrupt files, torch interop through safetensors."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorbrain as tb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_round_trip_nested(tmp_path):
    path = tmp_path / "c.safetensors"
    obj = {
        "model": {"fc.weight": tb.randn(3, 2), "fc.bias": tb.zeros(3, dtype=tb.float16)},
        "optimizer": {"state": {0: {"step": 3.0, "exp_avg": tb.ones(2)}},
                      "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0]}]},
        "epoch": 7, "loss": float("nan"), "best": float("inf"), "name": "run-1", "none": None,
        "flags": [True, False], "array": np.arange(6, dtype=np.int32).reshape(2, 3),
        "scalar": tb.tensor(2.5), "ints": tb.tensor([1, 2, 3]), "mask": tb.tensor([True, False]),
    }
    tb.save(obj, path)
    back = tb.load(path)
    assert back["epoch"] == 7 and back["name"] == "run-1" and back["none"] is None
    assert np.isnan(back["loss"]) and back["best"] == float("inf")
    assert back["flags"] == [True, False]
    assert back["optimizer"]["state"][0]["step"] == 3.0
    assert isinstance(back["optimizer"]["param_groups"][0]["betas"], tuple)
    for key in ("fc.weight", "fc.bias"):
        a, b = obj["model"][key], back["model"][key]
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(back["array"], obj["array"])
    assert isinstance(back["array"], np.ndarray)
    assert back["scalar"].shape == () and back["scalar"].item() == 2.5
    assert back["ints"].dtype == tb.int64 and back["mask"].dtype == tb.bool


def test_requires_grad_and_non_contiguous(tmp_path):
    w = tb.randn(4, 5, requires_grad=True)
    tb.save({"wt": w.detach().T, "w": w}, tmp_path / "x")
    back = tb.load(tmp_path / "x")
    assert back["w"].requires_grad
    np.testing.assert_array_equal(back["wt"].numpy(), w.detach().numpy().T)


def test_state_dict_keys_are_plain_names(tmp_path):
    from safetensors.numpy import load_file
    sd = {"layer.0.weight": tb.randn(2, 2), "layer.0.bias": tb.randn(2)}
    tb.save(sd, tmp_path / "m.safetensors")
    raw = load_file(str(tmp_path / "m.safetensors"))
    assert sorted(raw) == sorted(sd)


def test_torch_loads_state_dict(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    sd = {k: tb.randn(*v.shape) for k, v in model.state_dict().items()}
    tb.save(sd, tmp_path / "m.safetensors")
    model.load_state_dict(load_file(str(tmp_path / "m.safetensors")), strict=True)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    h = np.maximum(x @ sd["0.weight"].numpy().T + sd["0.bias"].numpy(), 0)
    want = h @ sd["2.weight"].numpy().T + sd["2.bias"].numpy()
    np.testing.assert_allclose(model(torch.tensor(x)).detach().numpy(), want, rtol=1e-5, atol=1e-6)


def test_plain_safetensors_file_loads_flat(tmp_path):
    from safetensors.numpy import save_file
    save_file({"a": np.ones(3, np.float32)}, str(tmp_path / "p.safetensors"))
    back = tb.load(tmp_path / "p.safetensors")
    assert list(back) == ["a"] and back["a"].tolist() == [1.0, 1.0, 1.0]


def test_objects_beyond_plain_data_need_weights_only_false(tmp_path):
    # torch 2.6+: saving works; the default weights_only=True load refuses (tests/test_checkpoint_io.py)
    tb.save({"x": object()}, tmp_path / "obj")
    with pytest.raises(Exception, match="weights_only=False"):
        tb.load(tmp_path / "obj")
    tb.save({(1, 2): 3}, tmp_path / "keys")  # pickled, but names no class: loads as in torch
    assert tb.load(tmp_path / "keys") == {(1, 2): 3}
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


@pytest.mark.parametrize("damage", ["truncate", "garbage", "pickle-like", "empty", "bad-structure"])
def test_corrupt_files_raise_naming_the_file(tmp_path, damage):
    path = tmp_path / "ckpt.safetensors"
    tb.save({"w": tb.randn(100), "epoch": 1}, path)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) - 50])
    elif damage == "garbage":
        path.write_bytes(os.urandom(256))
    elif damage == "pickle-like":
        path.write_bytes(b"\x80\x04\x95" + b"\x00" * 40)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        header["__metadata__"]["tensorbrain"] = '{"T":"dict","k":["w"],"v":[{"T":"tensor","name":"zz"}]}'
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        path.write_bytes(len(h).to_bytes(8, "little") + h + data[8 + n:])
    with pytest.raises(ValueError, match="ckpt.safetensors"):
        tb.load(path)


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="nope"):
        tb.load("/nonexistent/nope.safetensors")


def test_crash_mid_save_keeps_previous_checkpoint(tmp_path):
    """A process killed while writing a large checkpoint leaves the old file intact."""
    path = tmp_path / "ckpt.safetensors"
    tb.save({"epoch": 1, "w": tb.ones(10)}, path)
    before = path.read_bytes()
    code = textwrap.dedent(f"""
        import os, sys, signal
        import safetensors.numpy as stn
        real = stn.save_file
        def slow(arrays, filename, metadata=None):
            real(arrays, filename, metadata=metadata)   # the temporary file is complete...
            os.kill(os.getpid(), signal.SIGKILL)        # ...but we die before the rename
        stn.save_file = slow
        import tensorbrain as tb
        tb.save({{"epoch": 2, "w": tb.zeros(1000)}}, {str(path)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT},
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert path.read_bytes() == before
    assert tb.load(path)["epoch"] == 1


def test_map_location_cpu_and_cuda_errors(tmp_path):
    tb.save({"w": tb.ones(2)}, tmp_path / "c")
    assert tb.load(tmp_path / "c", map_location="cpu")["w"].device == tb.device("cpu")
    if not tb.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location='cpu'|CUDA is not available"):
            tb.load(tmp_path / "c", map_location="cuda")


@pytest.mark.gpu
def test_cuda_round_trip(tmp_path):
    w = tb.randn(3, device="cuda")
    tb.save({"w": w}, tmp_path / "g")
    back = tb.load(tmp_path / "g")
    assert back["w"].is_cuda
    assert tb.load(tmp_path / "g", map_location="cpu")["w"].device == tb.device("cpu")
