"""Debian bases: a Debian system built with mmdebstrap, the lower layer of a sandbox's root.

An environment's base is the host's system by default (rootfs.py: nothing to build). With
`base: "debian:<suite>"` it is instead a Debian rootfs that `mmdebstrap --mode=unshare`
builds from the host's own Debian mirror (the one its apt sources name), with the
environment's packages (and python3, which the sandbox's guest runs on), once per suite
and package list: the base's key. Every sandbox of every environment on that base stands
on the same tree, read-only (an overlay's lower layer never changes), under a layer of its
own; what it installs lands in that layer.

The tree lives under the backend's environments directory like any environment build,
`<data dir>/environments/<key>/rootfs`, so a sandbox can boot on the base itself (the
environment's own build does, and then keeps only what its setup changed) and an
environment built on it names it in a `base` file beside its layer. Its files belong to
the sandboxes' uid range (idmap.py): mmdebstrap writes a tarball whose owners are the ids
inside (root is 0), the host unpacks it as they are, without its device nodes (every boot
has its own /dev), and moves every id into the range, as a sandbox's workspace is.

mmdebstrap runs in user namespaces of its own (unprivileged, as root's subordinate ids or
none); its temporary files sit in the build's own directory, which a cancelled or failed
build removes whole. A half-built base is never used: it is built under a dot name (the
collector passes those by) and renamed when complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import urlparse

from burrow.sandbox import idmap
from burrow.sandbox.backend import ErrorCode, SandboxError
from burrow.sandbox.bwrap import SANDBOX_GUEST_ROOT, SANDBOX_WORKSPACE
from burrow.sandbox.idmap import IdRange

PREFIX = "debian:"
SUITE = re.compile(r"[a-z][a-z0-9-]{1,31}")
KEY = re.compile(r"debian-[a-z][a-z0-9-]{1,31}-[0-9a-f]{12}")
ALWAYS = ("python3",)  # the sandbox's guest is a Python program
VARIANT = "apt"  # Essential: yes packages and apt: what installing more needs
ROOTFS = "rootfs"  # the tree, in the base's directory
BASE_FILE = "base"  # in an environment built on a base: the base's key
APT = Path("/etc/apt")
# Made in the tree before it is re-owned: where every boot mounts its own or bwrap binds.
MOUNT_POINTS = (
    *("proc", "dev", "run", "sys", "tmp"),
    SANDBOX_WORKSPACE.lstrip("/"),
    f"{SANDBOX_GUEST_ROOT.lstrip('/')}/guest",
)
STOP_SECONDS = 10.0  # after SIGTERM, how long mmdebstrap may take to clean up


@runtime_checkable
class BaseStore(Protocol):
    """A backend that can boot sandboxes on a Debian base (the local one)."""

    def environments_dir(self) -> Path: ...

    def id_range(self) -> IdRange | None: ...

    def root_unavailable(self) -> str: ...


class BuildFailed(Exception):
    """mmdebstrap (or unpacking its tarball) failed: its exit and the tail of its output
    are in the build's log."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def suite_of(base: str) -> str | None:
    """`debian:bookworm` -> `bookworm`; None for any other base (or a malformed suite)."""
    if not base.startswith(PREFIX):
        return None
    suite = base[len(PREFIX) :]
    return suite if SUITE.fullmatch(suite) else None


def key(suite: str, packages: tuple[str, ...]) -> str:
    """The base's identity: its suite and the packages in it (order and repeats aside)."""
    what = json.dumps([suite, sorted({*ALWAYS, *packages})])
    return f"debian-{suite}-{hashlib.sha256(what.encode()).hexdigest()[:12]}"


def unavailable() -> str:
    """Why this host cannot build Debian bases ("" when it can)."""
    if shutil.which("mmdebstrap") is None:
        return "mmdebstrap is not installed (`apt-get install mmdebstrap`; `make setup` does)"
    if host_mirror() is None:
        return f"the host's apt sources ({APT}/sources.list*) name no Debian mirror"
    return ""


def host_mirror(apt: Path = APT) -> str | None:
    """The Debian mirror the host's apt uses (its first `deb` source that is Debian's
    archive, not its security archive or a third party's), for mmdebstrap to use too."""
    for uri in _deb_sources(apt):
        path = urlparse(uri).path.rstrip("/")
        if path.endswith("/debian") or path == "/debian":
            return uri
    return None


def _deb_sources(apt: Path) -> list[str]:
    """The URIs of `deb` entries, in apt's order: sources.list, then sources.list.d's
    one-line (.list) and deb822 (.sources) files by name."""
    uris: list[str] = []
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*"))]
    for file in files:
        try:
            text = file.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if file.name.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = _stanza(stanza)
                if "deb" in fields.get("types", "").split() and fields.get("enabled") != "no":
                    uris += fields.get("uris", "").split()
        elif file.name == "sources.list" or file.name.endswith(".list"):
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
                if len(words) >= 3 and words[0] == "deb":
                    uris.append(words[1])
    return uris


def _stanza(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#") or ":" not in line or line[:1].isspace():
            continue
        name, value = line.split(":", 1)
        fields[name.strip().lower()] = value.strip()
    return fields


def rootfs_of(environment: Path) -> Path | None:
    """The Debian tree a sandbox on the environment build `environment` stands on: the
    base's own (a base booted as itself), the one its `base` file names, or None (an
    environment on the host's system)."""
    own = environment / ROOTFS
    if own.is_dir():
        return own
    named = base_of(environment)
    if named is None:
        return None
    tree = environment.parent / named / ROOTFS
    if not tree.is_dir():
        raise SandboxError(
            ErrorCode.BOOT_FAILED,
            f"the Debian base {named} this environment was built on is gone; "
            "save the environment again to rebuild it",
        )
    return tree


def base_of(environment: Path) -> str | None:
    """The key in an environment build's `base` file (only a well-formed one counts)."""
    try:
        named = (environment / BASE_FILE).read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return named if KEY.fullmatch(named) else None


def mark(environment: Path, base_key: str) -> None:
    """Name the base an environment build stands on (written after its layer is saved)."""
    temporary = environment / f".{BASE_FILE}.{os.getpid()}"
    temporary.write_text(base_key + "\n")
    os.replace(temporary, environment / BASE_FILE)


def mmdebstrap_argv(suite: str, packages: tuple[str, ...], mirror: str, out: Path) -> list[str]:
    include = ",".join(sorted({*ALWAYS, *packages}))
    return [
        "mmdebstrap",
        "--mode=unshare",
        f"--variant={VARIANT}",
        f"--include={include}",
        "--format=tar",
        suite,
        str(out),
        mirror,
    ]


async def build(
    directory: Path,
    suite: str,
    packages: tuple[str, ...],
    ids: IdRange,
    output: Callable[[bytes], None],
) -> None:
    """Build the base into `directory` (`<environments>/<key>`), `output` hearing every
    byte mmdebstrap writes. Cancelling stops mmdebstrap and leaves nothing behind; a
    failure raises BuildFailed. Nothing is done when the base is there."""
    if (directory / ROOTFS).is_dir():
        return
    missing = unavailable()
    if missing:
        raise BuildFailed(f"this host cannot build a Debian base: {missing}.")
    mirror = host_mirror()
    assert mirror is not None
    making = directory.with_name(f".{directory.name}.{os.getpid()}")
    await asyncio.to_thread(shutil.rmtree, making, ignore_errors=True)
    making.mkdir(mode=0o700, parents=True)
    try:
        tarball = making / "rootfs.tar"
        argv = mmdebstrap_argv(suite, packages, mirror, tarball)
        output(f"[burrow] {' '.join(argv)}\n".encode())
        code = await _run(argv, making, output)
        if code != 0:
            raise BuildFailed(f"mmdebstrap exited with {code}")
        output(b"[burrow] unpacking the base into the sandboxes' uid range\n")
        await asyncio.to_thread(_unpack, tarball, making / ROOTFS, ids)
        tarball.unlink()
        making.rename(directory)
    finally:
        await asyncio.to_thread(shutil.rmtree, making, ignore_errors=True)


async def _run(argv: list[str], scratch: Path, output: Callable[[bytes], None]) -> int:
    """mmdebstrap's exit; its output streamed. Its own process group, so a cancel stops
    every process it started (SIGTERM first: it then removes its temporary tree)."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": str(scratch), "LC_ALL": "C.UTF-8"}
    child = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        cwd=scratch,
        start_new_session=True,
    )
    assert child.stdout is not None
    try:
        while chunk := await child.stdout.read(4096):
            output(chunk)
        return await child.wait()
    except BaseException:
        await asyncio.shield(_stop(child))
        raise


async def _stop(child: asyncio.subprocess.Process) -> None:
    if child.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(child.wait(), STOP_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        await child.wait()


def _unpack(tarball: Path, tree: Path, ids: IdRange) -> None:
    """The tarball's files as they are (numeric owners, modes, xattrs), no device nodes,
    then every id moved into the range and the mount points made."""
    tree.mkdir(mode=0o755)
    argv = [
        "tar",
        "--extract",
        "--file",
        str(tarball),
        "--directory",
        str(tree),
        "--numeric-owner",
        "--same-permissions",
        "--xattrs",
        "--xattrs-include=*",
        "--exclude=./dev/*",
        "--no-overwrite-dir",
    ]
    done = subprocess.run(argv, capture_output=True, check=False)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace")[-1000:]
        raise BuildFailed(f"unpacking mmdebstrap's tarball failed: {tail}")
    for point in MOUNT_POINTS:
        (tree / point).mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(tree / "tmp", 0o1777)
    os.chmod(tree, 0o755)
    idmap.reown(tree, ids)
