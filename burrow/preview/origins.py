"""Requests one page makes to another preview: refused.

Every preview is on one site (`*.preview.localhost`), and the owner's cookie for each
must be `SameSite=None` to reach the app's cross-site iframe; so when a page of preview X
asks for preview Y, the browser attaches the owner's cookie for Y. The cookie cannot tell
the two apart; the request's `Origin` and `Sec-Fetch-Site` can.

- WebSocket handshakes and unsafe methods (anything but GET, HEAD, OPTIONS) must come from
  the preview's own origin: a dev server's hot-reload socket and its page's forms and
  fetches do.
- A read that names another origin (a CORS fetch; browsers send no `Origin` on navigations
  and plain loads) is refused too: a service reflecting `Origin` in
  `Access-Control-Allow-Origin` would otherwise hand its data to that page.
- `Origin: null` (a sandboxed frame, a data: URL, or a page under `no-referrer` posting to
  itself) passes only when `Sec-Fetch-Site` vouches that it is same-origin.
- Without `Origin`, an unsafe request or handshake passes unless `Sec-Fetch-Site` says it
  is from elsewhere: browsers send `Origin` on every handshake and every POST, so what
  arrives with neither header is not a page's request in a browser (curl, a script) and
  brought the cookie itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from burrow.preview.asgi import Scope
from burrow.preview.headers import header

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OWN_SITES = frozenset({b"same-origin", b"none"})  # "none": typed, bookmarked, no page


def foreign_request(scope: Scope, own_origins: Iterable[str]) -> str | None:
    """Why this request is another page's, or None when it may pass. `own_origins`: the
    preview's origin as the request's Host names it and as Burrow's URLs do (the two
    differ only behind a proxy that rewrites Host)."""
    origin = header(scope, b"origin").strip().lower()
    fetch_site = header(scope, b"sec-fetch-site").strip().lower()
    changes = scope["type"] == "websocket" or scope["method"] not in SAFE_METHODS
    if origin and origin != b"null":
        if origin in {own.lower().encode("latin-1") for own in own_origins}:
            return None
        return f"The request came from a page of {origin.decode('latin-1')}."
    if fetch_site and fetch_site not in OWN_SITES:
        if changes or origin:
            return f"The request came from another page (Sec-Fetch-Site: {fetch_site.decode()})."
        return None  # a navigation or a plain load: no CORS read, no change
    if origin and not fetch_site:
        return "The request came from a page with an opaque origin (Origin: null)."
    return None
