"""The deployment's topology as processes (deploy/compose.yaml without containers): a fresh
PostgreSQL database, a `burrow sandbox-host`, two `burrow serve` replicas on the e2b backend,
nginx with deploy/nginx's routes in front. Everything goes through the proxy, and the
requests land on both replicas."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from tests.api.harness import ADMIN_PASSWORD, log_in
from tests.deploy.proxy import UPSTREAM_HEADER
from tests.deploy.topology import Topology, topology

NOTE = "hello-from-the-sandbox-host"


def script(path: Path) -> str:
    """The scripted model: one bash call that writes a file in the sandbox, then a word."""
    command = f"echo {NOTE} > note.txt && cat note.txt"
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
        {"text": "written"},
    ]
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


class Stream:
    """An SSE stream through the proxy: the replica that serves it, and its events."""

    def __init__(self) -> None:
        self.upstream = asyncio.get_running_loop().create_future()
        self.events: list[dict[str, Any]] = []

    async def follow(self, http: httpx.AsyncClient, cid: str, until: str) -> None:
        url = f"/api/conversations/{cid}/events"
        async with http.stream("GET", url, timeout=None) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            self.upstream.set_result(response.headers[UPSTREAM_HEADER])
            async for event in _parse(response.aiter_lines()):
                self.events.append(event)
                if event["type"] == until:
                    return


async def _parse(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    fields: dict[str, str] = {}
    async for line in lines:
        if line == "":
            if "data" in fields:
                yield json.loads(fields["data"])
            fields = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(":")
            fields[key] = value.removeprefix(" ")


async def read_until(ws: ClientConnection, marker: bytes, timeout: float = 20) -> bytes:
    seen = b""
    async with asyncio.timeout(timeout):
        while marker not in seen:
            frame = await ws.recv()
            seen += frame if isinstance(frame, bytes) else b""
    return seen


async def test_the_topology_serves_a_conversation_through_the_proxy_on_both_replicas(
    tmp_path: Path, pg_url: str
) -> None:
    with topology(tmp_path, pg_url, script(tmp_path / "model.json")) as top:
        await _a_conversation_through_the_proxy(top)


async def _a_conversation_through_the_proxy(top: Topology) -> None:
    base = top.proxy.base
    replicas = {replica.app for replica in top.replicas}
    landed: list[str] = []

    def on(response: httpx.Response) -> httpx.Response:
        landed.append(response.headers[UPSTREAM_HEADER])
        return response

    # A browser's requests: its Origin is the proxy's address, which the replicas see as
    # their own through the X-Forwarded-Host they believe from the proxy only.
    headers = {"Origin": base}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
        assert on(await http.get("/api/health")).json()["status"] == "ok"
        await log_in(http, "admin", ADMIN_PASSWORD)
        created = on(await http.post("/api/conversations", json={"title": "deployed"}))
        assert created.status_code == 201, created.text
        cid = created.json()["id"]

        # Two live streams, opened one after the other: round robin puts them on
        # different replicas, so one of them follows a run that another replica owns.
        streams = [Stream(), Stream()]
        followers = []
        for stream in streams:
            followers.append(asyncio.create_task(stream.follow(http, cid, "run.finished")))
            landed.append(await asyncio.wait_for(stream.upstream, 20))
        assert {s.upstream.result() for s in streams} == replicas

        sent = on(await http.post(f"/api/conversations/{cid}/messages", json={"content": "go"}))
        assert sent.status_code == 202, sent.text
        await asyncio.wait_for(asyncio.gather(*followers), 90)

        journal = on(await http.get(f"/api/conversations/{cid}/events?format=json")).json()
        for stream in streams:
            assert stream.events == journal  # live, in order, gap-free, on both replicas
        assert [e["seq"] for e in journal] == list(range(1, len(journal) + 1))
        [finished] = [e["data"] for e in journal if e["type"] == "tool.finished"]
        assert finished["exit_code"] == 0 and NOTE in finished["output"], finished
        assert journal[-1]["data"]["status"] == "completed"

        # The file the run wrote, read through each replica in turn.
        for _ in top.replicas:
            read = on(await http.get(f"/api/conversations/{cid}/files/content?path=note.txt"))
            assert read.status_code == 200, read.text
            assert read.text == NOTE + "\n"

        # A terminal in the same sandbox. It lives in the replica that opened it (its
        # scrollback, its sockets), so the proxy sends all of it there.
        opened = on(
            await http.post(f"/api/conversations/{cid}/terminals", json={"cols": 80, "rows": 24})
        )
        assert opened.status_code == 201, opened.text
        tid = opened.json()["terminal_id"]
        url = f"ws://127.0.0.1:{top.proxy.port}/api/conversations/{cid}/terminals/{tid}/ws"
        cookie = {"Cookie": f"burrow_session={http.cookies['burrow_session']}", "Origin": base}
        async with (
            connect(url, additional_headers=cookie) as first,
            connect(url, additional_headers=cookie) as second,
        ):
            assert first.response is not None and second.response is not None
            sockets = {first.response.headers[UPSTREAM_HEADER]}
            sockets.add(second.response.headers[UPSTREAM_HEADER])
            assert sockets == {opened.headers[UPSTREAM_HEADER]}
            await first.send(b"cat note.txt; echo done-$((6*7))\n")
            for ws in (first, second):
                shown = await read_until(ws, b"done-42")
                assert NOTE.encode() in shown

        # The sandbox runs on the sandbox host, not in a replica.
        async with httpx.AsyncClient(base_url=top.proxy.gateway, timeout=10) as gateway:
            listed = await gateway.get("/v2/sandboxes", headers={"X-API-KEY": top.api_key})
            assert listed.status_code == 200, listed.text
            assert len(listed.json()) == 1

    assert set(landed) == replicas, landed
