"""Terminals over the API: REST to open/list/close, a WebSocket per viewer (DESIGN.md §3)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from burrow.llm.scripted import ScriptedProvider
from burrow.sandbox.terminals import SCROLLBACK_BYTES, SUBSCRIBER_BACKLOG_BYTES
from tests.api.harness import RunningServer, log_in, running_server


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[RunningServer]:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as server:
        yield server


def ws_url(srv: RunningServer, cid: str, tid: str) -> str:
    return f"{srv.base_url.replace('http', 'ws', 1)}/api/conversations/{cid}/terminals/{tid}/ws"


def session_cookie(client: httpx.AsyncClient) -> dict[str, str]:
    return {"Cookie": f"burrow_session={client.cookies['burrow_session']}"}


async def open_terminal(srv: RunningServer, cid: str, cols: int = 80, rows: int = 24) -> str:
    response = await srv.client.post(
        f"/api/conversations/{cid}/terminals", json={"cols": cols, "rows": rows}
    )
    assert response.status_code == 201, response.text
    tid: str = response.json()["terminal_id"]
    return tid


async def read_until(ws: ClientConnection, marker: bytes, timeout: float = 10) -> bytes:
    seen = bytearray()
    async with asyncio.timeout(timeout):
        while marker not in seen:
            message = await ws.recv()
            assert isinstance(message, bytes)
            seen += message
    return bytes(seen)


async def test_two_sockets_share_one_shell_which_outlives_them(srv: RunningServer) -> None:
    cid = await srv.create_conversation()
    tid = await open_terminal(srv, cid)
    url, headers = ws_url(srv, cid, tid), session_cookie(srv.client)
    async with (
        connect(url, additional_headers=headers) as first,
        connect(url, additional_headers=headers) as second,
    ):
        await first.send(b"export KEPT=yes-$((6*7)); echo SHARED-$((6*7))\n")
        assert b"SHARED-42" in await read_until(first, b"SHARED-42")
        assert b"SHARED-42" in await read_until(second, b"SHARED-42")
    # Both sockets are gone; the shell is not. A new socket first gets the scrollback.
    async with connect(url, additional_headers=headers) as third:
        assert b"SHARED-42" in await read_until(third, b"SHARED-42")
        await third.send(b"echo VALUE-$KEPT\n")
        assert b"VALUE-yes-42" in await read_until(third, b"VALUE-yes-42")
    listed = (await srv.client.get(f"/api/conversations/{cid}/terminals")).json()
    assert [t["terminal_id"] for t in listed] == [tid] and not listed[0]["exited"]


async def test_resize_and_ctrl_c_over_the_socket(srv: RunningServer) -> None:
    cid = await srv.create_conversation()
    tid = await open_terminal(srv, cid, cols=90, rows=20)
    async with connect(ws_url(srv, cid, tid), additional_headers=session_cookie(srv.client)) as ws:
        await ws.send(json.dumps({"type": "resize", "cols": 132, "rows": 43}))
        await ws.send(b"stty size; echo SIZE-$((6*7))\n")
        assert b"43 132" in await read_until(ws, b"SIZE-42")
        await ws.send(b"sleep 1000\n")
        await asyncio.sleep(0.3)
        await ws.send(b"\x03")  # interrupts the sleep: the next command runs at once
        await ws.send(b"echo AFTER-$((6*7))\n")
        assert b"AFTER-42" in await read_until(ws, b"AFTER-42", timeout=5)


async def test_exit_closes_the_socket_and_delete_removes_the_terminal(
    srv: RunningServer,
) -> None:
    cid = await srv.create_conversation()
    tid = await open_terminal(srv, cid)
    async with connect(ws_url(srv, cid, tid), additional_headers=session_cookie(srv.client)) as ws:
        await ws.send(b"exit 0\n")
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4000
    listed = (await srv.client.get(f"/api/conversations/{cid}/terminals")).json()
    assert listed[0]["exited"] and listed[0]["exit_code"] == 0
    deleted = await srv.client.delete(f"/api/conversations/{cid}/terminals/{tid}")
    assert deleted.status_code == 204
    assert (await srv.client.get(f"/api/conversations/{cid}/terminals")).json() == []
    again = await srv.client.delete(f"/api/conversations/{cid}/terminals/{tid}")
    assert again.status_code == 404


async def expect_refused(url: str, headers: dict[str, str], code: int) -> None:
    try:
        async with connect(url, additional_headers=headers) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == code
    except InvalidStatus as exc:  # closed before the handshake: a 403 response
        assert exc.response.status_code == 403


async def test_only_the_owner_attaches_from_the_apps_own_origin(srv: RunningServer) -> None:
    cid = await srv.create_conversation()
    tid = await open_terminal(srv, cid)
    url, owner = ws_url(srv, cid, tid), session_cookie(srv.client)
    await expect_refused(url, {}, 4401)
    evil = {**owner, "Origin": "http://8000-x.preview.localhost:8421"}
    await expect_refused(url, evil, 4403)
    made = await srv.client.post("/api/users", json={"username": "bob", "password": "bob-pw-123"})
    assert made.status_code == 201, made.text
    async with httpx.AsyncClient(base_url=srv.base_url) as bob:
        await log_in(bob, "bob", "bob-pw-123")
        await expect_refused(url, session_cookie(bob), 4404)
        base = f"/api/conversations/{cid}/terminals"
        assert (await bob.get(base)).status_code == 404
        assert (await bob.post(base, json={"cols": 80, "rows": 24})).status_code == 404
        assert (await bob.delete(f"{base}/{tid}")).status_code == 404
    own_origin = {**owner, "Origin": srv.base_url}
    async with connect(url, additional_headers=own_origin) as ws:
        await ws.send(b"echo OK-$((6*7))\n")
        await read_until(ws, b"OK-42")


async def test_a_socket_that_stops_reading_a_flood_is_dropped_with_4008_within_its_byte_bound(
    srv: RunningServer,
) -> None:
    cid = await srv.create_conversation()
    tid = await open_terminal(srv, cid)
    url, headers = ws_url(srv, cid, tid), session_cookie(srv.client)
    # A client that stops reading at the TCP level, with a small receive buffer and no
    # compression (a flood of `yes` would deflate a thousandfold and never back up).
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.connect(("127.0.0.1", int(srv.base_url.rsplit(":", 1)[1])))
    sock.setblocking(False)
    async with connect(url, additional_headers=headers, compression=None, sock=sock) as slow:
        slow.transport.pause_reading()
        await slow.send(b"yes 'flood flood flood flood flood flood flood flood' | head -c 400M\n")
        await asyncio.sleep(3)  # the flood piles up behind this socket
        slow.transport.resume_reading()
        received = 0
        with pytest.raises(ConnectionClosed) as closed:
            async with asyncio.timeout(30):
                while True:
                    received += len(await slow.recv())
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4008
    # It got the scrollback, what was in flight (the server's socket buffer: at most 4 MiB
    # on Linux by default, tcp_wmem) and nothing of the 1 MiB held for it when it was dropped.
    # Before, a dropped socket still got the 1,023 chunks queued for it (4 MiB more here,
    # up to 64 MiB with full-size chunks).
    print(f"a socket that stopped reading got {received:,} bytes before 4008")
    assert received <= SCROLLBACK_BYTES + SUBSCRIBER_BACKLOG_BYTES + 4 * 1024 * 1024
    # The shell lives on; a new socket first gets the scrollback, bounded by bytes.
    async with connect(url, additional_headers=headers, compression=None) as fresh:
        first = await fresh.recv()
        assert isinstance(first, bytes) and 0 < len(first) <= SCROLLBACK_BYTES
        await fresh.send(b"\x03")
        await fresh.send(b"echo CALM-$((6*7))\n")
        await read_until(fresh, b"CALM-42", timeout=30)
