"""E2B's signed file URLs (`download_url`, `upload_url` of a sandbox created `secure`): a
`/files` request that carries, instead of the access token, `signature=v1_<sha256>` of
`path:operation:username:token[:expiration]` and maybe `signature_expiration` (Unix
seconds). The token never travels; the signature opens one path, one way (read: GET,
write: POST), for the sandbox whose token made it, until it expires.

Without `--domain` such a URL names no sandbox (it is the host's own `/files?…`): the host
then finds the sandbox whose token signed it, among the running ones.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterable
from enum import Enum
from urllib.parse import parse_qs

from starlette.types import Scope

from burrow.sandbox_host.registry import HostedSandbox

FILES_PATH = "/files"
EXPIRED = "signature is already expired"  # envd's words, which the SDK's tests read


class Verdict(Enum):
    VALID = "valid"
    EXPIRED = "expired"
    INVALID = "invalid"
    ABSENT = "absent"  # not a signed request


def signed(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["path"] == FILES_PATH and "signature" in _query(scope)


def verdict(scope: Scope, hosted: HostedSandbox, now: float | None = None) -> Verdict:
    if not signed(scope):
        return Verdict.ABSENT
    query = _query(scope)
    operation = "write" if scope["method"] == "POST" else "read"
    expiration = query.get("signature_expiration")
    raw = f"{query.get('path', '')}:{operation}:{query.get('username', '')}:{hosted.access_token}"
    if expiration is not None:
        raw += f":{expiration}"
    digest = hashlib.sha256(raw.encode()).digest()
    expected = "v1_" + base64.b64encode(digest).rstrip(b"=").decode("ascii")
    if not hmac.compare_digest(expected.encode(), query["signature"].encode()):
        return Verdict.INVALID
    if expiration is not None:
        if not expiration.lstrip("-").isdigit():
            return Verdict.INVALID
        if int(expiration) < (time.time() if now is None else now):
            return Verdict.EXPIRED
    return Verdict.VALID


def signer(scope: Scope, running: Iterable[HostedSandbox]) -> HostedSandbox | None:
    """The running sandbox whose token signed this request, if one did."""
    for hosted in running:
        if verdict(scope, hosted) in (Verdict.VALID, Verdict.EXPIRED):
            return hosted
    return None


def _query(scope: Scope) -> dict[str, str]:
    raw = scope.get("query_string", b"").decode("latin-1")
    return {key: values[0] for key, values in parse_qs(raw, keep_blank_values=True).items()}
