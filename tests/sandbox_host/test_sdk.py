"""The stock e2b SDK (unmodified, from PyPI) drives a real `burrow sandbox-host`."""

from __future__ import annotations

import pytest
from e2b import AsyncSandbox, CommandExitException, Sandbox

from tests.sandbox_host.harness import Host

pytestmark = pytest.mark.timeout(60)


async def test_create_run_write_read_kill(sdk: Host) -> None:
    sandbox = await AsyncSandbox.create()
    try:
        result = await sandbox.commands.run("echo hi; echo oops >&2; pwd")
        assert (result.stdout, result.stderr, result.exit_code) == ("hi\n/workspace\n", "oops\n", 0)

        info = await sandbox.files.write("/home/user/notes/a.txt", "hello file")
        assert info.path == "/workspace/notes/a.txt"
        assert await sandbox.files.read("notes/a.txt") == "hello file"
        assert (await sandbox.commands.run("cat notes/a.txt")).stdout == "hello file"
        binary = bytes(range(256)) * 4096  # 1 MiB and more: read back in pieces
        await sandbox.files.write("blob.bin", binary)
        assert bytes(await sandbox.files.read("blob.bin", format="bytes")) == binary

        listed = [s.sandbox_id async for s in _all(AsyncSandbox.list())]
        assert sandbox.sandbox_id in listed
        assert (await sandbox.get_info()).state.value == "running"
    finally:
        await sandbox.kill()
    assert sandbox.sandbox_id not in [s.sandbox_id async for s in _all(AsyncSandbox.list())]


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


async def _all(paginator):  # type: ignore[no-untyped-def]
    while paginator.has_next:
        for item in await paginator.next_items():
            yield item
