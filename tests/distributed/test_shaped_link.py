"""The shaped-link helper (``tensorbrain.testing.shaped_link``): two network namespaces joined
by a user-space relay at 100 Mbit/s and 20 ms one way. Measured from real sockets: a TCP
round trip takes at least the two delays, and a bulk transfer never beats the rate."""
import sys
import textwrap

import pytest

from tensorbrain.testing.shaped_link import shaped_link, why_unavailable

SERVER = textwrap.dedent("""
    import socket, sys
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], 29611)); s.listen(); print("listening", flush=True)
    c, _ = s.accept()
    for _ in range(20):                       # echo 20 pings
        c.sendall(c.recv(1))
    n = 0
    while True:                               # then sink the bulk transfer
        b = c.recv(1 << 20)
        if not b:
            break
        n += len(b)
    print(n, flush=True)
""")
CLIENT = textwrap.dedent("""
    import socket, sys, time
    c = socket.create_connection((sys.argv[1], 29611), timeout=30)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(20):
        t = time.perf_counter(); c.sendall(b"x"); c.recv(1); rtts.append(time.perf_counter() - t)
    data = b"\\0" * (8 << 20)
    t = time.perf_counter(); c.sendall(data); c.shutdown(socket.SHUT_WR); c.recv(1)
    print(min(rtts), sorted(rtts)[10], len(data) * 8 / (time.perf_counter() - t) / 1e6)
""")


def test_the_relay_shapes_rate_and_delay():
    why = why_unavailable()
    if why:
        pytest.skip(why)
    with shaped_link(rate_mbit=100, delay_ms=20) as link:
        a0 = link.addresses[0]
        server = link.popen(0, [sys.executable, "-c", SERVER, a0], stdout=-1, text=True)
        assert server.stdout.readline().strip() == "listening"
        client = link.popen(1, [sys.executable, "-c", CLIENT, a0], stdout=-1, text=True)
        out, _ = client.communicate(timeout=60)
        got, _ = server.communicate(timeout=30)
        rtt_min, rtt_med, mbit = map(float, out.split())
        assert int(got) == 8 << 20
        assert 0.040 <= rtt_min and rtt_med < 0.080, (rtt_min, rtt_med)  # two 20 ms delays
        assert 40 < mbit <= 100, mbit    # the link's rate is a ceiling the relay enforces
        sent = link.stats()["bytes"]
        assert sent[1] >= 8 << 20, sent  # the data (and headers) went through the relay
