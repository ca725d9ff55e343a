"""The fan-out's direct write (burrow/api/direct_write.py): under uvicorn, a caught-up
client's live events go straight to its connection, past the app's ASGI `send` chain; a
client that stops reading falls back to its own task, is dropped, and resumes exactly,
while the clients beside it get every event once and in order."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal.events import ToolOutput, make
from tests.api.harness import RunningServer, running_server, sse_events
from tests.proof.test_slow_clients import complete_frames, dechunk, open_stalled_sse, read_to_end


class FramesThroughSend:
    """Counts the SSE event frames that pass through the app's ASGI `send` chain."""

    frames = 0

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counting(message: Message) -> None:
            if message["type"] == "http.response.body":
                FramesThroughSend.frames += message.get("body", b"").count(b"\nevent: ")
            await send(message)

        await self.app(scope, receive, counting)


async def append_output(srv: RunningServer, cid: str, text: str) -> int:
    [event] = await srv.services.journal.append(
        cid, make(ToolOutput(call_id="c", stream="stdout", text=text))
    )
    return event.seq


async def read_seqs(
    client: httpx.AsyncClient,
    cid: str,
    last: int,
    after: int = 0,
    first: asyncio.Event | None = None,
) -> list[int]:
    """The seqs of the stream up to `last`; `first` is set once one has arrived."""
    seqs = []
    async for event in sse_events(client, cid, after or None):
        seqs.append(event["seq"])
        if first is not None:
            first.set()
        if event["seq"] == last:
            return seqs
    raise AssertionError("the stream ended early")


async def test_live_events_reach_caught_up_clients_past_the_asgi_send_chain(
    tmp_path: Path,
) -> None:
    FramesThroughSend.frames = 0
    async with running_server(
        tmp_path, lambda: ScriptedProvider([]), middleware=FramesThroughSend
    ) as srv:
        cid = await srv.create_conversation()
        total = 101
        firsts = [asyncio.Event() for _ in range(3)]
        readers = [
            asyncio.create_task(read_seqs(srv.client, cid, total, first=first)) for first in firsts
        ]
        # A first event, written by whichever path; once every reader has it, each one
        # waits caught up, and the rest can only go the direct way.
        await append_output(srv, cid, "probe\n")
        async with asyncio.timeout(10):
            for first in firsts:
                await first.wait()
        await asyncio.sleep(0.2)
        through_send = FramesThroughSend.frames
        for i in range(total - 1):
            await append_output(srv, cid, f"{i}\n")
        async with asyncio.timeout(20):
            results = await asyncio.gather(*readers)
    assert all(seqs == list(range(1, total + 1)) for seqs in results)
    assert FramesThroughSend.frames == through_send, "live events took the ASGI send chain"


async def test_a_stalled_client_is_dropped_while_its_neighbours_get_every_event(
    tmp_path: Path,
) -> None:
    stall = 1.0
    async with running_server(
        tmp_path, lambda: ScriptedProvider([]), stream_stall_seconds=stall
    ) as srv:
        cid = await srv.create_conversation()
        port = int(srv.base_url.rsplit(":", 1)[1])
        cookie = srv.client.cookies["burrow_session"]
        stalled = await asyncio.to_thread(open_stalled_sse, port, cookie, cid, 0)
        # 6.4 MB: more than the stalled socket's kernel buffers (tcp_wmem: up to 4 MiB)
        # and the transport's high-water mark, so its writes back up for real.
        total, text = 400, "x" * 16_000 + "\n"
        readers = [asyncio.create_task(read_seqs(srv.client, cid, total)) for _ in range(4)]
        started = time.monotonic()
        for _ in range(total):
            await append_output(srv, cid, text)
        async with asyncio.timeout(30):
            results = await asyncio.gather(*readers)
        readers_seconds = time.monotonic() - started
        assert all(seqs == list(range(1, total + 1)) for seqs in results)
        assert readers_seconds < 20, f"the readers waited on the stalled client: {readers_seconds}"

        await asyncio.sleep(stall * 2)
        raw, closed = await asyncio.to_thread(read_to_end, stalled, stall + 20)
        stalled.close()
        assert closed, f"the server kept a stalled event stream open ({len(raw):,} bytes read)"
        got = [e["seq"] for e in complete_frames(dechunk(raw))]
        assert got == list(range(1, len(got) + 1))
        assert len(got) < total, "the stream was never stalled"
        # It resumes from its last complete event: the rest, each once, in order.
        async with asyncio.timeout(30):
            rest = await read_seqs(srv.client, cid, total, after=got[-1] if got else 0)
        assert rest == list(range(len(got) + 1, total + 1))
