"""torch.serialization's helpers: location_tag, default_restore_location,
normalize_storage_type, set_default_mmap_options, get_unsafe_globals_in_checkpoint (against
torch's on the same torch.save files)."""
import argparse
import collections
import mmap

import pytest

import tensorbrain as tb
from tensorbrain import serialization as S


def test_storage_helpers():
    s = tb.ones(3).untyped_storage()
    assert S.location_tag(s) == "cpu" and S.location_tag(tb.ones(1)) == "cpu"
    assert S.default_restore_location(s, "cpu") is s
    if not tb.cuda.is_available():
        with pytest.raises(RuntimeError, match="torch.cuda.is_available\\(\\) is False"):
            S.default_restore_location(s, "cuda:0")
    with pytest.raises(RuntimeError, match="tagged with tpu"):
        S.default_restore_location(s, "tpu")
    with pytest.raises(RuntimeError, match="don't know how to determine"):
        S.location_tag(object())
    assert S.normalize_storage_type(tb.FloatStorage) is tb.FloatStorage
    with S.set_default_mmap_options(mmap.MAP_SHARED):
        assert S.set_default_mmap_options.flags == mmap.MAP_SHARED
    assert S.set_default_mmap_options.flags != mmap.MAP_SHARED
    with pytest.raises(ValueError, match="expected mmap.MAP_PRIVATE or mmap.MAP_SHARED"):
        S.set_default_mmap_options(12345)


def test_unsafe_globals_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    cases = {
        "state_dict": torch.nn.Linear(2, 2).state_dict(),
        "objects": {"args": argparse.Namespace(lr=0.1), "w": torch.ones(2),
                    "c": collections.Counter("aab"), "od": collections.OrderedDict(a=1)},
    }
    for name, obj in cases.items():
        path = tmp_path / f"{name}.pt"
        torch.save(obj, path)
        assert S.get_unsafe_globals_in_checkpoint(str(path)) == \
            sorted(torch.serialization.get_unsafe_globals_in_checkpoint(str(path))), name
    assert S.get_unsafe_globals_in_checkpoint(str(tmp_path / "objects.pt")) == \
        ["argparse.Namespace"]
    with pytest.raises(ValueError, match="not a readable torch checkpoint"):
        (tmp_path / "x.pt").write_bytes(b"PK\x03\x04garbage")
        S.get_unsafe_globals_in_checkpoint(str(tmp_path / "x.pt"))


def test_skip_data_as_torch(tmp_path):
    """skip_data: a save keeps shapes and dtypes and writes zeros (torch reads our .pt so, we
    read torch's so); a load gives shapes and dtypes; nested blocks nest."""
    torch = pytest.importorskip("torch")
    state = {"w": tb.ones(2, 3), "ids": [tb.arange(4)], "step": 7}
    with S.skip_data():
        tb.save(state, tmp_path / "a.pt", format="torch")
        tb.save(state, tmp_path / "a.safetensors")
    got = torch.load(tmp_path / "a.pt", weights_only=True)
    assert got["step"] == 7 and got["w"].dtype == torch.float32 and got["ids"][0].dtype == torch.int64
    assert not got["w"].any() and tuple(got["w"].shape) == (2, 3) and not got["ids"][0].any()
    ours = tb.load(tmp_path / "a.safetensors")
    assert ours["step"] == 7 and tuple(ours["w"].shape) == (2, 3) and not ours["w"].numpy().any()
    with torch.serialization.skip_data():
        torch.save({"w": torch.ones(3)}, tmp_path / "t.pt")
    assert tb.load(tmp_path / "t.pt")["w"].tolist() == [0.0, 0.0, 0.0]
    tb.save({"w": tb.ones(3)}, tmp_path / "full.safetensors")
    with S.skip_data():
        loaded = tb.load(tmp_path / "full.safetensors")
    assert tuple(loaded["w"].shape) == (3,) and loaded["w"].dtype == tb.float32
    assert tb.load(tmp_path / "full.safetensors")["w"].tolist() == [1.0, 1.0, 1.0]
    with S.skip_data():
        with S.skip_data():
            pass
        assert not tb.load(tmp_path / "full.safetensors")["w"].numpy().any()
    assert tb.load(tmp_path / "full.safetensors")["w"].tolist() == [1.0, 1.0, 1.0]
