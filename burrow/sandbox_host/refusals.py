"""A request the host answers itself rather than a service in a sandbox: E2B's error body
`{code, message}` over HTTP, or a close code over a WebSocket (which has no body)."""

from __future__ import annotations

import json

from starlette.types import Scope, Send


async def refuse(scope: Scope, send: Send, status: int, message: str, *, close_code: int) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": close_code})
        return
    body = json.dumps({"code": status, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})
