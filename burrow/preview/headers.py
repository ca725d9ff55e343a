"""What crosses the proxy: hop-by-hop headers dropped, Burrow's credentials stripped both
ways (the browser's cookies going up, a service's `Set-Cookie` for them coming down),
X-Forwarded-* added, the link token taken out of the URL (RFC 9110 §7.6.1)."""

from __future__ import annotations

from burrow.preview.asgi import Scope

COOKIE = "burrow_preview"
TOKEN_PARAM = b"burrow_token"
# Never forwarded to a sandbox, and never set by one: the app's session cookie under both
# of its names (burrow/api/session_cookie.py) and the proxy's own.
APP_COOKIES = (b"burrow_session", b"__Host-burrow_session", COOKIE.encode())
_APP_COOKIES_LOWER = frozenset(name.lower() for name in APP_COOKIES)
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
NOT_FORWARDED = HOP_BY_HOP | {
    b"authorization",
    b"host",
    b"x-forwarded-for",
    b"x-forwarded-host",
    b"x-forwarded-proto",
}
WEBSOCKET_OWN = frozenset(  # the upstream handshake makes its own
    {b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions"}
    | {b"sec-websocket-protocol", b"content-length"}
)


def header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return b""


def cookies(scope: Scope, name: bytes) -> list[bytes]:
    found: list[bytes] = []
    for key, value in scope["headers"]:
        if key == b"cookie":
            for part in value.split(b";"):
                cookie_name, _, cookie_value = part.strip().partition(b"=")
                if cookie_name == name:
                    found.append(cookie_value.strip(b'"'))
    return found


def query_param(query: bytes, name: bytes) -> str | None:
    for part in query.split(b"&"):
        key, _, value = part.partition(b"=")
        if key == name:
            return value.decode("latin-1")
    return None


def without_token(scope: Scope) -> bytes:
    path = scope.get("raw_path") or scope["path"].encode()
    kept = [
        p
        for p in scope.get("query_string", b"").split(b"&")
        if p.partition(b"=")[0] not in (TOKEN_PARAM, b"")
    ]
    return bytes(path) + (b"?" + b"&".join(kept) if kept else b"")


def target(scope: Scope) -> bytes:
    path = bytes(scope.get("raw_path") or scope["path"].encode())
    query = scope.get("query_string", b"")
    return path + b"?" + query if query else path


def upstream_headers(
    scope: Scope, host: str, scheme: str
) -> tuple[list[tuple[bytes, bytes]], bool]:
    """The browser's headers minus hop-by-hop ones and Burrow's credentials, plus the
    X-Forwarded ones; and whether the request has a body."""
    listed = {token.strip().lower() for token in header(scope, b"connection").split(b",") if token}
    headers: list[tuple[bytes, bytes]] = [(b"host", host.encode("latin-1"))]
    framed = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            framed = True
        elif name == b"transfer-encoding":
            framed = True
            headers.append((b"transfer-encoding", b"chunked"))  # re-framed on this hop
            continue
        if name in NOT_FORWARDED or name in listed:
            continue
        if name == b"cookie":
            value = strip_app_cookies(value)
            if not value:
                continue
        headers.append((name, value))
    client = scope.get("client")
    if client:
        headers.append((b"x-forwarded-for", str(client[0]).encode()))
    headers += [
        (b"x-forwarded-host", host.encode("latin-1")),
        (b"x-forwarded-proto", scheme.encode()),
    ]
    return headers, framed


def strip_app_cookies(value: bytes) -> bytes:
    parts = [p.strip() for p in value.split(b";")]
    return b"; ".join(p for p in parts if p and p.partition(b"=")[0].strip() not in APP_COOKIES)


def response_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    listed: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            listed |= {token.strip().lower() for token in value.split(b",")}
    kept: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        lower = name.lower()
        if lower in HOP_BY_HOP or lower in listed:
            continue
        if (
            lower == b"set-cookie"
            and value.partition(b"=")[0].strip().lower() in _APP_COOKIES_LOWER
        ):
            # The service may not replace the proxy's cookie, nor plant an app session on
            # a parent domain the app shares (`Domain=example.com`): it would sign the
            # user's browser into the service author's account.
            continue
        kept.append((lower, value))
    return kept
