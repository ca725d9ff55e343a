"""Event commit -> delivered to each SSE client, for 1, 100 and 1,000 clients of one
conversation (DESIGN.md §7: p50 <= 5 ms, and with 1,000 clients p99 <= 20 ms).

The clock starts right after the database commit: the bench wraps the store's transaction
so the time is taken on the database thread as the commit returns, before the journal
fans the event out. It stops when a client has read the event's complete SSE frame. The
clients are real HTTP/1.1 SSE connections to a real uvicorn server on 127.0.0.1, held by a
separate process that reads them with epoll and a byte-level parser (no asyncio, no HTTP
library), so the clients cost as little as a client can. Both processes read the same
system-wide monotonic clock (time.perf_counter_ns is CLOCK_MONOTONIC on Linux).

Baseline, in the same run: the raw-socket floor, a bare asyncio server that accepts the
same clients in the same client process and writes the same bytes (the same chunked SSE
frame) to every socket in a loop, its clock starting just before the loop. The ratio is
what Burrow's commit -> fan-out -> write path adds over pushing the bytes at all.

One event at a time: the next is pushed once every client has the previous one, Burrow
and the floor taking turns (both servers live in this process, each with its own client
process), so a noisy neighbour slows both alike and the ratio stays meaningful.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import select
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import p50, pct, report, serve_in_process
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal.events import ToolOutput, make
from burrow.store.database import Database
from burrow.store.records import Event

WARMUP = 10
SAMPLES = {1: 300, 100: 300, 1000: 200}
# A complete frame: the seq is known once its data line and the blank line have arrived.
FRAME = re.compile(rb"id: (\d+)\nevent: [^\n]*\ndata: [^\n]*\n\n")


# ---- the client process -------------------------------------------------------------


def attach(port: int, path: str, cookie: str) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: burrow_session={cookie}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    buf = b""
    while b": connected\n\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"127.0.0.1:{port} closed before the stream started: {buf[:300]!r}")
        buf += chunk
    sock.setblocking(False)
    return sock, buf.split(b": connected\n\n", 1)[1]


def clients(port: int, path: str, count: int, cookie: str, out: str) -> None:
    """Hold `count` SSE clients; print each seq once every client has read it; on a line
    on stdin, write every arrival time (ns, per seq) to `out` and exit."""
    socks = [attach(port, path, cookie) for _ in range(count)]
    poller = select.epoll()
    pending: dict[int, bytes] = {}
    for sock, rest in socks:
        poller.register(sock.fileno(), select.EPOLLIN)
        pending[sock.fileno()] = rest
    poller.register(sys.stdin.fileno(), select.EPOLLIN)
    arrivals: dict[int, list[int]] = {}
    stdin = sys.stdin.fileno()
    print("attached", flush=True)
    while True:
        for fd, _ in poller.poll():
            if fd == stdin:
                Path(out).write_text(json.dumps(arrivals))
                return
            data = os.read(fd, 65536)
            now = time.perf_counter_ns()
            if not data:
                raise RuntimeError("the server closed a stream")
            buf = pending[fd] + data
            end = 0
            for m in FRAME.finditer(buf):
                seq = int(m.group(1))
                got = arrivals.setdefault(seq, [])
                got.append(now)
                if len(got) == count:
                    os.write(1, f"{seq}\n".encode())
                end = m.end()
            pending[fd] = buf[end:]


# ---- the server side ------------------------------------------------------------------


def clock_commits(db: Database, stamps: list[int]) -> None:
    """Wrap the SQLite transaction so `stamps` gets the time right after each commit, on
    the database thread. Bench-only; mirrors Database.run's SQLite path."""
    engine, thread = db._sync_engine, db._thread
    assert engine is not None and thread is not None, "the bench runs on SQLite"

    async def run(fn: Callable[[Any], Any]) -> Any:
        def in_thread() -> Any:
            with engine.begin() as conn:
                result = fn(conn)
            stamps.append(time.perf_counter_ns())  # committed: the clock starts here
            return result

        return await asyncio.get_running_loop().run_in_executor(thread, in_thread)

    db.run = run  # type: ignore[method-assign]


class Clients:
    """The client process, driven line by line."""

    def __init__(self, proc: asyncio.subprocess.Process, out: Path) -> None:
        self.proc, self.out = proc, out

    @classmethod
    async def start(cls, port: int, path: str, count: int, cookie: str, out: Path) -> Clients:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--clients-of",
            str(port),
            path,
            str(count),
            cookie,
            str(out),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        self = cls(proc, out)
        assert (await self.line(120)) == "attached"
        return self

    async def line(self, timeout: float = 30) -> str:
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            raise RuntimeError("the client process ended early")
        return raw.decode().strip()

    async def all_have(self, seq: int) -> None:
        while int(await self.line()) < seq:
            pass

    async def arrivals(self) -> dict[int, list[int]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"q\n")
        await self.proc.stdin.drain()
        await asyncio.wait_for(self.proc.wait(), 60)
        return {int(k): v for k, v in json.loads(self.out.read_text()).items()}


def latencies(commits: dict[int, int], arrivals: dict[int, list[int]]) -> list[float]:
    """Commit -> each client, in ms, for the measured (non-warm-up) seqs."""
    return [
        (t - commits[seq]) / 1e6 for seq, times in arrivals.items() if seq in commits for t in times
    ]


# One side of the comparison: pushes event `i` and answers its seq and commit time (ns).
Push = Callable[[int], Awaitable[tuple[int, int]]]


@contextlib.asynccontextmanager
async def burrow_side(count: int, tmp: Path) -> AsyncIterator[tuple[Push, Clients]]:
    async with serve_in_process(tmp, lambda: ScriptedProvider([]), connections=10) as (
        base,
        svc,
        client,
    ):
        stamps: list[int] = []
        clock_commits(svc.db, stamps)
        cid = (await client.post("/api/conversations", json={})).json()["id"]
        port = int(base.rsplit(":", 1)[1])
        cookie = client.cookies["burrow_session"]
        crowd = await Clients.start(
            port, f"/api/conversations/{cid}/events", count, cookie, tmp / "burrow.json"
        )

        async def push(i: int) -> tuple[int, int]:
            [event] = await svc.journal.append(
                cid, make(ToolOutput(call_id="c", stream="stdout", text=f"{i}\n"))
            )
            return event.seq, stamps[-1]

        yield push, crowd


def chunk(frame: bytes) -> bytes:
    """`frame` as one HTTP/1.1 chunk, as uvicorn writes a streamed body."""
    return b"%x\r\n%s\r\n" % (len(frame), frame)


TS = "2026-11-30T00:00:00.000Z"
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


@contextlib.asynccontextmanager
async def floor_side(count: int, tmp: Path) -> AsyncIterator[tuple[Push, Clients]]:
    """The same clients and bytes, pushed by a bare asyncio server: the floor."""
    transports: list[asyncio.Transport] = []

    class Accept(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            if b"\r\n\r\n" in data:
                self.transport.write(SSE_HEAD + chunk(b": connected\n\n"))
                transports.append(self.transport)

    # Port 0: the kernel's pick, so no other session's server can take it meanwhile.
    server = await asyncio.get_running_loop().create_server(Accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        crowd = await Clients.start(port, "/events", count, "-", tmp / "floor.json")

        async def push(i: int) -> tuple[int, int]:
            text = json.dumps({"call_id": "c", "stream": "stdout", "text": f"{i}\n"})
            frame = chunk(Event("c", i + 1, "tool.output", TS, None, text).sse_frame)
            start = time.perf_counter_ns()
            for transport in transports:
                transport.write(frame)
            return i + 1, start

        yield push, crowd
    finally:
        server.close()


async def measure(count: int) -> None:
    """Burrow and the floor side by side, taking turns event by event, so that whatever
    else the machine is doing falls on both alike."""
    samples = SAMPLES.get(count, 200)
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            burrow_side(count, Path(tmp)) as (ours_push, ours_crowd),
            floor_side(count, Path(tmp)) as (floor_push, floor_crowd),
        ):
            commits: dict[str, dict[int, int]] = {"ours": {}, "floor": {}}
            for i in range(WARMUP + samples):
                for side, push, crowd in (
                    ("ours", ours_push, ours_crowd),
                    ("floor", floor_push, floor_crowd),
                ):
                    seq, committed = await push(i)
                    if i >= WARMUP:
                        commits[side][seq] = committed
                    await crowd.all_have(seq)
            ours = latencies(commits["ours"], await ours_crowd.arrivals())
            floor = latencies(commits["floor"], await floor_crowd.arrivals())
    for name, ours_q, floor_q, target in (
        ("p50", p50(ours), p50(floor), "<= 5 ms"),
        ("p99", pct(ours, 0.99), pct(floor, 0.99), "<= 20 ms at 1,000 clients"),
    ):
        report(
            f"SSE commit->client {name}, {count} clients",
            ours_q,
            "ms",
            f"raw-socket floor {name} (bare asyncio server writing the same bytes)",
            floor_q,
            target,
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, nargs="*", default=[1, 100, 1000])
    parser.add_argument("--clients-of", nargs=5, metavar=("PORT", "PATH", "N", "COOKIE", "OUT"))
    args = parser.parse_args()
    if args.clients_of:
        port, path, n, cookie, out = args.clients_of
        clients(int(port), path, int(n), cookie, out)
    else:
        for n in args.clients:
            asyncio.run(measure(n))
