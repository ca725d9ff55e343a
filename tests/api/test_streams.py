"""Open streams per user (BURROW_MAX_STREAMS_PER_USER): SSE streams and terminal sockets
count together; over the cap is a clear refusal; closing one frees its slot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from burrow.config import Settings
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, log_in, running_server
from tests.api.test_terminals import open_terminal, read_until, session_cookie, ws_url


@contextlib.asynccontextmanager
async def sse(client: httpx.AsyncClient, cid: str) -> AsyncIterator[httpx.Response]:
    """An open event stream (its first bytes read, so the server holds it)."""
    async with client.stream("GET", f"/api/conversations/{cid}/events", timeout=30) as response:
        chunks = response.aiter_raw()  # kept: a dropped iterator closes the response
        if response.status_code == 200:
            await anext(chunks)
        yield response


async def eventually_admitted(srv: RunningServer, cid: str) -> None:
    """A closed stream's slot frees once the server sees the disconnect: soon."""
    for _ in range(100):
        async with sse(srv.client, cid) as response:
            if response.status_code == 200:
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the closed stream's slot was never freed")


async def refused_socket(url: str, headers: dict[str, str]) -> tuple[int, str]:
    async with connect(url, additional_headers=headers) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code, closed.value.rcvd.reason


async def test_streams_over_the_cap_are_refused_and_closing_frees_them(tmp_path: Path) -> None:
    async with running_server(
        tmp_path, lambda: ScriptedProvider([]), max_streams_per_user=3
    ) as srv:
        cid = await srv.create_conversation()
        tid = await open_terminal(srv, cid)
        url, cookie = ws_url(srv, cid, tid), session_cookie(srv.client)
        async with contextlib.AsyncExitStack() as held:
            first = await held.enter_async_context(sse(srv.client, cid))
            second = await held.enter_async_context(sse(srv.client, cid))
            socket: ClientConnection = await held.enter_async_context(
                connect(url, additional_headers=cookie)
            )
            assert first.status_code == second.status_code == 200
            await socket.send(b"echo HELD-$((6*7))\n")  # answered: the server holds it
            await read_until(socket, b"HELD-42")
            # The fourth of either kind is refused, clearly.
            async with sse(srv.client, cid) as fourth:
                assert fourth.status_code == 429
                error = (await fourth.aread()).decode()
                assert "too_many_streams" in error and "BURROW_MAX_STREAMS_PER_USER" in error
                assert fourth.headers["retry-after"]
            code, reason = await refused_socket(url, cookie)
            assert code == 4429 and "BURROW_MAX_STREAMS_PER_USER=3" in reason
            # A page of events is not a stream: still served.
            page = await srv.client.get(
                f"/api/conversations/{cid}/events", params={"format": "json"}
            )
            assert page.status_code == 200
            # The cap is per user: another account streams as usual.
            made = await srv.client.post(
                "/api/users", json={"username": "bob", "password": "bob-pw-123"}
            )
            assert made.status_code == 201, made.text
            async with httpx.AsyncClient(base_url=srv.base_url) as bob:
                await log_in(bob, "bob", "bob-pw-123")
                bob_cid = (await bob.post("/api/conversations", json={})).json()["id"]
                async with sse(bob, bob_cid) as bobs:
                    assert bobs.status_code == 200

            # Closing the terminal socket frees its slot: a new socket gets in (the two
            # streams still open).
            await socket.close()
            for _ in range(100):
                async with connect(url, additional_headers=cookie) as again:
                    await again.send(b"echo BACK-$((6*7))\n")
                    with contextlib.suppress(ConnectionClosed):
                        await read_until(again, b"BACK-42")
                        break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the closed socket's slot was never freed")
        # And the SSE streams closed with the stack freed theirs: three fit again.
        async with contextlib.AsyncExitStack() as held:
            for _ in range(2):
                await eventually_admitted(srv, cid)
                await held.enter_async_context(sse(srv.client, cid))
            await eventually_admitted(srv, cid)


def test_the_default_cap_admits_a_thousand_clients_on_one_conversation() -> None:
    assert Settings().max_streams_per_user > 1000  # DESIGN §7's 1,000 SSE clients, plus one
