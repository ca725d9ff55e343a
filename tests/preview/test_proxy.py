"""The preview proxy end to end: a real server, a real sandbox, real services in it."""

from __future__ import annotations

import asyncio
import json
import os
import socket

import websockets
from websockets.asyncio.client import connect

from tests.preview.harness import Preview
from tests.process_memory import rss_bytes


async def test_http_server_through_the_signed_link_then_the_cookie(preview: Preview) -> None:
    sandbox = await preview.sandbox()
    await sandbox.write_file("site/index.html", b"<h1>hello from the sandbox</h1>")
    await preview.start(8000, command="cd site && python3 -m http.server 8000")

    url = await preview.signed_url(8000)
    assert url.startswith(f"http://{preview.host(8000)}/?burrow_token=")
    path = url.split(preview.host(8000), 1)[1].replace("/?", "/index.html?a=1&", 1)
    exchange = await preview.proxy.get(path, headers={"host": preview.host(8000)})
    assert exchange.status_code == 303
    assert exchange.headers["location"] == "/index.html?a=1"  # the token is gone
    cookie_header = exchange.headers["set-cookie"]
    for attribute in ("HttpOnly", "SameSite=None", "Secure", "Partitioned", "Path=/", "Max-Age="):
        assert attribute in cookie_header
    assert "Domain" not in cookie_header  # host-only: this preview's origin alone
    cookie = cookie_header.split(";")[0].partition("=")[2]

    page = await preview.get(8000, "/index.html", cookie)
    assert page.status_code == 200
    assert page.text == "<h1>hello from the sandbox</h1>"
    assert "SimpleHTTP" in page.headers["server"]


async def test_burrow_credentials_never_reach_the_sandbox(preview: Preview) -> None:
    await preview.start(8001, "app_server.py")
    cookie = await preview.sign_in(8001)
    response = await preview.get(
        8001,
        "/headers",
        None,
        {
            "cookie": f"theme=dark; burrow_session=SECRET; burrow_preview={cookie}",
            "authorization": "Bearer SECRET",
            "connection": "keep-alive, x-hop",
            "x-hop": "hop",
        },
    )
    assert response.status_code == 200, response.text
    headers = dict(json.loads(response.text))
    assert "SECRET" not in response.text and cookie not in response.text
    assert headers["cookie"] == "theme=dark"
    assert "authorization" not in headers and "x-hop" not in headers
    assert headers["host"] == preview.host(8001)
    assert headers["x-forwarded-host"] == preview.host(8001)
    assert headers["x-forwarded-proto"] == "http"
    # The service cannot replace the proxy's cookie; its own cookies pass.
    set_cookies = (await preview.get(8001, "/cookie", cookie)).headers.get_list("set-cookie")
    assert set_cookies == ["app=1; Path=/"]


async def test_post_bodies_and_fifty_concurrent_requests(preview: Preview) -> None:
    await preview.start(8002, "app_server.py")
    cookie = await preview.sign_in(8002)
    body = bytes(range(256)) * 4096  # 1 MiB, binary
    echoed = await preview.proxy.post(
        "/echo",
        content=body,
        headers={"host": preview.host(8002), "cookie": f"burrow_preview={cookie}"},
    )
    assert echoed.status_code == 200 and echoed.content == body

    responses = await asyncio.gather(*(preview.get(8002, f"/item/{i}", cookie) for i in range(50)))
    assert [r.status_code for r in responses] == [200] * 50
    assert [r.text for r in responses] == [f"path /item/{i}" for i in range(50)]


async def test_upstream_connections_are_kept_alive(preview: Preview) -> None:
    await preview.start(8007, "app_server.py")
    cookie = await preview.sign_in(8007)
    peers = {(await preview.get(8007, "/peer", cookie)).text for _ in range(10)}
    assert len(peers) == 1  # one tunnel, reused: no connection left checked out


async def test_a_100_mb_download_streams_with_bounded_memory(preview: Preview) -> None:
    await preview.start(8003, "app_server.py")
    cookie = await preview.sign_in(8003)
    baseline = rss_bytes(os.getpid())
    peak = baseline
    received = 0
    async with preview.proxy.stream(
        "GET",
        "/big?mb=100",
        headers={"host": preview.host(8003), "cookie": f"burrow_preview={cookie}"},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-length"] == str(100 << 20)
        async for chunk in response.aiter_raw():
            received += len(chunk)
            peak = max(peak, rss_bytes(os.getpid()))
    assert received == 100 << 20
    # The server (proxy + tunnel) runs in this process; a buffered body would add 100 MB.
    assert peak - baseline < 20 << 20, f"RSS grew by {(peak - baseline) >> 20} MiB"


async def test_websocket_messages_are_relayed_both_ways(preview: Preview) -> None:
    await preview.start(8004, "dev_server.py")
    cookie = await preview.sign_in(8004)
    sock = socket.create_connection(("127.0.0.1", preview.port))
    async with connect(
        f"ws://{preview.host(8004)}/hmr",
        sock=sock,
        additional_headers={"cookie": f"burrow_preview={cookie}"},
        subprotocols=[websockets.Subprotocol("vite-hmr")],
    ) as ws:
        assert ws.subprotocol == "vite-hmr"
        await ws.send("hello")
        assert await ws.recv() == "hello"
        await ws.send(b"\x00\x01binary")
        assert await ws.recv() == b"\x00\x01binary"
        large = "y" * 200_000
        await ws.send(large)
        assert await ws.recv() == large


async def test_a_websocket_without_the_cookie_is_refused(preview: Preview) -> None:
    await preview.start(8005, "dev_server.py")
    sock = socket.create_connection(("127.0.0.1", preview.port))
    try:
        async with connect(f"ws://{preview.host(8005)}/", sock=sock):
            raise AssertionError("connected without a cookie")
    except websockets.InvalidStatus as exc:
        assert exc.response.status_code == 403


async def test_a_stopped_sandbox_is_woken_by_its_preview(preview: Preview) -> None:
    await preview.start(8006, "app_server.py")
    cookie = await preview.sign_in(8006)
    sandbox = await preview.sandbox()
    await sandbox.stop()  # as hibernation does: processes gone, files kept
    assert preview.server.services.runtime.sandboxes.running(preview.cid) is None

    response = await preview.get(8006, "/", cookie)
    # The sandbox is up again; the service is not (yet): a page that reloads itself.
    assert preview.server.services.runtime.sandboxes.running(preview.cid) is not None
    assert response.status_code == 503
    assert "Waiting for port 8006" in response.text
    assert response.headers["retry-after"] == "2"

    await preview.start(8006, "app_server.py")
    assert (await preview.get(8006, "/", cookie)).text == "path /"


async def test_the_upstream_websocket_handshake_has_one_host(preview: Preview) -> None:
    await preview.start(8008, "dev_server.py")
    cookie = await preview.sign_in(8008)
    sock = socket.create_connection(("127.0.0.1", preview.port))
    async with connect(
        f"ws://{preview.host(8008)}/handshake",
        sock=sock,
        additional_headers={"cookie": f"burrow_preview={cookie}", "x-app": "kept"},
    ) as ws:
        received = str(await ws.recv())  # the request as the service read it off the wire
    lines = received.split("\r\n")
    assert lines[0] == "GET /handshake HTTP/1.1"
    names = [line.partition(":")[0].lower() for line in lines[1:] if line]
    assert names.count("host") == 1, received
    assert f"\r\nHost: {preview.host(8008)}\r\n".lower() in received.lower()
    assert len(names) == len(set(names)), received  # no header twice
    assert "x-app: kept" in received.lower() and cookie not in received


async def test_a_service_cannot_set_the_apps_session_cookie(preview: Preview) -> None:
    # On a shared parent domain (app on example.com, previews under it) a service's
    # `Set-Cookie: burrow_session=…; Domain=example.com` would reach the app and sign the
    # user's browser into the service author's account.
    await preview.start(8009, "app_server.py")
    cookie = await preview.sign_in(8009)
    response = await preview.get(8009, "/app-cookies", cookie)
    assert response.status_code == 200, response.text
    assert response.headers.get_list("set-cookie") == ["app=2; Path=/"]
