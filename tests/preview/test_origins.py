"""A preview's WebSockets and state-changing requests come from its own page: another
preview's page (or any other site) is refused, even though the browser attaches the
owner's cookie for the target preview to its requests."""

from __future__ import annotations

import json
import socket

import pytest
import websockets
from websockets.asyncio.client import connect

from tests.preview.harness import Preview

EVIL = "http://evil.example"


async def _notes(preview: Preview, port: int, cookie: str) -> list[str]:
    response = await preview.get(port, "/notes", cookie)
    assert response.status_code == 200, response.text
    notes: list[str] = json.loads(response.text)
    return notes


async def _post(
    preview: Preview, port: int, cookie: str, body: str, headers: dict[str, str]
) -> int:
    sent = {"host": preview.host(port), "cookie": f"burrow_preview={cookie}", **headers}
    return (await preview.proxy.post("/notes", content=body, headers=sent)).status_code


def _origin(preview: Preview, port: int, cid: str | None = None) -> str:
    return f"http://{preview.host(port, cid)}"


async def _open_websocket(preview: Preview, port: int, cookie: str, origin: str | None) -> str:
    """The echo of one message, or raises websockets.InvalidStatus."""
    sock = socket.create_connection(("127.0.0.1", preview.port))
    async with connect(
        f"ws://{preview.host(port)}/hmr",
        sock=sock,
        origin=websockets.Origin(origin) if origin else None,
        additional_headers={"cookie": f"burrow_preview={cookie}"},
    ) as ws:
        await ws.send("ping")
        return str(await ws.recv())


async def test_a_websocket_from_another_origin_is_refused(preview: Preview) -> None:
    await preview.start(8060, "dev_server.py")
    cookie = await preview.sign_in(8060)
    other = await preview.server.create_conversation("other")
    for origin in (EVIL, _origin(preview, 8060, other), _origin(preview, 8061), "null"):
        with pytest.raises(websockets.InvalidStatus) as refused:
            await _open_websocket(preview, 8060, cookie, origin)
        assert refused.value.response.status_code == 403, origin
    # The page's own hot-reload socket, and a client that is not a browser (no Origin).
    assert await _open_websocket(preview, 8060, cookie, _origin(preview, 8060)) == "ping"
    assert await _open_websocket(preview, 8060, cookie, None) == "ping"


async def test_a_post_from_another_origin_is_refused_before_the_service(
    preview: Preview,
) -> None:
    await preview.start(8062, "dev_server.py")
    cookie = await preview.sign_in(8062)
    other = await preview.server.create_conversation("other")
    refused = [
        {"origin": EVIL},
        {"origin": _origin(preview, 8062, other)},  # another conversation's preview
        {"origin": "null"},  # an opaque origin: a sandboxed frame, a data: URL
        {"sec-fetch-site": "same-site"},  # a browser's request from a sibling, no Origin
        {"origin": "null", "sec-fetch-site": "cross-site"},
    ]
    for headers in refused:
        assert await _post(preview, 8062, cookie, "forged", headers) == 403, headers
    assert await _notes(preview, 8062, cookie) == []

    allowed = [
        {"origin": _origin(preview, 8062)},  # the page's own form or fetch
        {"origin": _origin(preview, 8062), "sec-fetch-site": "same-origin"},
        {"origin": "null", "sec-fetch-site": "same-origin"},  # its own, under no-referrer
        {},  # curl: not a browser, it brought the cookie itself
        # Behind a proxy that drops the port from Host: the origin of Burrow's own URLs.
        {"host": preview.host(8062).rsplit(":", 1)[0], "origin": _origin(preview, 8062)},
    ]
    for index, headers in enumerate(allowed):
        assert await _post(preview, 8062, cookie, f"own {index}", headers) == 200, headers
    assert await _notes(preview, 8062, cookie) == [f"own {i}" for i in range(len(allowed))]


async def test_reads_and_loads_by_another_page_are_refused_navigations_are_not(
    preview: Preview,
) -> None:
    await preview.start(8063, "dev_server.py")
    cookie = await preview.sign_in(8063)
    # A CORS read (fetch with credentials) names its origin: a service that reflects the
    # Origin in Access-Control-Allow-Origin would otherwise hand its data to that page.
    for origin in (EVIL, _origin(preview, 8064), "null"):
        response = await preview.get(8063, "/notes", cookie, {"origin": origin})
        assert response.status_code == 403, origin
        assert "another site" in response.text
    # Another page's <img> or <embed>: no Origin, but the browser says where it is from.
    for site in ("same-site", "cross-site"):
        for mode, dest in (("no-cors", "image"), ("navigate", "embed")):
            load = {"sec-fetch-site": site, "sec-fetch-mode": mode, "sec-fetch-dest": dest}
            response = await preview.get(8063, f"/notes/add?text={dest}", cookie, load)
            assert response.status_code == 403, load
    assert await _notes(preview, 8063, cookie) == []
    # The app framing the preview, a link from elsewhere, a typed address, the page's own
    # loads and reads, and a client that is no browser.
    passing = [
        ("cross-site", "navigate", "iframe"),
        ("same-site", "navigate", "document"),
        ("none", "navigate", "document"),
        ("same-origin", "no-cors", "image"),
    ]
    for site, mode, dest in passing:
        load = {"sec-fetch-site": site, "sec-fetch-mode": mode, "sec-fetch-dest": dest}
        assert (await preview.get(8063, "/notes", cookie, load)).status_code == 200, load
    for headers in ({"origin": _origin(preview, 8063), "sec-fetch-site": "same-origin"}, {}):
        assert (await preview.get(8063, "/notes", cookie, headers)).status_code == 200, headers
