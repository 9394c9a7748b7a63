"""Worker functions for test_horovod (run in real processes by run_workers)."""
import numpy as np


def collectives(rank, world):
    import tensorbrain as tb
    import tensorbrain.horovod as hvd
    hvd.init()
    assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (rank, world, rank,
                                                                             world)
    assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1) and hvd.is_initialized()
    x = tb.tensor([float(rank + 1), 10.0 * (rank + 1)])
    out = {"avg": hvd.allreduce(x).tolist(), "sum": hvd.allreduce(x, op=hvd.Sum).tolist(),
           "max": hvd.allreduce(x, op=hvd.Max).tolist(), "x_kept": x.tolist()}
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Sum)
    out["inplace"] = y.tolist()
    h = hvd.allreduce_async(x)
    out["async"] = hvd.synchronize(h).tolist()
    out["fp16"] = hvd.allreduce(x, compression=hvd.Compression.fp16).tolist()
    # allgather with a different first dimension per rank
    out["gather"] = hvd.allgather(tb.full((rank + 1, 2), float(rank))).tolist()
    out["bcast"] = hvd.broadcast(x, root_rank=1).tolist()
    # alltoall: rank r sends r+1 rows to rank 0 and 1 row to rank 1
    rows = tb.arange(rank + 2, dtype=tb.float32) + 100 * rank
    got, splits = hvd.alltoall(rows, splits=[rank + 1, 1])
    out["alltoall"], out["splits"] = got.tolist(), splits.tolist()
    out["even_alltoall"] = hvd.alltoall(tb.arange(4, dtype=tb.float32) + 10 * rank).tolist()
    out["rs"] = hvd.reducescatter(tb.arange(6, dtype=tb.float32).reshape(3, 2) * (rank + 1),
                                  op=hvd.Sum).tolist()
    out["obj"] = hvd.broadcast_object({"a": [1, rank]}, root_rank=1)
    out["objs"] = hvd.allgather_object(f"r{rank}")
    try:
        hvd.allreduce(x, op=hvd.Adasum)
    except NotImplementedError as exc:
        out["adasum"] = str(exc)
    out["join"] = hvd.join()
    return out


def fusion_buckets(rank, world, threshold):
    """The DistributedOptimizer's Tensor Fusion buckets, and that they launch during backward."""
    import os
    os.environ["HOROVOD_FUSION_THRESHOLD"] = str(threshold)
    import tensorbrain as tb
    import tensorbrain.horovod as hvd
    hvd.init()
    tb.manual_seed(0)
    model = tb.nn.Sequential(tb.nn.Linear(8, 8), tb.nn.Tanh(), tb.nn.Linear(8, 2))
    opt = hvd.DistributedOptimizer(tb.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x = tb.tensor(np.random.default_rng(rank).standard_normal((4, 8)).astype(np.float32))
    model(x).sum().backward()
    launched = opt._hvd_fusion.next          # buckets already in flight before step()
    try:
        opt.zero_grad()
        raced = False
    except AssertionError:
        raced = True
    opt.step()
    return {"buckets": opt._hvd_fusion.buckets, "launched": launched, "raced": raced,
            "is_sgd": isinstance(opt, tb.optim.SGD)}
