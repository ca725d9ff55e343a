"""The web UI: web/dist at `/`, with index.html for every client-side route.

Mounted after the API routers, so `/api/*` always wins; an unknown `/api/...` path stays
a JSON 404 instead of becoming the app's HTML.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response

from burrow.api.errors import error_response, nul_in_path

DIST = Path(__file__).resolve().parents[2] / "web" / "dist"

# Vite names every asset by its content hash: a changed file is a new URL.
IMMUTABLE = "public, max-age=31536000, immutable"

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Burrow</title>
<style>body{font:15px/1.6 system-ui,sans-serif;background:#131416;color:#e6e4df;
max-width:36rem;margin:18vh auto;padding:0 1rem}code{color:#f0bd7b}</style></head>
<body><h1>Burrow</h1><p>The web UI has not been built. Run <code>make run</code> in the
repository (it builds <code>web/dist</code> and starts the server), then reload.</p>
<p>The API is up: <a href="/api/health" style="color:#f0bd7b">/api/health</a>.</p></body></html>
"""


def mount(app: FastAPI, dist: Path = DIST) -> None:
    """Serve the built UI from `dist`, looked up per request so a rebuild needs no restart."""

    @app.api_route("/{path:path}", methods=["GET", "HEAD"], include_in_schema=False)
    def web(path: str) -> Response:  # sync: the file checks run off the event loop
        if path == "api" or path.startswith("api/"):
            return error_response(404, "not_found", f"/{path} was not found.")
        if "\0" in path:  # resolving it would raise
            bad = nul_in_path()
            return error_response(bad.status, bad.code, bad.message)
        index = dist / "index.html"
        if not index.is_file():
            return HTMLResponse(NOT_BUILT, status_code=503, headers={"Cache-Control": "no-cache"})
        if path:
            root = dist.resolve()
            candidate = (root / path).resolve()
            if candidate.is_relative_to(root) and candidate.is_file():
                cache = IMMUTABLE if path.startswith("assets/") else "no-cache"
                return FileResponse(candidate, headers={"Cache-Control": cache})
            if path.startswith("assets/"):
                return error_response(404, "not_found", f"/{path} was not found.")
        # Client-side routes (/c/<id>, ...) all load the app shell.
        return FileResponse(
            index,
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )
