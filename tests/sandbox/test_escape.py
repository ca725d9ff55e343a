"""The escape suite: from inside a sandbox, try to get out, and fail.

Every attempt runs in a sandbox with production-like limits; after each, the host and a
second sandbox must be unaffected (and the attacking sandbox still usable).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from burrow.sandbox import bwrap, idmap
from burrow.sandbox.backend import SandboxError
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
    # /root and /etc/shadow exist inside: the sandbox's own (test_rootfs.py), not the host's.
    for path in (str(database), str(pair.backend.data_dir), str(Path.home() / ".bashrc")):
        result = await run(pair.attacker, "sh", "-c", f"cat {path} || ls {path}")
        assert result.exit.exit_code != 0, f"{path} is readable inside the sandbox"
    places = "/etc /var /home /root /srv /opt /mnt /workspace /tmp /.burrow /run"
    found = await run(pair.attacker, "sh", "-c", f"grep -rls 'users and secrets' {places}")
    assert "burrow.db" not in found.text
    await assert_unaffected(pair)


async def test_system_writes_stay_in_the_sandbox_and_its_agent_and_proc_are_not_writable(
    pair: Pair,
) -> None:
    passwd = await asyncio.to_thread(Path("/etc/passwd").read_bytes)
    for target in ("/usr/evil", "/etc/passwd", "/evil"):  # its own root (rootfs.py)
        result = await run(pair.attacker, "sh", "-c", f"echo pwned >> {target}")
        assert result.exit.exit_code == 0, result.stderr
    assert await asyncio.to_thread(Path("/etc/passwd").read_bytes) == passwd
    for target in ("/.burrow/guest/evil.py", "/.burrow/guest/server.py", "/proc/x"):
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


INTO_OTHER_PROCESSES = """
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buffer = ctypes.create_string_buffer(4096)
iovec = (ctypes.c_size_t * 2)(ctypes.addressof(buffer), 64)
def call(name, number, *args):
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    error = errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "succeeded"
    print(name, error)
guest_pidfd = libc.syscall(ctypes.c_long(434), ctypes.c_long(2), ctypes.c_long(0))
call("ptrace-attach-guest", 101, 16, 2, 0, 0)
call("ptrace-attach-init", 101, 16, 1, 0, 0)
call("process_vm_readv", 310, 2, ctypes.addressof(iovec), 1, ctypes.addressof(iovec), 1, 0)
call("process_vm_writev", 311, 2, ctypes.addressof(iovec), 1, ctypes.addressof(iovec), 1, 0)
call("pidfd_getfd", 438, guest_pidfd, 4, 0)
call("kcmp", 312, 1, 2, 0, 0, 0)
call("io_uring_setup", 425, 4, ctypes.addressof(buffer))
call("modify_ldt", 154, 0, ctypes.addressof(buffer), 16)
call("memfd_secret", 447, 0)
for name, family, kind, protocol in [("vsock", 40, socket.SOCK_STREAM, 0),
                                     ("netlink-audit", 16, socket.SOCK_RAW, 9),
                                     ("netlink-sock-diag", 16, socket.SOCK_RAW, 4),
                                     ("netlink-uevent", 16, socket.SOCK_DGRAM, 15)]:
    try:
        socket.socket(family, kind, protocol).close()
        print(name, "succeeded")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
for path in ("/proc/2/mem", "/proc/2/environ"):
    try:
        open(path, "rb").read(1)
        print(path, "succeeded")
    except OSError as exc:
        print(path, errno.errorcode[exc.errno])
"""


async def test_the_agent_and_init_cannot_be_traced_or_robbed(pair: Pair) -> None:
    """Finding 4: ptrace/process_vm/pidfd_getfd on the guest (pid 2) and init (pid 1), the
    guest's memory through /proc, and kernel surface a build never needs."""
    result = await run(pair.attacker, "python3", "-c", INTO_OTHER_PROCESSES)
    outcomes = dict(line.rsplit(" ", 1) for line in result.text.splitlines())
    assert len(outcomes) == 15, result.text + result.stderr.decode()
    for name, outcome in outcomes.items():
        # netlink families other than routes: "not built into this kernel", as useradd
        # needs to hear of audit
        refused = ("EPROTONOSUPPORT",) if name.startswith("netlink") else ("EPERM", "EACCES")
        assert outcome in refused, f"{name}: {outcome}"
    await assert_unaffected(pair)


async def test_what_stays_allowed_routes_interfaces_and_ps(pair: Pair) -> None:
    """NETLINK_ROUTE (getifaddrs: `vite --host`, `ip route`) and reading /proc (ps)."""
    route = "import socket; socket.socket(16, socket.SOCK_RAW, 0).close(); print('route ok')"
    assert (await run(pair.attacker, "python3", "-c", route)).text == "route ok\n"
    ip = await run(pair.attacker, "sh", "-c", "ip route && ip -o addr")
    assert ip.exit.exit_code == 0 and " lo " in ip.text, ip.stderr
    interfaces = "console.log(Object.keys(require('os').networkInterfaces()).join())"
    node = await run(pair.attacker, "node", "-e", interfaces)
    assert node.text == "lo\n", node.stderr
    ps = await run(pair.attacker, "ps", "-eo", "pid,args")
    assert ps.exit.exit_code == 0 and "from guest.server import main" in ps.text, ps.text


async def test_dev_is_read_only_and_dev_shm_is_bounded(pair: Pair) -> None:
    bound = TEST_LIMITS.tmp_mb
    devfs = await run(pair.attacker, "sh", "-c", "echo pwned > /dev/evil")
    assert devfs.exit.exit_code != 0 and "Read-only" in devfs.stderr.decode()
    fill = f"head -c {bound * 2}M /dev/zero > /dev/shm/fill; stat -c %s /dev/shm/fill"
    shm = await run(pair.attacker, "sh", "-c", fill)
    assert "No space left on device" in shm.stderr.decode()
    assert int(shm.text) <= bound << 20
    await run(pair.attacker, "rm", "-f", "/dev/shm/fill")
    await assert_unaffected(pair)


async def test_the_sandbox_init_and_agent_carry_nothing_of_the_host(
    limited_backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 9: pid 1 is bwrap, started by the server; its environment, working
    directory and command line are readable by every process of the sandbox."""
    monkeypatch.setenv("BURROW_HOST_ONLY", "host-only-value")
    sandbox = await limited_backend.create("pid1")
    look = (
        'for p in 1 2; do for f in environ cmdline; do echo; echo "$p $f:"; '
        "tr '\\0' '\\n' < /proc/$p/$f; done; readlink /proc/$p/cwd /proc/$p/root; done"
    )
    seen = (await run(sandbox, "sh", "-c", look)).text
    assert "1 environ:\n\n" in seen, seen  # empty
    assert "1 cmdline:\nbwrap\n--args\n" in seen, seen
    host = [os.getcwd(), str(tmp_path), str(limited_backend.data_dir), "host-only-value"]
    host.append(str(sandbox.socket_path.parent))
    for value in host:
        assert value not in seen, f"{value} is visible inside the sandbox:\n{seen}"


FLOOD_THE_HOST = """
import os
try:
    with open("/proc/1/fd/2", "wb") as host_pipe:  # bwrap's stderr: the host reads it
        for _ in range(40):
            host_pipe.write(b"x" * 60000 + b"\\n")
        host_pipe.write(b"y" * (2 << 20))
    outcome = "flooded"
except PermissionError:
    outcome = "refused"
with open("flood.txt", "w") as note:
    note.write(outcome)
os.kill(os.getppid(), 9)  # the guest: the sandbox dies, its stderr becomes the reason
"""


async def test_the_sandbox_cannot_flood_the_reason_of_its_death(pair: Pair) -> None:
    """The reason is read from bwrap's stderr, bounded. Since sandboxes run as their own
    uid range, that pipe (the host root's) does not even open from inside."""
    with pytest.raises(SandboxError):
        await run(pair.attacker, "python3", "-c", FLOOD_THE_HOST)
    assert pair.attacker.status == "failed" and "died" in pair.attacker.detail
    assert len(pair.attacker.detail) < 20 * 600, len(pair.attacker.detail)
    note = pair.backend.workspace_dir("attacker") / "flood.txt"
    assert await asyncio.to_thread(note.read_text) == "refused"
    check = await run(pair.bystander, "cat", "notes.txt")
    assert check.text == "bystander's notes"


# Opens every file under the host-wide writable parts of /proc for writing, and writes
# nothing: a successful open is the failure, so a vulnerable build changes nothing here.
OPEN_PROC_FOR_WRITING = """
import os
opened, refused = [], 0
for top in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"):
    paths = [top] if os.path.isfile(top) else [
        os.path.join(d, f) for d, _, files in os.walk(top) for f in files]
    for path in paths:
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError:
            refused += 1
        else:
            os.close(fd)
            opened.append(path)
print(refused)
for path in opened:
    print(path)
"""


# Sysctls of the sandbox's own IPC and pid namespaces: their root may set them, for that
# namespace alone (nothing of the host's). Only the read-only bind shuts these too.
OWN_NAMESPACE_SYSCTLS = re.compile(
    r"/proc/sys/(fs/mqueue/.*|kernel/(msg\w+|auto_msgmni|sem|shm\w+|ns_last_pid|pid_max))"
)


async def writable_proc_files(sandbox: LocalSandbox) -> list[str]:
    result = await run(sandbox, "python3", "-c", OPEN_PROC_FOR_WRITING)
    refused, *opened = result.text.splitlines()
    assert int(refused) > 500, result.text + result.stderr.decode()  # /proc/sys was walked
    return opened


async def assert_proc_globals_refuse_writers(sandbox: LocalSandbox) -> None:
    opened = await writable_proc_files(sandbox)
    assert opened == [], f"writable from the sandbox: {opened[:20]}"


async def test_proc_sys_and_sysrq_cannot_be_opened_for_writing(pair: Pair) -> None:
    """Hardening finding 1: the sandbox's root was the host's kuid 0, which the kernel
    lets write /proc/sys (kernel.core_pattern ran a command as host root)."""
    await assert_proc_globals_refuse_writers(pair.attacker)
    await assert_unaffected(pair)


async def test_each_wall_alone_keeps_proc_sys_shut(
    limited_backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The uid range alone (no read-only /proc binds) already makes the kernel refuse
    every host-wide file: what stays writable is the sandbox's own namespaces' sysctls."""
    monkeypatch.setattr(bwrap, "PROC_READ_ONLY", ())
    sandbox = await limited_backend.create("uid-wall-only")
    mounts = (await run(sandbox, "cat", "/proc/self/mountinfo")).text
    assert " /proc/sys " not in mounts  # really without the second wall
    opened = await writable_proc_files(sandbox)
    host_wide = [path for path in opened if not OWN_NAMESPACE_SYSCTLS.fullmatch(path)]
    assert host_wide == [], f"host-wide files writable without the read-only binds: {host_wide}"


async def test_the_sandbox_root_is_an_unprivileged_host_uid(pair: Pair) -> None:
    """ids 0-65535 inside map onto Burrow's subordinate range, never the host's root."""
    ids = pair.backend.id_range()
    assert ids is not None and ids.start >= idmap.FIRST
    assert f"{idmap.NAME}:{ids.start}:{idmap.SIZE}" in registered_ranges()
    maps = await run(pair.attacker, "sh", "-c", "cat /proc/self/uid_map /proc/self/gid_map")
    assert maps.text.split() == ["0", str(ids.start), str(idmap.SIZE)] * 2
    await run(pair.attacker, "sh", "-c", "sleep 31 & touch made-inside")
    # The shell may return before its background child has exec'd sleep: look again.
    assert await host_ids_of(b"sleep\x0031\x00") == [str(ids.start)] * 8  # real..fs uid, gid
    made = pair.backend.workspace_dir("attacker") / "made-inside"
    assert owner(made) == (ids.start, ids.start)
    await assert_unaffected(pair)


def registered_ranges() -> list[str]:
    return Path("/etc/subuid").read_text().splitlines()


def owner(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, st.st_gid


async def host_ids_of(cmdline: bytes, within: float = 5.0) -> list[str]:
    """Uid and Gid of the process with this command line, as the host's /proc says."""
    deadline = time.monotonic() + within
    while (ids := host_ids_now(cmdline)) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"no process {cmdline!r} on the host")
        await asyncio.sleep(0.05)
    return ids


def host_ids_now(cmdline: bytes) -> list[str] | None:
    for pid in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if pid.name.isdigit() and pid.joinpath("cmdline").read_bytes() == cmdline:
                status = pid.joinpath("status").read_text().splitlines()
                ids = [line.split()[1:] for line in status if line.startswith(("Uid:", "Gid:"))]
                return ids[0] + ids[1]
    return None


async def test_no_new_user_namespace_from_inside(pair: Pair) -> None:
    """bwrap's --disable-userns cannot be had with a host-written uid map: the seccomp
    filter refuses unshare, clone(CLONE_NEWUSER) and clone3 (the C library falls back)."""
    probe = """
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
for name, number, flags in [("unshare", 272, 0x10000000), ("clone", 56, 0x10000000 | 17),
                            ("clone3", 435, 0)]:
    result = libc.syscall(number, flags, 0, 0, 0, 0)
    print(name, result, os.strerror(ctypes.get_errno()))
print(subprocess.run(["echo", "spawned"], capture_output=True, text=True).stdout.strip())
"""
    result = await run(pair.attacker, "python3", "-c", probe)
    assert result.text.splitlines() == [
        "unshare -1 Operation not permitted",
        "clone -1 Operation not permitted",
        "clone3 -1 Function not implemented",
        "spawned",
    ], result.stderr
    unshare = await run(pair.attacker, "unshare", "--user", "--map-root-user", "true")
    assert unshare.exit.exit_code != 0
    await assert_unaffected(pair)


# Modules a workspace could plant to run inside the guest: everything the guest imports
# lazily (its file API, commands, terminals, tunnels) and the protocol's json.
PLANTED_MODULES = (
    "json", "subprocess", "selectors", "signal", "fcntl", "termios", "struct", "errno",
    "stat", "os", "time", "guest", "pty", "select", "socket",
)  # fmt: skip
PLANT = "import os\nopen('/workspace/ran-{name}', 'w').close()\n"


def guest_pid(sandbox: LocalSandbox) -> int:
    """The guest as the host sees it: bwrap's child's child."""
    assert sandbox._process is not None
    parent = sandbox._process.pid
    for _ in range(2):
        parent = next(
            int(entry.name)
            for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and _ppid(entry) == parent
        )
    return parent


def _ppid(entry: Path) -> int:
    try:
        stat = entry.joinpath("stat").read_text()
    except OSError:
        return -1
    return int(stat[stat.rindex(")") + 2 :].split()[1])


async def test_a_workspace_module_never_runs_in_the_agent(limited_backend: LocalBackend) -> None:
    """Hardening finding 3: the guest ran `python3 -E -S -B -c` (the current directory on
    sys.path) and chdir'd to /workspace before its lazy imports, so a planted `json.py`
    ran inside it at its next boot. Now it runs isolated and never has the workspace as
    its working directory."""
    sandbox = await limited_backend.create("planted")
    for name in PLANTED_MODULES:
        await sandbox.write_file(f"{name}.py", PLANT.format(name=name).encode())
    await sandbox.write_file("guest/__init__.py", PLANT.format(name="guest-package").encode())
    await limited_backend.hibernate(sandbox)
    sandbox = await limited_backend.create("planted")  # the next boot, over those files
    await sandbox.write_file("touch.txt", b"a file request first")
    pid = await asyncio.to_thread(guest_pid, sandbox)
    cwd = await asyncio.to_thread(os.readlink, f"/proc/{pid}/cwd")
    assert cwd == "/.burrow", cwd
    assert (await run(sandbox, "python3", "-c", "print('a command')")).text == "a command\n"
    pty = await sandbox.open_pty(80, 24)
    pty.close()
    await sandbox.read_file("touch.txt")
    files = [entry.name for entry in await sandbox.list_dir(".")]
    assert not [name for name in files if name.startswith("ran-")], files
