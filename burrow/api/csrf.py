"""CSRF defence (DESIGN.md §3): previews run untrusted pages in the same browser, so a
state-changing API request must be JSON and, when it carries an Origin, come from the
app's own origin. A cross-origin page can neither send JSON without a preflight that
we never approve, nor pass the Origin check.
"""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Receive, Scope, Send

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}
# The one route that takes a form: a cross-origin page *can* post multipart without a
# preflight, so there the Origin must be ours, or absent on a Bearer request (no cookie
# is sent by a script on its own; a browser always sends Origin on a cross-site POST).
UPLOADS = re.compile(r"/api/conversations/[^/]+/uploads")
# The Files editor's save sends the file's raw bytes. A PUT is never a "simple" request: a
# cross-origin page cannot send one without a preflight, which is never approved.
RAW_PUTS = re.compile(r"/api/conversations/[^/]+/files/content")


class CSRFGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guarded = scope["type"] == "http" and scope["method"] in STATE_CHANGING
        if guarded and scope["path"].startswith("/api/"):
            problem = self._problem(scope)
            if problem is not None:
                await _refuse(send, *problem)
                return
        await self.app(scope, receive, send)

    def _problem(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        if origin is not None and origin != own_origin(scope, headers):
            return 403, "cross_origin", f"Cross-origin request refused (Origin: {origin})."
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type == "multipart/form-data" and UPLOADS.fullmatch(scope["path"]):
            # No cookie and no token: the login check answers (401).
            if origin is None and "cookie" in headers and not _bearer(headers):
                return (
                    403,
                    "origin_required",
                    "Uploads come from the app's own page (with its Origin) or carry "
                    "an Authorization: Bearer token.",
                )
            return None
        if scope["method"] == "PUT" and RAW_PUTS.fullmatch(scope["path"]):
            return None
        has_body = (
            headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers
        )
        if content_type != "application/json" and (has_body or scope["method"] != "DELETE"):
            return (
                415,
                "json_required",
                "State-changing requests must send Content-Type: application/json "
                "(send {} when there is nothing to say).",
            )
        return None


def _bearer(headers: dict[str, str]) -> bool:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def own_origin(scope: Scope, headers: dict[str, str]) -> str:
    """The origin this request was addressed to, as the browser sees it. Behind a trusted
    proxy, `ForwardedHeaders` has already put the proxy's scheme and host in the scope;
    nobody else's `X-Forwarded-*` reaches this far."""
    return f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
