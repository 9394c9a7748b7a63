"""RPC round trip: an 8-byte ``rpc_sync`` (a function returning its 8-byte argument) between 2
processes on this machine, TensorBrain's agent next to torch's TensorPipe RPC in the same run
(interleaved rounds, so machine load hits both).

    python benchmarks/rpc.py --calls 2000 --rounds 5

Prints per round the median microseconds per call of each, and the ratio tb / torch. torch is
optional (the torch rows are skipped without it).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def echo(x):
    return x


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(kind: str, rank: int, port: int, calls: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if kind == "torch":
        import torch
        import torch.distributed.rpc as rpc
        payload = torch.zeros(2, dtype=torch.float32)          # 8 bytes
        opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}")
    else:
        import tensorbrain as tb
        import tensorbrain.distributed.rpc as rpc
        payload = tb.zeros(2, dtype=tb.float32)
        opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        from benchmarks.rpc import echo as fn
        for _ in range(50):
            rpc.rpc_sync("w1", fn, args=(payload,))
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            rpc.rpc_sync("w1", fn, args=(payload,))
            times.append(time.perf_counter() - t)
        times.sort()
        print(json.dumps({"median_us": times[len(times) // 2] * 1e6,
                          "best_us": times[0] * 1e6}), flush=True)
    rpc.shutdown()


def measure(kind: str, calls: int) -> dict:
    port = _port()
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    env.pop("TENSORBRAIN_AS_TORCH", None)
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", kind, str(r), str(port),
                               str(calls)], env=env, stdout=subprocess.PIPE, text=True)
             for r in (0, 1)]
    out = procs[0].communicate(timeout=600)[0]
    procs[1].wait(timeout=60)
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--worker", nargs=4, default=None)
    a = p.parse_args()
    if a.worker:
        kind, rank, port, calls = a.worker
        worker(kind, int(rank), int(port), int(calls))
        return
    try:
        import torch.distributed.rpc  # noqa: F401
        kinds = ["tb", "torch"]
    except ImportError:
        kinds = ["tb"]
    print(f"load average at start: {os.getloadavg()}")
    print("round | tb median us (best) | torch median us (best) | tb / torch")
    for r in range(a.rounds):
        got = {k: measure(k, a.calls) for k in (kinds if r % 2 == 0 else kinds[::-1])}
        tb_, th = got["tb"], got.get("torch")
        ratio = f"{tb_['median_us'] / th['median_us']:.2f}" if th else "-"
        th_text = f"{th['median_us']:.0f} ({th['best_us']:.0f})" if th else "-"
        print(f"{r} | {tb_['median_us']:.0f} ({tb_['best_us']:.0f}) | {th_text} | {ratio}",
              flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
