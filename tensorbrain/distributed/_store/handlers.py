"""What the TCPStore server does for each request: one small handler per opcode.

Each handler gets the server, the connection and the request's fields (already split by
:func:`.protocol.decode`), checks the field count and caps, and replies through
``server.reply`` or parks the request (``server.park``) until its keys are set. A malformed
request raises :class:`.protocol.ProtocolError`, which drops that connection only.
"""
from __future__ import annotations

from ..errors import DistStoreError
from . import protocol as P
from .base import INTERNAL_PREFIX, add_rule, compare_set_rule


def _need(op, fields, n):
    if len(fields) != n:
        raise P.ProtocolError(f"{P.OP_NAMES.get(op, op)} takes {n} fields, got {len(fields)}")


def _stored(server, conn, err, ok_frame):
    """Reply to a write: ``ok_frame``, or the store-full error ``put`` returned."""
    server.reply(conn, P.encode(P.ST_ERROR, err.encode()) if err else ok_frame)


def _set(server, conn, f):
    _need(P.OP_SET, f, 2)
    key = P.decode_key(f[0])
    if len(f[1]) > P.MAX_VALUE_BYTES:
        raise P.ProtocolError(f"value of {len(f[1])} bytes exceeds the cap")
    _stored(server, conn, server.put(key, f[1]), P.encode(P.ST_OK))


def _get(server, conn, f):
    _need(P.OP_GET, f, 2)
    key = P.decode_key(f[0])
    if key in server.data:
        server.reply(conn, P.encode(P.ST_OK, server.data[key]))
    else:
        server.park(conn, [key], P.OP_GET, P.read_i64(f[1]))


def _add(server, conn, f):
    _need(P.OP_ADD, f, 2)
    key = P.decode_key(f[0])
    try:
        new = add_rule(server.data.get(key), P.read_i64(f[1]), key)
    except DistStoreError as exc:  # the old value is not an integer
        server.reply(conn, P.encode(P.ST_ERROR, str(exc).encode()))
        return
    _stored(server, conn, server.put(key, new), P.encode(P.ST_OK, P.i64(int(new))))


def _compare_set(server, conn, f):
    _need(P.OP_CAS, f, 3)
    key = P.decode_key(f[0])
    if len(f[2]) > P.MAX_VALUE_BYTES:
        raise P.ProtocolError("desired value exceeds the cap")
    result, write = compare_set_rule(server.data.get(key), f[1], f[2])
    err = server.put(key, f[2]) if write else None
    _stored(server, conn, err, P.encode(P.ST_OK, result))


def _wait(server, conn, f):
    if not 2 <= len(f) <= P.MAX_WAIT_KEYS + 1:
        raise P.ProtocolError("wait needs a timeout and 1..MAX_WAIT_KEYS keys")
    keys = [P.decode_key(k) for k in f[1:]]
    if all(k in server.data for k in keys):
        server.reply(conn, P.encode(P.ST_OK))
    else:
        server.park(conn, keys, P.OP_WAIT, P.read_i64(f[0]))


def _check(server, conn, f):
    if len(f) > P.MAX_WAIT_KEYS:
        raise P.ProtocolError("too many keys in check")
    ok = all(P.decode_key(k) in server.data for k in f)
    server.reply(conn, P.encode(P.ST_OK, b"\x01" if ok else b"\x00"))


def _delete(server, conn, f):
    _need(P.OP_DELETE, f, 1)
    old = server.pop(P.decode_key(f[0]))
    server.reply(conn, P.encode(P.ST_OK, b"\x01" if old is not None else b"\x00"))


def _num_keys(server, conn, f):
    n = sum(1 for k in server.data if not k.startswith(INTERNAL_PREFIX))
    server.reply(conn, P.encode(P.ST_OK, P.i64(n)))


def _ping(server, conn, f):
    server.reply(conn, P.encode(P.ST_OK))


#: opcode -> handler(server, conn, fields)
HANDLERS = {
    P.OP_SET: _set,
    P.OP_GET: _get,
    P.OP_ADD: _add,
    P.OP_CAS: _compare_set,
    P.OP_WAIT: _wait,
    P.OP_CHECK: _check,
    P.OP_DELETE: _delete,
    P.OP_NUM_KEYS: _num_keys,
    P.OP_PING: _ping,
}
