"""Checkpoint housekeeping through a real server and sandbox: the oldest go past
BURROW_CHECKPOINT_MAX_COUNT or BURROW_CHECKPOINT_MAX_BYTES, their objects with them (the
store stays whole: every kept one still restores), each lists the bytes it added, and
deleting the conversation deletes the store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, running_server
from tests.api.test_checkpoints import run, shell

MB = 1024 * 1024
# Each run adds a megabyte nobody can compress, named after how many files there were.
ADD = "head -c 1048576 /dev/urandom > f$(ls | wc -l).bin"
# Each run replaces the megabyte: a checkpoint holds one, the store one per checkpoint.
REPLACE = "head -c 1048576 /dev/urandom > f.bin"


def adding(command: str = ADD) -> ScriptedProvider:
    turns = []
    for _ in range(8):
        turns += [
            ScriptedTurn(tool_calls=[("bash", {"command": command})]),
            ScriptedTurn(text="ok"),
        ]
    return ScriptedProvider(turns, turn_from_context=True)


async def listed(srv: RunningServer, cid: str) -> list[dict[str, object]]:
    response = await srv.client.get(f"/api/conversations/{cid}/checkpoints")
    assert response.status_code == 200, response.text
    found: list[dict[str, object]] = response.json()
    return found


async def test_the_oldest_checkpoints_are_pruned_past_the_count(tmp_path: Path) -> None:
    async with running_server(tmp_path, adding, checkpoint_max_count=3) as srv:
        cid = await srv.create_conversation()
        runs = [await run(srv, cid) for _ in range(5)]
        blob = await shell(srv, cid, "git hash-object f0.bin")
        checkpoints = await listed(srv, cid)
        assert [c["run_id"] for c in checkpoints] == runs[2:]
        # Each holds one more megabyte than the one before it: that is what it added.
        sizes = [c["size"] for c in checkpoints]
        assert all(isinstance(s, int) and MB <= s < 1.2 * MB for s in sizes), sizes
        # f0.bin came with the second run's checkpoint, still kept: its object stays.
        store = "GIT_DIR=.burrow/checkpoints git"
        assert (await shell(srv, cid, f"{store} cat-file -t {blob}")).strip() == "blob"
        # The pruned ones left no refs and no unreachable objects behind.
        refs = await shell(srv, cid, f"{store} for-each-ref --format='%(refname)'")
        assert len(refs.split()) == 3
        loose = await shell(srv, cid, f"{store} fsck --unreachable --no-reflogs 2>&1 || true")
        assert "unreachable" not in loose
        # Every kept checkpoint still restores whole.
        oldest = checkpoints[0]["id"]
        restored = await srv.client.post(
            f"/api/conversations/{cid}/checkpoints/{oldest}/restore", json={}
        )
        assert restored.status_code == 200, restored.text
        assert await shell(srv, cid, "ls") == "f0.bin\nf1.bin\n"


async def test_the_oldest_checkpoints_are_pruned_past_the_bytes(tmp_path: Path) -> None:
    replacing = lambda: adding(REPLACE)  # noqa: E731
    async with running_server(tmp_path, replacing, checkpoint_max_bytes=int(2.5 * MB)) as srv:
        cid = await srv.create_conversation()
        runs = [await run(srv, cid) for _ in range(5)]
        checkpoints = await listed(srv, cid)
        assert [c["run_id"] for c in checkpoints] == runs[3:]
        # The store on disk shrank with them: the two megabytes kept, of four written.
        kib = await shell(srv, cid, "du -sk .burrow/checkpoints/objects | cut -f1")
        assert 2 * 1024 <= int(kib) < 2.5 * 1024, kib


async def test_a_store_over_the_bytes_keeps_the_newest_whole(tmp_path: Path) -> None:
    # Every checkpoint holds every file so far: only the newest fits, and even it does not.
    async with running_server(tmp_path, adding, checkpoint_max_bytes=int(2.5 * MB)) as srv:
        cid = await srv.create_conversation()
        runs = [await run(srv, cid) for _ in range(5)]
        [newest] = await listed(srv, cid)
        assert newest["run_id"] == runs[4]
        restored = await srv.client.post(
            f"/api/conversations/{cid}/checkpoints/{newest['id']}/restore", json={}
        )
        assert restored.status_code == 200, restored.text
        assert await shell(srv, cid, "ls") == "f0.bin\nf1.bin\nf2.bin\nf3.bin\n"


async def test_a_single_checkpoint_over_the_bytes_is_kept(tmp_path: Path) -> None:
    async with running_server(tmp_path, adding, checkpoint_max_bytes=1) as srv:
        cid = await srv.create_conversation()
        runs = [await run(srv, cid) for _ in range(3)]
        assert [c["run_id"] for c in await listed(srv, cid)] == runs[2:]


async def test_deleting_the_conversation_deletes_its_checkpoints(tmp_path: Path) -> None:
    async with running_server(tmp_path, adding) as srv:
        cid = await srv.create_conversation()
        await run(srv, cid)
        await run(srv, cid)
        data = Path(srv.services.settings.data_dir)
        head = data / "workspaces" / cid / ".burrow" / "checkpoints" / "HEAD"
        assert await asyncio.to_thread(head.exists)
        assert (await srv.client.delete(f"/api/conversations/{cid}")).status_code == 204
        assert not await asyncio.to_thread(head.parent.parent.parent.exists)
        assert not await asyncio.to_thread(lambda: list(data.rglob("checkpoints/HEAD")))
