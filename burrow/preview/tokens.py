"""Signed preview grants: a short-lived link token, then a longer-lived host cookie.

A grant names the user, the conversation and the port, the sign-in it was given under
(the digest of the session or API token that asked for the link: the grant admits only
while that sign-in lasts), and carries a random nonce (a link's is spent on first use,
`spent.py`); it is HMAC-SHA256-signed with a key kept in the data directory
(`preview.key`, 0600). The kind ("link" or "cookie") is part of what is signed, so one can
never be used as the other. A grant without a sign-in (signed before grants had one) is
refused: nothing could end it before its time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["link", "cookie"]
KEY_FILE = "preview.key"


class TokenInvalid(Exception):
    """Not a token this server signed (tampered, truncated, or signed with another key)."""


class TokenExpired(Exception):
    """A genuine token whose time has passed."""


@dataclass(frozen=True)
class PreviewGrant:
    user_id: str
    cid: str
    port: int
    expires: float  # Unix time
    nonce: str
    session: str  # the token digest (burrow.store.accounts) of the sign-in it was given under


def load_key(data_dir: Path) -> bytes:
    """The signing key, created once (random, mode 0600) on first use."""
    path = data_dir / KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first
        return path.read_bytes()
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


class PreviewSigner:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def mint(
        self, kind: Kind, user_id: str, cid: str, port: int, ttl: float, *, session: str
    ) -> str:
        payload = {
            "u": user_id,
            "c": cid,
            "p": port,
            "e": int(time.time() + ttl),
            "n": secrets.token_urlsafe(12),
            "s": session,
        }
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._sign(kind, body))}"

    def verify(self, kind: Kind, token: str, now: float | None = None) -> PreviewGrant:
        body, _, signature = token.partition(".")
        try:
            expected = self._sign(kind, body)
            if not hmac.compare_digest(base64.urlsafe_b64decode(_pad(signature)), expected):
                raise TokenInvalid("bad signature")
            raw = json.loads(base64.urlsafe_b64decode(_pad(body)))
            grant = PreviewGrant(
                str(raw["u"]),
                str(raw["c"]),
                int(raw["p"]),
                float(raw["e"]),
                str(raw.get("n", "")),
                str(raw.get("s", "")),
            )
        except (binascii.Error, ValueError, KeyError, TypeError, UnicodeError):
            raise TokenInvalid("malformed token") from None
        if kind == "link" and not grant.nonce:
            raise TokenInvalid("a link without a nonce cannot be spent once")
        if not grant.session:
            raise TokenInvalid("a grant bound to no sign-in would outlive a logout")
        if grant.expires <= (time.time() if now is None else now):
            raise TokenExpired
        return grant

    def _sign(self, kind: Kind, body: str) -> bytes:
        message = f"burrow-preview.{kind}.{body}".encode()
        return hmac.new(self._key, message, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _pad(text: str) -> bytes:
    return (text + "=" * (-len(text) % 4)).encode()
