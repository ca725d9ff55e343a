"""The sandbox's uid range (idmap.py): registered once, and what older Burrows left re-owned.

A data directory of Burrow da46d44 and before holds workspaces (and checkpoint stores in
them) written by sandboxes that ran as the host's root, so every file there is kuid 0's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burrow.sandbox import idmap
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend
from burrow.sandbox.stage import Stage
from tests.sandbox.harness import TEST_LIMITS, run

REPO = Path(__file__).resolve().parents[2]


def test_a_range_is_registered_once_past_every_other(tmp_path: Path) -> None:
    subuid, subgid = tmp_path / "subuid", tmp_path / "subgid"
    subuid.write_text("alice:100000:65536\nbob:165536:65536")  # no final newline
    subgid.write_text("alice:100000:65536\nbob:165536:65536\npodman:300000:1000\n")
    first = idmap.burrow_range(subuid, subgid)
    assert first == idmap.IdRange(327680)  # past podman's, on a 65,536 boundary
    assert subuid.read_text().splitlines()[-1] == "burrow:327680:65536"
    assert subgid.read_text().splitlines()[-1] == "burrow:327680:65536"
    assert idmap.burrow_range(subuid, subgid) == first
    assert subuid.read_text().count("burrow:") == 1
    assert "bob:165536:65536\nburrow" in subuid.read_text()


def test_an_operators_own_entry_is_used(tmp_path: Path) -> None:
    subuid, subgid = tmp_path / "subuid", tmp_path / "subgid"
    for path in (subuid, subgid):
        path.write_text("burrow:4000000:65536\n")
    assert idmap.burrow_range(subuid, subgid) == idmap.IdRange(4000000)


def old_workspace(workspace: Path) -> None:
    """What a da46d44 sandbox left: files, a nested git repository and a checkpoint store,
    all kuid 0's, plus a link out of the workspace that must never be followed."""
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print('old')\n")
    (workspace / "script.sh").write_text("echo hi\n")
    os.chmod(workspace / "script.sh", 0o755)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    store = ["--git-dir", str(workspace / ".burrow" / "checkpoints"), "--work-tree", str(workspace)]
    subprocess.run([*git, "init", "-q", "--bare", str(workspace / ".burrow" / "checkpoints")])
    subprocess.run([*git, *store, "add", "src"], check=True)
    subprocess.run([*git, *store, "commit", "-qm", "checkpoint"], check=True)
    (workspace / "host-passwd").symlink_to("/etc/passwd")


async def test_a_workspace_an_older_burrow_made_is_reowned_and_usable(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data")
    workspace = backend.workspace_dir("old")
    old_workspace(workspace)
    passwd = os.stat("/etc/passwd")
    try:
        sandbox = await backend.create("old")
        ids = backend.id_range()
        assert ids is not None
        edit = "echo new >> src/app.py && chmod +x src/app.py && rm script.sh && touch src/n"
        result = await run(sandbox, "sh", "-c", edit)
        assert result.exit.exit_code == 0, result.stderr
        log = await run(sandbox, "git", "--git-dir", ".burrow/checkpoints", "log", "--format=%s")
        assert log.text == "checkpoint\n", log.stderr
        commit = await run(
            sandbox, "sh", "-c",
            "git --git-dir .burrow/checkpoints --work-tree . -c user.name=t -c user.email=t@t "
            "commit -qam again && echo committed",
        )  # fmt: skip
        assert commit.text == "committed\n", commit.stderr
    finally:
        await backend.close()
    for path in (workspace, workspace / "src" / "app.py", workspace / ".burrow" / "checkpoints"):
        assert (path.stat().st_uid, path.stat().st_gid) == (ids.root, ids.root), path
    link = os.lstat(workspace / "host-passwd")
    assert (link.st_uid, link.st_gid) == (ids.root, ids.root)
    after = os.stat("/etc/passwd")
    assert (after.st_uid, after.st_gid, after.st_mode) == (
        passwd.st_uid,
        passwd.st_gid,
        passwd.st_mode,
    ), "the link was followed"


async def test_a_new_disk_image_belongs_to_the_range(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "data", limits=TEST_LIMITS)
    try:
        sandbox = await backend.create("fresh")
        ids = backend.id_range()
        assert ids is not None
        root = backend.workspace_dir("fresh")
        assert (root.stat().st_uid, root.stat().st_gid) == (ids.root, ids.root)
        assert (await run(sandbox, "sh", "-c", "touch a && ls -n a")).text.split()[2:4] == [
            "0",
            "0",
        ]
    finally:
        await backend.close()


KILLED_MID_BOOT = """
import sys
from pathlib import Path
from burrow.sandbox import idmap, leftovers, stage
data, runtime = Path(sys.argv[1]), Path(sys.argv[2])
lock = leftovers.claim(data)
runtime.mkdir()
ids = idmap.burrow_range()
stage.open_to(runtime, ids)
workspace = data / "workspaces" / "victim"
stage.Stage(runtime, ids).bind("victim", workspace)
import os
os.pwrite(lock, str(runtime).encode(), 0)
print("bound", flush=True)
os._exit(9)
"""


@pytest.mark.parametrize("limits", [None, TEST_LIMITS], ids=["directory", "disk image"])
async def test_a_stage_bind_left_by_a_killed_server_is_detached_not_deleted(
    tmp_path: Path, limits: Limits | None
) -> None:
    """A server killed between staging a workspace and its sandbox's start leaves a bind
    of the workspace inside its runtime directory; the next server removes that directory,
    and must detach the bind first rather than delete the workspace's files through it."""
    data = tmp_path / "data"
    backend = LocalBackend(data, limits=limits)
    sandbox = await backend.create("victim")
    await sandbox.write_file("precious.txt", b"keep me")
    await backend.close()
    if limits is not None:  # the workspace's disk stays mounted, as after a kill
        await backend._disk("victim").mount()  # type: ignore[union-attr]
    runtime = Path(f"/tmp/burrow-killed-{os.getpid()}-{id(limits)}")
    owner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", KILLED_MID_BOOT, str(data), str(runtime),
        stdout=asyncio.subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    assert owner.stdout is not None and await owner.stdout.readline() == b"bound\n"
    await owner.wait()
    staged = Stage(runtime, backend.id_range()).path_for("victim")  # type: ignore[arg-type]
    assert (staged / "precious.txt").exists()  # the bind outlived its server
    again = LocalBackend(data, limits=limits)
    try:
        await again.recover()
        sandbox = await again.create("victim")
        assert (await run(sandbox, "cat", "precious.txt")).text == "keep me"
        assert not await asyncio.to_thread(runtime.exists)
    finally:
        await again.close()
