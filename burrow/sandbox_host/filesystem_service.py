"""envd's `filesystem.Filesystem` Connect service on a hosted sandbox.

Stat and ListDir are the sandbox's own `stat` / `list_dir`; MakeDir, Remove and Move run
`mkdir`, `rm` and `mv` inside the sandbox (Burrow's sandbox protocol has no such calls, and
the sandbox may do that to itself anyway). Paths are the sandbox's own (paths.py); the
kernel's views, the guest, `/` and the home itself are not changed here.
Watching is by inotify on the sandbox's own tree (tree.py): creates, writes, removes,
renames and permission changes as envd's watcher reports them, as they happen, recursive
or not, with the entry's info when asked. A host that cannot open the sandbox's tree (not
root) polls the listing instead (`POLL_SECONDS`): a rename there is a remove plus a create.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import posixpath
import secrets
import stat
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar, cast

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from e2b.envd.filesystem import filesystem_pb as pb
from e2b.envd.filesystem.filesystem_connect import Filesystem
from protobuf import Oneof
from protobuf.wkt.google.protobuf.timestamp_pb import Timestamp

from burrow.sandbox.backend import (
    ErrorCode,
    ExecChunk,
    ExecExit,
    ExecRequest,
    FileEntry,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.sandbox_host import tree, users
from burrow.sandbox_host.paths import E2B_HOME, BadPath, absolute, connect_code, sandbox_path
from burrow.sandbox_host.registry import HostedSandbox, current_sandbox
from burrow.sandbox_host.users import current_user

POLL_SECONDS = 0.5
MAX_LISTED_ENTRIES = 10_000  # a deep ListDir or a recursive watch stops here, with an error
MAX_DEPTH = 32
MAX_WATCHERS = 16  # per sandbox, streams and polled watchers together
MAX_PENDING_WATCH_EVENTS = 10_000
T = TypeVar("T")

_TYPES = {
    "file": pb.FileType.FILE,
    "dir": pb.FileType.DIRECTORY,
    "symlink": pb.FileType.SYMLINK,
    "other": pb.FileType.UNSPECIFIED,
}
_FORMATS = {"file": stat.S_IFREG, "dir": stat.S_IFDIR, "symlink": stat.S_IFLNK, "other": 0}
Snapshot = dict[str, tuple[str, int, float]]


def _hosted() -> HostedSandbox:
    hosted = current_sandbox.get()
    if hosted.state != "running":
        raise ConnectError(Code.UNAVAILABLE, f"Sandbox {hosted.sandbox_id} is paused.")
    return hosted


async def _call(action: Awaitable[T]) -> T:
    try:
        return await action
    except SandboxError as exc:
        raise ConnectError(connect_code(exc.code), exc.message) from None


CLOSED = ("/proc", "/sys", "/dev", "/.burrow")  # as the guest has them (guest/files.py)


def _path(hosted: HostedSandbox, given: str, *, not_root: bool = False) -> str:
    workspace = hosted.sandbox.workspace
    try:
        path = sandbox_path(given, workspace)
    except BadPath as exc:
        raise ConnectError(Code.INVALID_ARGUMENT, str(exc)) from None
    closed = any(path == c or path.startswith(c + "/") for c in CLOSED)
    if closed or (not_root and path in ("/", workspace, E2B_HOME)):
        raise ConnectError(
            Code.PERMISSION_DENIED,
            f"{given}: not changed here ("
            + ("the kernel's views and the guest are not served)." if closed else "a root)."),
        )
    return path


def _entry(entry: FileEntry, workspace: str) -> pb.EntryInfo:
    whole = int(entry.mtime)
    linked: dict[str, Any] = {}
    if entry.target is not None:  # a link: its target's type, and where it points
        linked = {"symlink_target": absolute(entry.target, workspace), "is_symlink": True}
    return pb.EntryInfo(
        name=entry.name,
        type=_TYPES[entry.kind],
        path=absolute(entry.path, workspace),
        size=entry.size,
        mode=entry.mode,
        permissions=stat.filemode(_FORMATS[entry.kind] | entry.mode),
        owner=entry.owner,
        group=entry.group,
        modified_time=Timestamp(seconds=whole, nanos=int((entry.mtime - whole) * 1e9)),
        **linked,
    )


async def _run(hosted: HostedSandbox, argv: list[str]) -> None:
    """A coreutils command in the sandbox, as the call's user (users.py: its permissions
    hold, and what it makes is its); its stderr becomes the error when it fails."""
    stderr = bytearray()
    exit = ExecExit(None)
    user = current_user.get() or hosted.user
    request = ExecRequest(argv=users.command(argv, user, hosted.users))
    async with closing_exec(hosted.sandbox.exec(request)) as events:
        async for event in events:
            if isinstance(event, ExecChunk):
                stderr += event.data[: 4096 - len(stderr)] if event.stream == "stderr" else b""
            else:
                exit = event
    if exit.exit_code != 0:
        raise ConnectError(Code.INTERNAL, stderr.decode(errors="replace").strip() or str(argv))


async def _exists(sandbox: Sandbox, path: str) -> bool:
    try:
        await sandbox.stat(path)
    except SandboxError as exc:
        if exc.code == ErrorCode.NOT_FOUND:
            return False
        raise ConnectError(connect_code(exc.code), exc.message) from None
    return True


async def _walk(sandbox: Sandbox, path: str, depth: int) -> list[FileEntry]:
    """Entries under `path`, `depth` levels down, bounded; in envd's order (Go's WalkDir:
    depth first, each folder's entries by name), so a folder's children follow it."""
    found: list[FileEntry] = []
    level = [path]
    for _ in range(depth):
        below: list[str] = []
        for directory in level:
            for entry in await _call(sandbox.list_dir(directory)):
                found.append(entry)
                if entry.kind == "dir":
                    below.append(absolute(entry.path, sandbox.workspace))
            if len(found) > MAX_LISTED_ENTRIES:
                raise ConnectError(
                    Code.RESOURCE_EXHAUSTED,
                    f"More than {MAX_LISTED_ENTRIES} entries under {path}: list less deep.",
                )
        level = below
        if not level:
            break
    return sorted(found, key=lambda entry: entry.path.split("/"))


class _Watch:
    """A polled watch of one directory (recursive or not)."""

    def __init__(self, sandbox: Sandbox, path: str, recursive: bool, include_entry: bool):
        self.sandbox = sandbox
        self.path = path
        self.depth = MAX_DEPTH if recursive else 1
        self.include_entry = include_entry
        self.snapshot: Snapshot = {}
        self.entries: dict[str, FileEntry] = {}

    async def prime(self) -> None:
        self.snapshot = await self._take()

    async def changes(self) -> list[pb.FilesystemEvent]:
        before, after = self.snapshot, await self._take()
        self.snapshot = after
        events = []
        base = self.path
        for path in sorted(after.keys() - before.keys()):
            events.append(self._event(path, base, pb.EventType.CREATE))
        for path in sorted(after.keys() & before.keys()):
            if after[path] != before[path] and after[path][0] == "file":
                events.append(self._event(path, base, pb.EventType.WRITE))
        for path in sorted(before.keys() - after.keys()):
            events.append(self._event(path, base, pb.EventType.REMOVE, gone=True))
        return events

    def _event(
        self, path: str, base: str, kind: pb.EventType, *, gone: bool = False
    ) -> pb.FilesystemEvent:
        event = pb.FilesystemEvent(name=posixpath.relpath(path, base), type=kind)
        if self.include_entry and not gone and path in self.entries:
            event.entry = _entry(self.entries[path], self.sandbox.workspace)
        return event

    async def _take(self) -> Snapshot:
        listed = await _walk(self.sandbox, self.path, self.depth)
        self.entries = {absolute(e.path, self.sandbox.workspace): e for e in listed}
        return {path: (e.kind, e.size, e.mtime) for path, e in self.entries.items()}


class _Watcher:
    """A polled watch whose events wait for GetWatcherEvents (the sync SDK's watch)."""

    def __init__(self, watch: _Watch) -> None:
        self.watch = watch
        self.pending: list[pb.FilesystemEvent] = []
        self.task: asyncio.Task[None] | None = None

    async def poll_forever(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            with contextlib.suppress(ConnectError):
                self.pending += await self.watch.changes()
            del self.pending[:-MAX_PENDING_WATCH_EVENTS]  # a watcher nobody reads stays bounded


_KINDS = (
    (tree.IN_CREATE | tree.IN_MOVED_TO, pb.EventType.CREATE),
    (tree.IN_MODIFY, pb.EventType.WRITE),
    (tree.IN_DELETE | tree.IN_DELETE_SELF, pb.EventType.REMOVE),
    (tree.IN_MOVED_FROM | tree.IN_MOVE_SELF, pb.EventType.RENAME),
    (tree.IN_ATTRIB, pb.EventType.CHMOD),
)


class _Live:
    """An inotify watch (tree.py) as envd's events."""

    def __init__(self, sandbox: Sandbox, path: str, watch: tree.InotifyWatch, entry: bool):
        self.sandbox = sandbox
        self.path = path
        self.watch = watch
        self.include_entry = entry

    async def take(self, wait: float) -> list[pb.FilesystemEvent]:
        """The events waiting (after up to `wait` seconds for one); an error once the
        watch has ended on an overflow."""
        watch = self.watch
        if not watch.events and watch.failure is None:
            watch.ready.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch.ready.wait(), wait)
        if not watch.events and watch.failure is not None:
            raise ConnectError(Code.RESOURCE_EXHAUSTED, f"{self.path}: {watch.failure}")
        taken: list[pb.FilesystemEvent] = []
        while watch.events and len(taken) < 1000:
            mask, name, _ = watch.events.popleft()
            for bits, kind in _KINDS:
                if mask & bits:
                    taken.append(await self._event(name, kind))
        return taken

    async def _event(self, name: str, kind: pb.EventType) -> pb.FilesystemEvent:
        event = pb.FilesystemEvent(name=name, type=kind)
        if self.include_entry and kind != pb.EventType.REMOVE:
            path = posixpath.join(self.path, name) if name else self.path
            with contextlib.suppress(SandboxError):  # gone already: no entry, as in envd
                event.entry = _entry(await self.sandbox.stat(path), self.sandbox.workspace)
        return event

    def close(self) -> None:
        self.watch.close()


class FilesystemService(Filesystem):
    def __init__(self) -> None:
        # Per sandbox id; each sandbox's watchers end when it does (see `forget`).
        self._watchers: dict[str, dict[str, _Watcher | _Live]] = {}
        self._streams: dict[str, int] = {}
        self._trees: dict[str, tree.SandboxTree | None] = {}
        self._live: dict[str, set[_Live]] = {}

    async def stat(
        self, request: pb.StatRequest, ctx: RequestContext[pb.StatRequest, pb.StatResponse]
    ) -> pb.StatResponse:
        hosted = _hosted()
        path = _path(hosted, request.path)
        entry = await _call(hosted.sandbox.stat(path))
        return pb.StatResponse(entry=_entry(entry, hosted.sandbox.workspace))

    async def list_dir(
        self,
        request: pb.ListDirRequest,
        ctx: RequestContext[pb.ListDirRequest, pb.ListDirResponse],
    ) -> pb.ListDirResponse:
        hosted = _hosted()
        path = _path(hosted, request.path)
        if not 0 <= request.depth <= MAX_DEPTH:
            raise ConnectError(Code.INVALID_ARGUMENT, f"depth must be 1 to {MAX_DEPTH}.")
        entries = await _walk(hosted.sandbox, path, request.depth or 1)
        return pb.ListDirResponse(entries=[_entry(e, hosted.sandbox.workspace) for e in entries])

    async def make_dir(
        self,
        request: pb.MakeDirRequest,
        ctx: RequestContext[pb.MakeDirRequest, pb.MakeDirResponse],
    ) -> pb.MakeDirResponse:
        hosted = _hosted()
        path = _path(hosted, request.path, not_root=True)
        if await _exists(hosted.sandbox, path):
            raise ConnectError(Code.ALREADY_EXISTS, f"{request.path} already exists.")
        await _run(hosted, ["mkdir", "-p", "--", path])
        entry = await _call(hosted.sandbox.stat(path))
        return pb.MakeDirResponse(entry=_entry(entry, hosted.sandbox.workspace))

    async def remove(
        self, request: pb.RemoveRequest, ctx: RequestContext[pb.RemoveRequest, pb.RemoveResponse]
    ) -> pb.RemoveResponse:
        hosted = _hosted()
        path = _path(hosted, request.path, not_root=True)
        # A path that is not there is removed already, as envd has it.
        await _run(hosted, ["rm", "-rf", "--", path])
        return pb.RemoveResponse()

    async def move(
        self, request: pb.MoveRequest, ctx: RequestContext[pb.MoveRequest, pb.MoveResponse]
    ) -> pb.MoveResponse:
        hosted = _hosted()
        source = _path(hosted, request.source, not_root=True)
        destination = _path(hosted, request.destination, not_root=True)
        if not await _exists(hosted.sandbox, source):
            raise ConnectError(Code.NOT_FOUND, f"{request.source} does not exist.")
        await _run(hosted, ["mkdir", "-p", "--", posixpath.dirname(destination)])
        await _run(hosted, ["mv", "-T", "--", source, destination])
        entry = await _call(hosted.sandbox.stat(destination))
        return pb.MoveResponse(entry=_entry(entry, hosted.sandbox.workspace))

    async def watch_dir(
        self,
        request: pb.WatchDirRequest,
        ctx: RequestContext[pb.WatchDirRequest, pb.WatchDirResponse],
    ) -> AsyncIterator[pb.WatchDirResponse]:
        hosted = _hosted()
        watch = await self._watch(hosted, request)
        sandbox_id = hosted.sandbox_id
        self._streams[sandbox_id] = self._streams.get(sandbox_id, 0) + 1
        keepalive = _keepalive_seconds(ctx)
        try:
            yield _response("start", pb.WatchDirResponse.StartEvent())
            while hosted.state == "running" and not hosted.removed:
                if isinstance(watch, _Live):
                    changes = await watch.take(keepalive)
                else:
                    await asyncio.sleep(POLL_SECONDS)
                    changes = await watch.changes()
                for change in changes:
                    yield _response("filesystem", change)
                if not changes:
                    yield _response("keepalive", pb.WatchDirResponse.KeepAlive())
        finally:
            self._streams[sandbox_id] -= 1
            if isinstance(watch, _Live):
                watch.close()
                self._live.get(sandbox_id, set()).discard(watch)

    async def create_watcher(
        self,
        request: pb.CreateWatcherRequest,
        ctx: RequestContext[pb.CreateWatcherRequest, pb.CreateWatcherResponse],
    ) -> pb.CreateWatcherResponse:
        hosted = _hosted()
        watch = await self._watch(hosted, request)
        watcher: _Watcher | _Live = watch if isinstance(watch, _Live) else _Watcher(watch)
        watcher_id = secrets.token_hex(8)
        self._watchers.setdefault(hosted.sandbox_id, {})[watcher_id] = watcher
        if isinstance(watcher, _Watcher):
            watcher.task = asyncio.get_running_loop().create_task(watcher.poll_forever())
        hosted.on_end.append(lambda: self.forget(hosted.sandbox_id))
        return pb.CreateWatcherResponse(watcher_id=watcher_id)

    async def get_watcher_events(
        self,
        request: pb.GetWatcherEventsRequest,
        ctx: RequestContext[pb.GetWatcherEventsRequest, pb.GetWatcherEventsResponse],
    ) -> pb.GetWatcherEventsResponse:
        hosted = _hosted()
        watcher = self._watcher(hosted, request.watcher_id)
        if isinstance(watcher, _Live):
            try:
                return pb.GetWatcherEventsResponse(events=await watcher.take(0))
            except ConnectError:  # ended on an overflow: told once, then gone
                watcher.close()
                del self._watchers[hosted.sandbox_id][request.watcher_id]
                raise
        events, watcher.pending = watcher.pending, []
        return pb.GetWatcherEventsResponse(events=events)

    async def remove_watcher(
        self,
        request: pb.RemoveWatcherRequest,
        ctx: RequestContext[pb.RemoveWatcherRequest, pb.RemoveWatcherResponse],
    ) -> pb.RemoveWatcherResponse:
        hosted = _hosted()
        watcher = self._watcher(hosted, request.watcher_id)
        if isinstance(watcher, _Live):
            watcher.close()
        elif watcher.task is not None:
            watcher.task.cancel()
        del self._watchers[hosted.sandbox_id][request.watcher_id]
        return pb.RemoveWatcherResponse()

    def forget(self, sandbox_id: str) -> None:
        """The sandbox ended: its watchers stop, its tree's handle closes."""
        for watcher in self._watchers.pop(sandbox_id, {}).values():
            if isinstance(watcher, _Live):
                watcher.close()
            elif watcher.task is not None:
                watcher.task.cancel()
        for live in self._live.pop(sandbox_id, set()):
            live.close()  # a stream's: it ends at its next turn
        opened = self._trees.pop(sandbox_id, None)
        if opened is not None:
            opened.close()

    async def _watch(
        self, hosted: HostedSandbox, request: pb.WatchDirRequest | pb.CreateWatcherRequest
    ) -> _Watch | _Live:
        count = len(self._watchers.get(hosted.sandbox_id, {})) + self._streams.get(
            hosted.sandbox_id, 0
        )
        if count >= MAX_WATCHERS:
            raise ConnectError(
                Code.RESOURCE_EXHAUSTED,
                f"This sandbox has {MAX_WATCHERS} watchers already: remove one first.",
            )
        path = _path(hosted, request.path)
        entry = await _call(hosted.sandbox.stat(path))
        if entry.kind != "dir":
            raise ConnectError(Code.INVALID_ARGUMENT, f"{request.path} is not a directory.")
        opened = self._tree(hosted)
        if opened is not None:
            try:
                live = tree.InotifyWatch(
                    opened, path, request.recursive, request.allow_network_mounts
                )
            except tree.Overflow as exc:
                raise ConnectError(Code.RESOURCE_EXHAUSTED, f"{request.path}: {exc}") from None
            except OSError as exc:
                raise ConnectError(
                    Code.INVALID_ARGUMENT if exc.errno == errno.EOPNOTSUPP else Code.INTERNAL,
                    f"{request.path}: cannot watch it ({exc.strerror})",
                ) from None
            watch = _Live(hosted.sandbox, path, live, request.include_entry)
            self._live.setdefault(hosted.sandbox_id, set()).add(watch)
            return watch
        polled = _Watch(hosted.sandbox, path, request.recursive, request.include_entry)
        await polled.prime()
        return polled

    def _tree(self, hosted: HostedSandbox) -> tree.SandboxTree | None:
        """The sandbox's tree, opened once per run of it (closed by `forget`)."""
        if hosted.sandbox_id not in self._trees:
            self._trees[hosted.sandbox_id] = tree.SandboxTree.open(hosted.sandbox)
            hosted.on_end.append(lambda: self.forget(hosted.sandbox_id))
        return self._trees[hosted.sandbox_id]

    def _watcher(self, hosted: HostedSandbox, watcher_id: str) -> _Watcher | _Live:
        watcher = self._watchers.get(hosted.sandbox_id, {}).get(watcher_id)
        if watcher is None:
            raise ConnectError(Code.NOT_FOUND, f"No watcher {watcher_id!r} in this sandbox.")
        return watcher


def _keepalive_seconds(ctx: RequestContext[Any, Any]) -> float:
    try:
        seconds = float(ctx.request_headers.get("keepalive-ping-interval", 30))
    except ValueError:
        seconds = 30
    return min(max(1.0, seconds), 60.0)


def _response(kind: str, value: object) -> pb.WatchDirResponse:
    return pb.WatchDirResponse(event=cast(Any, Oneof(kind, value)))
