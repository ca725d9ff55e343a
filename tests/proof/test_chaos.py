"""Crash chaos: `kill -9` a real `burrow serve` at random moments, restart it, check it.

Each kill lands at one of seven moments (mid model stream, mid tool, while an approval
waits, during an SSE burst, during a terminal session, mid compaction inside a run, mid
`POST …/compact`), after a random delay. After each restart: every journal gap-free, every
`tool.started`, `run.started` and `approval.requested` closed exactly once, no tool ran
twice (each bash call appends its token to counter files in the workspace, before and
after its sleep), the dead server's sandbox processes, workspace mounts, loop devices and
cgroups all gone (counted from the host's tables, see census.py), `PRAGMA
integrity_check` ok, and the next message works with every user message of the
conversation in its model request (a summary cut short loses none of them).

BURROW_CHAOS_KILLS sets the number of kills (8 by default; `make proof` runs 50),
BURROW_CHAOS_SEED the random seed. The per-kill table is printed (pytest -s shows it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.api.harness import ADMIN_PASSWORD, log_in, serve_process, sse_events
from tests.api.test_compaction import is_summary_call
from tests.fakes.openai_server import (
    MODEL,
    FakeOpenAIServer,
    StreamReply,
    chunk,
    text_reply,
    tool_fragment,
)
from tests.proof import census

KILLS = int(os.environ.get("BURROW_CHAOS_KILLS", "8"))
SEED = int(os.environ.get("BURROW_CHAOS_SEED", str(random.SystemRandom().randrange(1 << 30))))
MOMENTS = ("model stream", "tool", "approval", "sse burst", "terminal", "compaction", "compact now")
# Every summary call streams this slowly (~1.6 s), so a kill can land inside it.
SUMMARY_WORDS, SUMMARY_DELAY = 40, 0.04
# A model that reports this many prompt tokens has filled 86% of the unknown model's
# 128k window, past BURROW_COMPACT_AT's 0.8: the run compacts before its next call.
FULL_CONTEXT = 110_000
REAP_TIMEOUT = 30.0
EVENT_TIMEOUT = 30.0

Event = dict[str, Any]


@dataclass
class Row:
    number: int
    moment: str
    delay: float = 0.0
    before: census.Census | None = None
    after: census.Census | None = None
    repaired: str = ""
    reaped: str = ""
    runtime: Path | None = None  # the dead server's runtime directory, as it recorded it
    reap_seconds: float = 0.0


@dataclass
class Chaos:
    data_dir: Path
    model: FakeOpenAIServer
    client: httpx.AsyncClient
    base: str
    cids: dict[str, str] = field(default_factory=dict)  # moment -> its conversation
    tokens: dict[str, set[str]] = field(default_factory=dict)  # cid -> tokens of its bash calls
    forbidden: set[str] = field(default_factory=set)  # tokens of calls never approved
    calls: int = 0
    summary_seen: asyncio.Event | None = None
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    # What a moment leaves attached to the server; the kill cuts it, then it is let go.
    readers: list[asyncio.Task[None]] = field(default_factory=list)
    sockets: list[ClientConnection] = field(default_factory=list)

    async def let_go(self) -> None:
        for task in self.readers:
            task.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)
        for ws in self.sockets:
            with contextlib.suppress(Exception):
                await ws.close()
        self.readers, self.sockets = [], []

    async def last_seq(self, cid: str) -> int:
        conversation = (await self.client.get(f"/api/conversations/{cid}")).json()
        return int(conversation["last_seq"])

    async def wait_event(self, cid: str, after: int, predicate: Callable[[Event], bool]) -> Event:
        async with asyncio.timeout(EVENT_TIMEOUT):
            async for event in sse_events(self.client, cid, last_event_id=after):
                if predicate(event):
                    return event
        raise AssertionError("the event stream ended")

    def tool_call(self, command: str, prompt_tokens: int = 20) -> StreamReply:
        """A bash call with an id unique across the whole test (journals pair by id)."""
        self.calls += 1
        raw = json.dumps({"command": command})
        fragment = tool_fragment(0, id=f"call_chaos_{self.calls}", name="bash", arguments=raw)
        return StreamReply(
            [
                chunk(role="assistant", content=None),
                chunk(tool_calls=[fragment]),
                chunk(finish_reason="tool_calls"),
                chunk(usage=(prompt_tokens, 9)),
            ]
        )

    def respond(self, body: dict[str, Any]) -> StreamReply | None:
        """Summary calls get a slow summary whenever they come (a restarted run may compact
        first); every other call takes the queue's next reply."""
        if not is_summary_call(body):
            return None
        if (seen := self.summary_seen) is not None:
            self.loop.call_soon_threadsafe(seen.set)
        summary = " ".join(f"summary{i}" for i in range(SUMMARY_WORDS))
        return StreamReply(text_reply(summary).chunks, chunk_delay=SUMMARY_DELAY)

    def expect_summary(self) -> asyncio.Event:
        """Set once the model receives its next summary call (told from its own thread)."""
        self.summary_seen = asyncio.Event()
        return self.summary_seen

    async def turn(self, cid: str, content: str) -> None:
        """One short finished turn, so compaction has an older turn to summarize."""
        self.model.enqueue(text_reply(f"noted {content}"))
        after = await self.last_seq(cid)
        run_id = await send(self, cid, content)
        await self.wait_event(
            cid, after, lambda e: e["type"] == "run.finished" and e["run_id"] == run_id
        )

    def counted(self, cid: str, token: str, seconds: float) -> str:
        """A command that counts itself in the workspace before and after sleeping."""
        self.tokens.setdefault(cid, set()).add(token)
        return (
            f"mkdir -p .chaos && echo {token} >> .chaos/begin && sleep {seconds} "
            f"&& echo {token} >> .chaos/end"
        )


async def model_stream(chaos: Chaos, cid: str, token: str) -> None:
    words = " ".join(f"word{i}" for i in range(80))
    chaos.model.enqueue(StreamReply(text_reply(words).chunks, chunk_delay=0.04))
    after = await chaos.last_seq(cid)
    await send(chaos, cid, token)
    await chaos.wait_event(cid, after, lambda e: e["type"] == "assistant.text.delta")


async def mid_tool(chaos: Chaos, cid: str, token: str) -> None:
    chaos.model.enqueue(chaos.tool_call(chaos.counted(cid, token, 2)), text_reply("done"))
    after = await chaos.last_seq(cid)
    await send(chaos, cid, token)
    await chaos.wait_event(cid, after, lambda e: e["type"] == "tool.started")


async def approval(chaos: Chaos, cid: str, token: str) -> None:
    # `rm -rf` is asked for in the default mode; the token must never reach the counter.
    command = f"rm -rf .chaos/gone-{token}; " + chaos.counted(cid, token, 0)
    chaos.forbidden.add(token)
    chaos.model.enqueue(chaos.tool_call(command), text_reply("done"))
    after = await chaos.last_seq(cid)
    await send(chaos, cid, token)
    await chaos.wait_event(cid, after, lambda e: e["type"] == "approval.requested")


async def sse_burst(chaos: Chaos, cid: str, token: str) -> None:
    words = " ".join(f"burst{i}" for i in range(3000))
    chaos.model.enqueue(StreamReply(text_reply(words).chunks, chunk_delay=0.001))
    after = await chaos.last_seq(cid)
    received = [0] * 4
    bursting = asyncio.Event()  # every reader is in the middle of it

    async def reader(index: int) -> None:
        async for _ in sse_events(chaos.client, cid, last_event_id=after):
            received[index] += 1
            if min(received) >= 20:
                bursting.set()

    chaos.readers = [asyncio.create_task(reader(i)) for i in range(len(received))]
    await send(chaos, cid, token)
    async with asyncio.timeout(EVENT_TIMEOUT):
        await bursting.wait()


async def terminal(chaos: Chaos, cid: str, token: str) -> None:
    response = await chaos.client.post(
        f"/api/conversations/{cid}/terminals", json={"cols": 80, "rows": 24}
    )
    assert response.status_code == 201, response.text
    tid = response.json()["terminal_id"]
    url = f"{chaos.base.replace('http', 'ws', 1)}/api/conversations/{cid}/terminals/{tid}/ws"
    cookie = {"Cookie": f"burrow_session={chaos.client.cookies['burrow_session']}"}
    ws = await connect(url, additional_headers=cookie)
    chaos.sockets.append(ws)
    await ws.send(f"sleep 300 & echo started-{token}\n".encode())
    seen = b""
    async with asyncio.timeout(EVENT_TIMEOUT):
        while f"started-{token}".encode() not in seen.replace(b"echo started", b""):
            message = await ws.recv()
            seen += message if isinstance(message, bytes) else message.encode()


async def compaction(chaos: Chaos, cid: str, token: str) -> None:
    """A run whose model reports a nearly full window: after its tool the run compacts
    before its next call; the kill lands in the summary call."""
    await chaos.turn(cid, f"{token} first")
    full = chaos.tool_call(chaos.counted(cid, token, 0), prompt_tokens=FULL_CONTEXT)
    chaos.model.enqueue(full, text_reply("done"))
    seen = chaos.expect_summary()
    await send(chaos, cid, token)
    async with asyncio.timeout(EVENT_TIMEOUT):
        await seen.wait()


async def compact_now(chaos: Chaos, cid: str, token: str) -> None:
    """`POST …/compact`, killed while the model writes the summary."""
    await chaos.turn(cid, f"{token} first")
    await chaos.turn(cid, f"{token} second")
    seen = chaos.expect_summary()

    async def ask() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the kill cuts the request
            response = await chaos.client.post(f"/api/conversations/{cid}/compact", json={})
            assert response.status_code == 202, response.text  # the kill came after it

    chaos.readers = [asyncio.create_task(ask())]
    async with asyncio.timeout(EVENT_TIMEOUT):
        await seen.wait()


SETUPS: dict[str, Callable[[Chaos, str, str], Awaitable[None]]] = {
    "model stream": model_stream,
    "tool": mid_tool,
    "approval": approval,
    "sse burst": sse_burst,
    "terminal": terminal,
    "compaction": compaction,
    "compact now": compact_now,
}
SUMMARY_SECONDS = SUMMARY_WORDS * SUMMARY_DELAY
DELAYS = {
    "model stream": 1.5,
    "tool": 2.5,
    "approval": 0.5,
    "sse burst": 0.5,
    "terminal": 0.5,
    "compaction": SUMMARY_SECONDS,
    "compact now": SUMMARY_SECONDS,
}


async def send(chaos: Chaos, cid: str, content: str) -> str:
    response = await chaos.client.post(
        f"/api/conversations/{cid}/messages", json={"content": content}
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


async def journal(client: httpx.AsyncClient, cid: str) -> list[Event]:
    events: list[Event] = []
    while True:
        page = (
            await client.get(
                f"/api/conversations/{cid}/events",
                params={"after": len(events), "format": "json"},
            )
        ).json()
        if not page:
            return events
        events += page


def check_journal(events: list[Event]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "seqs have a gap"
    for opened, closed, key in (
        ("tool.started", "tool.finished", "call_id"),
        ("approval.requested", "approval.resolved", "request_id"),
    ):
        starts = Counter(e["data"][key] for e in events if e["type"] == opened)
        ends = Counter(e["data"][key] for e in events if e["type"] == closed)
        assert starts == ends and set(starts.values()) <= {1}, f"{opened} unpaired"
    runs = Counter(e["run_id"] for e in events if e["type"] == "run.started")
    closed_runs = Counter(e["run_id"] for e in events if e["type"] == "run.finished")
    assert runs == closed_runs and set(runs.values()) <= {1}, "a run is not closed once"


def repaired(events: list[Event], since: int) -> str:
    fresh = [e for e in events if e["seq"] > since and "restarted" in str(e["data"])]
    kinds = Counter(e["type"].split(".")[0] for e in fresh)
    return ",".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "-"


def reaped_lines(log: Path, offset: int) -> str:
    """What the restarted server says it reaped (its log since `offset`)."""
    with log.open("rb") as file:
        file.seek(offset)
        text = file.read().decode(errors="replace")
    totals: Counter[str] = Counter()
    took = ""
    for line in text.splitlines():
        if "reaped the leftovers of" in line:
            took = " in " + line.rsplit(" in ", 1)[1]
        if "reaped what a stopped server left" in line:
            for part in line.split(": ", 1)[1].split(", "):
                count, _, what = part.partition(" ")
                if count.isdigit():
                    totals[what.split("(")[0]] += int(count)
    return (" ".join(f"{n} {what}" for what, n in totals.items() if n) or "nothing") + took


async def check_after_restart(chaos: Chaos, row: Row | None, seqs: dict[str, int]) -> None:
    begin = time.monotonic()
    while not (now := census.take(chaos.data_dir)).empty:
        assert time.monotonic() - begin < REAP_TIMEOUT, f"leaked after restart: {now}"
        await asyncio.sleep(0.05)
    notes = []
    for moment, cid in chaos.cids.items():
        events = await journal(chaos.client, cid)
        check_journal(events)
        status = (await chaos.client.get(f"/api/conversations/{cid}")).json()["status"]
        assert status == "idle", f"{moment}: conversation still {status}"
        if row is not None and moment == row.moment:
            notes.append(repaired(events, seqs.get(cid, 0)))
    with contextlib.closing(
        sqlite3.connect(f"file:{chaos.data_dir}/burrow.db?mode=ro", uri=True)
    ) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    if row is not None:
        row.after, row.reap_seconds, row.repaired = now, time.monotonic() - begin, notes[0]
        # The dead server's runtime directory goes when the restarted one takes the lock.
        runtime = row.runtime
        while runtime is not None and runtime.exists():
            assert time.monotonic() - begin < REAP_TIMEOUT, f"runtime dir left: {runtime}"
            await asyncio.sleep(0.05)


async def next_message_works(chaos: Chaos, cid: str, number: int) -> None:
    """A bash call and an answer: the sandbox boots again on the same workspace."""
    chaos.model.enqueue(chaos.tool_call(f"echo next-{number}"), text_reply("ok"))
    after = await chaos.last_seq(cid)
    run_id = await send(chaos, cid, f"next {number}")
    done = await chaos.wait_event(
        cid, after, lambda e: e["type"] == "run.finished" and e["run_id"] == run_id
    )
    assert done["data"]["status"] == "completed", done
    events = await journal(chaos.client, cid)
    outputs = [e["data"]["output"] for e in events if e["type"] == "tool.finished"]
    assert f"next-{number}" in outputs[-1]
    # Nothing the person said is lost, compacted or not: the run's last model request
    # holds every user message verbatim.
    said = [e["data"]["content"] for e in events if e["type"] == "user.message"]
    request = next(b for b in reversed(chaos.model.requests) if not is_summary_call(b))
    sent = [m["content"] for m in request["messages"] if m["role"] == "user"]
    assert [m for m in said if m not in sent] == [], "a user message is missing from the context"
    # No tool ran twice: each token at most once in each counter, never an unapproved one.
    counters = {}
    for name in ("begin", "end"):
        response = await chaos.client.get(
            f"/api/conversations/{cid}/files/content", params={"path": f".chaos/{name}"}
        )
        # 404: no tool wrote it yet. Never a 503: the restarted server's first boot of
        # the workspace must not fail while the dead one's sandbox is still going away.
        assert response.status_code in (200, 404), (response.status_code, response.text)
        counters[name] = (
            Counter(response.text.split()) if response.status_code == 200 else Counter()
        )
    for name, counter in counters.items():
        twice = [t for t, n in counter.items() if n > 1]
        assert not twice, f"tool ran twice: {twice} in .chaos/{name}"
        assert set(counter) <= chaos.tokens.get(cid, set()), f"unknown token in .chaos/{name}"
        assert not set(counter) & chaos.forbidden, "an unapproved command ran"
    assert set(counters["end"]) <= set(counters["begin"])


def print_table(rows: list[Row]) -> None:
    print(f"\nchaos: {len(rows)} kill(s), seed {SEED}; counts are processes/mounts/loops/cgroups")
    print(
        f"{'#':>3}  {'moment':<12} {'after s':>7}  {'before':<9} {'after':<9} {'reap s':>6}  "
        "repaired"
    )
    for r in rows:
        print(
            f"{r.number:>3}  {r.moment:<12} {r.delay:>7.2f}  {r.before!s:<9} {r.after!s:<9} "
            f"{r.reap_seconds:>6.2f}  {r.repaired}; reaped {r.reaped}"
        )
    leaked = sum(1 for r in rows if r.before is not None and not r.before.empty)
    print(f"kills that left something behind: {leaked}; left after the restart: 0 (checked)")


@pytest.mark.timeout(120 + 30 * KILLS)
async def test_kill_9_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    schedule = [MOMENTS[i % len(MOMENTS)] for i in range(KILLS)]
    rng.shuffle(schedule)
    data_dir = tmp_path / "data"
    rows: list[Row] = []
    starts: list[float] = []  # spawn -> healthy: the first start, then each restart
    log = (tmp_path / "serve.log").open("wb")
    try:
        with FakeOpenAIServer() as model:
            env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": model.base_url}
            seqs: dict[str, int] = {}
            chaos: Chaos | None = None
            for number in range(KILLS + 1):
                offset = (tmp_path / "serve.log").stat().st_size
                with serve_process(data_dir, MODEL, env, stderr=log, start_seconds=starts) as (
                    server,
                    base,
                ):
                    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                        await log_in(client, "admin", ADMIN_PASSWORD)
                        if chaos is None:
                            chaos = Chaos(data_dir, model, client, base)
                            model.responder = chaos.respond
                        chaos.client, chaos.base = client, base
                        row = rows[-1] if rows else None
                        await check_after_restart(chaos, row, seqs)
                        if row is not None:
                            log.flush()
                            row.reaped = reaped_lines(tmp_path / "serve.log", offset)
                        if row is not None:
                            await next_message_works(chaos, chaos.cids[row.moment], row.number)
                        if number == KILLS:
                            # A clean stop, too, leaves nothing behind.
                            server.terminate()  # uvicorn shuts down, then re-raises it
                            server.wait(30)
                            break
                        moment = schedule[number]
                        if moment not in chaos.cids:
                            created = await client.post(
                                "/api/conversations", json={"title": moment}
                            )
                            chaos.cids[moment] = created.json()["id"]
                        cid = chaos.cids[moment]
                        seqs[cid] = await chaos.last_seq(cid)
                        await SETUPS[moment](chaos, cid, f"k{number + 1}")
                        row = Row(number + 1, moment, rng.uniform(0, DELAYS[moment]))
                        await asyncio.sleep(row.delay)
                        server.kill()  # SIGKILL: no shutdown code runs
                        server.wait()
                        row.before = census.take(data_dir)
                        recorded = (data_dir / "sandboxes.lock").read_text()
                        row.runtime = Path(recorded) if recorded else None  # no sandbox yet
                        rows.append(row)
                        await chaos.let_go()
                        model.clear()
            # A clean start of the same (migrated) data directory, the yardstick of the
            # restarts after a kill.
            with serve_process(data_dir, MODEL, env, stderr=log, start_seconds=starts) as (
                server,
                _,
            ):
                server.terminate()
                server.wait(30)
    finally:
        log.close()
        print_table(rows)
        print((tmp_path / "serve.log").read_text(errors="replace")[-3000:])
    assert len(rows) == KILLS
    assert census.take(data_dir).empty, "a clean stop left something behind"
    clean, after_kills = starts[-1], sorted(starts[1:-1])
    median = after_kills[len(after_kills) // 2]
    worst = max(after_kills)
    print(f"start -> healthy: clean {clean:.2f} s; after a kill p50 {median:.2f}, max {worst:.2f}")
    assert median <= 2 * clean, f"restarts after a kill: {median:.2f} s; a clean start {clean:.2f}"
