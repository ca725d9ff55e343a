"""A checkpoint reads what changed since the one before, not all there is: a change that
keeps the size and puts the mtime back, a file become a link, deletions, a folder moved in
with old times and a folder renamed are all caught, a lost index or a mark from the future
costs a whole walk, not a change missed, and unchanged files are never opened (counted with
inotify on the host's side of the workspace). Each holds for a walked workspace and for a
watched one; what only a watch could get wrong (a flood, hard links, a take that failed,
hostile names) is tested against both ways of taking the same workspace."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import random
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.runs.workspace.checkpoints import Checkpoints
from burrow.runs.workspace.workspace_diff import Diff
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend, LocalSandbox
from tests.sandbox.harness import run

CID = "c"
# Past git's and the checkpoints' racy second: what follows is told apart by stat alone.
PAST_RACY = "sleep 1.1"


@pytest.fixture(params=["walk", "watch"])
async def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    """Each test twice: a workspace found by walking it, and one on its own disk, watched
    (sandbox/watch.py), where a take is handed what the watch saw."""
    watched = request.param == "watch"
    backend = LocalBackend(tmp_path / "data", limits=Limits(disk_mb=128) if watched else None)
    try:
        created = await backend.create("ckpt")
        assert (created.workspace_changes is not None) == watched
        yield created
    finally:
        await backend.close()


def store_of(sandbox: LocalSandbox, max_file_bytes: int = 10 * 1024 * 1024) -> Checkpoints:
    async def get(_cid: str) -> LocalSandbox:
        return sandbox

    return Checkpoints(get, max_file_bytes=max_file_bytes)


async def sh(sandbox: LocalSandbox, command: str) -> str:
    done = await run(sandbox, "sh", "-c", command)
    assert done.exit.exit_code == 0, (command, done.stderr)
    return done.text


def changes(diff: Diff) -> dict[str, str]:
    return {f.path: f.status for f in diff.files}


async def test_a_change_that_keeps_size_and_mtime_is_seen(sandbox: LocalSandbox) -> None:
    store = store_of(sandbox)
    await sh(sandbox, "mkdir d && echo one > d/a && echo one > d/b")
    await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    before = await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    # Same size, the mtime put back to the nanosecond: only the ctime tells.
    await sh(sandbox, 't=$(stat -c %y d/a) && echo two > d/a && touch -d "$t" d/a')
    assert await sh(sandbox, "stat -c %s d/a d/b") == "4\n4\n"
    after = await store.take(CID, None)
    diff = await store.diff(CID, before.id, after.id)
    assert changes(diff) == {"d/a": "modified"} and "+two" in diff.files[0].patch
    # The same within the racy second of the checkpoint before it.
    await sh(sandbox, 't=$(stat -c %y d/b) && echo six > d/b && touch -d "$t" d/b')
    racy = await store.take(CID, None)
    assert changes(await store.diff(CID, after.id, racy.id)) == {"d/b": "modified"}


async def test_links_deletions_and_moved_folders_are_seen(sandbox: LocalSandbox) -> None:
    store = store_of(sandbox)
    await sh(
        sandbox,
        "mkdir -p src/deep old .burrow/outputs/pkg && echo a > src/a && echo b > src/deep/b"
        " && echo c > old/c && echo gone > gone.txt && echo kept > kept.txt"
        " && echo p > .burrow/outputs/pkg/p.txt && mkdir .burrow/outputs/pkg/sub"
        " && echo q > .burrow/outputs/pkg/sub/q.txt",
    )
    await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    before = await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    # A file become a link, a file and a folder deleted, a folder (with a subfolder) moved
    # in from outside the checkpoints with its old ctimes, a folder renamed.
    await sh(
        sandbox,
        "rm src/a && ln -s kept.txt src/a && rm gone.txt && rm -r old"
        " && mv .burrow/outputs/pkg pkg && mv src/deep src/moved",
    )
    after = await store.take(CID, None)
    diff = await store.diff(CID, before.id, after.id)
    assert changes(diff) == {
        "src/a": "modified",
        "gone.txt": "deleted",
        "old/c": "deleted",
        "pkg/p.txt": "added",
        "pkg/sub/q.txt": "added",
        "src/deep/b": "deleted",
        "src/moved/b": "added",
    }
    link = next(f for f in diff.files if f.path == "src/a")
    assert "+kept.txt" in link.patch and "new file mode 120000" in link.patch
    # Restore and diff give what they gave before: the workspace as it was.
    await store.restore(CID, before.id)
    assert await sh(sandbox, "cat src/a old/c gone.txt src/deep/b; ls . src") == (
        "a\nc\ngone\nb\n.:\ngone.txt\nkept.txt\nold\nsrc\n\nsrc:\na\ndeep\n"
    )
    again = await store.take(CID, None)
    assert changes(await store.diff(CID, before.id, again.id)) == {}


async def test_a_store_without_its_index_walks_everything(sandbox: LocalSandbox) -> None:
    store = store_of(sandbox)
    await sh(sandbox, "echo a > a && echo b > b")
    before = await store.take(CID, None)
    await store.seal(CID)
    await sh(sandbox, PAST_RACY)
    await sh(sandbox, "echo bb > b && echo c > c && rm .burrow/checkpoints/index")
    after = await store.take(CID, None)
    assert changes(await store.diff(CID, before.id, after.id)) == {"b": "modified", "c": "added"}


async def test_a_mark_later_than_now_is_not_trusted(sandbox: LocalSandbox) -> None:
    store = store_of(sandbox)
    await sh(sandbox, "echo one > a")
    before = await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    # As if the clock were set back an hour since the last walk (or the mark planted).
    mark = await sh(sandbox, "cat .burrow/checkpoints/mark")
    assert mark.split()[1] == "10240", mark  # the size bound it walked with
    await sh(sandbox, 'echo "$(( $(date +%s) + 3600 )).5 10240" > .burrow/checkpoints/mark')
    await sh(sandbox, 't=$(stat -c %y a) && echo two > a && touch -d "$t" a')
    after = await store.take(CID, None)
    assert changes(await store.diff(CID, before.id, after.id)) == {"a": "modified"}


async def test_a_take_holds_the_workspace_as_it_was_captured(sandbox: LocalSandbox) -> None:
    store = store_of(sandbox)
    await sh(sandbox, "echo one > a")
    before = await store.take(CID, None)
    await store.seal(CID)
    await sh(sandbox, PAST_RACY)
    await sh(sandbox, "echo two > a")
    taken = await store.take(CID, "r_1")
    # Left pending (a server killed before it sealed): what changes after the capture is
    # not in it, and the next operation seals it first.
    assert (await sh(sandbox, "cat .burrow/checkpoints/pending")).startswith(taken.id + " ")
    await sh(sandbox, "echo three > a && rm -f .burrow/checkpoints/tree")
    listed = await store.list(CID)
    assert [c.id for c in listed] == [before.id, taken.id]
    assert listed[1].run_id == "r_1" and (listed[1].size or 0) > 0
    diff = await store.diff(CID, before.id, taken.id)
    assert changes(diff) == {"a": "modified"} and "+two" in diff.files[0].patch
    assert "+three" in (await store.diff(CID, taken.id, None)).files[0].patch
    await store.seal(CID)  # nothing pending: no-op
    assert [c.id for c in await store.list(CID)] == [before.id, taken.id]


async def test_a_file_become_a_fifo_leaves_the_checkpoint(sandbox: LocalSandbox) -> None:
    store = store_of(sandbox)
    await sh(sandbox, "echo one > a && echo b > b")
    before = await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    # git cannot take a fifo: the path by path comparison drops it from the index instead.
    await sh(sandbox, "rm a && mkfifo a && echo bb > b && echo c > c")
    after = await store.take(CID, None)
    assert changes(await store.diff(CID, before.id, after.id)) == {
        "a": "deleted",
        "b": "modified",
        "c": "added",
    }


async def test_a_lower_bound_on_file_size_leaves_out_an_unchanged_file(
    sandbox: LocalSandbox,
) -> None:
    store = store_of(sandbox)
    await sh(sandbox, "head -c 4096 /dev/zero > mid && echo s > small")
    await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    before = await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    lower = store_of(sandbox, max_file_bytes=2048)
    after = await lower.take(CID, None)
    assert changes(await lower.diff(CID, before.id, after.id)) == {"mid": "deleted"}
    assert (await lower.diff(CID, after.id, None)).skipped == ["mid"]


class Opened:
    """Files opened under a folder, as inotify on the host reports them."""

    IN_OPEN, IN_ISDIR, IN_NONBLOCK = 0x20, 0x40000000, 0o4000

    def __init__(self, root: Path) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._fd = self._libc.inotify_init1(self.IN_NONBLOCK)
        assert self._fd >= 0
        self._folders: dict[int, str] = {}
        for here, dirs, _ in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".burrow"]
            wd = self._libc.inotify_add_watch(self._fd, here.encode(), self.IN_OPEN)
            assert wd >= 0, ctypes.get_errno()
            self._folders[wd] = os.path.relpath(here, root)

    def files(self) -> list[str]:
        opened, data = [], b""
        while True:
            try:
                data += os.read(self._fd, 65536)
            except BlockingIOError:
                break
        offset = 0
        while offset < len(data):
            wd, mask, _cookie, size = struct.unpack_from("iIII", data, offset)
            name = data[offset + 16 : offset + 16 + size].rstrip(b"\0").decode()
            offset += 16 + size
            if not mask & self.IN_ISDIR and name:
                opened.append(os.path.join(self._folders[wd], name))
        return opened

    def close(self) -> None:
        os.close(self._fd)


async def test_unchanged_files_are_not_opened(sandbox: LocalSandbox) -> None:
    store = store_of(sandbox)
    await sh(
        sandbox,
        "for d in $(seq 1 20); do mkdir d$d && for f in $(seq 1 100); do echo $d.$f > d$d/f$f;"
        " done; done",
    )
    await store.take(CID, None)
    # As if that checkpoint were taken in the second the first file was written (it is, on
    # a quick machine, some of the time): to git every file is then racily clean.
    await sh(sandbox, 'touch -d "@$(stat -c %Y d1/f1)" .burrow/checkpoints/index')
    # The next index written re-reads the racily clean files, once: this take's, which has
    # a change to write (a watched take writes the index only then).
    await sh(sandbox, "echo new > new")
    await sh(sandbox, PAST_RACY)
    before = await store.take(CID, None)
    await sh(sandbox, PAST_RACY)
    await sh(sandbox, "echo changed >> d7/f7")
    opened = Opened(sandbox.workspace_dir)
    try:
        await asyncio.sleep(0)
        after = await store.take(CID, None)
        files = opened.files()
    finally:
        opened.close()
    assert files == ["d7/f7"]  # of 2,000: the one that changed, read once to be stored
    assert changes(await store.diff(CID, before.id, after.id)) == {"d7/f7": "modified"}


def _random_changes(rng: random.Random, count: int) -> str:
    """Shell for `count` changes among a few names, every kind a take must tell apart."""
    names = ["a", "b", "d/a", "d/b", "d/e/a", "e", "e/a", "big", ".burrow/outputs/o"]
    steps = []
    for _ in range(count):
        path, other = rng.choice(names), rng.choice(names)
        steps.append(
            rng.choice(
                [
                    f"mkdir -p $(dirname {path}) && w {path} && echo {rng.random()} >> {path}",
                    f"rm -rf {path}",
                    f"mkdir -p {path}/x && w {path}/x/f && echo in > {path}/x/f",  # file to folder
                    f"mkdir -p $(dirname {other}) && mv {path} {other}",
                    f"chmod +x {path}",
                    f"ln -sfn {other} {path}",
                    f"rm -rf {path} && mkfifo {path}",
                    # Either side of the 4 KiB bound.
                    f"w {path} && head -c {rng.choice([100, 5000])} /dev/urandom > {path}",
                    f"rm -rf .burrow/outputs/m && mkdir -p .burrow/outputs/m/n"
                    " && echo m > .burrow/outputs/m/n/f"
                    f" && rm -rf {path} && mv .burrow/outputs/m {path}",  # moved in whole
                ]
            )
            + " 2>/dev/null"
        )
    # A FIFO is never written to: with no reader, that would block for good.
    unfifo = 'w() { [ ! -p "$1" ] || rm "$1"; }'
    return unfifo + "; " + "; ".join(steps) + "; true"


async def test_an_empty_workspace_is_walked_once(sandbox: LocalSandbox) -> None:
    """A new conversation's workspace holds nothing to add to the index: it still gets one,
    so a watched take is handed what changed rather than walking at every run."""
    store = store_of(sandbox)
    await store.take(CID, None)
    await store.seal(CID)
    walked = "stat -c %Y.%y .burrow/checkpoints/now"
    last_walk = await sh(sandbox, walked)
    for _ in range(2):
        await store.take(CID, None)
        await store.seal(CID)
    if sandbox.workspace_changes is not None:
        assert await sh(sandbox, walked) == last_walk
    await sh(sandbox, "echo now > now.txt")
    taken = await store.take(CID, None)
    assert changes(await store.diff(CID, taken.id, None)) == {}
    listed = await store.list(CID)
    assert changes(await store.diff(CID, listed[-2].id, taken.id)) == {"now.txt": "added"}


async def test_every_take_holds_what_a_whole_walk_finds(sandbox: LocalSandbox) -> None:
    """Random changes of every kind, a take after each round; each checkpoint is checked
    against a walk of everything from scratch (no mark, no index): nothing is missed."""
    rng = random.Random(22)
    store = store_of(sandbox, max_file_bytes=4096)
    await sh(sandbox, "echo seed > seed")
    await store.take(CID, None)  # a walk (the watch's first answer: not known)
    walked = "stat -c %Y.%y .burrow/checkpoints/now"  # each walk rewrites it
    for round_ in range(30):
        await sh(sandbox, _random_changes(rng, 6))
        if round_ % 4 == 3:
            await sh(sandbox, PAST_RACY)
        last_walk = await sh(sandbox, walked)
        taken = await store.take(CID, None)
        if sandbox.workspace_changes is not None:  # handed what changed: no walk at all
            assert await sh(sandbox, walked) == last_walk, round_
        await store.seal(CID)
        await sh(sandbox, "cd .burrow/checkpoints && rm -f mark index tree")
        diff = await store.diff(CID, taken.id, None)
        assert changes(diff) == {}, (round_, changes(diff))
