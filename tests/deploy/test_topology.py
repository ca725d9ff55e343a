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


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def script(path: Path, call: dict[str, Any]) -> str:
    """The scripted model: one tool call in the sandbox, then a word."""
    path.write_text(json.dumps([call, {"text": "written"}]))
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


class Browser:
    """One signed-in client of the proxy, noting which replica answered each request."""

    def __init__(self, top: Topology, http: httpx.AsyncClient) -> None:
        self.top = top
        self.http = http
        self.landed: list[str] = []

    def on(self, response: httpx.Response) -> httpx.Response:
        self.landed.append(response.headers[UPSTREAM_HEADER])
        return response

    @property
    def replicas(self) -> set[str]:
        return {replica.app for replica in self.top.replicas}

    async def run_followed_on_both_replicas(self) -> tuple[str, list[dict[str, Any]]]:
        """A new conversation's message, its run followed live by two streams that round
        robin put on different replicas (so one follows a run another replica owns)."""
        created = self.on(await self.http.post("/api/conversations", json={"title": "deploy"}))
        assert created.status_code == 201, created.text
        cid = created.json()["id"]
        streams = [Stream(), Stream()]
        followers = []
        for stream in streams:
            followers.append(asyncio.create_task(stream.follow(self.http, cid, "run.finished")))
            self.landed.append(await asyncio.wait_for(stream.upstream, 20))
        assert {s.upstream.result() for s in streams} == self.replicas

        sent = await self.http.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
        assert self.on(sent).status_code == 202, sent.text
        await asyncio.wait_for(asyncio.gather(*followers), 90)

        page = await self.http.get(f"/api/conversations/{cid}/events?format=json")
        journal: list[dict[str, Any]] = self.on(page).json()
        for stream in streams:
            assert stream.events == journal  # live, in order, gap-free, on both replicas
        assert [e["seq"] for e in journal] == list(range(1, len(journal) + 1))
        assert journal[-1]["type"] == "run.finished"
        assert journal[-1]["data"]["status"] == "completed"
        return cid, journal


async def through_the_proxy(top: Topology, check: Any) -> None:
    # A browser's requests: its Origin is the proxy's address, which the replicas see as
    # their own through the X-Forwarded-Host they believe from the proxy only.
    base = top.proxy.base
    async with httpx.AsyncClient(base_url=base, headers={"Origin": base}, timeout=60) as http:
        browser = Browser(top, http)
        assert browser.on(await http.get("/api/health")).json()["status"] == "ok"
        await log_in(http, "admin", ADMIN_PASSWORD)
        await check(browser)
    assert set(browser.landed) == browser.replicas, browser.landed


async def test_a_run_its_stream_and_its_files_through_the_proxy_on_both_replicas(
    tmp_path: Path, pg_url: str
) -> None:
    write = tool_call("write_file", {"path": "note.txt", "content": NOTE + "\n"})
    with topology(tmp_path, pg_url, script(tmp_path / "model.json", write)) as top:

        async def check(browser: Browser) -> None:
            cid, journal = await browser.run_followed_on_both_replicas()
            [finished] = [e["data"] for e in journal if e["type"] == "tool.finished"]
            assert not finished["is_error"], finished
            # The file the run wrote, read through each replica in turn.
            url = f"/api/conversations/{cid}/files/content?path=note.txt"
            for _ in top.replicas:
                read = browser.on(await browser.http.get(url))
                assert read.status_code == 200, read.text
                assert read.text == NOTE + "\n"
            # The sandbox runs on the sandbox host, not in a replica.
            async with httpx.AsyncClient(base_url=top.proxy.gateway, timeout=10) as gateway:
                listed = await gateway.get("/v2/sandboxes", headers={"X-API-KEY": top.api_key})
                assert listed.status_code == 200, listed.text
                [sandbox] = listed.json()
                assert sandbox["sandboxID"].startswith("sbx1-")

        await through_the_proxy(top, check)


async def test_bash_and_a_terminal_in_the_sandbox_through_the_proxy(
    tmp_path: Path, pg_url: str
) -> None:
    bash = tool_call("bash", {"command": f"echo {NOTE} > note.txt && cat note.txt"})
    with topology(tmp_path, pg_url, script(tmp_path / "model.json", bash)) as top:

        async def check(browser: Browser) -> None:
            cid, journal = await browser.run_followed_on_both_replicas()
            [finished] = [e["data"] for e in journal if e["type"] == "tool.finished"]
            assert finished["exit_code"] == 0 and NOTE in finished["output"], finished
            # A terminal in the same sandbox. It lives in the replica that opened it (its
            # scrollback, its sockets), so the proxy sends all of it there.
            body = {"cols": 80, "rows": 24}
            opened = await browser.http.post(f"/api/conversations/{cid}/terminals", json=body)
            assert browser.on(opened).status_code == 201, opened.text
            tid = opened.json()["terminal_id"]
            url = f"ws://127.0.0.1:{top.proxy.port}/api/conversations/{cid}/terminals/{tid}/ws"
            session = browser.http.cookies["burrow_session"]
            headers = {"Cookie": f"burrow_session={session}", "Origin": top.proxy.base}
            async with (
                connect(url, additional_headers=headers) as first,
                connect(url, additional_headers=headers) as second,
            ):
                assert first.response is not None and second.response is not None
                sockets = {first.response.headers[UPSTREAM_HEADER]}
                sockets.add(second.response.headers[UPSTREAM_HEADER])
                assert sockets == {opened.headers[UPSTREAM_HEADER]}
                await first.send(b"cat note.txt; echo done-$((6*7))\n")
                for ws in (first, second):
                    shown = await read_until(ws, b"done-42")
                    assert NOTE.encode() in shown

        await through_the_proxy(top, check)
