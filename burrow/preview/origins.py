"""Requests one page makes to another preview: refused.

Every preview is on one site (`*.preview.localhost`), and the owner's cookie for each
must be `SameSite=None` to reach the app's cross-site iframe; so when a page of preview X
asks for preview Y, the browser attaches the owner's cookie for Y. The cookie cannot tell
the two apart; the request's `Origin` and fetch metadata (`Sec-Fetch-*`) can.

- A request naming another origin is refused, whatever its method: WebSocket handshakes
  and unsafe methods must come from the preview's own page (a dev server's hot-reload
  socket and its page's forms and fetches do), and a CORS read from elsewhere could take
  the data of a service that reflects `Origin` in `Access-Control-Allow-Origin`.
- A request the browser marks as from another page (`Sec-Fetch-Site` same-site or
  cross-site) passes only as a GET or HEAD navigation: the app framing the preview, a
  link, a new tab. Another page's `<img>` or `<script>` (which carry no `Origin`) could
  otherwise fire a service's side-effecting GETs or include its scripts.
- `Origin: null` (a sandboxed frame, a data: URL, or a page under `no-referrer` posting to
  itself) passes only when `Sec-Fetch-Site` vouches that it is same-origin.
- A request with neither header passes: browsers send `Origin` on every handshake and
  every POST and fetch metadata on everything, so it is not a page's request in a browser
  (curl, a script) and brought the cookie itself.

So a conversation's ports are origins apart too: a page on one port cannot post to, open
a socket to or load from another port's preview (serve both through the dev server's own
proxy instead, as Vite's `server.proxy` does).
"""

from __future__ import annotations

from collections.abc import Iterable

from burrow.preview.asgi import Scope
from burrow.preview.headers import header

NAVIGATION_METHODS = frozenset({"GET", "HEAD"})
OWN_SITES = frozenset({b"same-origin", b"none"})  # "none": typed, bookmarked, no page
NOT_NAVIGATIONS = frozenset({b"object", b"embed"})  # plugin content, not a page


def foreign_request(scope: Scope, own_origins: Iterable[str]) -> str | None:
    """Why this request is another page's, or None when it may pass. `own_origins`: the
    preview's origin as the request's Host names it and as Burrow's URLs do (the two
    differ only behind a proxy that rewrites Host)."""
    origin = header(scope, b"origin").strip().lower()
    site = header(scope, b"sec-fetch-site").strip().lower()
    if origin and origin != b"null":
        if origin in {own.lower().encode("latin-1") for own in own_origins}:
            return None
        return f"The request came from a page of {origin.decode('latin-1')}."
    if site and site not in OWN_SITES:
        if origin or not _navigation(scope):
            return f"The request came from another page (Sec-Fetch-Site: {site.decode()})."
        return None
    if origin and not site:
        return "The request came from a page with an opaque origin (Origin: null)."
    return None


def _navigation(scope: Scope) -> bool:
    return (
        scope["type"] == "http"
        and scope["method"] in NAVIGATION_METHODS
        and header(scope, b"sec-fetch-mode").lower() == b"navigate"
        and header(scope, b"sec-fetch-dest").lower() not in NOT_NAVIGATIONS
    )
