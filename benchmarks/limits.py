"""Every collective figure of issue 22 beside its anchor, measured in one run, a plot per figure.

    python benchmarks/limits.py                        # about 3-4 minutes on a 2-core machine
    python benchmarks/limits.py --quick                # a smoke run, about a minute
    python benchmarks/limits.py --plots docs/img --json limits.json --rounds 5

Figures, each against an anchor measured in the same run (the goal in brackets):

1. per-call cost: 8 B all_reduce through ``tb.distributed`` against raw MPICH (mpi4py
   ``Allreduce`` on NumPy) [<= 1.5x]; beside it the general path (``TB_FASTPATH=0``), the
   shared-memory transport alone and torch Gloo;
2. mid sizes: all_reduce busbw from 64 KiB to 16 MiB against MPICH's [>= 2x at every size];
3. the socket path (``TB_SHM=0``, what runs between hosts): 8 B against Gloo [<= 0.25x], and
   busbw from 4 MiB against the single-stream limit of this machine's loopback, measured here by
   one Python process streaming to another with ``sendall``/``recv_into`` [>= 0.9x]; a Unix
   stream (what same-host ranks use with ``TB_SHM=0``) is printed too, and both as a *duplex*
   stream (a stream each way at once, per direction: what a 2-rank ring does); and the same
   across two network namespaces joined by a veth pair, against the stream limit across that
   veth and Gloo there (``benchmarks/limits_netns.py``; needs root and ``ip netns``, else skipped saying why);
4. DDP: 2-rank efficiency, MLP 784-512-512-10 at B=512 per rank [>= 0.95], and the step time
   against torch DDP over Gloo in the same processes.

Collectives come from ``benchmarks/shm.py`` (each implementation in fresh ranks, rotating order
per round, best round per size), DDP from ``benchmarks/ddp.py`` (interleaved blocks, medians).
Without mpi4py/mpiexec or torch their columns are missing and the ratios say so. The machine is
printed first: on a shared machine, read the ratios, not the absolute figures.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from types import SimpleNamespace

import limits_netns  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)
import shm as shm_bench  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20
LATENCY = 8
MID = [64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB]
STREAM_FROM = 4 * MIB  # the socket busbw goal applies from here


# ***** the stream limit: one process sends, another receives, as fast as Python can *****
def stream_limit(family: str = "tcp", total: int = 256 * MIB, chunk: int = 4 * MIB) -> float:
    """One-way GB/s of one stream on this machine (``family`` "tcp": 127.0.0.1, "unix": a
    socketpair), ``sendall`` of a buffer against ``recv_into`` a preallocated one, timed on the
    receiver from its first byte to the last; the best of three transfers."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    if family == "unix":
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        srv = socket.create_server(("127.0.0.1", 0))
        a = socket.create_connection(srv.getsockname())
        b, _ = srv.accept()
        srv.close()
        for s in (a, b):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rounds = 3
    child = ctx.Process(target=_stream_send, args=(a, total, chunk, rounds), daemon=True)
    child.start()
    a.close()
    best = 0.0
    buf = memoryview(bytearray(chunk))
    try:
        for _ in range(rounds):
            got, t0 = 0, None
            while got < total:
                n = b.recv_into(buf)
                if n == 0:
                    raise RuntimeError("stream_limit: the sender closed early")
                if t0 is None:
                    t0 = time.perf_counter()
                got += n
            best = max(best, total / (time.perf_counter() - t0) / 1e9)
            b.sendall(b"k")  # the next round starts after this one is received
    finally:
        b.close()
        child.join(10)
    return best


def duplex_limit(family: str = "tcp", total: int = 128 * MIB, chunk: int = 4 * MIB) -> float:
    """Per-direction GB/s of one connection carrying a stream each way at once, what a 2-rank
    ring needs (each rank sends and receives ``size`` bytes per all_reduce, so its busbw is
    bounded by this, not by the one-way figure of :func:`stream_limit`). Each end sends from a
    thread and receives on its main thread; the parent's receive is timed; best of three."""
    import multiprocessing as mp
    if family == "unix":
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        srv = socket.create_server(("127.0.0.1", 0))
        a = socket.create_connection(srv.getsockname())
        b, _ = srv.accept()
        srv.close()
        for s in (a, b):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rounds = 3
    child = mp.get_context("fork").Process(target=_duplex_child, args=(a, total, chunk, rounds),
                                           daemon=True)
    child.start()
    a.close()
    try:
        best = _duplex_end(b, total, chunk, rounds)
        b.sendall(b"k")  # the child leaves after this
        return best
    finally:
        b.close()
        child.join(10)


def _duplex_end(sock, total, chunk, rounds) -> float:
    import threading
    data, buf, best = memoryview(bytearray(chunk)), memoryview(bytearray(chunk)), 0.0
    for _ in range(rounds):
        sock.sendall(b"r")  # both ends start each round together
        if sock.recv(1) != b"r":
            raise RuntimeError("duplex_limit: the peer closed early")
        sender = threading.Thread(target=lambda: [sock.sendall(data)
                                                 for _ in range(total // chunk)])
        t0 = time.perf_counter()
        sender.start()
        got = 0
        while got < total:
            n = sock.recv_into(buf, min(chunk, total - got))  # not into the next round
            if n == 0:
                raise RuntimeError("duplex_limit: the peer closed early")
            got += n
        sender.join()
        best = max(best, total / (time.perf_counter() - t0) / 1e9)
    return best


def _duplex_child(sock, total, chunk, rounds) -> None:
    _duplex_end(sock, total, chunk, rounds)
    sock.recv(1)
    sock.close()


def _stream_send(sock, total, chunk, rounds):
    data = memoryview(bytearray(b"x" * chunk))
    for _ in range(rounds):
        sent = 0
        while sent < total:
            sock.sendall(data)
            sent += chunk
        sock.recv(1)
    sock.close()


# ***** the collectives: benchmarks/shm.py's implementations, rotating order per round *****
def collectives(impls, sizes, rounds, warmup, min_time, nproc=2) -> dict:
    """{impl: [seconds per call at each size]}: the best round per size."""
    args = SimpleNamespace(warmup=warmup, min_time=min_time)
    best: dict = {}
    for rnd in range(rounds):
        order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
        for impl in order:
            times = shm_bench.run_impl(impl, nproc, sizes, args)
            if times is None:
                continue
            prev = best.get(impl, [float("inf")] * len(sizes))
            best[impl] = [min(x, y) for x, y in zip(prev, times)]
    return best


def busbw(size: int, seconds: float, n: int = 2) -> float:
    """nccl-tests' all_reduce bus bandwidth in GB/s (algbw x 2(n-1)/n)."""
    return size / seconds * 2 * (n - 1) / n / 1e9


# ***** the summary: one row per figure and anchor *****
def summarize(times: dict, sizes, limits: dict, ddp: dict | None) -> list:
    """Rows ``{figure, ours, anchor, anchor_name, ratio, goal, met}``; ``ratio`` is ours over
    the anchor as the goal states it (time ratio for latency, busbw ratio for bandwidth)."""
    rows = []

    def t(impl, s):
        return times[impl][sizes.index(s)] if impl in times and s in sizes else None

    def add(figure, ours, anchor, anchor_name, ratio, goal, met, unit):
        rows.append({"figure": figure, "ours": ours, "anchor": anchor, "anchor_name": anchor_name,
                     "ratio": ratio, "goal": goal, "met": met, "unit": unit})

    ours, mpi = t("shm", LATENCY), t("mpi", LATENCY)
    if ours is not None:
        r = ours / mpi if mpi else None
        add("8 B all_reduce, tb.distributed", ours * 1e6, mpi and mpi * 1e6, "MPICH", r,
            "<= 1.5x MPICH's time", r is not None and r <= 1.5, "us")
    for s in sizes:
        if s in MID and t("shm", s) is not None:
            o, m = busbw(s, t("shm", s)), (busbw(s, t("mpi", s)) if t("mpi", s) else None)
            r = o / m if m else None
            add(f"{shm_bench.human(s)} busbw, tb.distributed", o, m, "MPICH", r,
                ">= 2x MPICH's busbw", r is not None and r >= 2.0, "GB/s")
    tcp, gloo = t("tcp", LATENCY), t("gloo", LATENCY)
    if tcp is not None:
        r = tcp / gloo if gloo else None
        add("8 B all_reduce, sockets (TB_SHM=0)", tcp * 1e6, gloo and gloo * 1e6, "Gloo", r,
            "<= 0.25x Gloo's time", r is not None and r <= 0.25, "us")
    for s in sizes:
        if s >= STREAM_FROM and t("tcp", s) is not None and limits.get("tcp"):
            o = busbw(s, t("tcp", s))
            r = o / limits["tcp"]
            add(f"{shm_bench.human(s)} busbw, sockets (TB_SHM=0)", o, limits["tcp"],
                "TCP stream limit", r, ">= 0.9x the stream limit", r >= 0.9, "GB/s")
    if ddp:
        tb_eff = ddp["tb"]["eff"]
        add("DDP efficiency, 2 ranks, MLP B=512", tb_eff, ddp.get("torch", {}).get("eff"),
            "torch DDP", None, ">= 0.95", tb_eff >= 0.95, "")
        if "torch" in ddp:
            r = ddp["tb"]["N"] / ddp["torch"]["N"]
            add("DDP step, 2 ranks, MLP B=512", ddp["tb"]["N"] * 1e3, ddp["torch"]["N"] * 1e3,
                "torch DDP", r, "< 1x torch's step", r < 1.0, "ms")
    return rows


def print_rows(rows) -> None:
    print("| figure | ours | anchor | ours / anchor | goal | met |")
    print("| --- | ---: | ---: | ---: | --- | --- |")
    for r in rows:
        unit = f" {r['unit']}" if r["unit"] else ""
        anchor = "-" if r["anchor"] is None else f"{r['anchor']:.3g}{unit} ({r['anchor_name']})"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        print(f"| {r['figure']} | {r['ours']:.3g}{unit} | {anchor} | {ratio} | {r['goal']} | "
              f"{'yes' if r['met'] else 'no'} |")


def print_times(times, sizes) -> None:
    impls = [i for i in shm_bench.IMPLS if i in times]
    print("| size | " + " | ".join(f"{i} us / GB/s" for i in impls) + " |")
    print("| ---: |" + " ---: |" * len(impls))
    for k, s in enumerate(sizes):
        cells = [f"{times[i][k] * 1e6:.1f} / {busbw(s, times[i][k]):.3g}" for i in impls]
        print(f"| {shm_bench.human(s)} | " + " | ".join(cells) + " |")


# ***** plots: one per figure *****
def plots(times, sizes, limits, ddp, out_dir, netns=None) -> list:
    """Four PNGs in ``out_dir``; returns their paths ([] without matplotlib). ``netns``: the
    part across network namespaces (``limits_netns.measure``), drawn on the sockets plot."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# plots need matplotlib: pip install tensorbrain[plot]")
        return []
    os.makedirs(out_dir, exist_ok=True)
    labels = {"shm": "tb.distributed", "shm-general": "tb, TB_FASTPATH=0",
              "shm-raw": "shm transport alone", "tcp": "tb sockets (TB_SHM=0)",
              "mpi": "MPICH (mpi4py)", "gloo": "torch Gloo"}
    paths = []

    def save(fig, name):
        path = os.path.join(out_dir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=140)   # 70 dpi made the legends unreadable in the docs site
        plt.close(fig)
        paths.append(path)

    k8 = sizes.index(LATENCY) if LATENCY in sizes else None
    if k8 is not None:
        fig, ax = plt.subplots(figsize=(5, 3))
        impls = [i for i in labels if i in times]
        ax.barh([labels[i] for i in impls], [times[i][k8] * 1e6 for i in impls])
        if "mpi" in times:
            ax.axvline(1.5 * times["mpi"][k8] * 1e6, ls="--", c="k", lw=1, label="1.5x MPICH")
            ax.legend(fontsize=7)
        ax.set_xscale("log")
        ax.set_xlabel("8 B all_reduce, us per call (2 ranks)")
        save(fig, "limits_latency.png")
    for name, impls, title, line in (
            ("limits_mid_sizes.png", ["shm", "shm-raw", "mpi", "gloo"],
             "all_reduce busbw, shared memory", "mpi"),
            ("limits_sockets.png", ["tcp", "gloo"], "all_reduce busbw, sockets", "tcp-limit")):
        fig, ax = plt.subplots(figsize=(5, 3.4))
        big = [s for s in sizes if s >= 1024]
        for i in impls:
            if i in times:
                ax.plot(big, [busbw(s, times[i][sizes.index(s)]) for s in big], marker="o",
                        ms=3, label=labels[i])
        if line == "mpi" and "mpi" in times:
            ax.plot(big, [2 * busbw(s, times["mpi"][sizes.index(s)]) for s in big], "k--",
                    lw=1, label="goal: 2x MPICH")
        if line == "tcp-limit" and limits.get("tcp"):
            ax.axhline(limits["tcp"], c="k", ls="--", lw=1, label="TCP stream limit")
            ax.axhline(0.9 * limits["tcp"], c="k", ls=":", lw=1, label="goal: 0.9x limit")
        if line == "tcp-limit" and netns and "times" in netns:
            ns_sizes = netns["sizes"]
            for impl, lab in (("tcp", "tb across netns (veth)"), ("gloo", "Gloo across netns")):
                if impl in netns["times"]:
                    pts = [(s, busbw(s, t)) for s, t in zip(ns_sizes, netns["times"][impl])
                           if s >= 1024]
                    ax.plot(*zip(*pts), marker="s", ms=3, ls="-.", label=lab)
            ax.axhline(netns["limit"], c="tab:red", ls="--", lw=1, label="veth stream limit")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        save(fig, name)
    if ddp:
        fig, ax = plt.subplots(figsize=(4, 3))
        names = [n for n in ("tb", "torch") if n in ddp]
        ax.bar(["tb DDP" if n == "tb" else "torch DDP (Gloo)" for n in names],
               [ddp[n]["eff"] for n in names])
        ax.axhline(0.95, c="k", ls="--", lw=1, label="goal 0.95")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("2-rank efficiency (MLP, B=512/rank)")
        ax.legend(fontsize=7)
        save(fig, "limits_ddp.png")
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="collective rounds (best kept)")
    p.add_argument("--min-time", type=float, default=0.15, help="seconds timed per size")
    p.add_argument("--ddp-blocks", type=int, default=5)
    p.add_argument("--no-ddp", action="store_true")
    p.add_argument("--no-netns", action="store_true",
                   help="skip the part across two network namespaces (veth)")
    p.add_argument("--quick", action="store_true", help="1 round, short timings, 2 DDP blocks")
    p.add_argument("--plots", default="benchmark-plots", help="folder for the PNGs")
    p.add_argument("--json", default=None, help="also write every figure to this file")
    a = p.parse_args(argv)
    if a.quick:
        a.rounds, a.min_time, a.ddp_blocks = 1, 0.05, 2
    print(shm_bench.hardware_line())
    t0 = time.monotonic()
    limits = {"tcp": stream_limit("tcp"), "unix": stream_limit("unix")}
    print(f"# single-stream limit, one Python process to another: TCP loopback "
          f"{limits['tcp']:.2f} GB/s, Unix socket {limits['unix']:.2f} GB/s")
    limits.update({"tcp-duplex": duplex_limit("tcp"), "unix-duplex": duplex_limit("unix")})
    print(f"# a stream each way at once (what a 2-rank ring does), per direction: TCP loopback "
          f"{limits['tcp-duplex']:.2f} GB/s, Unix socket {limits['unix-duplex']:.2f} GB/s "
          f"(same-host ranks with TB_SHM=0 talk over Unix sockets)")
    sizes = [LATENCY] + MID
    impls = ["shm", "shm-general", "shm-raw", "tcp", "mpi", "gloo"]
    times = collectives(impls, sizes, a.rounds, 3, a.min_time)
    print(f"\n# all_reduce float32 sum, 2 ranks, best of {a.rounds} rounds")
    print_times(times, sizes)
    netns_rows: list = []
    netns: dict = {"skipped": "--no-netns"}
    if not a.no_netns:
        ns_sizes = [LATENCY] + [s for s in MID if s >= MIB]
        netns = dict(limits_netns.measure(ns_sizes, a.rounds, 3, a.min_time), sizes=ns_sizes)
        netns_rows = limits_netns.report(netns, ns_sizes, STREAM_FROM)
        limits["veth"] = netns.get("limit")
    ddp = None
    if not a.no_ddp:
        import ddp as ddp_bench  # sets 1 BLAS thread per process: only when DDP runs
        try:
            import torch  # noqa: F401
            fw = "both"
        except ImportError:
            fw = "tb"
        ddp = ddp_bench.launch(fw, "mlp", 512, 2, 10, 3, a.ddp_blocks)
        print(f"\n# DDP, MLP 784-512-512-10, B=512 per rank, {a.ddp_blocks} blocks of 10 steps")
        for n, m in ddp.items():
            print(f"{n}: step 1 rank {m['one'] * 1e3:.2f} ms, 2 ranks {m['N'] * 1e3:.2f} ms, "
                  f"efficiency {m['eff']:.2f} (by CPU time {m['cpu_eff']:.2f})")
    rows = summarize(times, sizes, limits, ddp) + netns_rows
    print(f"\n# every figure against its anchor (same run; load average now "
          f"{os.getloadavg()[0]:.1f}; {time.monotonic() - t0:.0f} s)")
    print_rows(rows)
    for path in plots(times, sizes, limits, ddp, a.plots, netns):
        print(f"# plot: {path}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"sizes": sizes, "times": times, "limits": limits, "ddp": ddp,
                       "netns": netns, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
