"""Open streams per user (BURROW_MAX_STREAMS_PER_USER): SSE streams and terminal sockets
count together; over the cap is a clear refusal; closing one frees its slot."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from burrow.config import Settings
from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, RunningServer, log_in, running_server, serve_process
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


# A stream lives no longer than the credential it was opened with (api/streams.py).

PASSWORD = "alice-password-1"
ENDED_WITHIN = 5.0  # seconds; before the fix a stream outlived its session indefinitely


class HeldStreams:
    """One client's open event stream and terminal socket, and whether each has ended."""

    def __init__(
        self, chunks: AsyncIterator[bytes], socket: ClientConnection | None = None
    ) -> None:
        self.chunks, self.socket = chunks, socket

    async def sse_ended(self, within: float) -> bool:
        try:
            async with asyncio.timeout(within):
                async for _ in self.chunks:
                    pass  # a heartbeat at most: the stream is idle
            return True
        except TimeoutError:
            return False

    async def socket_closed_with(self, within: float) -> int | None:
        assert self.socket is not None
        try:
            async with asyncio.timeout(within):
                while True:
                    await self.socket.recv()
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else -1
        except TimeoutError:
            return None

    async def socket_answers(self) -> bool:
        assert self.socket is not None
        await self.socket.send(b"echo STILL-$((6*7))\n")
        await read_until(self.socket, b"STILL-42")
        return True


@contextlib.asynccontextmanager
async def held_streams(
    srv: RunningServer, client: httpx.AsyncClient, cid: str, tid: str
) -> AsyncIterator[HeldStreams]:
    async with (
        client.stream("GET", f"/api/conversations/{cid}/events", timeout=None) as response,
        connect(ws_url(srv, cid, tid), additional_headers=session_cookie(client)) as socket,
    ):
        assert response.status_code == 200
        chunks = response.aiter_raw()
        await anext(chunks)  # ": connected": the server holds it
        held = HeldStreams(chunks, socket)
        assert await held.socket_answers()
        yield held


async def _alice(srv: RunningServer) -> str:
    made = await srv.client.post("/api/users", json={"username": "alice", "password": PASSWORD})
    assert made.status_code == 201, made.text
    uid: str = made.json()["id"]
    return uid


@contextlib.asynccontextmanager
async def _logged_in(srv: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as client:
        await log_in(client, "alice", PASSWORD)
        yield client


async def test_logout_ends_that_sessions_streams_and_no_others(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        await _alice(srv)
        async with _logged_in(srv) as here, _logged_in(srv) as there:
            cid = (await here.post("/api/conversations", json={})).json()["id"]
            tid = (await here.post(f"/api/conversations/{cid}/terminals", json={})).json()[
                "terminal_id"
            ]
            async with (
                held_streams(srv, here, cid, tid) as mine,
                held_streams(srv, there, cid, tid) as theirs,
            ):
                assert (await here.post("/api/auth/logout", json={})).status_code == 204
                assert await mine.sse_ended(ENDED_WITHIN)
                assert await mine.socket_closed_with(ENDED_WITHIN) == 4401
                # The other session's streams go on.
                assert not await theirs.sse_ended(0.5)
                assert await theirs.socket_answers()


async def test_a_password_change_ends_the_other_sessions_streams(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        await _alice(srv)
        async with _logged_in(srv) as here, _logged_in(srv) as there:
            token = (await here.post("/api/auth/tokens", json={})).json()["token"]
            cid = (await here.post("/api/conversations", json={})).json()["id"]
            tid = (await here.post(f"/api/conversations/{cid}/terminals", json={})).json()[
                "terminal_id"
            ]
            bearer = {"Authorization": f"Bearer {token}"}
            async with (
                held_streams(srv, here, cid, tid) as mine,
                held_streams(srv, there, cid, tid) as theirs,
                here.stream(
                    "GET", f"/api/conversations/{cid}/events", headers=bearer, timeout=None
                ) as by_token,
            ):
                token_chunks = by_token.aiter_raw()
                await anext(token_chunks)
                changed = await here.post(
                    "/api/me/password", json={"current": PASSWORD, "new": "a-new-password"}
                )
                assert changed.status_code == 204, changed.text
                assert await theirs.sse_ended(ENDED_WITHIN)
                assert await theirs.socket_closed_with(ENDED_WITHIN) == 4401
                # The asking session keeps its streams, and the API token (still valid) its.
                assert not await mine.sse_ended(0.5)
                assert await mine.socket_answers()
                assert not await HeldStreams(token_chunks).sse_ended(0.5)


async def test_disabling_an_account_ends_all_its_streams_a2a_included(tmp_path: Path) -> None:
    model = ScriptedProvider([ScriptedTurn(text="slow " * 300, delay=0.1)])  # ~30 s
    async with running_server(tmp_path, lambda: model) as srv:
        uid = await _alice(srv)
        admins_cid = await srv.create_conversation()
        async with (
            _logged_in(srv) as alice,
            srv.client.stream("GET", f"/api/conversations/{admins_cid}/events") as admins,
        ):
            admins_chunks = admins.aiter_raw()
            await anext(admins_chunks)
            token = (await alice.post("/api/auth/tokens", json={})).json()["token"]
            cid = (await alice.post("/api/conversations", json={})).json()["id"]
            tid = (await alice.post(f"/api/conversations/{cid}/terminals", json={})).json()[
                "terminal_id"
            ]
            rpc = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/stream",
                "params": {
                    "message": {
                        "kind": "message",
                        "role": "user",
                        "messageId": "m1",
                        "parts": [{"kind": "text", "text": "take your time"}],
                    }
                },
            }
            bearer = {"Authorization": f"Bearer {token}"}
            async with (
                held_streams(srv, alice, cid, tid) as held,
                alice.stream("POST", "/a2a", json=rpc, headers=bearer, timeout=None) as task,
            ):
                assert task.status_code == 200
                task_chunks = task.aiter_raw()
                await anext(task_chunks)  # "working"
                changed = await srv.client.patch(f"/api/users/{uid}", json={"disabled": True})
                assert changed.status_code == 200, changed.text
                assert await held.sse_ended(ENDED_WITHIN)
                assert await held.socket_closed_with(ENDED_WITHIN) == 4401
                assert await HeldStreams(task_chunks).sse_ended(ENDED_WITHIN)
            # The administrator's own stream is untouched.
            assert not await HeldStreams(admins_chunks).sse_ended(0.5)


def _open_stream(base: str, cid: str, cookie: str) -> tuple[int, socket.socket]:
    """A raw event stream: its status, and its connection (held until closed)."""
    host, port = base.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=5)
    conn.sendall(
        f"GET /api/conversations/{cid}/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Cookie: burrow_session={cookie}\r\n\r\n".encode()
    )
    seen = b""
    while b"\r\n\r\n" not in seen:
        chunk = conn.recv(4096)  # a server out of descriptors answers nothing: times out
        assert chunk, f"the server closed stream after {seen!r}"
        seen += chunk
    return int(seen.split(b" ", 2)[1]), conn


def test_one_users_streams_stop_at_a_cap_below_the_open_file_limit(tmp_path: Path) -> None:
    """At 1,024 descriptors (soft and hard) the default cap (1,100) would let one user take
    them all: the caps derived from the limit stop them first, and others still get in."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard < 2048:
        pytest.skip(f"the test itself needs more than 1,100 descriptors (ulimit -Hn {hard})")

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    with (
        serve_process(tmp_path, "demo", preexec_fn=low_limit) as (_, base),
        httpx.Client(base_url=base, timeout=10) as admin,
        contextlib.ExitStack() as held,
    ):
        assert admin.post(
            "/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        ).is_success
        cid = admin.post("/api/conversations", json={}).json()["id"]
        cookie = admin.cookies["burrow_session"]
        opened = 0
        for _ in range(1100):
            status, conn = _open_stream(base, cid, cookie)
            held.callback(conn.close)
            if status == 429:
                break
            assert status == 200
            opened += 1
        else:
            raise AssertionError("1,100 streams of one user were all admitted")
        print(f"one user's streams admitted at a 1,024-descriptor limit: {opened}")
        assert opened < 1024 - 256
        assert httpx.get(f"{base}/api/health", timeout=5).status_code == 200
        # Another user still streams.
        made = admin.post("/api/users", json={"username": "bob", "password": "bob-pw-123"})
        assert made.status_code == 201, made.text
        with httpx.Client(base_url=base, timeout=10) as bob:
            assert bob.post(
                "/api/auth/login", json={"username": "bob", "password": "bob-pw-123"}
            ).is_success
            bobs = bob.post("/api/conversations", json={}).json()["id"]
            status, conn = _open_stream(base, bobs, bob.cookies["burrow_session"])
            held.callback(conn.close)
            assert status == 200
