"""The workspace watch (sandbox/watch.py), driven by code inside a real sandbox whose
workspace is on its own disk: it names what changed as it is now, and says "not known"
(None: walk) whenever it cannot stand behind an answer — a flood, a file with two names, a
tree deeper than it follows — quickly, and without the host ever reading a path the
sandbox shaped (a folder swapped for a link to the host's /etc is reported as a link)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from burrow.sandbox.backend import Changed
from burrow.sandbox.cgroups import Limits
from burrow.sandbox.local import LocalBackend, LocalSandbox
from burrow.sandbox.watch import MAX_DEPTH, WorkspaceWatch
from tests.sandbox.harness import run


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[LocalSandbox]:
    backend = LocalBackend(tmp_path / "data", limits=Limits(disk_mb=256))
    try:
        yield await backend.create("watched")
    finally:
        await backend.close()


def watch_of(sandbox: LocalSandbox) -> WorkspaceWatch:
    watch = sandbox.workspace_changes
    assert isinstance(watch, WorkspaceWatch), "a root server's workspace disk is watched"
    return watch


def nothing_pruned(_path: str) -> bool:
    return False


async def sh(sandbox: LocalSandbox, command: str) -> None:
    done = await run(sandbox, "sh", "-c", command)
    assert done.exit.exit_code == 0, (command, done.stderr)


def by_path(changed: list[Changed] | None) -> dict[str, Changed]:
    assert changed is not None
    return {entry.path: entry for entry in changed}


async def test_changes_are_named_as_they_are_now(sandbox: LocalSandbox) -> None:
    watch = watch_of(sandbox)
    await sh(sandbox, "echo a > a && mkdir old && echo b > old/b")
    assert watch.changes(nothing_pruned) is None  # the first answer: nothing before was seen
    await sh(sandbox, "echo aa >> a")
    assert by_path(watch.changes(nothing_pruned)) == {"a": Changed("a", "file", 5)}
    assert watch.changes(nothing_pruned) == []
    await sh(
        sandbox,
        "mv old new && echo c > new/c && rm a && ln -s /etc/passwd link && mkfifo fifo"
        " && mkdir -p made/deep && echo d > made/deep/d && chmod +x new/b",
    )
    assert by_path(watch.changes(nothing_pruned)) == {
        "old": Changed("old", "gone", was_folder=True),
        "new": Changed("new", "folder", was_folder=True),
        "new/b": Changed("new/b", "file", 2),  # listed with the folder moved in
        "new/c": Changed("new/c", "file", 2),
        "a": Changed("a", "gone"),
        "link": Changed("link", "link"),
        "fifo": Changed("fifo", "other"),
        "made": Changed("made", "folder", was_folder=True),
        "made/deep": Changed("made/deep", "folder", was_folder=True),
        "made/deep/d": Changed("made/deep/d", "file", 2),
    }


async def test_pruned_paths_are_left_out_and_not_looked_at(sandbox: LocalSandbox) -> None:
    watch = watch_of(sandbox)
    watch.changes(nothing_pruned)
    await sh(
        sandbox,
        "mkdir -p .git/objects store && echo o > .git/objects/o && echo kept > kept"
        # Two names, both in a pruned folder: never stat'ed, so no reason to walk.
        " && echo s > store/s && ln store/s store/t",
    )
    changed = watch.changes(lambda path: path.split("/")[0] in (".git", "store"))
    assert by_path(changed) == {"kept": Changed("kept", "file", 5)}


async def test_hostile_names_come_back_byte_for_byte(sandbox: LocalSandbox) -> None:
    watch = watch_of(sandbox)
    watch.changes(nothing_pruned)
    await sh(
        sandbox,
        r"""printf x > "$(printf 'new\nline')" && printf x > ./-rf && printf x > 'a b'"""
        r""" && printf x > "$(printf 'caf\351')" && printf x > ' (deleted)'""",
    )
    names = set(by_path(watch.changes(nothing_pruned)))
    assert names == {"new\nline", "-rf", "a b", "caf\udce9", " (deleted)"}


async def test_a_folder_swapped_for_a_link_out_is_only_a_link(sandbox: LocalSandbox) -> None:
    watch = watch_of(sandbox)
    await sh(sandbox, "mkdir etc && echo mine > etc/passwd")
    watch.changes(nothing_pruned)
    await sh(sandbox, "echo changed > etc/passwd && mv etc gone && ln -s /etc etc")
    changed = by_path(watch.changes(nothing_pruned))
    assert changed["etc"] == Changed("etc", "link", was_folder=True)  # its old entries go
    assert changed["gone"].kind == "folder" and "gone/passwd" in changed
    # Nothing of the host's /etc: the link was never followed.
    assert not [path for path in changed if path.startswith("etc/")]


async def test_a_file_with_two_names_is_not_known(sandbox: LocalSandbox) -> None:
    watch = watch_of(sandbox)
    await sh(sandbox, "echo one > a")
    watch.changes(nothing_pruned)
    await sh(sandbox, "ln a b && echo two >> b")  # `a` changed too, with no event of its own
    assert watch.changes(nothing_pruned) is None
    await sh(sandbox, "rm b && echo three >> a")
    assert by_path(watch.changes(nothing_pruned)) == {
        "b": Changed("b", "gone"),
        "a": Changed("a", "file", 14),
    }


async def test_a_flood_is_not_known_at_once_and_the_watch_goes_on(
    sandbox: LocalSandbox,
) -> None:
    watch = watch_of(sandbox)
    watch.changes(nothing_pruned)
    await sh(sandbox, "mkdir f && cd f && seq 1 40000 | xargs touch")
    started = time.perf_counter()
    assert watch.changes(nothing_pruned) is None  # more queued than a walk costs
    assert time.perf_counter() - started < 0.5
    # A new queue from there: the walk that "None" asked for finds all before it.
    assert watch.changes(nothing_pruned) == []
    await sh(sandbox, "echo after > after")
    assert by_path(watch.changes(nothing_pruned)) == {"after": Changed("after", "file", 6)}


async def test_a_tree_deeper_than_followed_is_not_known(sandbox: LocalSandbox) -> None:
    watch = watch_of(sandbox)
    watch.changes(nothing_pruned)
    # Made elsewhere, then moved in whole: its entries come with no event of their own.
    deep = "/".join(["d"] * (MAX_DEPTH + 10))
    await sh(sandbox, f"mkdir -p .burrow/outputs/{deep} && mv .burrow/outputs/d moved")
    assert watch.changes(lambda path: path.startswith(".burrow/outputs")) is None


async def test_a_distrusted_watch_says_walk_once(sandbox: LocalSandbox) -> None:
    watch = watch_of(sandbox)
    watch.changes(nothing_pruned)
    await sh(sandbox, "echo a > a")
    watch.distrust()
    assert watch.changes(nothing_pruned) is None
    await sh(sandbox, "echo b > b")
    assert set(by_path(watch.changes(nothing_pruned))) == {"b"}


async def test_the_watch_ends_with_the_sandbox(sandbox: LocalSandbox) -> None:
    first = watch_of(sandbox)
    await sandbox.stop()
    assert sandbox.workspace_changes is None
    assert first.changes(nothing_pruned) is None  # closed: never a stale answer
