"""WatchDir by inotify on the sandbox's own tree (tree.py), through the stock e2b SDK."""

from __future__ import annotations

import asyncio
import time

import pytest
from e2b import AsyncSandbox, SandboxException
from e2b.sandbox.filesystem.watch_handle import FilesystemEvent, FilesystemEventType

from burrow.sandbox_host import tree

pytestmark = pytest.mark.timeout(120)


async def _until(events: list[FilesystemEvent], wanted: tuple[FilesystemEventType, str]) -> None:
    for _ in range(1000):  # 10 s
        if wanted in [(e.type, e.name) for e in events]:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{wanted} not seen in {len(events)} events")


async def test_an_event_right_after_a_write_and_in_a_new_folder(sandbox: AsyncSandbox) -> None:
    await sandbox.files.make_dir("w")
    events: list[FilesystemEvent] = []
    handle = await sandbox.files.watch_dir("w", on_event=events.append, recursive=True)
    started = time.monotonic()
    await sandbox.commands.run("mkdir w/sub && echo hi > w/sub/f && mv w/sub/f w/sub/g")
    await _until(events, (FilesystemEventType.RENAME, "sub/f"))
    await _until(events, (FilesystemEventType.CREATE, "sub/g"))
    assert (FilesystemEventType.WRITE, "sub/f") in [(e.type, e.name) for e in events]
    assert time.monotonic() - started < 5
    await handle.stop()


async def test_a_folder_moved_in_tells_what_it_holds(sandbox: AsyncSandbox) -> None:
    # Made before any watch could see it: its contents are told when its own watch is up
    # (the same path catches `mkdir d && echo hi > d/f` made faster than the watch).
    await sandbox.files.make_dir("w")
    await sandbox.commands.run("mkdir -p pre/deep && echo hi > pre/deep/f && touch pre/empty")
    events: list[FilesystemEvent] = []
    handle = await sandbox.files.watch_dir("w", on_event=events.append, recursive=True)
    await sandbox.commands.run("mv pre w/pre")
    await _until(events, (FilesystemEventType.WRITE, "pre/deep/f"))
    seen = [(e.type, e.name) for e in events]
    for created in ("pre/deep", "pre/deep/f", "pre/empty"):
        assert (FilesystemEventType.CREATE, created) in seen
    assert (FilesystemEventType.WRITE, "pre/empty") not in seen
    events.clear()
    await sandbox.commands.run("echo more >> w/pre/deep/f")  # and it is watched from then on
    await _until(events, (FilesystemEventType.WRITE, "pre/deep/f"))
    await handle.stop()


async def test_a_link_out_of_the_sandbox_is_resolved_inside_it(sandbox: AsyncSandbox) -> None:
    # An absolute link and a climbing one name the sandbox's own /tmp, never the host's.
    await sandbox.commands.run("ln -s /tmp out && ln -s ../../../../../../tmp up")
    for link in ("out", "up"):
        events: list[FilesystemEvent] = []
        handle = await sandbox.files.watch_dir(link, on_event=events.append)
        await sandbox.commands.run(f"touch /tmp/seen-{link}")
        await _until(events, (FilesystemEventType.CREATE, f"seen-{link}"))
        await handle.stop()
    # /proc's magic links jump out of any root: refused, not followed on the host.
    await sandbox.commands.run("ln -s /proc/1/root magic")
    with pytest.raises(SandboxException):
        await sandbox.files.watch_dir("magic", on_event=lambda e: None)


async def test_a_flood_is_bounded_and_the_host_keeps_answering(sandbox: AsyncSandbox) -> None:
    await sandbox.files.make_dir("flood")
    events: list[FilesystemEvent] = []
    ended: list[Exception | None] = []
    handle = await sandbox.files.watch_dir(
        "flood", on_event=events.append, on_exit=ended.append, recursive=True
    )
    flood = asyncio.ensure_future(
        sandbox.commands.run(
            "python3 -c \"import os\nfor i in range(100000): open(f'flood/{i}', 'w').close()\"",
            timeout=100,
        )
    )
    worst = 0.0
    while not flood.done():  # the host's other API answers meanwhile (envd and control)
        sent = time.monotonic()
        assert await sandbox.is_running()
        assert await sandbox.files.exists("flood")
        worst = max(worst, time.monotonic() - sent)
        await asyncio.sleep(0.05)
    await flood
    assert worst < 2, worst
    # Every create was told, or the watch ended saying events were lost: never a guess.
    for _ in range(300):
        if ended or len(events) >= 100_000:
            break
        await asyncio.sleep(0.1)
    if ended:
        assert "lost" in str(ended[0]), ended
    else:
        assert len({e.name for e in events if e.type == FilesystemEventType.CREATE}) == 100_000
    await handle.stop()
    assert tree.MAX_QUEUED <= 10_000


def test_another_sandboxs_watcher_is_not_found(sdk: object) -> None:
    from e2b import Sandbox

    with Sandbox.create() as first, Sandbox.create() as second:
        first.files.make_dir("w")
        theirs = first.files.watch_dir("w")
        first.files.write("w/secret-name", "x")
        mine = second.files.watch_dir("/home/user")
        mine._watcher_id = theirs._watcher_id  # the other sandbox's id
        with pytest.raises(SandboxException, match="No watcher"):
            mine.get_new_events()
        names: list[str] = []
        deadline = time.monotonic() + 10
        while "secret-name" not in names and time.monotonic() < deadline:
            names += [event.name for event in theirs.get_new_events()]
        assert "secret-name" in names  # still there for its own sandbox
        theirs.stop()
