"""The TCPStore wire format: length-prefixed frames of length-prefixed fields, bounded everywhere.

Frame:   u32 little-endian payload length N (1 <= N <= MAX_FRAME), then N payload bytes.
Request payload: u8 opcode, then fields.   Reply payload: u8 status, then fields.
Field:   u32 little-endian length L, then L bytes. Integers travel as 8-byte signed LE fields.

Handshake (first frames on a connection):
  server -> client  HELLO  = MAGIC, u8 version, u8 auth_required, 32-byte server nonce
  client -> server  OP_HELLO fields: MAGIC+version, 32-byte client nonce,
                    mac_c = HMAC-SHA256(secret, b"client" + nonce_s + nonce_c)  (b"" without secret)
  server -> client  OK, mac_s = HMAC-SHA256(secret, b"server" + nonce_s + nonce_c)  (or ERROR)
so with a shared secret each side proves it knows it (no replay: both nonces are fresh), and the
secret itself never travels. Without a secret the magic still rejects strangers (port scanners,
HTTP probes) at the first frame.

The caps (documented in docs/stores.md) bound what a client can make the server hold:
a frame is rejected as soon as its length prefix exceeds MAX_FRAME, before any allocation.
"""
from __future__ import annotations

import struct

MAGIC = b"TBSTORE"
VERSION = 1
NONCE_BYTES = 32

MAX_KEY_BYTES = 4096                 # a key, UTF-8 encoded
MAX_VALUE_BYTES = 64 * 1024 * 1024   # a value (addresses, small metadata, object payloads)
MAX_WAIT_KEYS = 4096                 # keys in one wait/check
MAX_FRAME = 2 * MAX_VALUE_BYTES + 64 * 1024   # compare_set carries two values
MAX_KEYS = 1_000_000                 # keys held by one server
MAX_STORE_BYTES = 1 << 30            # key+value bytes held by one server (1 GiB)
MAX_CONNECTIONS = 4096               # simultaneous client connections
HANDSHAKE_TIMEOUT_S = 15.0           # a connection that does not say hello in time is dropped
# Before the hello is accepted (authenticated when TB_STORE_SECRET is set) a peer may make the
# server hold at most one hello-sized frame, and only this many such peers are kept (the oldest
# is dropped for a new one): 200 silent or hostile connections cost a few MiB, not 136 MiB each.
MAX_HELLO_FRAME = 4096
MAX_PENDING_HANDSHAKES = 128

_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")

# opcodes
OP_HELLO, OP_SET, OP_GET, OP_ADD, OP_CAS, OP_WAIT, OP_CHECK, OP_DELETE, OP_NUM_KEYS, OP_PING = \
    range(1, 11)
OP_NAMES = {OP_HELLO: "hello", OP_SET: "set", OP_GET: "get", OP_ADD: "add", OP_CAS: "compare_set",
            OP_WAIT: "wait", OP_CHECK: "check", OP_DELETE: "delete_key",
            OP_NUM_KEYS: "num_keys", OP_PING: "ping"}
# reply statuses
ST_OK, ST_TIMEOUT, ST_ERROR = 0, 1, 2


class ProtocolError(ValueError):
    """A frame that does not follow the format; the server drops the connection."""


def i64(n: int) -> bytes:
    return _I64.pack(n)


def read_i64(b: bytes) -> int:
    if len(b) != 8:
        raise ProtocolError(f"integer field must be 8 bytes, got {len(b)}")
    return _I64.unpack(b)[0]


def encode(head: int, *fields: bytes) -> bytes:
    """One frame: length prefix, head byte (opcode or status), fields."""
    # one join, length prefix included: large values are copied once, not twice
    size = 1 + sum(4 + len(f) for f in fields)
    parts = [_U32.pack(size), bytes((head,))]
    for f in fields:
        parts.append(_U32.pack(len(f)))
        parts.append(f)
    return b"".join(parts)


def frame_length(prefix: bytes) -> int:
    """Validate a 4-byte length prefix; raises ProtocolError before anything is allocated."""
    n = _U32.unpack(prefix)[0]
    if n == 0 or n > MAX_FRAME:
        raise ProtocolError(f"frame length {n} outside 1..{MAX_FRAME}")
    return n


def decode(payload: bytes | bytearray | memoryview) -> tuple[int, list[bytes]]:
    """Split a payload into (head byte, fields), checking every length against what is left."""
    mv = memoryview(payload)
    head = mv[0]
    fields: list[bytes] = []
    pos, end = 1, len(mv)
    while pos < end:
        if end - pos < 4:
            raise ProtocolError("truncated field length")
        n = _U32.unpack_from(mv, pos)[0]
        pos += 4
        if n > end - pos:
            raise ProtocolError(f"field length {n} exceeds the {end - pos} bytes left in the frame")
        fields.append(bytes(mv[pos:pos + n]))
        pos += n
        if len(fields) > MAX_WAIT_KEYS + 2:
            raise ProtocolError("too many fields")
    return head, fields


def decode_key(raw: bytes) -> str:
    if len(raw) > MAX_KEY_BYTES:
        raise ProtocolError(f"key of {len(raw)} bytes exceeds the {MAX_KEY_BYTES}-byte cap")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("key is not valid UTF-8") from None
