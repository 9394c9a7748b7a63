"""tb.load of torch.save's zip format through a restricted unpickler, and tb.save(format="torch").

The committed tests/assets/torch_checkpoint.pt was written by real torch
(tests/assets/make_torch_checkpoint.py); its values are functions of np.arange, so the tests
that read it need no torch. Tests that compare with torch itself skip cleanly without it.
"""
from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

import tensorbrain as tb
from tests.assets.make_torch_checkpoint import PATH as ASSET, expected


def _arr(t):
    return t.detach().numpy()


# ***** reading a file torch wrote (no torch needed) *****
def test_reads_the_torch_made_checkpoint_with_every_dtype():
    ckpt = tb.load(ASSET)
    sd = ckpt["model"]
    assert isinstance(sd, collections.OrderedDict)
    for key, want in expected().items():
        got = _arr(sd[key])
        assert got.dtype == want.dtype, key
        assert got.shape == want.shape, key
        np.testing.assert_array_equal(got, want, err_msg=key)
    assert sd["emb.weight"].dtype == tb.bfloat16  # stays bfloat16
    # the same torch tensor twice is one tensor after the load (tied weights)
    assert np.shares_memory(_arr(sd["fc.weight"]), _arr(sd["tied.weight"]))


def test_torch_objects_around_the_tensors():
    ckpt = tb.load(ASSET)
    assert isinstance(ckpt["param"], tb.nn.Parameter) and ckpt["param"].requires_grad
    assert isinstance(ckpt["frozen"], tb.nn.Parameter) and not ckpt["frozen"].requires_grad
    assert ckpt["grad"].requires_grad and not isinstance(ckpt["grad"], tb.nn.Parameter)
    assert ckpt["meta"] == {"epoch": 3, "lr": 0.25, "name": "run-1", "none": None,
                            "flags": [True, False], "pair": (1, 2), "big": 2 ** 40,
                            "bytes": b"ab", "set": {1, 2}}
    assert ckpt["dtype"] == tb.bfloat16
    assert ckpt["device"] == tb.device("cpu")
    assert ckpt["size"] == (2, 3) and isinstance(ckpt["size"], tb.Size)


def test_bin_name_and_file_object(tmp_path):
    binary = tmp_path / "pytorch_model.bin"
    binary.write_bytes(open(ASSET, "rb").read())
    with open(binary, "rb") as fh:
        sd = tb.load(fh)["model"]
    np.testing.assert_array_equal(_arr(sd["fc.weight"]), expected()["fc.weight"])


def test_state_dict_loads_into_a_model():
    sd = tb.load(ASSET)["model"]
    model = tb.nn.Linear(3, 2)
    model.load_state_dict({"weight": sd["fc.weight"], "bias": sd["fc.bias"]})
    np.testing.assert_array_equal(_arr(model.bias), [-0.5, 0.5])


# ***** never running code *****
def _torch_zip(path, pickled: bytes, storages: dict[str, bytes] | None = None):
    """A zip with torch's layout around ``pickled`` (what a crafted .pt looks like)."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pickled)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/version", "3\n")
        for key, raw in (storages or {}).items():
            zf.writestr(f"archive/data/{key}", raw)


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _EvalEvil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (eval, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.mark.parametrize("evil,name", [(_Evil, "system"), (_EvalEvil, "builtins.eval")])
def test_a_malicious_pickle_is_refused_and_never_runs(tmp_path, evil, name):
    proof = tmp_path / "proof"
    pickle.loads(pickle.dumps(evil(proof), protocol=2))  # plain pickle runs it: the test can fail
    assert proof.exists()
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"weight": [1.0], "x": evil(marker)}, protocol=2)
    path = tmp_path / "model.pt"
    _torch_zip(path, payload)
    for weights_only in (True, False):
        with pytest.raises(pickle.UnpicklingError, match=name):
            tb.load(path, weights_only=weights_only)
    assert not marker.exists()


def test_getattr_and_unlisted_torch_names_are_refused(tmp_path):
    # GLOBAL builtins.getattr: the usual way around a naive allow-list
    payload = b"\x80\x02cbuiltins\ngetattr\n(cbuiltins\nobject\nX\x03\x00\x00\x00abct\x85R."
    _torch_zip(tmp_path / "a.pt", payload)
    with pytest.raises(pickle.UnpicklingError, match="builtins.getattr"):
        tb.load(tmp_path / "a.pt")
    payload = b"\x80\x02ctorch._utils\n_rebuild_qtensor\n."
    _torch_zip(tmp_path / "q.pt", payload)
    with pytest.raises(pickle.UnpicklingError, match="torch._utils._rebuild_qtensor"):
        tb.load(tmp_path / "q.pt")


def test_build_on_a_shared_object_is_refused(tmp_path):
    # BUILD would call np.dtype('float32').__setstate__ on the dtype NumPy shares process-wide
    state = b"(K\x03X\x01\x00\x00\x00>NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t"
    _torch_zip(tmp_path / "b.pt", b"\x80\x02ctorch\nfloat32\n" + state + b"b.")
    with pytest.raises(pickle.UnpicklingError, match="sets the state of a numpy"):
        tb.load(tmp_path / "b.pt")
    assert np.dtype("float32").byteorder == "="
    # an OrderedDict's attributes (a state dict's _metadata) are built
    sd = pickle.dumps(collections.OrderedDict(a=1), protocol=2)
    assert tb.load(_torch_zip(tmp_path / "o.pt", sd) or tmp_path / "o.pt") == {"a": 1}


def test_tensor_geometry_past_its_storage_is_refused(tmp_path):
    buf = io.BytesIO()
    tb.save({"w": tb.arange(4.0)}, buf, format="torch")
    with zipfile.ZipFile(buf) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    # shrink the storage: its declared 4 floats no longer fit
    path = tmp_path / "short.pt"
    with zipfile.ZipFile(path, "w") as zf:
        for n, raw in files.items():
            zf.writestr(n, raw[:8] if n == "archive/data/0" else raw)
    with pytest.raises(ValueError, match="holds 8 bytes, not 4"):
        tb.load(path)


def test_legacy_format_and_torchscript_are_named(tmp_path):
    legacy = tmp_path / "old.pt"
    legacy.write_bytes(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19." + b"\0" * 16)
    with pytest.raises(ValueError, match="legacy"):
        tb.load(legacy)
    script = tmp_path / "script.pt"
    with zipfile.ZipFile(script, "w") as zf:
        zf.writestr("m/constants.pkl", b"")
        zf.writestr("m/code/m.py", b"")
    with pytest.raises(ValueError, match="TorchScript"):
        tb.load(script)


# ***** writing torch's format *****
def test_save_torch_format_round_trips_without_torch(tmp_path):
    obj = {"model": collections.OrderedDict(w=tb.arange(6.0).reshape(2, 3),
                                            b=tb.ones(2, dtype=tb.bfloat16)),
           "p": tb.nn.Parameter(tb.zeros(2)), "step": 2 ** 40, "neg": -7, "lr": 0.5,
           "tags": ["a", None, True], "pair": (1, (2, 3)), "empty": [], "arr": np.arange(3)}
    path = tmp_path / "ours.pt"
    tb.save(obj, path, format="torch")
    back = tb.load(path)
    assert isinstance(back["model"], collections.OrderedDict)
    np.testing.assert_array_equal(_arr(back["model"]["w"]), np.arange(6.0).reshape(2, 3))
    assert back["model"]["b"].dtype == tb.bfloat16
    assert isinstance(back["p"], tb.nn.Parameter)
    assert (back["step"], back["neg"], back["lr"], back["tags"], back["pair"], back["empty"]) == \
        (2 ** 40, -7, 0.5, ["a", None, True], (1, (2, 3)), [])
    np.testing.assert_array_equal(_arr(back["arr"]), np.arange(3))
    with zipfile.ZipFile(path) as zf:  # storages start on 64-byte boundaries, as torch's
        for info in zf.infolist():
            assert (info.header_offset + 30 + len(info.filename) + len(info.extra)) % 64 == 0


def test_save_torch_format_refuses_objects_and_unknown_formats(tmp_path):
    with pytest.raises(TypeError, match=r"cannot store a Linear \(at 'model'\)"):
        tb.save({"model": tb.nn.Linear(2, 2)}, tmp_path / "m.pt", format="torch")
    with pytest.raises(ValueError, match="format='pickle' is unknown"):
        tb.save({}, tmp_path / "m.pt", format="pickle")
    assert not os.listdir(tmp_path)


# ***** against real torch *****
def test_torch_saved_values_match_torch():
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(5, 6, generator=gen)
    obj = {"f32": base, "bf16": base.to(torch.bfloat16), "f16": base.half(),
           "i8": (base * 10).to(torch.int8), "view": base[1:4, ::2], "t": base.t(),
           "u32": torch.arange(4).to(torch.uint32), "f8": base.to(torch.float8_e4m3fn),
           "c128": torch.complex(base.double(), base.double()), "empty": torch.zeros(0, 3),
           "lin": torch.nn.Linear(3, 2).state_dict()}
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    got = tb.load(buf)
    for key, want in obj.items():
        if key == "lin":
            continue
        g = _arr(got[key])
        assert str(g.dtype) == str(want.dtype).replace("torch.", ""), key
        np.testing.assert_array_equal(g.view(np.uint8), want.contiguous().view(torch.uint8)
                                      .numpy().reshape(g.view(np.uint8).shape), err_msg=key)
    np.testing.assert_array_equal(_arr(got["lin"]["weight"]), obj["lin"]["weight"].numpy())


def test_torch_loads_what_tb_saves_weights_only():
    torch = pytest.importorskip("torch")
    model = tb.nn.Linear(3, 2)
    obj = {"model": model.state_dict(), "bf16": tb.arange(4.0).to(tb.bfloat16),
           "u16": tb.tensor(np.arange(3, dtype=np.uint16)), "p": tb.nn.Parameter(tb.ones(2)),
           "meta": {"epoch": 1, "tags": ["x"], "pair": (1, 2.5)}}
    buf = io.BytesIO()
    tb.save(obj, buf, format="torch")
    buf.seek(0)
    back = torch.load(buf, weights_only=True)
    ref = torch.nn.Linear(3, 2)
    ref.load_state_dict(back["model"])  # strict: same keys, shapes
    np.testing.assert_array_equal(ref.weight.detach().numpy(), _arr(model.weight))
    assert back["bf16"].dtype == torch.bfloat16
    assert back["bf16"].float().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert back["u16"].dtype == torch.uint16 and back["u16"].tolist() == [0, 1, 2]
    assert isinstance(back["p"], torch.nn.Parameter)
    assert back["meta"] == {"epoch": 1, "tags": ["x"], "pair": (1, 2.5)}


def test_real_malicious_torch_file_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(1), "x": _Evil(marker)}, path)
    with pytest.raises(pickle.UnpicklingError, match="system"):
        tb.load(path)
    assert not marker.exists()
    # torch itself refuses it too (weights_only=True), so the two agree
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    assert not marker.exists()


def test_pytorch_file_reader_matches_torch(tmp_path):
    """tb.PyTorchFileReader: the records, bytes, sizes, offsets and storages of a torch.save
    archive, as torch.PyTorchFileReader gives them (path or open file)."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "a.pt"
    torch.save({"w": torch.arange(4.0), "b": torch.ones(2, 3, dtype=torch.int64)}, path)
    theirs = torch.PyTorchFileReader(str(path))
    with open(path, "rb") as fh:
        for ours in (tb.PyTorchFileReader(str(path)), tb.PyTorchFileReader(fh)):
            names = ours.get_all_records()
            assert names == theirs.get_all_records() and ours.has_record("data.pkl")
            assert not ours.has_record("nope")
            for name in names:
                assert ours.get_record(name) == theirs.get_record(name)
                assert ours.get_record_size(name) == theirs.get_record_size(name)
                assert ours.get_record_offset(name) == theirs.get_record_offset(name)
            assert ours.serialization_id() == theirs.serialization_id()
            s = ours.get_storage_from_record("data/1", 6, tb.int64)
            t = theirs.get_storage_from_record("data/1", 6, torch.int64)
            assert tuple(s.shape) == tuple(t.shape) == (0,)
            assert s.untyped_storage().nbytes() == t.untyped_storage().nbytes() == 48
            with pytest.raises(RuntimeError, match="failed locating file nope"):
                ours.get_record("nope")
    assert tb.ScriptModule is tb.jit.ScriptModule
