"""The data directory is private to the server's user (issue 9, finding 8).

The attack: another local user (`nobody`) reads `burrow.db` (argon2 hashes, journals) or
a workspace's disk image straight off the disk. The data directory lives under a folder
anyone may traverse, as `~/.local/share` usually is, so only Burrow's own modes stop it.
"""

from __future__ import annotations

import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.harness import ADMIN_PASSWORD, serve_process

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A folder every local user can traverse (pytest's own tmp_path is 0700)."""
    parent = Path(tempfile.mkdtemp(prefix="burrow-datadir-"))
    parent.chmod(0o755)
    probe = parent / "probe"
    probe.write_text("readable")
    probe.chmod(0o644)
    # The attacker can read what is not protected: the reads below fail for a reason.
    assert as_nobody("cat", str(probe)).stdout == b"readable"
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def as_nobody(*argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*NOBODY, *argv], capture_output=True, timeout=30)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def start_a_sandbox(base: str) -> str:
    """Log in, create a conversation and list its files: its workspace image exists."""
    with httpx.Client(base_url=base, timeout=30) as client:
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        assert client.post("/api/auth/login", json=login).status_code == 200
        cid: str = client.post("/api/conversations", json={"title": "t"}).json()["id"]
        assert client.get(f"/api/conversations/{cid}/files").status_code == 200
        return cid


def stop(process: subprocess.Popen[bytes]) -> None:
    """A clean stop (SIGTERM): sandboxes stop and workspace images are unmounted."""
    process.send_signal(signal.SIGTERM)
    process.wait(30)


def test_a_fresh_data_dir_is_private_and_nobody_reads_it(
    open_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BURROW_SANDBOX_DISK_MB", "64")
    data = open_parent / "data"
    stderr = open_parent / "stderr"
    with stderr.open("wb") as err, serve_process(data, "demo", stderr=err) as (server, base):
        cid = start_a_sandbox(base)
        image = data / "workspaces" / f"{cid}.img"
        assert image.is_file(), "the workspace disk image (BURROW_SANDBOX_DISK_MB) is missing"
        expected = {
            data: 0o700,
            data / "burrow.db": 0o600,
            data / "burrow.db-wal": 0o600,
            data / "burrow.db-shm": 0o600,
            data / "secret.key": 0o600,
            data / "preview.key": 0o600,
            data / "workspaces": 0o700,
            image: 0o600,
        }
        assert {p: oct(mode(p)) for p in expected} == {p: oct(m) for p, m in expected.items()}

        for target in (data / "burrow.db", data / "burrow.db-wal", image):
            read = as_nobody("dd", f"if={target}", "of=/dev/null", "count=1")
            assert read.returncode != 0, f"nobody read {target}"
            assert b"Permission denied" in read.stderr
        listing = as_nobody("ls", str(data))
        assert listing.returncode != 0 and b"Permission denied" in listing.stderr
        stop(server)
    assert mode(data / "workspaces" / cid) == 0o700  # the mount point, unmounted again
    assert "warning" not in stderr.read_text()  # nothing to repair on a fresh start


def test_looser_modes_are_repaired_at_start_with_a_warning(
    open_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BURROW_SANDBOX_DISK_MB", "64")
    data = open_parent / "data"
    with serve_process(data, "demo") as (server, base):
        cid = start_a_sandbox(base)
        stop(server)
    # As an older Burrow (or a copy without -p) left it: folders 0755, files 0644.
    loose = [data, data / "workspaces", data / "workspaces" / cid]
    loose += [data / name for name in ("burrow.db", "secret.key", "preview.key")]
    loose += [data / "workspaces" / f"{cid}.img"]
    for path in loose:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert as_nobody("dd", f"if={data / 'burrow.db'}", "of=/dev/null").returncode == 0

    stderr = open_parent / "stderr"
    with stderr.open("wb") as err, serve_process(data, "demo", stderr=err) as (server, _):
        assert {p: oct(mode(p)) for p in loose} == {
            p: oct(0o700 if p.is_dir() else 0o600) for p in loose
        }
        read = as_nobody("dd", f"if={data / 'burrow.db'}", "of=/dev/null")
        assert read.returncode != 0 and b"Permission denied" in read.stderr
        stop(server)
    warning = stderr.read_text()
    assert f"warning: {len(loose)} path(s) in the data directory were readable" in warning
    assert str(data / "burrow.db") in warning
