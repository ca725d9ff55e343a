"""The escape suite: from inside a sandbox, try to get out, and fail.

Every attempt runs in a sandbox with production-like limits; after each, the host and a
second sandbox must be unaffected (and the attacking sandbox still usable).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from burrow.sandbox.local import LocalBackend, LocalSandbox
from burrow.sandbox.network import host_addresses
from tests.sandbox.harness import TEST_LIMITS, count_processes, run


@dataclass
class Pair:
    backend: LocalBackend
    attacker: LocalSandbox
    bystander: LocalSandbox


@pytest.fixture
async def pair(limited_backend: LocalBackend) -> Pair:
    attacker, bystander = await asyncio.gather(
        limited_backend.create("attacker"), limited_backend.create("bystander")
    )
    await bystander.write_file("notes.txt", b"bystander's notes")
    return Pair(limited_backend, attacker, bystander)


async def assert_unaffected(pair: Pair) -> None:
    """The host, the bystander and the attacker itself all still work."""
    host = await asyncio.create_subprocess_exec("true")
    assert await host.wait() == 0
    check = await run(pair.bystander, "sh", "-c", "cat notes.txt && echo fine > more.txt")
    assert check.exit.exit_code == 0 and check.text == "bystander's notes"
    assert (await run(pair.attacker, "echo", "alive")).text == "alive\n"


@pytest.fixture
async def listener() -> AsyncIterator[int]:
    """A TCP service on the host's 127.0.0.1, standing in for the Burrow API."""
    server = await asyncio.start_server(lambda r, w: w.close(), "0.0.0.0", 0)
    port: int = server.sockets[0].getsockname()[1]
    try:
        yield port
    finally:
        server.close()
        await server.wait_closed()


CONNECT = """
import socket, sys
for host in sys.argv[2:]:
    try:
        socket.create_connection((host, int(sys.argv[1])), timeout=2).close()
        print("connected", host)
    except OSError as exc:
        print("refused", host, exc.errno)
"""


async def test_files_outside_the_sandbox_cannot_be_read(pair: Pair) -> None:
    database = pair.backend.data_dir / "burrow.db"
    database.write_bytes(b"SQLite format 3\x00 users and secrets")
    for path in (str(database), "/root", "/etc/shadow", "/etc/gshadow", str(Path.home())):
        result = await run(pair.attacker, "sh", "-c", f"cat {path} || ls {path}")
        assert result.exit.exit_code != 0, f"{path} is readable inside the sandbox"
    places = "/etc /var /home /root /srv /opt /mnt /workspace /tmp /.burrow /run"
    found = await run(pair.attacker, "sh", "-c", f"grep -rls 'users and secrets' {places}")
    assert "burrow.db" not in found.text
    await assert_unaffected(pair)


async def test_nothing_outside_the_workspace_and_tmp_is_writable(pair: Pair) -> None:
    for target in ("/usr/evil", "/etc/passwd", "/evil", "/.burrow/agent/evil.py", "/proc/x"):
        result = await run(pair.attacker, "sh", "-c", f"echo pwned > {target}")
        assert result.exit.exit_code != 0, f"{target} is writable"
    sysrq = "open('/proc/sysrq-trigger', 'w')"  # opened, never written
    assert (await run(pair.attacker, "python3", "-c", sysrq)).exit.exit_code != 0
    mount = await run(pair.attacker, "sh", "-c", "mount -t tmpfs none /mnt")
    assert mount.exit.exit_code != 0
    assert not any([await asyncio.to_thread(os.path.exists, p) for p in ("/evil", "/usr/evil")])
    await assert_unaffected(pair)


async def test_host_processes_and_the_other_sandbox_are_invisible(pair: Pair) -> None:
    await run(pair.bystander, "sh", "-c", "python3 -c 'import time; time.sleep(60)' by-marker &")
    assert await count_processes(pair.bystander, "by-marker") == 1
    assert await count_processes(pair.attacker, "by-marker") == 0
    pids = (await run(pair.attacker, "sh", "-c", "ls /proc | grep -E '^[0-9]+$'")).text.split()
    assert str(os.getpid()) not in pids or len(pids) < 10  # only the sandbox's own few
    assert len(pids) < 10, pids
    kill = await run(pair.attacker, "kill", "-9", str(os.getpid()))
    assert kill.exit.exit_code != 0
    await assert_unaffected(pair)


async def test_host_services_and_other_sandboxes_ports_are_unreachable(
    pair: Pair, listener: int
) -> None:
    addresses = ["127.0.0.1", *(a for a in host_addresses() if not a.startswith("127."))]
    for port in (5432, listener):
        result = await run(pair.attacker, "python3", "-c", CONNECT, str(port), *addresses)
        assert "connected" not in result.text, result.text
    # A service in the bystander is reachable inside it, never from the attacker.
    serve = "python3 -m http.server 8000 --bind 127.0.0.1 > /dev/null 2>&1 &"
    await run(pair.bystander, "sh", "-c", f"{serve} sleep 0.5")
    inside = await run(pair.bystander, "python3", "-c", CONNECT, "8000", "127.0.0.1")
    assert "connected" in inside.text
    across = await run(pair.attacker, "python3", "-c", CONNECT, "8000", "127.0.0.1")
    assert "refused" in across.text
    await assert_unaffected(pair)


async def test_no_secret_of_the_server_is_in_the_environment(
    limited_backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-leak")
    sandbox = await limited_backend.create("env")
    every_environ = "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; env"
    seen = (await run(sandbox, "sh", "-c", every_environ)).text
    assert "sk-test-must-not-leak" not in seen and "OPENAI_API_KEY" not in seen


async def test_a_fork_bomb_hits_the_process_limit(pair: Pair) -> None:
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 10"
    result = await run(pair.attacker, "bash", "-c", bomb, timeout=2)
    assert result.exit.timed_out
    assert "process limit" in result.stderr.decode()
    await asyncio.sleep(0.5)  # the killed group drains
    await assert_unaffected(pair)


async def test_a_memory_bomb_is_killed_and_named(pair: Pair) -> None:
    grab = f"x = bytearray({TEST_LIMITS.memory_mb * 2} << 20); print('survived')"
    result = await run(pair.attacker, "python3", "-c", grab, timeout=20)
    assert "survived" not in result.text
    assert result.exit.signal == 9
    assert "ran out of memory" in result.stderr.decode()
    await assert_unaffected(pair)


async def test_a_disk_fill_stops_at_the_quota(pair: Pair) -> None:
    before = os.statvfs(pair.backend.data_dir)
    fill = "dd if=/dev/urandom of=/workspace/fill bs=1M count=1000"
    result = await run(pair.attacker, "sh", "-c", fill, timeout=30)
    assert result.exit.exit_code != 0
    stderr = result.stderr.decode()
    assert "No space left on device" in stderr and "workspace disk is full" in stderr
    after = os.statvfs(pair.backend.data_dir)
    used_on_host = (before.f_bavail - after.f_bavail) * before.f_frsize
    assert used_on_host <= (TEST_LIMITS.disk_mb + 8) << 20
    tmp = await run(pair.attacker, "sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=1000")
    assert "No space left on device" in tmp.stderr.decode()
    await run(pair.attacker, "rm", "-f", "/workspace/fill", "/tmp/fill")
    await assert_unaffected(pair)


async def test_dangerous_system_calls_are_refused(pair: Pair) -> None:
    probe = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, number in [("unshare", 272), ("bpf", 321), ("keyctl", 250), ("userfaultfd", 323),
                     ("perf_event_open", 298), ("kexec_load", 246), ("init_module", 175)]:
    result = libc.syscall(number, 0, 0, 0, 0, 0)
    print(name, result, os.strerror(ctypes.get_errno()))
"""
    result = await run(pair.attacker, "python3", "-c", probe)
    lines = result.text.splitlines()
    assert len(lines) == 7, result.stderr
    for line in lines:
        assert line.split(" ", 2)[1:] == ["-1", "Operation not permitted"], line
    status = (await run(pair.attacker, "cat", "/proc/self/status")).text
    assert "Seccomp:\t2" in status and "NoNewPrivs:\t1" in status
    await assert_unaffected(pair)


def test_the_host_is_reachable_from_the_test_itself(listener: int) -> None:
    """The unreachable checks above mean something: the listener does accept."""
    socket.create_connection(("127.0.0.1", listener), timeout=2).close()
