"""Real bubblewrap sandboxes for tests: fixtures (a per-test data directory) and helpers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.sandbox.backend import Backend, ExecChunk, ExecExit, ExecRequest, PtySession, Sandbox
from burrow.sandbox.bwrap import GUEST_FLAGS, GUEST_START
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend, LocalSandbox


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(tmp_path / "data")
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture
async def sandbox(backend: LocalBackend) -> LocalSandbox:
    return await backend.create("test")


@pytest.fixture(params=["local", "e2b"])
async def any_sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sandbox]:
    """The backend conformance suite: a test taking this runs on every backend (`-k e2b`
    picks the e2b runs, against a real `burrow sandbox-host`)."""
    chosen: Backend
    if request.param == "local":
        chosen = LocalBackend(tmp_path / "data")
    else:
        from burrow.sandbox.e2b import E2BBackend

        host = request.getfixturevalue("sandbox_host")
        chosen = E2BBackend(api=host.api, hibernation="files", network="none")
    sandbox_id = f"test-{secrets.token_hex(4)}"  # the host's sandboxes outlive a test
    try:
        yield await chosen.create(sandbox_id)
    finally:
        await chosen.destroy(sandbox_id)
        await chosen.close()


class Completed:
    def __init__(self, stdout: bytes, stderr: bytes, exit: ExecExit) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.exit = exit

    @property
    def text(self) -> str:
        return self.stdout.decode()


async def run(sandbox: Sandbox, *argv: str, **options: object) -> Completed:
    """Run a command to its end and collect its output."""
    stdout, stderr = bytearray(), bytearray()
    exit_event = None
    async for event in sandbox.exec(ExecRequest(argv=list(argv), **options)):  # type: ignore[arg-type]
        if isinstance(event, ExecChunk):
            (stdout if event.stream == "stdout" else stderr).extend(event.data)
        else:
            exit_event = event
    assert exit_event is not None
    return Completed(bytes(stdout), bytes(stderr), exit_event)


# Counts live processes whose command line contains a marker; the marker is passed
# reversed so that this checker's own command line does not match it.
_COUNT_SCRIPT = """
import os, sys
marker = sys.argv[1][::-1].encode()
count = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            count += marker in f.read()
    except OSError:
        pass
print(count)
"""


async def sh(sandbox: Sandbox, script: str, timeout: float = 60) -> Completed:
    """`script` run by bash in the sandbox."""
    return await run(sandbox, "/bin/bash", "-c", script, timeout=timeout)


def ok(result: Completed) -> str:
    """The output of a command that must have succeeded."""
    assert result.exit.exit_code == 0, result.text + result.stderr.decode(errors="replace")
    return result.text


async def count_processes(sandbox: Sandbox, marker: str) -> int:
    result = await run(sandbox, "python3", "-c", _COUNT_SCRIPT, marker[::-1])
    return int(result.text)


async def wait_for_no_processes(sandbox: Sandbox, marker: str, within: float = 3.0) -> int:
    """Killed processes vanish asynchronously; give the kernel a moment, then report."""
    count = await count_processes(sandbox, marker)
    for _ in range(int(within / 0.05)):
        if not count:
            break
        await asyncio.sleep(0.05)
        count = await count_processes(sandbox, marker)
    return count


def sleeper(marker: str, seconds: int = 1000) -> str:
    """A shell snippet starting a long sleep recognisable by `marker`."""
    return f"python3 -c 'import time; time.sleep({seconds})' {marker}"


# Small limits, so each limit is reached in well under a second.
TEST_LIMITS = Limits(memory_mb=256, pids=128, cpus=1.0, disk_mb=64, tmp_mb=32)


@pytest.fixture
async def limited_backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    """Sandboxes as production runs them: cgroup limits, a disk quota, seccomp."""
    backend = LocalBackend(tmp_path / "data", limits=TEST_LIMITS)
    try:
        yield backend
    finally:
        await backend.close()


async def read_pty_until(session: PtySession, marker: bytes, timeout: float = 10) -> bytes:
    """Terminal output up to and including `marker` (which must appear)."""
    seen = bytearray()
    async with asyncio.timeout(timeout):
        while marker not in seen:
            data = await session.read()
            assert data, f"the shell ended before {marker!r}; output: {bytes(seen)!r}"
            seen += data
    return bytes(seen)


def host_pids(marker: bytes) -> list[int]:
    """Host pids of processes whose command line contains `marker` (seen from outside)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if marker in f.read():
                    found.append(int(name))
        except OSError:
            pass
    return found


def namespace_members(pid_namespace: str) -> list[int]:
    """Host pids of every process in a pid namespace (`pid:[inode]`), counted from outside
    the sandbox, so a sandbox cannot hide one."""
    members = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{name}/ns/pid") == pid_namespace:
                members.append(int(name))
        except OSError:
            pass
    return members


def process_state(pid: int) -> str:
    """The one-letter state of /proc/<pid>/stat (R, S, T = stopped, ...); "" when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def guest_of(marker: bytes) -> tuple[str, int]:
    """The pid namespace of the sandbox running the process marked `marker`, and the host
    pid of that sandbox's guest (the namespace's pid 2: python, not bwrap's pid 1)."""
    marked = host_pids(marker)
    assert marked, f"no process marked {marker!r}"
    namespace = os.readlink(f"/proc/{marked[0]}/ns/pid")
    for pid in namespace_members(namespace):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
            flags = [flag.encode() for flag in (*GUEST_FLAGS, "-c", GUEST_START)]
            if argv[1 : 1 + len(flags)] == flags:
                return namespace, pid
    raise AssertionError(f"no guest in the sandbox of {marker!r}")


async def wait_for_state(pid: int, state: str, within: float = 10.0) -> None:
    for _ in range(int(within / 0.05)):
        if process_state(pid) == state:
            return
        await asyncio.sleep(0.05)
    assert process_state(pid) == state
