"""tcp backend settings: TB_IFNAME picks the interface to listen on and advertise, TB_TCP_UNIX=0
forces TCP between same-host ranks, and a bad interface name is a clear error."""
import pytest

import tensorbrain.distributed as dist
from tensorbrain.distributed.backends import tcp

HERE = "tests.distributed.test_tcp_config"


def test_iface_ip_of_loopback():
    assert tcp._iface_ip("lo") == "127.0.0.1"
    with pytest.raises(dist.DistNetworkError, match="TB_IFNAME='no-such-if0'"):
        tcp._iface_ip("no-such-if0")


def transports(rank, size):
    import json
    be = dist.distributed_c10d._default("cfg").backend
    rec = json.loads(be.store.get(f"tcp/addr/{rank}"))
    import numpy as np
    import tensorbrain as tb
    x = tb.tensor(np.ones(3, np.float32))
    dist.all_reduce(x)
    return {"ip": rec["ip"], "kinds": sorted({c.transport for c in be.conns if c is not None}),
            "sum": float(x._data[0])}


def test_ifname_and_plain_tcp(workers):
    res = workers(f"{HERE}:transports", 2, env={"TB_IFNAME": "lo", "TB_TCP_UNIX": "0",
                                                "TB_SHM": "0"}, timeout=60)
    for r in res:
        assert r == {"ip": "127.0.0.1", "kinds": ["tcp"], "sum": 2.0}, res


def test_same_host_defaults_to_unix_sockets(workers):
    res = workers(f"{HERE}:transports", 2, env={"TB_SHM": "0"}, timeout=60)
    assert all(r["kinds"] == ["unix"] and r["sum"] == 2.0 for r in res), res


def test_bad_ifname_fails_init(workers):
    results = workers(f"{HERE}:transports", 2, env={"TB_IFNAME": "no-such-if0"}, timeout=60,
                      raise_on_error=False)
    for r in results:
        assert r.error_type == "DistNetworkError" and "no-such-if0" in r.message, r.describe()


def test_a_failed_bind_closes_its_listener(monkeypatch):
    """An address this host cannot listen on is a named error, and the socket made for it is
    closed at once (no ResourceWarning when it is collected)."""
    import gc
    import warnings

    from tensorbrain.distributed.backends.tcp import mesh
    monkeypatch.setattr(mesh.Mesh, "_advertised_ip", lambda self: ("192.0.2.1", "192.0.2.1"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(dist.DistNetworkError, match="rank 0: cannot listen on 192.0.2.1"):
            mesh.Mesh(dist.HashStore(), 0, 2, 5.0, "bind-test")
        gc.collect()
    leaked = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    assert not leaked, leaked
