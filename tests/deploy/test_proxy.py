"""deploy/nginx's routes in front of a real `burrow serve` (in-process, on 127.0.0.1), with
hostile clients: events stream through unbuffered, terminals upgrade, forged forwarding
headers and foreign origins get nowhere, oversized bodies and dead replicas answer in
Burrow's error shape; the sandbox gateway sends each sandbox's requests to its host."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.api.harness import ADMIN_PASSWORD, RunningServer, free_port, running_server
from tests.deploy.proxy import UPSTREAM_HEADER, Proxy, Upstreams, running_proxy

SLOW = "echo one; sleep 1.5; echo two"


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[RunningServer]:
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": SLOW}}]},
        {"text": "done"},
    ]
    (tmp_path / "model.json").write_text(json.dumps(turns))
    async with running_server(
        tmp_path / "data",
        None,
        preview=True,
        model=f"scripted:{tmp_path / 'model.json'}",
        trusted_proxies="127.0.0.1",
    ) as server:
        yield server


@contextlib.contextmanager
def proxy_for(tmp_path: Path, srv: RunningServer, **hosts: str) -> Iterator[Proxy]:
    app = srv.base_url.removeprefix("http://")
    upstreams = Upstreams(
        apps=[app],
        previews=[f"127.0.0.1:{srv.preview_port}"],
        sandbox_hosts=hosts or {"sbx1": "127.0.0.1:9"},
    )
    with running_proxy(tmp_path / "nginx", Proxy(free_port(), free_port()), upstreams) as p:
        yield p


@contextlib.asynccontextmanager
async def proxied_client(proxy: Proxy) -> AsyncIterator[httpx.AsyncClient]:
    """Signed in through the proxy, sending the Origin a browser on its address would."""
    headers = {"Origin": proxy.base}
    async with httpx.AsyncClient(base_url=proxy.base, headers=headers, timeout=30) as http:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        assert (await http.post("/api/auth/login", json=login)).status_code == 200
        yield http


async def test_events_stream_through_unbuffered_as_they_happen(
    tmp_path: Path, srv: RunningServer
) -> None:
    with proxy_for(tmp_path, srv) as proxy:
        async with proxied_client(proxy) as http:
            cid = (await http.post("/api/conversations", json={})).json()["id"]
            arrived: dict[str, float] = {}
            url = f"/api/conversations/{cid}/events"
            async with http.stream("GET", url, timeout=None) as stream:
                assert stream.headers[UPSTREAM_HEADER] == srv.base_url.removeprefix("http://")
                sent = await http.post(f"/api/conversations/{cid}/messages", json={"content": "x"})
                assert sent.status_code == 202
                async with asyncio.timeout(30):
                    async for line in stream.aiter_lines():
                        if line.startswith("data:"):
                            event = json.loads(line.removeprefix("data:"))
                            text = event["data"].get("text", "")
                            if event["type"] == "tool.output" and "one" in text:
                                arrived.setdefault("one", time.monotonic())
                            if event["type"] == "run.finished":
                                arrived["finished"] = time.monotonic()
                                break
            # "one" came through while the command still slept: nothing held it back.
            assert arrived["finished"] - arrived["one"] > 1.0


async def test_terminals_upgrade_through_the_proxy_from_its_origin_only(
    tmp_path: Path, srv: RunningServer
) -> None:
    with proxy_for(tmp_path, srv) as proxy:
        async with proxied_client(proxy) as http:
            cid = (await http.post("/api/conversations", json={})).json()["id"]
            made = await http.post(f"/api/conversations/{cid}/terminals", json={})
            assert made.status_code == 201, made.text
            tid = made.json()["terminal_id"]
            url = f"ws://127.0.0.1:{proxy.port}/api/conversations/{cid}/terminals/{tid}/ws"
            cookie = f"burrow_session={http.cookies['burrow_session']}"
            own = {"Cookie": cookie, "Origin": proxy.base}
            async with connect(url, additional_headers=own) as ws:
                await ws.send(b"echo $((20+22))-through-nginx\n")
                seen = b""
                async with asyncio.timeout(20):
                    while b"42-through-nginx" not in seen:
                        frame = await ws.recv()
                        seen += frame if isinstance(frame, bytes) else b""
            # A page of another origin: the replica sees the Host the proxy forwarded and
            # refuses it (4403), as it would without the proxy.
            evil = {"Cookie": cookie, "Origin": "http://evil.example"}
            try:
                async with connect(url, additional_headers=evil) as ws:
                    with pytest.raises(ConnectionClosed) as closed:
                        await ws.recv()
                    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
            except InvalidStatus as exc:
                assert exc.response.status_code == 403


async def test_forged_forwarding_headers_do_not_dodge_the_login_throttle_or_the_origin_check(
    tmp_path: Path, srv: RunningServer
) -> None:
    with proxy_for(tmp_path, srv) as proxy:
        async with httpx.AsyncClient(base_url=proxy.base, timeout=30) as http:
            statuses = []
            for attempt in range(11):
                # Each try claims another address; nginx replaces the claim with the peer.
                forged = {"X-Forwarded-For": f"203.0.113.{attempt}", "Origin": proxy.base}
                wrong = {"username": "admin", "password": f"wrong-{attempt}"}
                response = await http.post("/api/auth/login", json=wrong, headers=forged)
                statuses.append(response.status_code)
            assert statuses[:10] == [401] * 10
            assert statuses[10] == 429

            # The Host a client forges in X-Forwarded-Host is replaced too: its Origin must
            # match the address it really used.
            spoof = {"Origin": "http://evil.example", "X-Forwarded-Host": "evil.example"}
            refused = await http.post("/api/auth/logout", json={}, headers=spoof)
            assert refused.status_code == 403
            assert refused.json()["error"]["code"] == "cross_origin"


async def test_oversized_bodies_and_a_dead_replica_answer_in_burrows_error_shape(
    tmp_path: Path, srv: RunningServer
) -> None:
    with proxy_for(tmp_path, srv) as proxy:
        async with proxied_client(proxy) as http:
            huge = b"x" * (65 * 1024 * 1024)
            headers = {"Content-Type": "application/json"}
            refused = await http.post("/api/conversations", content=huge, headers=headers)
            assert refused.status_code == 413
            assert refused.json()["error"]["code"] == "too_large"
            # The proxy is still there for everyone else.
            assert (await http.get("/api/health")).status_code == 200

    # The same routes with the only replica gone.
    upstreams = Upstreams([f"127.0.0.1:{free_port()}"], ["127.0.0.1:9"], {"sbx1": "127.0.0.1:9"})
    gone = Proxy(free_port(), free_port())
    with running_proxy(tmp_path / "nginx-dead", gone, upstreams):
        async with httpx.AsyncClient(base_url=gone.base, timeout=30) as http:
            down = await http.get("/api/health")
            assert down.status_code == 503
            assert down.json()["error"]["code"] == "unavailable"


@contextlib.asynccontextmanager
async def named_host(name: str) -> AsyncIterator[str]:
    """A stand-in sandbox host that answers with its name and what it was asked: the
    gateway's routing is what is under test here (the real host: test_topology.py)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        body = {"host": name, "path": request.url.path, "id": request.headers.get("e2b-sandbox-id")}
        await JSONResponse(body)(scope, receive, send)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def test_the_sandbox_gateway_sends_each_sandbox_to_the_host_that_named_it(
    tmp_path: Path, srv: RunningServer
) -> None:
    async with (
        named_host("sbx1") as one,
        named_host("sbx2") as two,
        named_host("burrow-sbx-0") as pod,  # a StatefulSet's pod (the Helm chart)
    ):
        hosts = {"sbx1": one, "sbx2": two, "burrow-sbx-0": pod}
        with proxy_for(tmp_path, srv, **hosts) as proxy:
            async with httpx.AsyncClient(base_url=proxy.gateway, timeout=10) as gateway:

                async def host_of(path: str, sandbox: str | None = None) -> str:
                    headers = {"E2b-Sandbox-Id": sandbox} if sandbox else {}
                    response = await gateway.get(path, headers=headers)
                    assert response.status_code == 200
                    return str(response.json()["host"])

                assert await host_of("/sandboxes/sbx2-a1b2") == "sbx2"
                assert await host_of("/sandboxes/sbx1-a1b2/timeout") == "sbx1"
                assert await host_of("/v2/sandboxes/sbx2-a1b2/logs") == "sbx2"
                assert await host_of("/files", "sbx1-a1b2") == "sbx1"
                assert await host_of("/files", "sbx2-a1b2") == "sbx2"
                assert await host_of("/files", "burrow-sbx-0-a1b2") == "burrow-sbx-0"
                assert await host_of("/sandboxes/burrow-sbx-0-a1b2/pause") == "burrow-sbx-0"
                # The header wins over a path that names another host's sandbox.
                assert await host_of("/sandboxes/sbx1-x", "sbx2-y") == "sbx2"
                # Ids no host claims go to some host (which answers 404 for them).
                assert await host_of("/files", "../../etc-x") in hosts
                assert await host_of("/sandboxes/sbx3-a1b2") in hosts

                # A new sandbox and the lookup that finds it again (the e2b backend's
                # metadata filter) reach the same host, whichever conversation it is for;
                # conversations spread over the hosts.
                placed = set()
                for n in range(30):
                    key = f"c_{n:04x}"
                    body = {"templateID": "base", "metadata": {"burrow_sandbox": key}}
                    created = await gateway.post("/sandboxes", json=body)
                    query = {"metadata": f"burrow_sandbox={key}", "state": "running,paused"}
                    listed = await gateway.get("/v2/sandboxes", params=query)
                    assert created.json()["host"] == listed.json()["host"]
                    placed.add(listed.json()["host"])
                assert placed == set(hosts)
                # A create body past what a create needs is refused at the gateway.
                huge = await gateway.post("/sandboxes", content=b"x" * 200_000)
                assert huge.status_code == 413


async def test_preview_hosts_reach_the_preview_listener_and_admit_no_stranger(
    tmp_path: Path, srv: RunningServer
) -> None:
    with proxy_for(tmp_path, srv) as proxy:
        async with proxied_client(proxy) as http:
            cid = (await http.post("/api/conversations", json={})).json()["id"]
            host = f"5173-{cid}.preview.localhost:{proxy.port}"
            # The owner's session cookie is the app's, not this preview host's: without a
            # signed link the preview listener refuses, and it is the one that answered.
            response = await http.get("/", headers={"Host": host})
            assert response.headers[UPSTREAM_HEADER] == f"127.0.0.1:{srv.preview_port}"
            assert response.status_code in (401, 403), response.text
            # A Host that is not a preview's goes to the app.
            app = await http.get("/api/health", headers={"Host": f"localhost:{proxy.port}"})
            assert app.headers[UPSTREAM_HEADER] == srv.base_url.removeprefix("http://")
