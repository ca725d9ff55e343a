"""Debian bases (debian_base.py): a real mmdebstrap build (once per test process, shared:
tests/sandbox/debian.py), the lower layer of real sandboxes that see that Debian and not
the host's system, install into their own layer with apt, and cannot change the base.

The installs go through the sandbox's egress to the Debian mirror the host's apt uses.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.sandbox import debian_base, idmap
from burrow.sandbox.local import LocalBackend
from burrow.sandbox.network import egress_unavailable
from tests.sandbox.debian import link_into, shared_base
from tests.sandbox.harness import ok, run, sh

INSTALL_SECONDS = 300
HOST_ONLY = ("/usr/bin/slirp4netns", "/usr/bin/mmdebstrap")  # the host has them, the base not


async def output_of(*argv: str) -> str:
    child = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    out, _ = await child.communicate()
    return out.decode()


@pytest.fixture
async def on_debian(tmp_path: Path) -> AsyncIterator[tuple[LocalBackend, str]]:
    """A backend with egress whose environments hold the shared base; and its key."""
    assert not egress_unavailable(), egress_unavailable()
    backend = LocalBackend(tmp_path / "data", network="egress")
    key = await asyncio.to_thread(link_into, backend.environments_dir())
    try:
        yield backend, key
    finally:
        await backend.close()


def snapshot(tree: Path) -> dict[str, tuple[int, int, int, int, int]]:
    """Every entry's mode, owner, group, size and mtime: what a write would change."""
    seen = {}
    for directory, dirs, files in os.walk(tree):
        for name in (*dirs, *files):
            path = os.path.join(directory, name)
            st = os.lstat(path)
            seen[path] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns)
    return seen


def test_the_mirror_is_the_one_the_host_s_apt_uses(tmp_path: Path) -> None:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d" / "a-third-party.list").write_text(
        "deb [signed-by=/k.gpg] https://deb.nodesource.com/node_20.x nodistro main\n"
    )
    (apt / "sources.list.d" / "b.sources").write_text(
        "Types: deb\nURIs: http://security.debian.org/debian-security\nSuites: x-security\n\n"
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n"
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
        "Types: deb\n# a comment\nURIs: http://ftp.de.debian.org/debian/\nSuites: bookworm\n"
    )
    assert debian_base.host_mirror(apt) == "http://ftp.de.debian.org/debian/"
    (apt / "sources.list").write_text("# deb http://old.example/debian sid main\n")
    assert debian_base.host_mirror(apt) == "http://ftp.de.debian.org/debian/"
    (apt / "sources.list").write_text("deb [arch=amd64] http://mirror.example/debian sid main\n")
    assert debian_base.host_mirror(apt) == "http://mirror.example/debian"
    assert debian_base.host_mirror(tmp_path / "nowhere") is None
    # This host's: what its own apt sources say, never a name written into Burrow.
    configured = [
        line.split(":", 1)[1].strip()
        for source in Path("/etc/apt/sources.list.d").glob("*.sources")
        for line in source.read_text().splitlines()
        if line.startswith("URIs:") and line.rstrip("/").endswith("/debian")
    ]
    assert debian_base.host_mirror() == configured[0]


def test_a_base_is_keyed_by_its_suite_and_packages() -> None:
    key = debian_base.key("bookworm", ("git", "nodejs"))
    assert debian_base.KEY.fullmatch(key)
    assert key == debian_base.key("bookworm", ("nodejs", "git", "git"))
    assert key == debian_base.key("bookworm", ("nodejs", "git", "python3"))  # always there
    assert key != debian_base.key("trixie", ("git", "nodejs"))
    assert key != debian_base.key("bookworm", ("git",))
    for base in ("debian:", "debian:Bookworm", "debian:../x", "debian:a", "ubuntu:jammy", "host"):
        assert debian_base.suite_of(base) is None, base
    assert debian_base.suite_of("debian:bookworm-backports") == "bookworm-backports"


def test_the_base_belongs_to_the_sandboxes_range_without_device_nodes() -> None:
    tree = shared_base() / debian_base.ROOTFS
    ids = idmap.burrow_range()
    assert ids is not None
    assert idmap.owned_by(tree, ids) and idmap.owned_by(tree / "usr/bin/apt-get", ids)
    assert (tree / "etc/shadow").stat().st_gid == ids.start + 42  # shadow's group, shifted
    owners = {st.st_uid for st in map(os.lstat, snapshot(tree))}
    assert all(ids.contains(uid) for uid in owners)  # nothing of the host's root in it
    assert list((tree / "dev").iterdir()) == []  # every boot has its own /dev
    assert "VERSION_CODENAME=bookworm" in (tree / "etc/os-release").read_text()


async def test_a_sandbox_on_the_base_sees_that_debian_not_the_host_s_system(
    on_debian: tuple[LocalBackend, str],
) -> None:
    backend, key = on_debian
    sandbox = await backend.create("sees", environment=key)
    release = ok(await sh(sandbox, "cat /etc/os-release"))
    assert "ID=debian" in release and "VERSION_CODENAME=bookworm" in release
    # Its own /usr: what the host has installed (slirp4netns, mmdebstrap) is not there.
    assert await asyncio.to_thread(lambda: all(map(os.path.exists, HOST_ONLY)))
    assert (
        ok(await sh(sandbox, "ls /usr/bin/slirp4netns /usr/bin/mmdebstrap 2>&1 || true")).count(
            "No such file"
        )
        == 2
    )
    host_packages = (await output_of("dpkg-query", "-W", "-f", "${Package}\n")).split()
    inside = ok(await sh(sandbox, "dpkg-query -W -f '${Package}\\n'")).split()
    assert "python3" in inside and "apt" in inside and "slirp4netns" not in inside
    assert len(inside) < len(host_packages)
    # Root inside, the unprivileged range outside; no host path in its mount table.
    ids = backend.id_range()
    assert ids is not None
    assert ok(await sh(sandbox, "id -u")) == "0\n"
    assert ok(await sh(sandbox, "cat /proc/self/uid_map")).split() == [
        "0",
        str(ids.start),
        str(idmap.SIZE),
    ]
    # One overlay (the base and its layer; none of the host's grafts), naming no host path.
    overlays = ok(await sh(sandbox, "grep ' - overlay ' /proc/self/mountinfo"))
    assert len(overlays.splitlines()) == 1 and " / / " in overlays
    for host_path in (str(backend.data_dir), str(shared_base())):
        assert host_path not in overlays
        assert (await sh(sandbox, f"ls -d {host_path}")).exit.exit_code != 0


async def test_an_install_lands_in_the_sandbox_s_own_layer_and_nowhere_else(
    on_debian: tuple[LocalBackend, str],
) -> None:
    backend, key = on_debian
    tree = shared_base() / debian_base.ROOTFS
    assert not (tree / "usr/bin/jq").exists(), "pick a package the base lacks"
    first = await backend.create("installs", environment=key)
    install = "apt-get update -q && apt-get install -y -q --no-install-recommends jq"
    ok(await sh(first, install, timeout=INSTALL_SECONDS))
    assert ok(await sh(first, "echo '{\"a\": 7}' | jq .a")) == "7\n"
    assert not (tree / "usr/bin/jq").exists()  # the shared base is as it was
    assert (backend.layer_dir("installs") / "root/upper/usr/bin/jq").is_file()
    # Another conversation on the same base does not see it.
    second = await backend.create("another", environment=key)
    assert "No such" in ok(await sh(second, "ls /usr/bin/jq 2>&1 || true"))
    # The layer outlives its processes (hibernation): the install is still there.
    await backend.hibernate(first)
    woken = await backend.create("installs")  # it stays on the base it booted on
    assert ok(await sh(woken, "jq --version")).startswith("jq-")
    assert "VERSION_CODENAME=bookworm" in ok(await sh(woken, "cat /etc/os-release"))


async def test_a_hostile_root_cannot_change_the_shared_base(
    on_debian: tuple[LocalBackend, str],
) -> None:
    backend, key = on_debian
    tree = shared_base() / debian_base.ROOTFS
    before = await asyncio.to_thread(snapshot, tree)
    hostile = await backend.create("hostile", environment=key)
    attack = (
        "echo evil > /usr/bin/evil; echo evil >> /usr/bin/python3; chmod 777 /usr/bin; "
        "chown 1234 /etc/passwd; echo 'evil::0:0::/:/bin/sh' >> /etc/passwd; "
        "mount -o remount,rw / 2>&1; umount -l / 2>&1; "
        "mount -t tmpfs none /usr 2>&1; "
        "for fd in /proc/1/fd/*; do ls -l $fd; done 2>&1 | grep -v -e pipe -e socket -e null; "
        "rm -rf /usr /etc /var /opt 2>&1 | tail -1; echo done"
    )
    result = await sh(hostile, attack)
    assert "done" in result.text, result.text
    after = await asyncio.to_thread(snapshot, tree)
    assert after == before
    # What it did is its own: the deletions are whiteouts in its layer.
    upper = backend.layer_dir("hostile") / "root/upper"
    assert stat.S_ISCHR(os.lstat(upper / "usr").st_mode)
    # The next sandbox on the base starts on it as built.
    fresh = await backend.create("fresh", environment=key)
    assert ok(await sh(fresh, "ls /usr/bin/evil 2>&1; grep -c evil /etc/passwd || true")) == (
        "ls: cannot access '/usr/bin/evil': No such file or directory\n0\n"
    )
    assert ok(await run(fresh, "python3", "-c", "print('intact')")) == "intact\n"


async def test_a_cancelled_base_build_stops_mmdebstrap_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    ids = idmap.burrow_range()
    assert ids is not None
    directory = tmp_path / "environments" / debian_base.key("bookworm", ("jq",))
    started = asyncio.Event()

    def heard(data: bytes) -> None:
        if b"I: " in data:  # mmdebstrap itself is running
            started.set()

    building = asyncio.create_task(debian_base.build(directory, "bookworm", ("jq",), ids, heard))
    async with asyncio.timeout(60):
        await started.wait()
    building.cancel()
    with pytest.raises(asyncio.CancelledError):
        await building
    assert await output_of("pgrep", "-f", str(tmp_path)) == ""  # no mmdebstrap, apt or tar
    assert list((tmp_path / "environments").iterdir()) == []  # neither base nor scratch


async def test_a_failed_base_build_says_mmdebstrap_s_exit(tmp_path: Path) -> None:
    ids = idmap.burrow_range()
    assert ids is not None
    directory = tmp_path / "environments" / debian_base.key("bookworm", ("no-such-pkg-x",))
    heard = bytearray()
    with pytest.raises(debian_base.BuildFailed, match="mmdebstrap exited with"):
        await debian_base.build(directory, "bookworm", ("no-such-pkg-x",), ids, heard.extend)
    assert b"no-such-pkg-x" in heard
    assert list((tmp_path / "environments").iterdir()) == []
