"""Finding 6: what an unauthenticated peer can make the TCPStore server allocate is bounded.

The store runs in its own process with TB_STORE_SECRET set; 200 connections each announce a
maximal frame and stream 1 MiB without ever completing the hello. Before the fix the server
buffered all of it (~136 MiB per connection at worst); now each costs at most a hello-sized
buffer, the server's RSS grows by < 50 MiB, and an authenticated client is still served.
"""
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from tensorbrain.distributed.store import TCPStore

ROOT = Path(__file__).resolve().parents[3]
SERVER = """
import sys, time
from tensorbrain.distributed.store import TCPStore
s = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=60)
print(s.port, flush=True)
sys.stdin.read()   # until the test closes our stdin
"""


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_unauthenticated_connections_cost_little_memory(soak):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TB_STORE_SECRET": "s3cret-for-the-test"}
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)
    socks = []
    try:
        port = int(proc.stdout.readline())
        time.sleep(0.3)
        base = rss_mib(proc.pid)
        junk = b"\0" * (1 << 20)
        for _ in range(200 * soak):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.setblocking(False)
            try:  # a maximal frame announced, then as much as the server will take
                s.send(struct.pack("<I", 2 * 64 * 1024 * 1024 + 64 * 1024) + junk)
            except (BlockingIOError, OSError):
                pass
            socks.append(s)
        time.sleep(1.5)  # let the server read what it will
        grown = rss_mib(proc.pid) - base
        assert grown < 50, f"the store server grew by {grown:.0f} MiB for 200 silent peers"
        good = TCPStore("127.0.0.1", port, is_master=False, timeout=10,
                        secret="s3cret-for-the-test")
        good.set("k", b"v")
        assert good.get("k") == b"v"
    finally:
        for s in socks:
            s.close()
        proc.stdin.close()
        proc.kill()
        proc.wait(10)
