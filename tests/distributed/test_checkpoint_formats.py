"""DCP's planners, metadata, Hugging Face storage, format conversion and sharded optimizer
loading: against the values written here with NumPy, against real torch's files and readers
(skipped without torch), and with DTensor shards saved by 2 real processes."""
import json
import os

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed.checkpoint as dcp
from tensorbrain.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp
from tensorbrain.testing.distributed import run_workers

pytestmark = pytest.mark.timeout(120)
HERE = "tests.distributed.test_checkpoint_formats"
A = np.arange(24, dtype=np.float32).reshape(6, 4) * 0.5
B = np.arange(5, dtype=np.int64) - 2


def test_default_planners_and_partial_load(tmp_path):
    dcp.save({"a": tb.tensor(A), "n": 3}, checkpoint_id=tmp_path, planner=dcp.DefaultSavePlanner())
    sd = {"a": tb.zeros(6, 4), "extra": tb.ones(2)}
    with pytest.raises(RuntimeError, match="Missing key in checkpoint state_dict: extra"):
        dcp.load(sd, checkpoint_id=tmp_path, planner=dcp.DefaultLoadPlanner())
    dcp.load(sd, checkpoint_id=tmp_path, planner=dcp.DefaultLoadPlanner(allow_partial_load=True))
    np.testing.assert_array_equal(sd["a"].numpy(), A)
    np.testing.assert_array_equal(sd["extra"].numpy(), [1, 1])

    class Custom(dcp.DefaultLoadPlanner):
        def create_local_plan(self):
            return None
    with pytest.raises(NotImplementedError, match="overrides create_local_plan"):
        dcp.load(sd, checkpoint_id=tmp_path, planner=Custom())
    from tensorbrain.distributed.checkpoint.filesystem import DEFAULT_SUFFIX, SerializationFormat
    with pytest.raises(NotImplementedError, match="never pickle"):
        dcp.FileSystemWriter(tmp_path, serialization_format=SerializationFormat.TORCH_SAVE)
    assert all(f.endswith(DEFAULT_SUFFIX) for f in os.listdir(tmp_path) if f.startswith("__"))
    with pytest.raises(TypeError, match="must be a LoadPlanner"):
        dcp.load(sd, checkpoint_id=tmp_path, planner=dcp.DefaultSavePlanner())
    sd2 = {"a": tb.zeros(6, 4), "n": 0}   # the deprecated spellings
    dcp.save_state_dict({"a": tb.tensor(A) + 1, "n": 4}, dcp.FileSystemWriter(tmp_path))
    dcp.load_state_dict(sd2, dcp.FileSystemReader(tmp_path))
    np.testing.assert_array_equal(sd2["a"].numpy(), A + 1)
    assert sd2["n"] == 4


def test_metadata_matches_torchs_for_the_same_state_dict(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint as tdcp
    dcp.save({"m": {"a": tb.tensor(A), "b": tb.tensor(B)}, "step": 7}, checkpoint_id=tmp_path / "tb")
    tdcp.save({"m": {"a": torch.tensor(A), "b": torch.tensor(B)}, "step": 7},
              checkpoint_id=str(tmp_path / "torch"), no_dist=True)
    ours = dcp.FileSystemReader(tmp_path / "tb").read_metadata().state_dict_metadata
    theirs = tdcp.FileSystemReader(str(tmp_path / "torch")).read_metadata().state_dict_metadata
    assert set(ours) == set(theirs) == {"m.a", "m.b", "step"}
    for key in ("m.a", "m.b"):
        assert tuple(ours[key].size) == tuple(theirs[key].size)
        assert str(ours[key].properties.dtype) == str(theirs[key].properties.dtype).split(".")[1]
        assert [tuple(c.sizes) for c in ours[key].chunks] == \
            [tuple(c.sizes) for c in theirs[key].chunks]
    assert type(ours["step"]).__name__ == type(theirs["step"]).__name__ == "BytesStorageMetadata"


def test_hf_writer_output_is_what_torch_and_safetensors_read(tmp_path):
    torch = pytest.importorskip("torch")
    import safetensors.torch
    import torch.distributed.checkpoint as tdcp
    sd = {"model.a": tb.tensor(A), "model.b": tb.tensor(B)}
    dcp.save(sd, storage_writer=dcp.HuggingFaceStorageWriter(
        tmp_path, fqn_to_index_mapping={"model.a": 1, "model.b": 2}))
    assert sorted(os.listdir(tmp_path)) == ["model-00001-of-00002.safetensors",
                                            "model-00002-of-00002.safetensors",
                                            "model.safetensors.index.json"]
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == {"model.a": "model-00001-of-00002.safetensors",
                                   "model.b": "model-00002-of-00002.safetensors"}
    got = safetensors.torch.load_file(str(tmp_path / "model-00001-of-00002.safetensors"))
    np.testing.assert_array_equal(got["model.a"].numpy(), A)
    into = {"model.a": torch.zeros(6, 4), "model.b": torch.zeros(5, dtype=torch.int64)}
    tdcp.load(into, storage_reader=tdcp.HuggingFaceStorageReader(str(tmp_path)), no_dist=True)
    np.testing.assert_array_equal(into["model.b"].numpy(), B)
    with pytest.raises(ValueError, match="stores tensors only"):
        dcp.save({"a": tb.ones(2), "step": 1}, storage_writer=dcp.HuggingFaceStorageWriter(
            tmp_path / "bad"))


def test_hf_reader_loads_torchs_hf_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint as tdcp
    tdcp.save({"w": torch.tensor(A), "i": torch.tensor(B)},
              storage_writer=tdcp.HuggingFaceStorageWriter(str(tmp_path)), no_dist=True)
    sd = {"w": tb.zeros(6, 4), "i": tb.zeros(5, dtype=tb.int64)}
    dcp.load(sd, storage_reader=dcp.HuggingFaceStorageReader(tmp_path))
    np.testing.assert_array_equal(sd["w"].numpy(), A)
    np.testing.assert_array_equal(sd["i"].numpy(), B)
    md = dcp.HuggingFaceStorageReader(tmp_path).read_metadata()
    assert tuple(md.state_dict_metadata["w"].size) == (6, 4)
    with pytest.raises(FileNotFoundError, match="no .safetensors file"):
        dcp.load(sd, storage_reader=dcp.HuggingFaceStorageReader(tmp_path / "nothing"))


def test_format_utils_round_trip_and_torch_pt_file(tmp_path):
    torch = pytest.importorskip("torch")
    dcp.save({"model": {"a": tb.tensor(A)}, "opt": {"param_groups": [{"lr": 0.1}]}, "step": 2},
             checkpoint_id=tmp_path / "ck")
    dcp_to_torch_save(tmp_path / "ck", tmp_path / "full.pt")
    full = tb.load(str(tmp_path / "full.pt"))
    np.testing.assert_array_equal(full["model"]["a"].numpy(), A)
    assert full["opt"] == {"param_groups": [{"lr": 0.1}]} and full["step"] == 2
    torch.save({"w": torch.tensor(A), "layers": [torch.tensor(B)]}, str(tmp_path / "t.pt"))
    torch_save_to_dcp(tmp_path / "t.pt", tmp_path / "ck2")
    sd = {"w": tb.zeros(6, 4), "layers": [tb.zeros(5, dtype=tb.int64)]}
    dcp.load(sd, checkpoint_id=tmp_path / "ck2")
    np.testing.assert_array_equal(sd["w"].numpy(), A)
    np.testing.assert_array_equal(sd["layers"][0].numpy(), B)


# ***** 2 ranks: DTensor shards into HF files, and optimizer state sharded like the params *****
def _save_sharded(rank, world_size, folder):
    import tensorbrain.distributed as dist
    from tensorbrain.distributed.device_mesh import init_device_mesh
    from tensorbrain.distributed.tensor import Replicate, Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world_size,))
    w = distribute_tensor(tb.tensor(A), mesh, [Shard(0)])
    dcp.save({"w": w, "b": tb.tensor(B)}, storage_writer=dcp.HuggingFaceStorageWriter(
        os.path.join(folder, "hf")))
    model = {"w": tb.nn.Parameter(w)}
    optim = {"state": {"w": {"exp_avg": distribute_tensor(tb.tensor(A) * 2, mesh, [Shard(0)]),
                             "step": 5}},
             "param_groups": [{"lr": 0.01, "params": ["w"]}]}
    dcp.save({"model": model, "optim": optim}, checkpoint_id=os.path.join(folder, "dcp"),
             planner=dcp.DefaultSavePlanner(dedup_save_to_lowest_rank=True))
    dist.barrier()
    from tensorbrain.distributed.checkpoint.optimizer import load_sharded_optimizer_state_dict
    got = load_sharded_optimizer_state_dict(model, "optim",
                                            dcp.FileSystemReader(os.path.join(folder, "dcp")))
    st = got["optim"]["state"]["w"]
    rep = distribute_tensor(tb.tensor(A), mesh, [Replicate()])
    return {"local": st["exp_avg"].to_local().numpy(), "placement": str(st["exp_avg"].placements[0]),
            "step": st["step"], "lr": got["optim"]["param_groups"][0]["lr"],
            "rep": rep.to_local().numpy().shape}


def test_sharded_saves_into_hf_files_and_optimizer_state_comes_back_sharded(tmp_path):
    outs = run_workers(f"{HERE}:_save_sharded", 2, str(tmp_path))
    import safetensors.numpy
    got = safetensors.numpy.load_file(str(tmp_path / "hf" / "model-00001-of-00001.safetensors"))
    np.testing.assert_array_equal(got["w"], A)
    np.testing.assert_array_equal(got["b"], B)
    assert sorted(os.listdir(tmp_path / "hf")) == ["model-00001-of-00001.safetensors",
                                                   "model.safetensors.index.json"]
    for r, out in enumerate(outs):
        np.testing.assert_array_equal(out["local"], (A * 2)[3 * r:3 * r + 3])
        assert out["placement"].startswith("Shard") and out["step"] == 5 and out["lr"] == 0.01


def test_dedup_save_to_lowest_rank_moves_shared_chunks_to_rank_0():
    from tensorbrain.distributed.checkpoint.state_dict_saver import _plan

    def item(name, n):
        return [name, "tensor", {"dtype": "float32", "size": [n], "offsets": [0], "lengths": [n]}]
    plans = [{"items": [item("x", 4), item("big", 100)]}, {"items": [item("x", 4)]}]
    owner = {False: None, True: None}
    for lowest in owner:
        entries, _ = _plan(plans, lowest)
        owner[lowest] = entries["x"]["chunks"][0]["rank"]
    assert owner == {False: 1, True: 0}   # least loaded rank, or the lowest holder


def test_planner_helpers_match_torch():
    """planner_helpers: write items of a tensor and of a value, and the read boxes of a local
    chunk over saved chunks, field by field against torch's."""
    torch = pytest.importorskip("torch")
    from torch.distributed.checkpoint import metadata as TM
    from torch.distributed.checkpoint import planner_helpers as TP

    from tensorbrain.distributed.checkpoint import metadata as M
    from tensorbrain.distributed.checkpoint import planner_helpers as P

    def flat(items):
        out = []
        for it in items:
            row = [it.type.name]
            for f in ("index", "dest_index", "storage_index"):
                idx = getattr(it, f, None)
                if idx is not None:
                    row += [idx.fqn, None if idx.offset is None else list(idx.offset), idx.index]
            for f in ("dest_offsets", "storage_offsets", "lengths"):
                if hasattr(it, f):
                    row.append(list(getattr(it, f)))
            td = getattr(it, "tensor_data", None)
            if td is not None:
                row += [list(td.chunk.offsets), list(td.chunk.sizes), list(td.size)]
            out.append(row)
        return out
    for name, ours, theirs in (("w", tb.ones(2, 3), torch.ones(2, 3)), ("s", 3, 3)):
        assert flat(P._create_write_items(name, ours)) == flat(TP._create_write_items(name, theirs))
    saved = [((0, 0), (2, 4)), ((2, 0), (2, 4))]
    local = [((1, 1), (2, 2)), ((3, 0), (1, 4))]
    got = P.create_read_items_for_chunk_list(
        "w", M.TensorStorageMetadata(M.TensorProperties(tb.float32), tb.Size([4, 4]),
                                     [M.ChunkStorageMetadata(tb.Size(o), tb.Size(s))
                                      for o, s in saved]),
        [M.ChunkStorageMetadata(tb.Size(o), tb.Size(s)) for o, s in local])
    want = TP.create_read_items_for_chunk_list(
        "w", TM.TensorStorageMetadata(TM.TensorProperties(torch.float32), torch.Size([4, 4]),
                                      [TM.ChunkStorageMetadata(torch.Size(o), torch.Size(s))
                                       for o, s in saved]),
        [TM.ChunkStorageMetadata(torch.Size(o), torch.Size(s)) for o, s in local])
    assert flat(got) == flat(want) and len(got) == 3
