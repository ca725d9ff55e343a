"""Workspace checkpoints: a git object store of the workspace, run inside the sandbox.

Git runs through the conversation's sandbox (never on the host: the workspace is the
model's to shape, symlinks out and hostile names included) with `GIT_DIR` at
`.burrow/checkpoints` and the workspace as its work tree, so changes made through bash are
captured as well as the file tools'. The user's own `.git` never sees the store: it holds
a `.gitignore` of `*`. Files are listed with `find` and fed to `git update-index`, not
`git add`: a nested repository's working files are checkpointed as plain files (its `.git`
folder is not), where `git add -A` would record a submodule pointer and lose them. A
checkpoint costs what changed, not what exists: one walk stats every file, git is handed
only those whose ctime is newer than the walk before (less a racy second), and the index
keeps the rest; see `snapshot` in checkpoint_script.py for why that misses nothing. A run
waits only for that capture: the commit (and the store's bounds) is made as the run ends,
or first by any operation on the store before then.

A checkpoint is a commit with a ref `refs/checkpoints/<id>`; its subject holds the time, the
run and the bytes it added, so the store lists itself (`git for-each-ref`) with no table to
keep in step. Past a count or a size the oldest are pruned (their refs, then the objects no
other holds). A checkpoint leaves as a git bundle and enters another conversation's store
from one (forks). The git side is one shell script, in checkpoint_script.py.
Left out: Burrow's internals (`.burrow/outputs`, `.burrow/services`, `services.json`, the
store), `.git` folders, and files over `max_file_bytes` (named in `skipped`).
"""

from __future__ import annotations

import asyncio
import builtins
import os
import secrets
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from burrow.runs.loop.hooks.base import Call, Hook, Run
from burrow.runs.workspace.checkpoint_script import SCRIPT as _SCRIPT
from burrow.runs.workspace.workspace_diff import PATCH_LEFT_OUT, PATCH_LIMIT_TOTAL, Diff, assemble
from burrow.sandbox.backend import (
    Changed,
    ErrorCode,
    ExecChunk,
    ExecExit,
    ExecRequest,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.store.records import NewEvent

STORE = ".burrow/checkpoints"
EXCLUDED = (".burrow/outputs", ".burrow/services", ".burrow/services.json", STORE)
_UNDER_EXCLUDED = tuple(f"{path}/" for path in EXCLUDED)
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_COUNT = 50
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024
GIT_TIMEOUT_SECONDS = 300.0
MAX_LIST_BYTES = 4 * 1024 * 1024  # name lists (raw, numstat, skipped) read back at most
MAX_ARGUMENT_BYTES = 64 * 1024  # paths a take-changed passes as arguments (more: a walk)


_NOT_FOUND_EXIT = 3  # the script's "no such checkpoint"
_NO_SUCH_PATH_EXIT = 4


class CheckpointNotFound(Exception):
    def __init__(self, checkpoint_id: str) -> None:
        super().__init__(
            f"Checkpoint {checkpoint_id} was not found: list them with GET …/checkpoints."
        )
        self.checkpoint_id = checkpoint_id


class PathNotInCheckpoint(Exception):
    """A revert of a path that neither the checkpoint nor the workspace has."""


@dataclass(frozen=True)
class Checkpoint:
    id: str
    run_id: str | None  # None: taken by a restore or a revert (their undo)
    created_at: str  # ISO 8601, UTC, milliseconds
    size: int | None = None  # bytes its take added to the store; None: not recorded


@dataclass(frozen=True)
class _Output:
    exit_code: int | None
    data: bytes
    cut: bool  # more than the limit was written; the rest was not read


def _subject(run_id: str | None) -> str:
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"{now} {run_id or '-'}"


def _new_id() -> str:
    # Time first, so ids taken in one millisecond still sort in the order they were taken.
    return f"ck_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(4)}"


def valid_id(checkpoint_id: str) -> bool:
    return (
        checkpoint_id.startswith("ck_")
        and len(checkpoint_id) <= 40
        and all(c in "0123456789abcdef" for c in checkpoint_id[3:])
    )


class Checkpoints:
    """Take, list, diff and restore one conversation's workspace checkpoints."""

    def __init__(
        self,
        sandbox: Callable[[str], Awaitable[Sandbox]],
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_count: int = DEFAULT_MAX_COUNT,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self._sandbox = sandbox
        self._max_kib = max(1, max_file_bytes // 1024)
        self._max_count = max_count
        self._max_bytes = max_bytes
        # The store's index is shared by every operation: one at a time per conversation.
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def _git(
        self,
        cid: str,
        *args: str,
        limit: int = MAX_LIST_BYTES,
        stdin: bytes | None = None,
        sandbox: Sandbox | None = None,
    ) -> _Output:
        sandbox = sandbox or await self._sandbox(cid)
        argv = ["sh", "-c", _SCRIPT, "sh", sandbox.workspace, str(self._max_kib), *args]
        request = ExecRequest(argv=argv, timeout=GIT_TIMEOUT_SECONDS, stdin=stdin)
        out, err = bytearray(), bytearray()
        async with closing_exec(sandbox.exec(request)) as events:
            async for item in events:
                if isinstance(item, ExecChunk):
                    target = out if item.stream == "stdout" else err
                    target += item.data
                    if len(out) > limit:
                        return _Output(None, bytes(out[:limit]), cut=True)
                elif isinstance(item, ExecExit):
                    if item.exit_code not in (0, _NOT_FOUND_EXIT, _NO_SUCH_PATH_EXIT):
                        detail = err.decode(errors="replace").strip()[-500:]
                        raise SandboxError(
                            ErrorCode.INTERNAL,
                            f"The workspace checkpoint store failed ({args[0]}, exit "
                            f"{item.exit_code}{', timed out' if item.timed_out else ''}): "
                            f"{detail or 'no message'}. It needs git in the sandbox, room on "
                            "the workspace's disk, and .burrow/checkpoints left to Burrow.",
                        )
                    return _Output(item.exit_code, bytes(out), cut=False)
        raise SandboxError(ErrorCode.UNAVAILABLE, "The sandbox ended before git finished.")

    async def take(self, cid: str, run_id: str | None) -> Checkpoint:
        """Captures the workspace: nothing done to it after changes what the checkpoint
        holds. Its commit is left pending, for `seal` or else the next operation on the
        store, which seals it first (a run waits for the capture only)."""
        async with self._locks[cid]:
            checkpoint_id, subject = _new_id(), _subject(run_id)
            sandbox = await self._sandbox(cid)
            watch = sandbox.workspace_changes
            plan = self._plan(watch.changes(_pruned)) if watch is not None else None
            try:
                if plan is None:  # a walk: it finds what changed since the walk before
                    await self._git(cid, "take", checkpoint_id, subject, sandbox=sandbox)
                else:
                    stdin, args = plan
                    await self._git(
                        cid, "take-changed", checkpoint_id, subject, *args,
                        stdin=stdin, sandbox=sandbox,
                    )  # fmt: skip
            except BaseException:
                if watch is not None:  # what it told was not applied: the next take walks
                    watch.distrust()
                raise
            return _parse_entry(f"{checkpoint_id} {subject}")

    def _plan(self, changed: builtins.list[Changed] | None) -> tuple[bytes, list[str]] | None:
        """The script's `take-changed` for what a watch saw: the paths for git to read
        (stdin), then its arguments. None: walk instead (not known, or too long to pass)."""
        if changed is None:
            return None
        update, drop, folders = [], [], []
        for entry in changed:
            if entry.kind == "folder" or entry.was_folder:
                folders.append(entry.path)  # what the index has under it is read again
            if entry.kind == "folder" or (entry.kind == "gone" and entry.was_folder):
                continue  # (a folder's entries come listed with it)
            if entry.kind == "other" or (
                entry.kind == "file" and -(-entry.size // 1024) > self._max_kib
            ):  # as the walk's `find -size +<KiB>k` leaves it out
                drop.append(entry.path)
            else:
                update.append(entry.path)  # a file, a link, or gone (git drops it)
        if sum(len(path) + 1 for path in drop + folders) > MAX_ARGUMENT_BYTES:
            return None
        stdin = b"".join(os.fsencode(path) + b"\0" for path in update)
        return stdin, ["1" if update else "0", str(len(drop)), *drop, *folders]

    async def seal(self, cid: str) -> None:
        """Commits a take left pending, then keeps the store within its bounds."""
        async with self._locks[cid]:
            out = await self._git(cid, "seal", str(self._max_count), str(self._max_bytes))
            if out.exit_code == _NOT_FOUND_EXIT:
                return  # nothing pending: an operation since sealed it
            # The bytes it added, the store's, then (past a bound) every checkpoint.
            _, size, *listed = [*out.data.decode(errors="replace").splitlines(), "", ""]
            if listed := [line for line in listed if line]:
                entries = sorted(map(_parse_entry, listed), key=lambda c: (c.created_at, c.id))
                await self._prune(cid, entries, int(size) if size.isdigit() else 0)

    async def _prune(self, cid: str, kept: builtins.list[Checkpoint], store: int) -> None:
        """Drop the oldest checkpoints past the count, then past the bytes the store may
        take (the newest always stays), and the objects only they held."""
        dropped = kept[: max(0, len(kept) - self._max_count)] if self._max_count else []
        kept = kept[len(dropped) :]
        if dropped:
            store = await self._store_bytes(cid, dropped)
        while self._max_bytes and store > self._max_bytes and len(kept) > 1:
            # What the oldest added is what dropping them frees, at most: later checkpoints
            # may hold the same files. Drop as many as should do, measure, repeat.
            excess, dropping = store - self._max_bytes, []
            while kept[1:] and excess > 0:
                oldest = kept.pop(0)
                dropping.append(oldest)
                excess -= oldest.size or excess  # unknown: one, then measure
            store = await self._store_bytes(cid, dropping)

    async def _store_bytes(self, cid: str, dropping: builtins.list[Checkpoint]) -> int:
        """Prune `dropping`; the bytes the store takes after."""
        out = await self._git(cid, "prune", *[c.id for c in dropping])
        size = out.data.decode().strip()
        return int(size) if size.isdigit() else 0

    async def export(
        self, cid: str, checkpoint_id: str, bundle: str, carried: Sequence[str] = ()
    ) -> None:
        """Write a checkpoint ("now": the workspace as it is) as a git bundle at `bundle`
        (a path inside the store), for another conversation's `import_bundle`; with the
        `carried` checkpoints as they are (a fork's earlier runs', so it can be forked or
        restored at them in turn)."""
        if checkpoint_id != "now" and not valid_id(checkpoint_id):
            raise CheckpointNotFound(checkpoint_id)
        kept = [c for c in carried if valid_id(c)]
        async with self._locks[cid]:
            out = await self._git(cid, "export", checkpoint_id, bundle, *kept)
            if out.exit_code == _NOT_FOUND_EXIT:
                raise CheckpointNotFound(checkpoint_id)

    async def import_bundle(self, cid: str, bundle: str) -> Checkpoint:
        """Make the bundle's checkpoint this conversation's own, and its workspace's files,
        and the checkpoints it carries too (the bundle file is removed)."""
        async with self._locks[cid]:
            checkpoint_id, subject = _new_id(), _subject(None)
            await self._git(cid, "import", bundle, checkpoint_id, subject)
            return _parse_entry(f"{checkpoint_id} {subject}")

    async def list(self, cid: str) -> list[Checkpoint]:
        """Oldest first."""
        async with self._locks[cid]:
            return await self._entries(cid)

    async def _entries(self, cid: str) -> builtins.list[Checkpoint]:
        output = await self._git(cid, "list")
        entries = [_parse_entry(line) for line in output.data.decode(errors="replace").splitlines()]
        return sorted(entries, key=lambda c: (c.created_at, c.id))

    async def diff(self, cid: str, start: str | None, end: str | None) -> Diff:
        """From `start` (None: the first checkpoint) to `end` (None: the workspace now)."""
        async with self._locks[cid]:
            if start is None:
                first = await self._first(cid)
                if first is None:
                    if end is not None:
                        raise CheckpointNotFound(end)
                    return Diff()
                start = first
            a, b = await self._tree(cid, start), await self._tree(cid, end or "now")
            raw = await self._git(cid, "diff", a, b, "raw")
            numstat = await self._git(cid, "diff", a, b, "numstat")
            patch = await self._git(cid, "diff", a, b, "patch", limit=PATCH_LIMIT_TOTAL)
            skipped = await self._git(cid, "diff", a, b, "skipped") if end is None else None
        # A list cut at its bound ends mid-record: keep the whole records before it.
        listed = raw.data[: raw.data.rfind(b"\0:") + 1] if raw.cut else raw.data
        diff = assemble(listed, numstat.data, patch.data.decode("utf-8", errors="replace"))
        diff.truncated = raw.cut or numstat.cut or patch.cut or diff.truncated
        if patch.cut:
            for change in diff.files:
                if not change.patch:
                    change.patch = PATCH_LEFT_OUT.format(limit=PATCH_LIMIT_TOTAL)
        if skipped is not None:
            diff.skipped = [p.decode(errors="replace") for p in skipped.data.split(b"\0") if p]
        return diff

    async def patch(self, cid: str, start: str | None, end: str | None) -> str:
        """The diff as `git diff` prints it, bounded by PATCH_LIMIT_TOTAL."""
        async with self._locks[cid]:
            if start is None:
                start = await self._first(cid)
                if start is None:
                    if end is not None:
                        raise CheckpointNotFound(end)
                    return ""
            a, b = await self._tree(cid, start), await self._tree(cid, end or "now")
            out = await self._git(cid, "diff", a, b, "patch", limit=PATCH_LIMIT_TOTAL)
        text = out.data.decode("utf-8", errors="replace")
        return text + (PATCH_LEFT_OUT.format(limit=PATCH_LIMIT_TOTAL) if out.cut else "")

    async def restore(self, cid: str, checkpoint_id: str) -> Checkpoint:
        """Make the workspace as it was at the checkpoint; returns the checkpoint taken of
        the state before (restoring that one undoes this)."""
        if not valid_id(checkpoint_id):
            raise CheckpointNotFound(checkpoint_id)
        async with self._locks[cid]:
            undo_id, subject = _new_id(), _subject(None)
            out = await self._git(cid, "restore", checkpoint_id, undo_id, subject)
            if out.exit_code == _NOT_FOUND_EXIT:
                raise CheckpointNotFound(checkpoint_id)
            return _parse_entry(f"{undo_id} {subject}")

    async def revert(self, cid: str, path: str, checkpoint_id: str) -> tuple[str, Checkpoint]:
        """One file (or folder) as it was at the checkpoint: ("restored" | "deleted", the
        undo checkpoint). A path the checkpoint did not have is deleted."""
        if not valid_id(checkpoint_id):
            raise CheckpointNotFound(checkpoint_id)
        async with self._locks[cid]:
            undo_id, subject = _new_id(), _subject(None)
            out = await self._git(cid, "revert", checkpoint_id, undo_id, subject, path)
            if out.exit_code == _NOT_FOUND_EXIT:
                raise CheckpointNotFound(checkpoint_id)
            if out.exit_code == _NO_SUCH_PATH_EXIT:
                raise PathNotInCheckpoint(path)
            return out.data.decode().strip(), _parse_entry(f"{undo_id} {subject}")

    async def _first(self, cid: str) -> str | None:
        found = await self._entries(cid)
        return found[0].id if found else None

    async def _tree(self, cid: str, checkpoint_id: str) -> str:
        """The tree of a checkpoint, or of the workspace now ("now")."""
        if checkpoint_id != "now" and not valid_id(checkpoint_id):
            raise CheckpointNotFound(checkpoint_id)
        out = await self._git(cid, "tree", checkpoint_id)
        if out.exit_code == _NOT_FOUND_EXIT:
            raise CheckpointNotFound(checkpoint_id)
        return out.data.decode().strip()


def _pruned(path: str) -> bool:
    """Left out of checkpoints, and all under it (as the walk prunes it)."""
    return path in EXCLUDED or path.startswith(_UNDER_EXCLUDED) or ".git" in path.split("/")


def _parse_entry(line: str) -> Checkpoint:
    """`<id> <created_at> <run_id or -> [<bytes added>]` (the size is written by git)."""
    checkpoint_id, created_at, run_id, size, *_ = [*line.split(" "), "", "", ""]
    return Checkpoint(
        checkpoint_id,
        None if run_id in ("", "-") else run_id,
        created_at,
        int(size) if size.isdigit() else None,
    )


class CheckpointAtStart(Hook):
    """Checkpoints the workspace at the run's start, so whatever the run does (tools or
    bash) can be diffed against and undone. Taken while the first model call streams (a
    walk that stats every file, and git for what changed) and awaited before the first tool
    call can change a file; committed as the run ends.
    A failure is logged, not fatal: a full disk must not stop the agent that could clean it."""

    def __init__(
        self, checkpoints: Checkpoints, log: Callable[[str, str, Exception], None]
    ) -> None:
        self._checkpoints = checkpoints
        self._log = log
        self._taking: asyncio.Task[None] | None = None
        self._taken = False

    async def before_model_call(self, run: Run) -> None:
        if self._taking is None:
            self._taking = asyncio.create_task(self._take(run), name=f"checkpoint {run.run_id}")

    async def before_tool_call(self, run: Run, call: Call) -> str | None:
        await self._settled()
        return None

    async def close(self, run: Run) -> list[NewEvent]:
        await self._settled()
        if self._taken:
            # Its commit, once the run no longer waits on the sandbox (beside a tool call it
            # would slow the tool; a list or diff meanwhile seals it first), and before the
            # run ends: an ended run's sandbox is idle, free to hibernate or make room.
            try:
                await asyncio.shield(self._checkpoints.seal(run.cid))
            except Exception as exc:  # left pending: the next operation seals it
                self._log(run.cid, run.run_id, exc)
        return []

    async def _settled(self) -> None:
        if self._taking is not None:
            # Shielded: a run interrupted meanwhile still leaves a whole checkpoint.
            await asyncio.shield(self._taking)

    async def _take(self, run: Run) -> None:
        try:
            await self._checkpoints.take(run.cid, run.run_id)
            self._taken = True  # a sandbox that failed the take is not asked to seal
        except Exception as exc:  # the sandbox, git, a conversation deleted meanwhile
            self._log(run.cid, run.run_id, exc)
