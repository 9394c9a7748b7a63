"""The store's shared-secret handshake: an HMAC challenge-response over both sides' nonces.

The server's hello carries a nonce; the client answers with its own nonce and
``HMAC(secret, "client" + nonce_s + nonce_c)``; the server answers with the ``"server"`` MAC,
so each side proves it knows ``TB_STORE_SECRET`` without sending it.
"""
from __future__ import annotations

import hashlib
import hmac

from .base import to_bytes


class AuthError(Exception):
    """The handshake was refused (wrong or missing secret, other protocol version)."""


def mac(secret: bytes, who: bytes, nonce_s: bytes, nonce_c: bytes) -> bytes:
    """``who``'s proof (``b"client"`` or ``b"server"``) that it knows ``secret``."""
    return hmac.new(secret, who + nonce_s + nonce_c, hashlib.sha256).digest()


def secret_from(secret) -> bytes:
    """The secret to use: ``secret`` as bytes, else ``TB_STORE_SECRET``, else none (``b""``)."""
    if secret is None:
        from ... import _config
        secret = _config.get("TB_STORE_SECRET")
    return to_bytes(secret, "secret") if secret else b""
