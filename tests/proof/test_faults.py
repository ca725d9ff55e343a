"""Faults other than a crash (issue 13, item 1): each one real, each a clear error to the
user, and nothing the server acknowledged lost.

- The sandbox's agent is killed (SIGKILL, from the host) in the middle of a tool call.
- Another process holds the database (`BEGIN EXCLUSIVE`) longer than the busy timeout.
- The disk under the data directory fills up (the data directory is a small tmpfs).
- The sandbox cannot boot: its workspace image was corrupted while it hibernated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.api.harness import ADMIN_PASSWORD, log_in, serve_process, sse_events
from tests.api.test_output_bounds import until_idle
from tests.proof.test_slow_clients import all_events
from tests.sandbox.harness import guest_of, host_pids

Event = dict[str, Any]


def assert_journal_whole(events: list[Event]) -> None:
    """Gap-free; every tool call and run closed exactly once."""
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for opened, closing in (("tool.started", "tool.finished"), ("run.started", "run.finished")):
        key = "call_id" if opened.startswith("tool") else "run_id"

        def ids(kind: str, key: str = key) -> list[str]:
            return [e["data"].get(key) or e.get(key) for e in events if e["type"] == kind]

        assert sorted(ids(opened)) == sorted(ids(closing)), (opened, closing)
        assert len(set(ids(closing))) == len(ids(closing))


@dataclass
class FaultedRun:
    events: list[Event] = field(default_factory=list)  # the journal once the faulted run ended
    seen: list[Event] = field(default_factory=list)  # what a watcher was sent live


@contextlib.asynccontextmanager
async def a_fault_mid_run(client: httpx.AsyncClient, cid: str) -> AsyncIterator[FaultedRun]:
    """Send "1" and yield once its answer streams: the block injects the fault. Then wait for
    that run to end, send "2" and check that nothing was lost: the journal whole, the faulted
    run's events unchanged by the next run, and every event sent live in the journal."""
    run = FaultedRun()
    watching = asyncio.create_task(watch(client, cid, run.seen))
    sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": "1"})
    assert sent.status_code == 202, sent.text
    async with asyncio.timeout(30):
        while not any(e["type"] == "assistant.text.delta" for e in run.seen):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    yield run
    await until_idle(client, cid)
    watching.cancel()
    run.events = await all_events(client, cid, 0)
    sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": "2"})
    assert sent.status_code == 202, sent.text
    await until_idle(client, cid)
    after = await all_events(client, cid, 0)
    assert_journal_whole(after)
    assert after[: len(run.events)] == run.events
    assert run.seen == run.events[: len(run.seen)], "an event sent live is not in the journal"


async def test_the_agent_killed_mid_call_fails_the_call_clearly_and_the_next_works(
    tmp_path: Path,
) -> None:
    duration = f"1000.{secrets.randbelow(10**6):06d}"  # tells this sleep from any other
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "bash", "arguments": {"command": f"sleep {duration}"}}]},
                {"text": "the call failed"},
                {"tool_calls": [{"name": "bash", "arguments": {"command": "echo alive-$((6*7))"}}]},
                {"text": "done"},
            ]
        )
    )
    env = {"BURROW_SANDBOX_DISK_MB": "0"}  # no workspace image: faster boots
    with serve_process(tmp_path / "data", f"scripted:{script}", env) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": "go"})
            assert sent.status_code == 202, sent.text
            marker = b"sleep\0" + duration.encode()
            async with asyncio.timeout(60):
                while not host_pids(marker):  # noqa: ASYNC110 (polling the host's /proc)
                    await asyncio.sleep(0.05)
            _, agent = guest_of(marker)
            os.kill(agent, signal.SIGKILL)
            await until_idle(client, cid)

            sent = await client.post(
                f"/api/conversations/{cid}/messages", json={"content": "again"}
            )
            assert sent.status_code == 202, sent.text
            await until_idle(client, cid)
            events = await all_events(client, cid, 0)

    assert_journal_whole(events)
    finished = [e["data"] for e in events if e["type"] == "tool.finished"]
    killed, alive = finished
    print(f"\nthe killed call finished with: {killed}")
    assert killed["is_error"] and "the sandbox agent died" in killed["output"]
    assert "alive-42" in alive["output"] and alive["exit_code"] == 0


BUSY_TIMEOUT = 2.0  # the server's SQLite busy timeout in this test (`?timeout=` in the URL)


async def test_a_database_locked_by_another_process_is_a_clear_503_and_loses_nothing(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "first"}, {"text": "second"}]))
    data = tmp_path / "data"
    url = f"sqlite+aiosqlite:///{data / 'burrow.db'}?timeout={BUSY_TIMEOUT}"
    env = {"BURROW_DATABASE_URL": url}
    with serve_process(data, f"scripted:{script}", env) as (server, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": "1"})
            assert sent.status_code == 202, sent.text
            await until_idle(client, cid)
            before = await all_events(client, cid, 0)

            # Another process takes the database for writing, for longer than the timeout.
            held, release = threading.Event(), threading.Event()
            locker = threading.Thread(target=hold_exclusive, args=(data, held, release))
            locker.start()
            try:
                held.wait(10)
                began = time.monotonic()
                refused = await client.post(
                    f"/api/conversations/{cid}/messages", json={"content": "2"}
                )
                waited = time.monotonic() - began
                # Reads go on (WAL): the conversation and its journal are served.
                listed = await client.get(f"/api/conversations/{cid}")
                during = await all_events(client, cid, 0)
            finally:
                release.set()
                locker.join(10)
            print(f"\nlocked: {refused.status_code} after {waited:.1f} s: {refused.text}")
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "database_busy"
            assert "another process" in refused.json()["error"]["message"]
            assert refused.headers["retry-after"]
            assert listed.status_code == 200 and during == before

            # Released: the same message goes through, and nothing acknowledged is missing.
            sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": "2"})
            assert sent.status_code == 202, sent.text
            await until_idle(client, cid)
            after = await all_events(client, cid, 0)
            assert server.poll() is None
    assert after[: len(before)] == before
    assert_journal_whole(after)
    assert [e["data"]["content"] for e in after if e["type"] == "user.message"] == ["1", "2"]


async def test_a_database_locked_mid_run_ends_the_run_clearly_and_keeps_what_was_sent(
    tmp_path: Path,
) -> None:
    words = " ".join(f"word{i}" for i in range(400))
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": words, "delay": 0.02}, {"text": "after"}]))
    data = tmp_path / "data"
    url = f"sqlite+aiosqlite:///{data / 'burrow.db'}?timeout={BUSY_TIMEOUT}"
    with serve_process(data, f"scripted:{script}", {"BURROW_DATABASE_URL": url}) as (_, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            async with a_fault_mid_run(client, cid) as run:
                held, release = threading.Event(), threading.Event()
                locker = threading.Thread(target=hold_exclusive, args=(data, held, release))
                locker.start()
                held.wait(10)
                await asyncio.sleep(BUSY_TIMEOUT * 2)
                release.set()
                locker.join(10)
    [first, *_] = [e for e in run.events if e["type"] == "run.finished"]
    print(f"\nlocked mid-run: {first['data']}")
    assert first["data"]["status"] == "failed"
    assert first["data"]["error"].startswith("The database is locked by another process")


async def watch(client: httpx.AsyncClient, cid: str, into: list[Event]) -> None:
    async for event in sse_events(client, cid):
        into.append(event)


def hold_exclusive(data: Path, held: threading.Event, release: threading.Event) -> None:
    connection = sqlite3.connect(data / "burrow.db", isolation_level=None)
    try:
        connection.execute("BEGIN EXCLUSIVE")
        held.set()
        release.wait(BUSY_TIMEOUT * 10)
        connection.execute("ROLLBACK")
    finally:
        connection.close()


@contextlib.contextmanager
def small_disk(path: Path, megabytes: int) -> Iterator[Path]:
    """A tmpfs of `megabytes` at `path`: a disk that can really fill up."""
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", path], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], check=False)


def fill(disk: Path) -> Path:
    """Write zeros to `disk` until it is full; the file that did it."""
    filler = disk / "filler"
    with filler.open("wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


async def test_a_full_disk_is_a_clear_507_the_server_stays_up_and_loses_nothing(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": f"answer {i}"} for i in range(40)]))
    env = {"BURROW_SANDBOX_DISK_MB": "0"}
    with (
        small_disk(tmp_path / "data", 32) as data,
        serve_process(data, f"scripted:{script}", env) as (server, base),
    ):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            filler = fill(data)
            acknowledged, refused = [], []
            for i in range(20):  # pages SQLite already holds may take a few more writes
                content = f"message {i} " + "x" * 20000
                sent = await client.post(
                    f"/api/conversations/{cid}/messages", json={"content": content}
                )
                if sent.status_code == 202:
                    acknowledged.append(content)
                    await until_idle(client, cid)
                else:
                    refused.append(sent)
                    break
            assert refused, "the full disk never refused a write"
            error = refused[0].json()["error"]
            print(f"\ndisk full: {refused[0].status_code} after {len(acknowledged)} taken: {error}")
            assert refused[0].status_code == 507 and error["code"] == "storage_full"
            assert "disk under the data directory is full" in error["message"]
            assert (await client.get("/api/health")).status_code == 200
            assert server.poll() is None

            filler.unlink()  # space again: the same message goes through
            sent = await client.post(
                f"/api/conversations/{cid}/messages", json={"content": "after"}
            )
            assert sent.status_code == 202, sent.text
            await until_idle(client, cid)
            events = await all_events(client, cid, 0)
    assert_journal_whole(events)
    contents = [e["data"]["content"] for e in events if e["type"] == "user.message"]
    assert contents == [*acknowledged, "after"]


async def test_a_sandbox_that_cannot_boot_fails_the_call_clearly_and_keeps_the_journal(
    tmp_path: Path,
) -> None:
    calls = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo kept > note"}}]},
        {"text": "written"},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "cat note"}}]},
        {"text": "could not read it"},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(calls))
    data = tmp_path / "data"
    env = {"BURROW_SANDBOX_DISK_MB": "64"}
    with serve_process(data, f"scripted:{script}", env) as (server, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            await client.post(f"/api/conversations/{cid}/messages", json={"content": "write"})
            await until_idle(client, cid)
        server.terminate()  # a clean shutdown unmounts the workspace
        server.wait(30)
    [image] = (data / "workspaces").glob("*.img")
    with image.open("r+b") as f:  # while the server was down: the file system's start, gone
        f.write(b"\0" * (1 << 20))

    with serve_process(data, f"scripted:{script}", env) as (server, base):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            sent = await client.post(f"/api/conversations/{cid}/messages", json={"content": "read"})
            assert sent.status_code == 202, sent.text
            await until_idle(client, cid)
            sandbox = (await client.get(f"/api/conversations/{cid}/sandbox")).json()
            events = await all_events(client, cid, 0)
            assert (await client.get("/api/health")).status_code == 200
            assert server.poll() is None
    assert_journal_whole(events)
    first, second = [e["data"] for e in events if e["type"] == "tool.finished"]
    print(f"\nboot failed: {second['output']}; sandbox: {sandbox}")
    assert not first["is_error"] and second["is_error"]
    assert "mount" in second["output"].lower()
    assert sandbox["status"] == "failed"


async def test_a_disk_filling_mid_run_ends_the_run_clearly_once_there_is_space(
    tmp_path: Path,
) -> None:
    words = " ".join(f"word{i}" for i in range(400))
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": words, "delay": 0.02}, {"text": "after"}]))
    env = {"BURROW_SANDBOX_DISK_MB": "0"}
    with (
        small_disk(tmp_path / "data", 32) as data,
        serve_process(data, f"scripted:{script}", env) as (server, base),
    ):
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await log_in(client, "admin", ADMIN_PASSWORD)
            cid = (await client.post("/api/conversations", json={})).json()["id"]
            async with a_fault_mid_run(client, cid) as run:
                filler = fill(data)
                await asyncio.sleep(3)
                assert (await client.get("/api/health")).status_code == 200
                assert server.poll() is None
                filler.unlink()
    [first, *_] = [e for e in run.events if e["type"] == "run.finished"]
    print(f"\ndisk full mid-run: {first['data']}")
