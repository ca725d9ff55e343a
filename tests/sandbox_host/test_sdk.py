"""The stock e2b SDK (unmodified, from PyPI) drives a real `burrow sandbox-host`."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from collections.abc import AsyncIterator
from importlib.metadata import distribution
from pathlib import Path

import httpx
import pytest
from e2b import (
    AsyncSandbox,
    AsyncSandboxPaginator,
    CommandExitException,
    PtySize,
    Sandbox,
    SandboxInfo,
    SandboxQuery,
    TimeoutException,
)

from tests.sandbox_host.harness import API_KEY, Host

pytestmark = pytest.mark.timeout(60)


async def test_create_run_write_read_kill(sdk: Host) -> None:
    sandbox = await AsyncSandbox.create()
    try:
        result = await sandbox.commands.run("echo hi; echo oops >&2; pwd")
        assert (result.stdout, result.stderr, result.exit_code) == ("hi\n/home/user\n", "oops\n", 0)

        info = await sandbox.files.write("/home/user/notes/a.txt", "hello file")
        assert info.path == "/home/user/notes/a.txt"
        assert await sandbox.files.read("notes/a.txt") == "hello file"
        assert (await sandbox.commands.run("cat notes/a.txt")).stdout == "hello file"
        shell = await sandbox.commands.run("echo $HOME; cat /home/user/notes/a.txt")
        assert shell.stdout == "/home/user\nhello file"  # E2B's home, for the shell too
        # The sandbox's own root (root's: E2B's `user` may not write /opt, tests/test_users.py)
        await sandbox.commands.run("echo system > /opt/x.txt", user="root")
        assert await sandbox.files.read("/opt/x.txt") == "system\n"
        binary = bytes(range(256)) * 4096  # 1 MiB and more: read back in pieces
        await sandbox.files.write("blob.bin", binary)
        assert bytes(await sandbox.files.read("blob.bin", format="bytes")) == binary

        listed = [s.sandbox_id async for s in _all(AsyncSandbox.list())]
        assert sandbox.sandbox_id in listed
        assert (await sandbox.get_info()).state.value == "running"
    finally:
        await sandbox.kill()
    assert sandbox.sandbox_id not in [s.sandbox_id async for s in _all(AsyncSandbox.list())]


async def test_a_command_cut_off_by_a_kill_is_not_an_exit(sdk: Host) -> None:
    """The sandbox killed under a running command: its stream is dropped as a VM's would
    be, and the SDK (finding the sandbox gone) raises a TimeoutException, not an exit."""
    sandbox = await AsyncSandbox.create()
    command = await sandbox.commands.run("sleep 60", background=True)
    await sandbox.kill()
    with pytest.raises(TimeoutException):
        await asyncio.wait_for(command.wait(), 20)


async def test_listing_pages_orders_and_filters(sdk: Host) -> None:
    label = {"suite": f"list-{time.monotonic_ns()}"}
    made = [await AsyncSandbox.create(metadata=label) for _ in range(3)]
    try:
        query = SandboxQuery(metadata=label)
        pages = AsyncSandbox.list(query=query, limit=2)
        first = await pages.next_items()
        assert pages.has_next and pages.next_token
        second = await pages.next_items()
        assert not pages.has_next
        newest_first = [s.sandbox_id for s in made][::-1]
        assert [s.sandbox_id for s in first + second] == newest_first
        oldest_first = await AsyncSandbox.list(query=query, order="asc").next_items()
        assert [s.sandbox_id for s in oldest_first] == newest_first[::-1]
        started = (await made[1].get_info()).started_at
        later = await AsyncSandbox.list(
            query=SandboxQuery(metadata=label, started_after=started)
        ).next_items()
        assert {s.sandbox_id for s in later} == {made[1].sandbox_id, made[2].sandbox_id}
        none = await AsyncSandbox.list(
            query=SandboxQuery(metadata=label, template="other")
        ).next_items()
        assert none == []
        # Parameters it cannot read are a 400 naming them, not a guess.
        async with httpx.AsyncClient(base_url=sdk.url, timeout=10) as client:
            for query in ("nextToken=not-a-cursor", "limit=0", "limit=101", "order=sideways",
                          "startedAfter=yesterday"):  # fmt: skip
                answer = await client.get(f"/v2/sandboxes?{query}", headers={"X-API-KEY": API_KEY})
                assert answer.status_code == 400, (query, answer.text)
    finally:
        for sandbox in made:
            await sandbox.kill()


async def test_a_failing_command_raises_with_its_exit_code(sdk: Host) -> None:
    sandbox = await AsyncSandbox.create()
    try:
        with pytest.raises(CommandExitException) as failed:
            await sandbox.commands.run("echo partial; exit 3")
        assert failed.value.exit_code == 3
        assert failed.value.stdout == "partial\n"
        envs = await sandbox.commands.run("echo $GREETING", envs={"GREETING": "hey"})
        assert envs.stdout == "hey\n"
    finally:
        await sandbox.kill()


def test_the_sync_sdk_too(sdk: Host) -> None:
    with Sandbox.create() as sandbox:
        assert sandbox.commands.run("echo sync").stdout == "sync\n"
        sandbox.files.write("s.txt", b"bytes")
        assert sandbox.files.read("s.txt") == "bytes"


async def _all(paginator: AsyncSandboxPaginator) -> AsyncIterator[SandboxInfo]:
    while paginator.has_next:
        for item in await paginator.next_items():
            yield item


def test_the_sync_sdks_polled_watcher(sdk: Host) -> None:
    with Sandbox.create() as sandbox:
        sandbox.files.make_dir("w")
        watcher = sandbox.files.watch_dir("w")
        sandbox.files.write("w/one.txt", "1")
        deadline = time.monotonic() + 5
        names: list[str] = []
        while "one.txt" not in names and time.monotonic() < deadline:
            time.sleep(0.2)
            names += [event.name for event in watcher.get_new_events()]
        watcher.stop()
        assert "one.txt" in names


async def test_gzip_uploads_and_streamed_reads(sdk: Host) -> None:
    sandbox = await AsyncSandbox.create()
    try:
        await sandbox.files.write("z.txt", "squeezed " * 1000, gzip=True)
        assert await sandbox.files.read("z.txt") == "squeezed " * 1000
        stream = await sandbox.files.read("z.txt", format="stream")
        assert b"".join([chunk async for chunk in stream]) == b"squeezed " * 1000
    finally:
        await sandbox.kill()


def unmodified_sdk_files() -> int:
    """The SDK's Python files checked against the hashes its wheel recorded (RECORD):
    what runs here is the package as published, not a patched copy."""
    sdk = distribution("e2b")
    checked = 0
    for file in sdk.files or []:
        if file.hash is None or not str(file).endswith(".py"):
            continue
        digest = hashlib.new(file.hash.mode, Path(str(file.locate())).read_bytes()).digest()
        assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == file.hash.value, file
        checked += 1
    return checked


async def test_the_stock_sdk_create_command_file_pty_kill(sdk: Host) -> None:
    """The issue's demonstration in one go: create, run a command, write and read a file,
    a PTY, kill."""
    assert unmodified_sdk_files() > 100
    sandbox = await AsyncSandbox.create()
    assert (await sandbox.commands.run("uname -s")).stdout == "Linux\n"
    await sandbox.files.write("hello.txt", "hello from the SDK")
    assert await sandbox.files.read("hello.txt") == "hello from the SDK"
    shown = bytearray()
    seen = asyncio.Event()

    def on_data(data: bytes) -> None:
        shown.extend(data)
        if b"PTY-OK" in shown:
            seen.set()

    terminal = await sandbox.pty.create(PtySize(rows=24, cols=80), on_data=on_data)
    await sandbox.pty.send_stdin(terminal.pid, b"cat hello.txt; echo; echo PTY-''OK\n")
    await asyncio.wait_for(seen.wait(), 10)
    assert b"hello from the SDK" in shown
    await sandbox.pty.kill(terminal.pid)
    assert await sandbox.kill()
    assert not await sandbox.is_running()
