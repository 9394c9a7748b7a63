"""The distributed tutorial's first programs: blocking and non-blocking point-to-point, then
all_reduce with the old ``dist.reduce_op`` name, in processes started with mp.Process."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run_blocking(rank, size):
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        dist.send(tensor=tensor, dst=1)
    else:
        dist.recv(tensor=tensor, src=0)
    print(f"Rank {rank} has data {tensor[0]}")
    return tensor


def run_nonblocking(rank, size):
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 2
        req = dist.isend(tensor=tensor, dst=1)
    else:
        req = dist.irecv(tensor=tensor, src=0)
    req.wait()
    return tensor


def run_all_reduce(rank, size):
    group = dist.new_group(list(range(size)))
    tensor = torch.ones(1) * (rank + 1)
    dist.all_reduce(tensor, op=dist.reduce_op.SUM, group=group)
    return tensor


def run(rank, size):
    a = run_blocking(rank, size)
    b = run_nonblocking(rank, size)
    c = run_all_reduce(rank, size)
    value = float(a[0] + b[0] + c[0])
    print(f"Rank {rank}: {value:.1f}")
    if rank == 0:
        print(f"FINAL_LOSS {value:.6f}")


def init_process(rank, size, fn, port, backend="gloo"):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = 2
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 29521
    processes = []
    mp.set_start_method("spawn")
    for rank in range(world_size):
        p = mp.Process(target=init_process, args=(rank, world_size, run, port))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
    sys.exit(max(p.exitcode for p in processes))
