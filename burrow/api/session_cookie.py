"""The browser's session cookie: one cookie, set by this host alone, read exactly once.

Over https (the request's own scheme, or what a trusted proxy forwarded) it is
`__Host-burrow_session`: the browser then takes it only from this host, with Secure, Path=/
and no Domain, so a page on a sibling or child host (a preview under the app's domain)
cannot set one in its place. Over plain http (localhost) that prefix is not possible and it
is `burrow_session`. A request carrying two session cookies — both names, or one name twice
— is refused: it is what a cookie tossed onto the parent domain looks like, and Starlette
would silently keep one of them (the last), perhaps the attacker's.
"""

from __future__ import annotations

from fastapi import Response
from starlette.requests import HTTPConnection

from burrow.api.errors import ApiError
from burrow.store.accounts import SESSION_LIFETIME

PLAIN = "burrow_session"
HOST_ONLY = "__Host-burrow_session"
NAMES = (PLAIN, HOST_ONLY)


class DuplicateSessionCookie(ApiError):
    def __init__(self) -> None:
        super().__init__(
            400,
            "duplicate_session_cookie",
            "This request carries two Burrow session cookies, so it is not clear who you "
            "are (a page on another host of this domain may have set one). Clear this "
            "site's cookies in your browser, then sign in again.",
        )


def name(connection: HTTPConnection) -> str:
    """The cookie's name for this request's scheme."""
    return HOST_ONLY if connection.scope.get("scheme") in ("https", "wss") else PLAIN


def read(connection: HTTPConnection) -> str | None:
    """The session token the browser sent under this scheme's name, or None; raises
    `DuplicateSessionCookie` when there is more than one session cookie of either name."""
    found = presented(connection)
    if len(found) > 1:
        raise DuplicateSessionCookie
    # Over https the plain name proves nothing: any host of the domain can set it.
    return found[0][1] if found and found[0][0] == name(connection) and found[0][1] else None


def presented(connection: HTTPConnection) -> list[tuple[str, str]]:
    """Every session cookie in the request, (name, value), duplicates included."""
    found: list[tuple[str, str]] = []
    # The raw headers, not `connection.cookies`: that dict has already dropped duplicates.
    for header in connection.headers.getlist("cookie"):
        for part in header.split(";"):
            key, sep, value = part.partition("=")
            if sep and key.strip() in NAMES:
                found.append((key.strip(), value.strip().strip('"')))
    return found


def give(response: Response, connection: HTTPConnection, token: str) -> None:
    """Sign the browser in: the cookie, and over https the end of a plain one from before."""
    cookie = name(connection)
    response.set_cookie(
        cookie,
        token,
        max_age=int(SESSION_LIFETIME.total_seconds()),
        httponly=True,
        samesite="lax",
        secure=cookie == HOST_ONLY,
        path="/",
    )
    if cookie == HOST_ONLY:
        _expire(response, PLAIN, secure=True)


def take_back(response: Response, connection: HTTPConnection) -> None:
    """Sign the browser out (the cookie of this scheme, and a plain one left from before)."""
    https = name(connection) == HOST_ONLY
    if https:
        _expire(response, HOST_ONLY, secure=True)
    _expire(response, PLAIN, secure=https)


def _expire(response: Response, cookie: str, *, secure: bool) -> None:
    response.delete_cookie(cookie, path="/", secure=secure, httponly=True, samesite="lax")
