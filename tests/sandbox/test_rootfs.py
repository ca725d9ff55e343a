"""The writable root (rootfs.py): a sandbox installs into its own layer, never the host.

Real sandboxes under this (root) server, with egress to Debian's, PyPI's and npm's
registries for the installs: the machine reaches those and nothing else.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.sandbox.local import LocalBackend
from burrow.sandbox.mounts import mount_targets
from burrow.sandbox.network import egress_unavailable
from tests.sandbox.harness import TEST_LIMITS, ok, run, sh

INSTALL_SECONDS = 300


@pytest.fixture
async def online(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    """Sandboxes with egress (the registries), as `burrow serve` starts them."""
    assert not egress_unavailable(), egress_unavailable()  # make setup installs slirp4netns
    backend = LocalBackend(tmp_path / "data", network="egress")
    try:
        yield backend
    finally:
        await backend.close()


async def test_apt_installs_a_daemon_the_host_lacks_and_it_runs_as_its_own_user(
    online: LocalBackend,
) -> None:
    assert shutil.which("memcached") is None, "pick a package this host does not have"
    sandbox = await online.create("apt")
    install = "apt-get update -q && apt-get install -y -q --no-install-recommends memcached"
    ok(await sh(sandbox, install, timeout=INSTALL_SECONDS))
    ok(await sh(sandbox, "memcached -u memcache -d -p 11311 -l 127.0.0.1"))
    probe = (
        "import socket, time\n"
        "for _ in range(50):\n"
        "    try:\n"
        "        s = socket.create_connection(('127.0.0.1', 11311)); break\n"
        "    except OSError: time.sleep(0.1)\n"
        "s.sendall(b'set k 0 0 2\\r\\nhi\\r\\nget k\\r\\n'); time.sleep(0.3)\n"
        "print(s.recv(4096).decode())\n"
    )
    answer = ok(await run(sandbox, "python3", "-c", probe))
    assert "STORED" in answer and "VALUE k 0 2\r\nhi" in answer
    owner = ok(await sh(sandbox, "ps -o user= -C memcached"))
    assert owner.split() == ["memcache"]
    assert shutil.which("memcached") is None  # the host's /usr is as it was


async def test_pip_and_npm_install_system_wide(online: LocalBackend) -> None:
    sandbox = await online.create("tools")
    host = await asyncio.create_subprocess_exec(
        "/usr/bin/python3", "-c", "import iniconfig", stderr=asyncio.subprocess.DEVNULL
    )
    assert await host.wait() != 0, "the host's python3 must lack iniconfig for this test"
    pip = "python3 -m pip --version || (apt-get update -q && apt-get install -y -q python3-pip)"
    ok(await sh(sandbox, pip, timeout=INSTALL_SECONDS))
    install = "python3 -m pip install -q --no-cache-dir --break-system-packages iniconfig"
    ok(await sh(sandbox, install, timeout=INSTALL_SECONDS))
    where = ok(await run(sandbox, "python3", "-c", "import iniconfig; print(iniconfig.__file__)"))
    assert where.startswith("/usr/local/lib/python3")
    ok(await sh(sandbox, "npm i -g --no-audit --no-fund is-odd@3.0.1", timeout=INSTALL_SECONDS))
    root = ok(await sh(sandbox, "npm root -g")).strip()
    assert (
        ok(await sh(sandbox, f"node -e \"console.log(require('{root}/is-odd')(3))\"")) == "true\n"
    )
    assert not (Path(root) / "is-odd").exists()  # not on the host


async def test_the_layer_outlives_hibernation_and_a_restart_and_goes_with_the_sandbox(
    tmp_path: Path,
) -> None:
    backend = LocalBackend(tmp_path / "data")
    sandbox = await backend.create("kept")
    made = "echo mine > /usr/local/bin/mine && echo conf > /etc/mine.conf && useradd -m carol"
    ok(await sh(sandbox, made))
    check = "cat /usr/local/bin/mine /etc/mine.conf && id -u carol && ls -d /home/carol"
    await backend.hibernate(sandbox)
    sandbox = await backend.create("kept")
    assert ok(await sh(sandbox, check)).startswith("mine\nconf\n")
    await backend.close()

    restarted = LocalBackend(tmp_path / "data")  # a server restart: a new backend, new base
    try:
        sandbox = await restarted.create("kept")
        assert ok(await sh(sandbox, check)).startswith("mine\nconf\n")
        other = await restarted.create("other")
        assert (await sh(other, "cat /usr/local/bin/mine")).exit.exit_code != 0
        await restarted.destroy("kept")
        assert not restarted.layer_dir("kept").exists()
        sandbox = await restarted.create("kept")
        assert (await sh(sandbox, "cat /usr/local/bin/mine")).exit.exit_code != 0
    finally:
        await restarted.close()


async def test_the_layer_has_its_own_disk_and_counts_toward_the_quota(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data", limits=TEST_LIMITS)
    try:
        sandbox = await backend.create("quota")
        before = backend.disk_used("quota") or 0
        ok(await sh(sandbox, "head -c 20000000 /dev/urandom > /opt/blob && sync"))
        assert (backend.disk_used("quota") or 0) >= before + 19_000_000
        # No more than the layer's disk (TEST_LIMITS: 64 MiB), whatever is asked.
        full = await sh(sandbox, "head -c 100000000 /dev/zero > /opt/more")
        assert full.exit.exit_code != 0 and "No space left" in full.stderr.decode()
        assert ok(await sh(sandbox, "echo still > /workspace/fine && cat fine")) == "still\n"
    finally:
        await backend.close()


# ---- attacks -------------------------------------------------------------------------


def host_state() -> tuple[tuple[int, int, int], bytes]:
    ls = Path("/usr/bin/ls").stat()
    return (ls.st_mode, ls.st_uid, ls.st_size), Path("/etc/passwd").read_bytes()


async def test_root_in_the_sandbox_changes_only_its_own_copy_of_the_system(
    backend: LocalBackend,
) -> None:
    attacker, bystander = await backend.create("attacker"), await backend.create("bystander")
    ls, passwd = host_state()
    attack = (
        "chmod 777 /usr/bin/ls && chown 1234 /usr/bin/ls && echo x >> /usr/bin/ls && "
        "echo 'evil:x:0:0::/:/bin/sh' >> /etc/passwd && rm -rf /usr/share/doc && "
        "echo pwned > /usr/bin/pwned"
    )
    ok(await sh(attacker, attack))
    assert host_state() == (ls, passwd)
    assert Path("/usr/share/doc").is_dir() and not Path("/usr/bin/pwned").exists()  # noqa: ASYNC240
    seen = ok(
        await sh(
            bystander, "ls -l /usr/bin/ls; grep -c evil /etc/passwd; ls /usr/share/doc | wc -l"
        )
    )
    assert seen.split("\n")[1] == "0" and int(seen.split("\n")[2]) > 0
    assert "rwxrwxrwx" not in seen


async def test_the_host_s_secrets_and_home_stay_out(backend: LocalBackend) -> None:
    marker = Path.home() / f".burrow-test-{secrets.token_hex(4)}"
    marker.write_text("the host's")
    try:
        sandbox = await backend.create("curious")
        shadow = ok(await sh(sandbox, "cat /etc/shadow /etc/gshadow"))
        assert shadow and all(line.split(":")[1] == "*" for line in shadow.splitlines())
        assert marker.name not in ok(await sh(sandbox, "ls -a /root /home"))
        found = await sh(sandbox, 'grep -rl "the host\'s" /root /home /etc /var /opt /srv')
        assert found.text == ""
        assert (await sh(sandbox, f"ls -d {backend.data_dir}")).exit.exit_code != 0
        overlays = ok(await sh(sandbox, "grep ' - overlay ' /proc/self/mountinfo"))
        assert len(overlays.splitlines()) >= 2 and str(backend.data_dir) not in overlays
    finally:
        marker.unlink()


async def test_links_left_in_the_layer_cannot_steer_the_next_boot(backend: LocalBackend) -> None:
    """The root layer is the sandbox's. While it runs, the kernel pins the mount points'
    directories (they cannot be removed or renamed); but a layer can hold a link where a
    mount point will be (an older Burrow mounted nothing there). A /var that is a link to
    /usr would put the dpkg overlay over the host's /usr/lib/dpkg if the host followed it;
    a /.burrow that is a link to a fake guest would run the sandbox's own agent, which
    could drop the read-only wall. Both are made real directories again at the boot."""
    sandbox = await backend.create("steer")
    fake = (
        "mkdir -p /workspace/fake/guest && touch /workspace/fake/guest/__init__.py && "
        'echo \'open("/workspace/pwned", "w")\' > /workspace/fake/guest/server.py'
    )
    ok(await sh(sandbox, fake))
    await backend.hibernate(sandbox)
    upper = backend.layer_dir("steer") / "root" / "upper"
    for name, points_to in ((".burrow", "/workspace/fake"), ("var", "/usr")):
        shutil.rmtree(upper / name, ignore_errors=True)
        (upper / name).symlink_to(points_to)
    sandbox = await backend.create("steer")  # the host's guest answered the handshake
    assert "/usr/lib/dpkg" not in mount_targets()
    assert not any(t.startswith("/usr/lib/dpkg") for t in mount_targets())
    check = "test ! -L /var && test ! -L /.burrow && ls /var/lib/dpkg/status && ls /workspace"
    assert "pwned" not in ok(await sh(sandbox, check))


async def test_set_id_bits_raise_nobody(backend: LocalBackend) -> None:
    sandbox = await backend.create("setuid")
    script = (
        "useradd -m mallory && cp /bin/bash /usr/local/bin/rootsh"
        " && chmod 4755 /usr/local/bin/rootsh"
        " && runuser -u mallory -- /usr/local/bin/rootsh -p -c 'id -u; cat /etc/shadow'"
    )
    result = await sh(sandbox, script)
    assert result.text.split("\n")[0] not in ("", "0"), result.text
    assert "Permission denied" in result.stderr.decode()


async def test_root_in_the_sandbox_cannot_raise_its_limits(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data", limits=TEST_LIMITS)
    try:
        sandbox = await backend.create("limits")
        attempts = {
            "mount cgroup2": "mount -t cgroup2 none /mnt",
            "mount tmpfs": "mount -t tmpfs none /mnt",
            "raise nofile": "prlimit --pid $$ --nofile=1048576:1048576",
            "sysctl": "echo 1 > /proc/sys/vm/drop_caches",
            "unshare": "unshare --user --map-root-user true",
        }
        for name, attempt in attempts.items():
            result = await sh(sandbox, attempt)
            assert result.exit.exit_code != 0, f"{name} succeeded"
        assert ok(await sh(sandbox, "cat /proc/self/status | grep CapEff")).split()[1] == (
            f"{_capability_mask():016x}"
        )
    finally:
        await backend.close()


def _capability_mask() -> int:
    from burrow.sandbox.bwrap import ROOT_CAPABILITIES

    numbers = {
        "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_FSETID": 4,
        "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8,
        "CAP_NET_BIND_SERVICE": 10, "CAP_SYS_CHROOT": 18, "CAP_AUDIT_WRITE": 29,
        "CAP_SETFCAP": 31,
    }  # fmt: skip
    return sum(1 << numbers[name] for name in ROOT_CAPABILITIES)


async def test_a_read_only_root_is_still_there_for_who_asks(tmp_path: Path) -> None:
    """BURROW_SANDBOX_ROOT=read-only: the host's system read-only, no capability."""
    backend = LocalBackend(tmp_path / "data", root="read-only")
    try:
        sandbox = await backend.create("ro")
        status = ok(await run(sandbox, "cat", "/proc/self/status"))
        assert "CapEff:\t0000000000000000" in status
        for target in ("/usr/evil", "/etc/passwd", "/evil"):
            result = await sh(sandbox, f"echo pwned > {target}")
            assert result.exit.exit_code != 0, f"{target} is writable"
        assert (await sh(sandbox, "ls -d /etc/shadow /root")).exit.exit_code != 0
        assert not backend.layer_dir("ro").exists()
    finally:
        await backend.close()
