"""The socket path between two "hosts": two Linux network namespaces joined by a veth pair.

Part of ``benchmarks/limits.py`` (``--netns``; on by default where it can run): the single-stream
TCP limit across the veth (one Python process in one namespace streaming to one in the other,
``sendall`` against ``recv_into``, as over loopback; and per direction with a stream each way at
once, which is what a 2-rank ring does) beside tb's all_reduce busbw with rank 0 in one
namespace and rank 1 in the other, and Gloo's where torch is installed. Ranks in different
namespaces count as different hosts to the tcp backend, so they talk TCP over the veth whatever
``TB_SHM`` says. Needs root and iproute2 (``ip netns``); otherwise :func:`unavailable` says why
and the part is skipped.

    python benchmarks/limits_netns.py            # this part alone, about a minute
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=check)


def unavailable() -> str | None:
    """Why the namespaces cannot be made here, or None when they can."""
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if shutil.which("ip") is None:
        return "needs iproute2 (the ip command)"
    if os.geteuid() != 0:
        return "needs root (ip netns add)"
    return None


@contextlib.contextmanager
def two_namespaces():
    """Yield ``(namespaces, addresses, devices)``: two namespaces joined by a veth pair, with
    each end's address and device; everything is removed on exit (processes left inside are
    killed). Raises RuntimeError with ip's message when the kernel refuses."""
    tag = uuid.uuid4().hex[:6]
    ns, devs = [f"tbb{tag}a", f"tbb{tag}b"], [f"vb{tag}a", f"vb{tag}b"]
    subnet = f"10.252.{os.getpid() % 250}"
    addrs = [f"{subnet}.1", f"{subnet}.2"]
    made = []
    try:
        for n in ns:
            r = _ip("netns", "add", n, check=False)
            if r.returncode != 0:
                raise RuntimeError(f"ip netns add refused: {r.stderr.strip()}")
            made.append(n)
        _ip("link", "add", devs[0], "type", "veth", "peer", "name", devs[1])
        for n, dev, addr in zip(ns, devs, addrs):
            _ip("link", "set", dev, "netns", n)
            _ip("-n", n, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", n, "link", "set", dev, "up")
            _ip("-n", n, "link", "set", "lo", "up")
        yield ns, addrs, devs
    finally:
        for n in made:
            for pid in _ip("netns", "pids", n, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), 9)
            _ip("netns", "del", n, check=False)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE")}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TORCH_CPP_LOG_LEVEL="ERROR", **extra)
    return env


def _in_ns(ns, argv, env, **kw):
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], env=env, **kw)


# ***** the stream limit across the veth *****
def _stream_recv(addr, port, total, chunk, rounds, duplex=False) -> None:
    srv = socket.create_server((addr, port))
    print("ready", flush=True)
    b, _ = srv.accept()
    srv.close()
    b.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if duplex:
        from limits import _duplex_end  # a stream each way at once (limits.duplex_limit)
        best = _duplex_end(b, total, chunk, rounds)
        b.sendall(b"k")
        print(f"GBps {best}", flush=True)
        return
    buf, best = memoryview(bytearray(chunk)), 0.0
    for _ in range(rounds):
        got, t0 = 0, None
        while got < total:
            n = b.recv_into(buf)
            if n == 0:
                raise RuntimeError("the sender closed early")
            if t0 is None:
                t0 = time.perf_counter()
            got += n
        best = max(best, total / (time.perf_counter() - t0) / 1e9)
        b.sendall(b"k")
    print(f"GBps {best}", flush=True)


def _stream_send(addr, port, total, chunk, rounds, duplex=False) -> None:
    a = socket.create_connection((addr, port), timeout=20)
    a.settimeout(None)
    a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if duplex:
        from limits import _duplex_child
        _duplex_child(a, total, chunk, rounds)
        return
    data = memoryview(bytearray(b"x" * chunk))
    for _ in range(rounds):
        for _ in range(total // chunk):
            a.sendall(data)
        a.recv(1)
    a.close()


def stream_limit(ns, addrs, total=256 << 20, chunk=4 << 20, rounds=3, port=29761,
                 duplex=False) -> float:
    """One-way GB/s of one TCP stream from namespace 1 to namespace 0: the best of ``rounds``;
    with ``duplex``, per direction with a stream each way at once (``limits.duplex_limit``)."""
    me = os.path.abspath(__file__)
    args = [addrs[0], str(port), str(total), str(chunk), str(rounds), str(int(duplex))]
    recv = _in_ns(ns[0], [sys.executable, me, "--stream-recv", *args], _env(),
                  stdout=subprocess.PIPE, text=True)
    try:
        if recv.stdout.readline().strip() != "ready":
            raise RuntimeError("the receiver did not start")
        send = _in_ns(ns[1], [sys.executable, me, "--stream-send", *args], _env())
        out, _ = recv.communicate(timeout=120)
        send.wait(30)
    finally:
        for p in (recv,):
            if p.poll() is None:
                p.kill()
    return float(out.split("GBps")[1])


# ***** the collectives across the veth *****
def run_impl(impl, ns, addrs, devs, sizes, warmup, min_time, port, timeout=600):
    """Per-size seconds of ``impl`` ("tcp" or "gloo") with rank r in namespace r, or None when
    it is unavailable or failed (said on stdout)."""
    if impl == "gloo":
        try:
            import torch  # noqa: F401
        except ImportError:
            return None
    fd, out = tempfile.mkstemp(prefix=f"tb-netns-bench-{impl}-", suffix=".json")
    os.close(fd)
    argv = [sys.executable, os.path.join(HERE, "shm.py"), "--worker", impl,
            "--sizes", ",".join(map(str, sizes)), "-w", str(warmup), "--min-time",
            str(min_time), "--out", out]
    procs = []
    try:
        for r in range(2):
            env = _env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                       MASTER_ADDR=addrs[0], MASTER_PORT=str(port), TB_SHM="0",
                       GLOO_SOCKET_IFNAME=devs[r], TB_RUN_ID=f"netns{os.getpid()}")
            procs.append(_in_ns(ns[r], argv, env))
        deadline = time.monotonic() + timeout
        for p in procs:
            p.wait(max(1.0, deadline - time.monotonic()))
        if any(p.returncode for p in procs):
            print(f"# {impl} across namespaces: a rank failed "
                  f"(exit codes {[p.returncode for p in procs]})")
            return None
        with open(out) as f:
            return json.load(f)
    except subprocess.TimeoutExpired:
        print(f"# {impl} across namespaces: timed out")
        return None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        os.unlink(out)


def measure(sizes, rounds=3, warmup=3, min_time=0.15) -> dict:
    """``{"limit": GB/s, "times": {impl: [seconds per size]}}`` across two namespaces (best
    round per size, implementations in rotating order), or ``{"skipped": reason}``."""
    why = unavailable()
    if why:
        return {"skipped": why}
    try:
        with two_namespaces() as (ns, addrs, devs):
            limit = stream_limit(ns, addrs)
            duplex = stream_limit(ns, addrs, total=128 << 20, port=29762, duplex=True)
            impls, best = ["tcp", "gloo"], {}
            for rnd in range(rounds):
                for k, impl in enumerate(impls[rnd % 2:] + impls[:rnd % 2]):
                    t = run_impl(impl, ns, addrs, devs, sizes, warmup, min_time,
                                 port=29770 + 2 * rnd + k)
                    if t is not None:
                        prev = best.get(impl, [float("inf")] * len(sizes))
                        best[impl] = [min(x, y) for x, y in zip(prev, t)]
            return {"limit": limit, "duplex": duplex, "times": best}
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
        return {"skipped": f"{type(e).__name__}: {e}"}


def report(res, sizes, stream_from) -> list:
    """Print the part's table; return summary rows as benchmarks/limits.py builds them."""
    from shm import human
    if "skipped" in res:
        print(f"\n# across network namespaces (veth): skipped, {res['skipped']}")
        return []
    limit, times = res["limit"], res["times"]
    duplex = res.get("duplex")
    print(f"\n# across two network namespaces over veth: single-stream TCP limit {limit:.2f} GB/s; "
          f"a stream each way at once {duplex or float('nan'):.2f} GB/s per direction")
    print("| size | tb us | tb busbw GB/s | tb / stream limit | tb / duplex limit | gloo us | "
          "gloo busbw GB/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for k, s in enumerate(sizes):
        cells = []
        for impl in ("tcp", "gloo"):
            t = times.get(impl, [None] * len(sizes))[k]
            cells.append((t, s / t / 1e9 if t else None))
        (tt, tb), (gt, gb) = cells
        fmt = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
        print(f"| {human(s)} | {fmt(tt and tt * 1e6, '.1f')} | {fmt(tb, '.3g')} | "
              f"{fmt(tb and tb / limit, '.2f')} | "
              f"{fmt(tb and duplex and tb / duplex, '.2f')} | {fmt(gt and gt * 1e6, '.1f')} | "
              f"{fmt(gb, '.3g')} |")
        if tt is None:
            continue
        if k == 0 and gt:
            r = tt / gt
            rows.append({"figure": f"{human(s)} all_reduce, sockets across netns", "ours": tt * 1e6,
                         "anchor": gt * 1e6, "anchor_name": "Gloo", "ratio": r,
                         "goal": "<= 0.25x Gloo's time", "met": r <= 0.25, "unit": "us"})
        if s >= stream_from:
            r = tb / limit
            rows.append({"figure": f"{human(s)} busbw, sockets across netns", "ours": tb,
                         "anchor": limit, "anchor_name": "veth stream limit", "ratio": r,
                         "goal": ">= 0.9x the stream limit", "met": r >= 0.9, "unit": "GB/s"})
    return rows


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("--stream-recv", "--stream-send"):
        fn = _stream_recv if argv[0] == "--stream-recv" else _stream_send
        addr, port, total, chunk, rounds, duplex = argv[1:7]
        fn(addr, int(port), int(total), int(chunk), int(rounds), duplex == "1")
        return 0
    import argparse
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-time", type=float, default=0.15)
    a = p.parse_args(argv)
    sizes = [8, 1 << 20, 4 << 20, 16 << 20]
    report(measure(sizes, a.rounds, 3, a.min_time), sizes, 4 << 20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
