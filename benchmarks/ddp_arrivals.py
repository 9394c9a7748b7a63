"""How long DDP's end-of-backward reduction runs after the later rank arrives (issue 31).

    python benchmarks/ddp_arrivals.py                 # MLP 784-512-512-10, B=512 per rank, 300 steps
    python benchmarks/ddp_arrivals.py --steps 100 --batch 64
    python benchmarks/ddp_arrivals.py --solo          # one process, no DDP: the VM's step jitter
    python benchmarks/ddp_arrivals.py --nodes         # each backward node's time, DDP against bare

Two ranks (1 BLAS thread each) train the MLP of ``benchmarks/ddp.py`` with DDP over ``tcp``
(the resident shared-memory arena). Every step records, on each rank, when it entered and left
the fused reduction (``ResidentArena.all_reduce``) on the shared monotonic clock. Printed
(medians over the steps; ms and us):

* step: wall time per step;
* arrival gap: |rank 0's entry - rank 1's entry|, the wait that any synchronous method pays
  (``benchmarks/ddp.py``'s barrier-per-step row);
* exposed: from the later entry to each rank's exit, the part of the reduction that no
  computation hides: what DDP adds to lockstep;
* chunks by rank 0: of the reduction's chunks, those rank 0 reduced itself (the rank that ends
  backward first reduces what the other has published).

``--solo`` instead steps the same model in this one process, without DDP, and prints the
percentiles of its step time: the jitter that makes the ranks arrive apart.

``--nodes`` times backward node by node instead (the engine's profiling slot), in the same two
ranks for three copies of the model stepped in turn, each backward after a barrier: under DDP;
bare; and bare with every weight's gradient written by its GEMM into the same private array
every step (``engine.offer_grad_dests``, as DDP's resident arena offers its own place), not into
a fresh one. Per node of rank 0: the median time of its backward function and of the gap
before it (where the previous node's gradients were accumulated and DDP's hooks ran). What DDP
adds inside backward, node by node, and how much of it a persistent gradient array alone adds;
the end-of-backward reduction is not in it.

Run it with nothing else on the machine; compare versions in interleaved runs (the VM's step
time drifts by 10-30% over minutes).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"  # before NumPy loads its BLAS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.ddp import _stepper, build, free_port  # noqa: E402 - after the BLAS variables


def worker(rank: int, port: int, steps: int, batch: int, out: str) -> None:
    """One rank: warm up, then ``steps`` timed steps; writes its records to ``out``."""
    import numpy as np

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed._shm import arena as A

    dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    rec: list = []
    reduce = A.ResidentArena.all_reduce

    def timed(self, *args, **kw):
        t0 = time.monotonic()
        reduce(self, *args, **kw)
        rec.append((t0, time.monotonic(), self.reduced, -(-self.count // self.chunk)))
    A.ResidentArena.all_reduce = timed
    net, x, y = _model_and_data(tb, np, batch, rank)
    step = _stepper(tb, tb.nn.parallel.DistributedDataParallel(net), x, y)
    for _ in range(20):
        step()
    dist.barrier()
    rec.clear()
    t0 = time.monotonic()
    for _ in range(steps):
        step()
    with open(out, "w") as f:
        json.dump({"rec": rec, "step": (time.monotonic() - t0) / steps}, f)
    dist.destroy_process_group()


def nodes_worker(rank: int, port: int, steps: int, batch: int, out: str) -> None:
    """``--nodes``, one rank: per backward node, its time and the gap before it, DDP and bare."""
    import numpy as np

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.autograd import engine

    dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    net, x, y = _model_and_data(tb, np, batch, rank)
    models = {"DDP": tb.nn.parallel.DistributedDataParallel(net),
              "bare": _model_and_data(tb, np, batch, rank)[0],
              "kept": _model_and_data(tb, np, batch, rank)[0]}
    kept = [(p, np.empty_like(p._data)) for p in models["kept"].parameters() if p.ndim == 2]
    opts = {k: tb.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for k, m in models.items()}
    lossf = tb.nn.CrossEntropyLoss()
    rec: dict = {k: [] for k in models}
    cur: list = []    # this backward's [name, gap before, time] per node
    last = [0.0]      # when the previous node (or the backward call) ended

    def timed(node, grad):
        t0 = time.perf_counter()
        r = node.backward(grad)
        t1 = time.perf_counter()
        cur.append([node.name, t0 - last[0], t1 - t0])
        last[0] = t1
        return r
    for k in range(20 + steps):
        for name, model in models.items():
            opts[name].zero_grad()
            loss = lossf(model(x), y)
            for p, dest in kept if name == "kept" else ():
                engine.offer_grad_dests([p], [dest])
            dist.barrier()
            cur.clear()
            engine.PROFILE_HOOK[0] = timed if k >= 20 else None
            last[0] = time.perf_counter()
            loss.backward()
            engine.PROFILE_HOOK[0] = None
            opts[name].step()
            if k >= 20:
                rec[name].append(list(cur))
    with open(out, "w") as f:
        json.dump(rec, f)
    dist.destroy_process_group()


def _print_nodes(rec, steps, batch, load0):
    """``--nodes``' table from rank 0's records (``nodes_worker``)."""
    import numpy as np

    from benchmarks._common import cpu_model
    print(f"# {cpu_model()}; {os.cpu_count()} cores; load {load0:.2f} -> "
          f"{os.getloadavg()[0]:.2f}; MLP 784-512-512-10, B={batch} per rank, 2 ranks, "
          f"{steps} backward passes each, rank 0, medians in us")
    print("| node | bare | same array every step - bare | DDP - bare | gap before: bare | DDP |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    # per contender: [step, node, (gap before, time)]; the gap before node 1 is the forward's end
    t = {k: np.array([[n[1:] for n in s] for s in rec[k]]) * 1e6 for k in rec}
    med = {k: np.median(v, axis=0) for k, v in t.items()}
    for i, n in enumerate(rec["bare"][0]):
        b, k, d = med["bare"][i], med["kept"][i], med["DDP"][i]
        gaps = f"{b[0]:.0f} | {d[0]:.0f}" if i else "- | -"
        print(f"| {i + 1} {n[0]} | {b[1]:.0f} | {k[1] - b[1]:+.0f} | {d[1] - b[1]:+.0f} | "
              f"{gaps} |")
    tot = {k: np.median(v[:, :, 1].sum(axis=1)) for k, v in t.items()}
    gap = {k: np.median(v[:, 1:, 0].sum(axis=1)) for k, v in t.items()}
    print(f"| every node (median of the sums) | {tot['bare']:.0f} | "
          f"{tot['kept'] - tot['bare']:+.0f} | {tot['DDP'] - tot['bare']:+.0f} | "
          f"{gap['bare']:.0f} | {gap['DDP']:.0f} |")


def _model_and_data(tb, np, batch, seed):
    """benchmarks/ddp.py's MLP and a batch of random data drawn with ``seed``."""
    tb.manual_seed(0)
    model, shape = build(tb.nn, "mlp")
    rng = np.random.default_rng(seed)
    x = tb.from_numpy(rng.standard_normal((batch, *shape)).astype(np.float32))
    return model, x, tb.from_numpy(rng.integers(0, 10, batch))


def solo(steps: int, batch: int) -> None:
    """``--solo``: the step-time percentiles of one process without DDP."""
    import numpy as np

    import tensorbrain as tb
    from benchmarks._common import cpu_model
    step = _stepper(tb, *_model_and_data(tb, np, batch, 0))
    times = []
    for _ in range(20 + steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    ms = np.array(times[20:]) * 1e3
    print(f"# {cpu_model()}; load {os.getloadavg()[0]:.2f}; MLP 784-512-512-10, B={batch}, "
          f"one process, no DDP, {steps} steps")
    print("step p10/p50/p90/p99 " + "/".join(f"{np.percentile(ms, q):.2f}" for q in
                                          (10, 50, 90, 99)) + " ms")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--solo", action="store_true", help="one process, no DDP: step jitter")
    ap.add_argument("--nodes", action="store_true",
                    help="each backward node's time and the gap before it: DDP, bare, and "
                         "bare with the same gradient arrays every step")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)  # rank port out
    a = ap.parse_args(argv)
    if a.solo:
        solo(a.steps, a.batch)
        return
    if a.worker:
        (nodes_worker if a.nodes else worker)(int(a.worker[0]), int(a.worker[1]), a.steps,
                                              a.batch, a.worker[2])
        return
    import numpy as np

    from benchmarks._common import cpu_model
    load0 = os.getloadavg()[0]
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        outs = [os.path.join(tmp, f"r{r}.json") for r in (0, 1)]
        procs = [subprocess.Popen([sys.executable, __file__, "--steps", str(a.steps), "--batch",
                                   str(a.batch), *(["--nodes"] if a.nodes else []), "--worker",
                                   str(r), str(port), outs[r]])
                 for r in (0, 1)]
        for p in procs:
            if p.wait(timeout=600) != 0:
                sys.exit(f"ddp_arrivals: a rank exited with {p.returncode}")
        res = [json.load(open(o)) for o in outs]
    if a.nodes:
        _print_nodes(res[0], a.steps, a.batch, load0)
        return
    r0, r1 = (np.array(r["rec"]) for r in res)
    if len(r0) != a.steps or len(r1) != a.steps:
        sys.exit("ddp_arrivals: no resident arena (needs the native module and shared memory)")
    later = np.maximum(r0[:, 0], r1[:, 0])
    gap = np.abs(r0[:, 0] - r1[:, 0]) * 1e6
    print(f"# {cpu_model()}; {os.cpu_count()} cores; load {load0:.2f} -> "
          f"{os.getloadavg()[0]:.2f}; MLP 784-512-512-10, B={a.batch} per rank, 2 ranks, "
          f"{a.steps} steps")
    print(f"step {res[0]['step'] * 1e3:.2f} ms; arrival gap median {np.median(gap):.0f} us "
          f"(p90 {np.percentile(gap, 90):.0f}); exposed median rank 0 "
          f"{np.median((r0[:, 1] - later) * 1e6):.0f} us, rank 1 "
          f"{np.median((r1[:, 1] - later) * 1e6):.0f} us; chunks by rank 0 median "
          f"{np.median(r0[:, 2]):.0f} of {int(r0[0, 3])}")


if __name__ == "__main__":
    main()
