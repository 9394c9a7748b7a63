"""Pipeline schedules in real processes: after K steps every stage's parameters equal a
single-process run on the full batch (GPipe, 1F1B, interleaved 1F1B, pp x dp with DDP); shape
and schedule mismatches raise on every rank, naming stage and rank."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.distributed.pipelining import (PipelineStage, Schedule1F1B,
                                                ScheduleGPipe, ScheduleInterleaved1F1B,
                                                SplitPoint, pipeline, split_sequential)
from tensorbrain.distributed.pipelining.schedules import get_schedule_class
from tensorbrain.testing.distributed import run_workers

HERE = "tests.distributed.test_pipelining"
WIDTH, BATCH, STEPS = 6, 16, 3


def _model(n_layers, seed=0):
    tb.manual_seed(seed)
    layers = []
    for _ in range(n_layers):
        layers += [tb.nn.Linear(WIDTH, WIDTH), tb.nn.Tanh()]
    return tb.nn.Sequential(*layers)


def _data(rows=BATCH, seed=1):
    rng = np.random.default_rng(seed)
    return (tb.tensor(rng.standard_normal((rows, WIDTH)).astype(np.float32)),
            tb.tensor(rng.standard_normal((rows, WIDTH)).astype(np.float32)))


def _reference(n_stages, steps=STEPS):
    """One process, the full batch, the mean loss: what every pipeline run must reproduce."""
    model = _model(n_stages)
    opt = tb.optim.SGD(model.parameters(), lr=0.2)
    x, y = _data()
    for _ in range(steps):
        opt.zero_grad()
        tb.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().numpy() for p in model.parameters()]


_SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B,
              "interleaved": ScheduleInterleaved1F1B}


def _wrap(part, wrap, dp_group, dp_mesh):
    """One stage's module made data parallel over ``dp_group``: DDP, fully_shard or FSDP."""
    if wrap == "ddp":
        return tb.nn.parallel.DistributedDataParallel(part, process_group=dp_group)
    if wrap == "fully_shard":
        from tensorbrain.distributed.fsdp import fully_shard
        return fully_shard(part, mesh=dp_mesh)
    from tensorbrain.distributed.fsdp import FullyShardedDataParallel as FSDP
    return FSDP(part, device_mesh=dp_mesh)


def _full_params(part, mod, wrap):
    """The stage's parameters as whole arrays, in the plain module's order."""
    if wrap == "fsdp":
        return [v.numpy().tolist() for v in mod.state_dict().values()]
    return [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().numpy().tolist()
            for p in part.parameters()]


def _train(kind, n_stages, M, pp_group=None, dp_group=None, rows=None, wrap="ddp",
           dp_mesh=None, schedule_name=None):
    P = dist.get_world_size(pp_group)
    me = dist.get_rank(pp_group)
    model = _model(n_stages)
    parts = split_sequential(model, num_stages=n_stages)   # one Linear + Tanh per stage
    mine = [s for s in range(n_stages) if s % P == me]
    mods = {s: parts[s] for s in mine}
    if dp_group is not None:
        mods = {s: _wrap(parts[s], wrap, dp_group, dp_mesh) for s in mine}
    stages = [PipelineStage(mods[s], s, n_stages, "cpu", group=pp_group) for s in mine]
    arg = stages if kind == "interleaved" else stages[0]
    cls = _SCHEDULES[kind] if schedule_name is None else get_schedule_class(schedule_name)
    sched = cls(arg, M, loss_fn=tb.nn.MSELoss())
    opt = tb.optim.SGD([p for s in mine for p in mods[s].parameters()], lr=0.2)
    x, y = _data()
    if rows is not None:
        x, y = x[rows[0]:rows[1]], y[rows[0]:rows[1]]
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        losses = []
        has_first, has_last = 0 in mine, n_stages - 1 in mine
        if has_first and has_last:
            sched.step(x, target=y, losses=losses)
        elif has_first:
            sched.step(x)
        elif has_last:
            out = sched.step(target=y, losses=losses)
            assert tuple(out.shape) == tuple(y.shape)
        else:
            sched.step()
        opt.step()
    peak = sched.last_step_stats["peak_live"]
    return {"params": {str(s): _full_params(parts[s], mods[s], wrap) for s in mine},
            "losses": [float(v.item()) for v in losses], "peak": {str(k): v for k, v in peak.items()}}


def _all_schedules(rank, world, runs):
    return [_train(kind, n_stages, M) for kind, n_stages, M in runs]


def _check(results, n_stages):
    ref = _reference(n_stages)
    got = {}
    for r in results:
        got.update(r["params"])
    assert sorted(got, key=int) == [str(s) for s in range(n_stages)]
    flat = [np.asarray(p) for s in range(n_stages) for p in got[str(s)]]
    for a, b in zip(flat, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_single_rank_interleaved_matches_one_process():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    try:
        res = _train("interleaved", 2, 4)
    finally:
        dist.destroy_process_group()
    _check([res], 2)


RUNS_2 = [("gpipe", 2, 4), ("1f1b", 2, 4), ("interleaved", 4, 4)]


def test_two_ranks_every_schedule_matches_one_process():
    res = run_workers(f"{HERE}:_all_schedules", 2, RUNS_2, timeout=120)
    for i, (_kind, n_stages, M) in enumerate(RUNS_2):
        _check([r[i] for r in res], n_stages)
        losses = [r[i]["losses"] for r in res if r[i]["losses"]][0]
        assert len(losses) == M
    # GPipe keeps all 4 micro-batches alive on stage 0; 1F1B at most num_stages - stage_index
    assert res[0][0]["peak"] == {"0": 4} and res[0][1]["peak"] == {"0": 2}
    assert res[1][1]["peak"] == {"1": 1}


RUNS_4 = [("gpipe", 4, 8), ("1f1b", 4, 8), ("interleaved", 8, 8)]


def test_four_ranks_every_schedule_matches_one_process():
    res = run_workers(f"{HERE}:_all_schedules", 4, RUNS_4, timeout=240)
    for i, (_kind, n_stages, _m) in enumerate(RUNS_4):
        _check([r[i] for r in res], n_stages)
    assert [r[1]["peak"][str(k)] for k, r in enumerate(res)] == [4, 3, 2, 1]


def _pp_dp(rank, world):
    from tensorbrain.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp"))
    dp = mesh.get_local_rank("dp")
    half = BATCH // 2
    return _train("1f1b", 2, 4, pp_group=mesh.get_group("pp"), dp_group=mesh.get_group("dp"),
                  rows=(dp * half, (dp + 1) * half))


def test_pp_x_dp_with_ddp_matches_one_process():
    res = run_workers(f"{HERE}:_pp_dp", 4, timeout=180)
    # mesh [[0, 1], [2, 3]]: ranks 0 and 1 hold stage 0 (two data-parallel replicas), 2 and 3
    # stage 1; replicas must agree with each other and with the one-process run
    assert res[0]["params"] == res[1]["params"] and res[2]["params"] == res[3]["params"]
    _check([res[0], res[2]], 2)


# ***** errors: every rank raises, naming stage and rank; nothing hangs *****
def _shape_mismatch(rank, world):
    parts = split_sequential(_model(2), num_stages=2)
    example = tb.zeros(BATCH // 4, WIDTH + 1) if rank == 1 else None
    stage = PipelineStage(parts[rank], rank, 2, "cpu", input_args=example)
    sched = ScheduleGPipe(stage, 4, loss_fn=tb.nn.MSELoss())
    x, y = _data()
    sched.step(x) if rank == 0 else sched.step(target=y)


def _bad_module(rank, world):
    parts = split_sequential(_model(2), num_stages=2)
    if rank == 1:
        parts[1] = tb.nn.Sequential(tb.nn.Linear(WIDTH + 2, WIDTH))   # cannot take stage 0's
    stage = PipelineStage(parts[rank], rank, 2, "cpu")
    sched = Schedule1F1B(stage, 4, loss_fn=tb.nn.MSELoss())
    x, y = _data()
    sched.step(x) if rank == 0 else sched.step(target=y)


def _other_schedule(rank, world):
    parts = split_sequential(_model(2), num_stages=2)
    stage = PipelineStage(parts[rank], rank, 2, "cpu")
    cls = ScheduleGPipe if rank == 0 else Schedule1F1B
    sched = cls(stage, 4, loss_fn=tb.nn.MSELoss())
    x, y = _data()
    sched.step(x) if rank == 0 else sched.step(target=y)


@pytest.mark.parametrize("fn, err, words", [
    ("_shape_mismatch", "PipeliningShapeError",
     ["stage 1 (rank 1) expects an input of shape (4, 7) float32", "stage 0 (rank 0) produces "
      "shape (4, 6) float32"]),
    ("_bad_module", "PipeliningShapeError", ["stage 1 (rank 1) failed on an input of shape (4, 6)"]),
    ("_other_schedule", "RuntimeError", ["rank 1 (stage(s) [1]) runs Schedule1F1B",
                                         "rank 0 (stage(s) [0]) runs ScheduleGPipe"]),
])
def test_mismatches_raise_on_every_rank(fn, err, words):
    res = run_workers(f"{HERE}:{fn}", 2, timeout=60, raise_on_error=False)
    for r in res:
        assert r.error_type == err, r.describe()
        for w in words:
            assert w in r.message


def test_split_helpers_and_local_errors():
    net = _model(3)
    assert [len(s) for s in split_sequential(net, balance=[2, 4])] == [2, 4]
    with pytest.raises(ValueError, match="adding up"):
        split_sequential(net, balance=[2, 2])
    pipe = pipeline(net, split_spec={"2": SplitPoint.BEGINNING, "3": SplitPoint.END})
    assert pipe.num_stages == 3
    assert [len(pipe.get_stage_module(i)) for i in range(3)] == [2, 2, 2]
    with pytest.raises(ValueError, match="not a child"):
        pipeline(net, split_spec={"nope": SplitPoint.END})
    with pytest.raises(NotImplementedError, match="cannot trace"):
        pipeline(tb.nn.Linear(2, 2))
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match="stage_index=3"):
            PipelineStage(net, 3, 2, "cpu")
        st = PipelineStage(net, 0, 1, "cpu")
        with pytest.raises(ValueError, match="does not split into n_microbatches=3"):
            ScheduleGPipe(st, 3, loss_fn=tb.nn.MSELoss()).step(tb.zeros(4, WIDTH), target=tb.zeros(4, WIDTH))
        with pytest.raises(ValueError, match=r"must hold stage\(s\) \[0, 1\]"):
            ScheduleInterleaved1F1B([PipelineStage(net, 0, 2, "cpu")], 2)
    finally:
        dist.destroy_process_group()


_MPI_MAIN = """
import json, os
import tensorbrain.distributed as dist
from tests.distributed import test_pipelining as T
dist.init_process_group("mpi")
res = T._all_schedules(dist.get_rank(), dist.get_world_size(), T.RUNS_2)
with open(os.path.join(os.environ["TB_OUT"], f"rank{dist.get_rank()}.json"), "w") as f:
    json.dump(res, f)   # a file per rank: two ranks' long stdout lines can interleave
dist.destroy_process_group()
"""


@pytest.mark.mpi
def test_mpi_backend_every_schedule_matches_one_process(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    from tensorbrain.distributed.backends import mpi as mpi_backend
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpi_backend.is_available() or not mpiexec.exists():
        pytest.skip("mpi4py or mpiexec missing")
    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    env.update(PYTHONPATH=root, OMP_NUM_THREADS="1", TB_OUT=str(tmp_path))
    proc = subprocess.run([str(mpiexec), "-n", "2", sys.executable, "-c", _MPI_MAIN], cwd=root,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for i, (_kind, n_stages, _m) in enumerate(RUNS_2):
        _check([r[i] for r in res], n_stages)


def _by_name(rank, world, runs):
    return [_train(kind, n_stages, M, schedule_name=name) for name, kind, n_stages, M in runs]


RUNS_BY_NAME = [("GPipe", "gpipe", 2, 4), ("1f1b", "1f1b", 2, 4),
                ("INTERLEAVED1F1B", "interleaved", 4, 4)]


def test_get_schedule_class_by_name_trains_like_one_process():
    assert get_schedule_class("gpipe") is ScheduleGPipe
    assert get_schedule_class("Interleaved1F1B") is ScheduleInterleaved1F1B
    with pytest.raises(NotImplementedError, match="ScheduleLoopedBFS is not supported"):
        get_schedule_class("LoopedBFS")
    with pytest.raises(ValueError, match="Unknown schedule name 'nope'"):
        get_schedule_class("nope")
    res = run_workers(f"{HERE}:_by_name", 2, RUNS_BY_NAME, timeout=120)
    for i, (_name, _kind, n_stages, _m) in enumerate(RUNS_BY_NAME):
        _check([r[i] for r in res], n_stages)


def test_unsupported_torch_names_say_so():
    with pytest.raises(NotImplementedError, match="ScheduleLoopedBFS is not supported"):
        from tensorbrain.distributed.pipelining import ScheduleLoopedBFS  # noqa: F401
    for name in ("ScheduleDualPipeV", "ScheduleZBVZeroBubble"):
        with pytest.raises(NotImplementedError, match=f"schedules.{name} is not supported"):
            getattr(tb.distributed.pipelining.schedules, name)


def _peer_dies(rank, world):
    parts = split_sequential(_model(2), num_stages=2)
    stage = PipelineStage(parts[rank], rank, 2, "cpu")

    def loss(out, y):
        raise RuntimeError("loss blew up on purpose")
    sched = Schedule1F1B(stage, 4, loss_fn=loss)
    x, y = _data()
    sched.step(x) if rank == 0 else sched.step(target=y)


def test_a_failing_stage_makes_the_other_rank_raise_not_hang():
    res = run_workers(f"{HERE}:_peer_dies", 2, timeout=60, group_timeout=15,
                      raise_on_error=False)
    assert res[1].error_type == "RuntimeError" and "on purpose" in res[1].message
    assert res[0].error_type in ("DistBackendError", "DistTimeoutError"), res[0].describe()
    assert "rank 1" in res[0].message


def test_forward_only_schedule_returns_the_model_output():
    dist.init_process_group("tcp", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = _model(2)
        parts = split_sequential(model, num_stages=2)
        stages = [PipelineStage(p, i, 2, "cpu") for i, p in enumerate(parts)]
        x, _ = _data()
        out = ScheduleInterleaved1F1B(stages, 4).step(x)
        # not bit for bit: MKL's GEMM (tensorbrain/_gemm.py) may round a row's sums differently
        # in a product of 2 rows (a microbatch) than of 8; a mixed-up microbatch is off by O(1)
        np.testing.assert_allclose(out.numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
        assert all(p.grad is None for p in model.parameters())
    finally:
        dist.destroy_process_group()


# ***** torch's tutorial: build the whole transformer, delete what a stage does not run *****
class _Transformer(tb.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = tb.nn.Embedding(50, 16)
        self.layers = tb.nn.ModuleDict({str(i): tb.nn.TransformerEncoderLayer(
            16, 4, dim_feedforward=32, dropout=0.0, batch_first=True) for i in range(4)})
        self.norm = tb.nn.LayerNorm(16)
        self.output = tb.nn.Linear(16, 50)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens) if self.tok_embeddings else tokens
        for layer in self.layers.values():
            h = layer(h)
        h = self.norm(h) if self.norm else h
        return self.output(h) if self.output else h


def _tokens():
    rng = np.random.default_rng(0)
    return tb.tensor(rng.integers(0, 50, (8, 6))), tb.tensor(rng.integers(0, 50, (8, 6)))


def _token_loss(out, target):
    return tb.nn.functional.cross_entropy(out.reshape(-1, 50), target.reshape(-1))


def _manual_split(rank, world):
    tb.manual_seed(0)
    model = _Transformer()
    if rank == 0:
        for i in (2, 3):
            del model.layers[str(i)]
        model.norm = model.output = None
    else:
        model.tok_embeddings = None
        for i in (0, 1):
            del model.layers[str(i)]
    sched = Schedule1F1B(PipelineStage(model, rank, world, "cpu"), 4, loss_fn=_token_loss)
    opt = tb.optim.SGD(model.parameters(), lr=0.1)
    x, y = _tokens()
    for _ in range(STEPS):
        opt.zero_grad()
        sched.step(x) if rank == 0 else sched.step(target=y)
        opt.step()
    return {n: p.detach().numpy().tolist() for n, p in model.named_parameters()}


def test_torch_tutorial_manual_split_transformer_matches_one_process():
    res = run_workers(f"{HERE}:_manual_split", 2, timeout=120)
    tb.manual_seed(0)
    ref = _Transformer()
    opt = tb.optim.SGD(ref.parameters(), lr=0.1)
    x, y = _tokens()
    for _ in range(STEPS):
        opt.zero_grad()
        _token_loss(ref(x), y).backward()
        opt.step()
    got = {**res[0], **res[1]}
    assert sorted(got) == sorted(n for n, _ in ref.named_parameters())
    for n, p in ref.named_parameters():
        np.testing.assert_allclose(np.asarray(got[n]), p.detach().numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=n)


def test_microbatch_split_and_merge_match_torch():
    """microbatch.split_args_kwargs_into_chunks / merge_chunks against torch's: default and
    explicit specs, replicated non-tensors, nested arguments, too-short tensors, reducers."""
    torch = pytest.importorskip("torch")
    from torch.distributed.pipelining import microbatch as tm

    from tensorbrain.distributed.pipelining import microbatch as m
    x0, y0 = np.arange(24.0).reshape(6, 4), np.arange(10.0).reshape(2, 5)
    res = []
    for lib, mod in ((tb, m), (torch, tm)):
        x, y = lib.tensor(x0), lib.tensor(y0)
        a, k = mod.split_args_kwargs_into_chunks((x, 3), {"mask": [y, {"z": x}]}, 4,
                                                 kwargs_chunk_spec={"mask": [
                                                     mod.TensorChunkSpec(1),
                                                     {"z": mod.TensorChunkSpec(0)}]})
        a2, _ = mod.split_args_kwargs_into_chunks((x,), None, 4,
                                                  mod.TensorChunkSpec.from_tuple((1,)))
        merged = mod.merge_chunks([c[0] for c in a2], (mod.TensorChunkSpec(1),)[0])
        reduced = mod.merge_chunks([c[0].sum() for c in a], mod.sum_reducer)
        res.append(([[c[0].numpy() for c in a], [c[1] for c in a],
                     [c["mask"][0].numpy() for c in k], [c["mask"][1]["z"].numpy() for c in k]],
                    merged.numpy(), float(reduced), str(mod.TensorChunkSpec(2))))
    (ga, gm, gr, gs), (ta, tm_, tr, ts) = res
    for g_list, t_list in zip(ga, ta):
        assert len(g_list) == len(t_list)
        for g, t in zip(g_list, t_list):
            np.testing.assert_array_equal(g, t)
    np.testing.assert_array_equal(gm, tm_)
    assert gr == tr and gs == ts
    with pytest.raises(ValueError, match="Unsupported chunk spec"):
        m.split_args_kwargs_into_chunks((3,), None, 2, (m.TensorChunkSpec(0),))
