"""File operations through the guest, confined to the workspace."""

from __future__ import annotations

import asyncio

import pytest

from burrow.sandbox.backend import ErrorCode, Sandbox, SandboxError
from tests.sandbox.harness import run


async def test_write_creates_parents_and_read_returns_bytes(any_sandbox: Sandbox) -> None:
    data = bytes(range(256))
    await any_sandbox.write_file("deep/er/file.bin", data)
    assert await any_sandbox.read_file("deep/er/file.bin") == data
    absolute = f"{any_sandbox.workspace}/deep/er/file.bin"
    assert await any_sandbox.read_file(absolute, offset=10, limit=5) == data[10:15]
    assert (await run(any_sandbox, "cat", "deep/er/file.bin")).stdout == data


async def test_list_and_stat_return_entries(any_sandbox: Sandbox) -> None:
    await any_sandbox.write_file("dir/a.txt", b"abc")
    await run(any_sandbox, "ln", "-s", "a.txt", "dir/link")
    entries = await any_sandbox.list_dir("dir")
    assert [(e.name, e.path, e.kind) for e in entries] == [
        ("a.txt", "dir/a.txt", "file"),
        ("link", "dir/link", "symlink"),
    ]
    stat = await any_sandbox.stat("dir/a.txt")
    assert (stat.kind, stat.size) == ("file", 3)
    assert stat.mtime > 0
    root = await any_sandbox.stat(".")
    assert (root.path, root.kind) == (".", "dir")


@pytest.mark.parametrize(
    "path", ["../../etc/passwd", "/etc/passwd", "sub/../../x", "escape/passwd"]
)
async def test_paths_leaving_the_workspace_are_refused(any_sandbox: Sandbox, path: str) -> None:
    await run(any_sandbox, "ln", "-s", "/etc", "escape")
    with pytest.raises(SandboxError) as caught:
        await any_sandbox.read_file(path)
    assert caught.value.code == ErrorCode.PATH_ESCAPE
    assert f"Path '{path}' is outside the workspace" in caught.value.message
    with pytest.raises(SandboxError) as caught:
        await any_sandbox.write_file(path, b"x")
    assert caught.value.code == ErrorCode.PATH_ESCAPE


async def test_symlinks_are_followed_inside_the_workspace_and_refused_out_of_it(
    any_sandbox: Sandbox,
) -> None:
    """A link within the workspace reads and writes through; a link out, even to a file that
    does not exist, is an escape (not "not found"), and writing through it changes nothing."""
    await any_sandbox.write_file("real/a.txt", b"abc")
    await run(any_sandbox, "ln", "-s", "real", "inside")
    await run(any_sandbox, "ln", "-s", "/tmp/burrow-nowhere", "out")
    assert await any_sandbox.read_file("inside/a.txt") == b"abc"
    await any_sandbox.write_file("inside/b.txt", b"def")
    assert await any_sandbox.read_file("real/b.txt") == b"def"
    assert [e.name for e in await any_sandbox.list_dir("inside")] == ["a.txt", "b.txt"]
    for attempt in (
        any_sandbox.read_file("out"),
        any_sandbox.write_file("out", b"x"),
        any_sandbox.list_dir("out"),
        any_sandbox.stat("out/x"),
    ):
        with pytest.raises(SandboxError) as caught:
            await attempt
        assert caught.value.code == ErrorCode.PATH_ESCAPE
    missing = await run(any_sandbox, "test", "-e", "/tmp/burrow-nowhere")
    assert missing.exit.exit_code != 0


async def test_missing_files_directories_and_huge_reads_are_typed_errors(
    any_sandbox: Sandbox,
) -> None:
    with pytest.raises(SandboxError) as caught:
        await any_sandbox.read_file("nope.txt")
    assert caught.value.code == ErrorCode.NOT_FOUND
    await run(any_sandbox, "mkdir", "adir")
    with pytest.raises(SandboxError) as caught:
        await any_sandbox.read_file("adir")
    assert caught.value.code == ErrorCode.IS_A_DIRECTORY
    with pytest.raises(SandboxError) as caught:
        await any_sandbox.list_dir("nope")
    assert caught.value.code == ErrorCode.NOT_FOUND
    await run(any_sandbox, "truncate", "-s", "100M", "big.bin")  # sparse: costs no disk
    with pytest.raises(SandboxError) as caught:
        await any_sandbox.read_file("big.bin")
    assert caught.value.code == ErrorCode.TOO_LARGE
    assert await any_sandbox.read_file("big.bin", offset=50 << 20, limit=4) == b"\0" * 4


async def test_a_fifo_is_refused_at_once_and_the_agent_keeps_answering(
    any_sandbox: Sandbox,
) -> None:
    """Sandboxed code plants a FIFO where a file is expected: reading or writing it through
    the guest is refused at once (a blocking open would hold the guest until the host's
    deadline killed the any_sandbox), and the next request is answered as usual."""
    await run(any_sandbox, "mkfifo", "pipe")
    for attempt in (any_sandbox.read_file("pipe"), any_sandbox.write_file("pipe", b"x")):
        with pytest.raises(SandboxError) as caught:
            await asyncio.wait_for(attempt, 2)
        assert caught.value.code == ErrorCode.NOT_A_FILE
        assert "not a regular file" in caught.value.message
    await any_sandbox.write_file("after.txt", b"still here")
    assert await any_sandbox.read_file("after.txt") == b"still here"
