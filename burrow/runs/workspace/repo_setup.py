"""A repository's own setup, `.burrow/setup.sh`: run once per commit, kept, started from.

When an import (git/repo_import.py) has cloned a repository holding `.burrow/setup.sh`,
the script runs in the conversation's sandbox right after the clone and before any run (a
run waits for the import): a sandbox where nothing else has run yet, with the walls of any
command, none of the conversation's secrets, and its network policy. A repository's setup
is untrusted code, so it runs only where the conversation's approval mode lets commands run
(`auto`, and `ask`: importing the repository is the user's own act); in `read_only` and
`plan` it is not run, and the journal says so. It is reported as `environment.build`
events named `.burrow/setup.sh`: started, progress at least every 1.5 s (the output's last
line), then done, or failed with its exit and the tail of its output.

What it leaves is kept, as a stopped sandbox `setup-<key>` whose root layer is a copy of
the conversation's (what the script installed) and whose workspace holds an archive of the
conversation's workspace (what it built there: node_modules, a virtualenv). The key is the
user, the repository and ref, the environment build the sandbox stands on, the script's
sha256 and the commit, so a kept setup is its user's alone and never stands for changed inputs. The
next conversation of that user on the same commit skips the script: its sandbox is made
again from the kept one (the root layer copied, as a fork's, and the archive unpacked over
the clone). A user keeps at most `MAX_KEPT` setups, the least recently used go first; they
count toward the user's disk quota, and the sandbox pool drops them first when it is full
(`kept_by`, `drop`: quotas.DiskCache).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal
from burrow.runs.workspace.between_sandboxes import TooLarge, copy_file, run_in
from burrow.runs.workspace.environments import (
    FAILURE_TAIL_BYTES,
    MAX_SETUP_BYTES,
    Build,
    Definitions,
    EnvironmentLayers,
    follow,
)
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.backend import ErrorCode, ExecRequest, Sandbox, SandboxError

log = logging.getLogger(__name__)

SCRIPT = ".burrow/setup.sh"
NAME = SCRIPT  # the `environment.build` events' name
SETTING_PREFIX = "repo_setup."
ARCHIVE = ".burrow/setup-workspace.tar"  # in a kept sandbox's workspace
SETUP_TIMEOUT_SECONDS = 1800.0
MAX_ARCHIVE_BYTES = 2 << 30
MAX_KEPT = 5  # per user
RUNS_COMMANDS = ("auto", "ask")  # the approval modes a setup runs in

# The workspace as the script left it, but Burrow's own folder (its checkpoints, uploads).
PACK = f'tar -C "$1" --exclude=./.burrow -cf "$1/{ARCHIVE}" .'
UNPACK = f'tar -C "$1" -xf "$1/{ARCHIVE}" && rm -f "$1/{ARCHIVE}"'


@dataclass(frozen=True)
class Imported:
    """What the import knows of the clone it made."""

    cid: str
    owner: str
    url: str
    ref: str  # as asked ("": the remote's default branch): the clone's checked-out branch
    commit: str  # HEAD's full hash ("" for an empty repository)
    approval_mode: str


class RepoSetups:
    def __init__(
        self,
        journal: Journal,
        sandboxes: SandboxPool,
        kept: Definitions,
    ) -> None:
        self._journal = journal
        self._sandboxes = sandboxes
        self._kept = kept  # the settings table: which setups are kept, whose, when last used

    async def script_of(self, cid: str) -> bytes | None:
        """The clone's setup script; None when it has none, or when it cannot be read (then
        journaled: the conversation stays usable without it)."""
        try:
            return await _read_script(await self._sandboxes.get(cid))
        except SandboxError as exc:
            await self._event(cid, "failed", f"{SCRIPT} could not be read: {exc.message}")
            return None

    async def after_clone(
        self, imported: Imported, script: bytes, settled: Callable[[], None]
    ) -> None:
        """Run the repository's setup (`script`, as read after the clone), or start from the
        kept one; journaled, never raised (a setup that fails leaves the clone as it was,
        and the conversation usable). `settled` is called just before the last event: a
        client that read it finds the workspace free."""

        async def last(stage: ev.ImportStage, detail: str) -> None:
            settled()
            await self._event(cid, stage, detail)

        cid = imported.cid
        if imported.approval_mode not in RUNS_COMMANDS:
            await last(
                "done",
                f"{SCRIPT} was not run: this conversation's approval mode "
                f"({imported.approval_mode}) runs no commands. Run it yourself when you "
                "choose another mode (bash .burrow/setup.sh).",
            )
            return
        key = self._key(imported, script, cid)
        kept_id = f"setup-{key}"
        try:
            sandbox = await self._sandboxes.get(cid)
            if await self._is_kept(key):
                await self._event(cid, "started", f"Starting from the kept {SCRIPT} of this commit")
                began = time.monotonic()
                await self._start_from(kept_id, cid)
                await self._use(key, imported.owner)
                took = time.monotonic() - began
                await last("done", f"Started from the kept setup ({took:.1f} s)")
                return
            await self._event(cid, "started", f"Running {SCRIPT}")
            began = time.monotonic()
            exit_code, build = await self._run(cid, sandbox)
            if exit_code != 0:
                tail = build.tail(FAILURE_TAIL_BYTES).strip()
                await last("failed", f"{SCRIPT} exited with {exit_code}:\n{tail}")
                return
            took = time.monotonic() - began
            kept = await self._keep(cid, sandbox, kept_id, key, imported.owner)
            await last("done", f"{SCRIPT} ran in {took:.1f} s; {kept}")
        except SandboxError as exc:
            await last("failed", f"{SCRIPT}: the sandbox: {exc.message}")

    # -- running it --------------------------------------------------------------------

    async def _run(self, cid: str, sandbox: Sandbox) -> tuple[int, Build]:
        build = Build(key="")
        request = ExecRequest(
            argv=["/bin/bash", SCRIPT],
            cwd=sandbox.workspace,
            env={"BURROW_SETUP": "1"},
            timeout=SETUP_TIMEOUT_SECONDS,
        )

        async def progress(line: str) -> None:
            await self._event(cid, "progress", line)

        return await follow(sandbox.exec(request), build, progress), build

    # -- keeping it --------------------------------------------------------------------

    def _key(self, imported: Imported, script: bytes, cid: str) -> str:
        backend = self._sandboxes.backend
        stands_on = "host"
        if isinstance(backend, EnvironmentLayers):
            stands_on = backend.environment_build_of(cid) or "host"
        what = [imported.owner, imported.url, imported.ref, stands_on, _sha256(script)]
        what.append(imported.commit)
        return _sha256(json.dumps(what).encode())[:24]

    async def _is_kept(self, key: str) -> bool:
        return (await self._kept.all()).get(SETTING_PREFIX + key) is not None

    async def _use(self, key: str, owner: str) -> None:
        value = json.dumps({"owner": owner, "used": time.time()})
        await self._kept.put({SETTING_PREFIX + key: value})

    async def _keep(self, cid: str, sandbox: Sandbox, kept_id: str, key: str, owner: str) -> str:
        """The conversation's root layer and workspace, as a stopped sandbox of their own;
        what was kept, said for the journal."""
        backend = self._sandboxes.backend
        await backend.destroy(kept_id)  # what an interrupted keep left
        try:
            await run_in(sandbox, PACK, sandbox.workspace, what="Packing the workspace")
            await self._sandboxes.copy_root(cid, kept_id)
            kept = await backend.create(kept_id, network="none")
            try:
                size = await copy_file(
                    sandbox,
                    ARCHIVE,
                    kept,
                    f"{kept.workspace}/{ARCHIVE}",
                    what="Keeping the workspace",
                    max_bytes=MAX_ARCHIVE_BYTES,
                )
            finally:
                await kept.stop()
        except TooLarge as exc:
            await backend.destroy(kept_id)
            return f"not kept: its workspace is {exc.size >> 20} MiB, over {exc.limit >> 20} MiB."
        finally:
            await run_in(sandbox, 'rm -f "$1"', f"{sandbox.workspace}/{ARCHIVE}", what="Cleaning")
        await self._use(key, owner)
        await self._collect(owner)
        return (
            f"kept ({size / 1e6:.1f} MB of workspace): the next conversation on this commit "
            "starts from it."
        )

    async def _start_from(self, kept_id: str, cid: str) -> None:
        """The conversation's sandbox made again from the kept one: its clone is the same
        commit, which the archive holds too."""
        backend = self._sandboxes.backend
        await self._sandboxes.destroy(cid)
        await self._sandboxes.copy_root(kept_id, cid)
        kept = await backend.create(kept_id, network="none")
        try:
            sandbox = await self._sandboxes.get(cid)
            await copy_file(
                kept,
                ARCHIVE,
                sandbox,
                f"{sandbox.workspace}/{ARCHIVE}",
                what="Copying the kept workspace",
                max_bytes=MAX_ARCHIVE_BYTES,
            )
        finally:
            await kept.stop()
        await run_in(sandbox, UNPACK, sandbox.workspace, what="Unpacking the kept workspace")

    async def kept_by(self, owner: str) -> list[str]:
        """The sandbox ids of the owner's kept setups, the least recently used first (they
        count toward the owner's disk quota: the pool drops them first when it is full)."""
        return [f"setup-{key}" for _, key in await self._kept_of(owner)]

    async def drop(self, sandbox_id: str) -> None:
        """A kept setup goes (the next conversation on its commit runs the script again)."""
        await self._sandboxes.backend.destroy(sandbox_id)
        await self._kept.put({SETTING_PREFIX + sandbox_id.removeprefix("setup-"): None})

    async def _kept_of(self, owner: str) -> list[tuple[float, str]]:
        """(last used, key) of the owner's kept setups, oldest first."""
        mine = []
        for name, value in (await self._kept.all()).items():
            if name.startswith(SETTING_PREFIX) and value:
                record = json.loads(value)
                if record.get("owner") == owner:
                    mine.append((float(record.get("used", 0)), name[len(SETTING_PREFIX) :]))
        return sorted(mine)

    async def _collect(self, owner: str) -> None:
        """Past MAX_KEPT of a user's kept setups, the least recently used are removed."""
        mine = await self._kept_of(owner)
        for _, key in mine[: max(0, len(mine) - MAX_KEPT)]:
            await self.drop(f"setup-{key}")

    async def _event(self, cid: str, stage: ev.ImportStage, detail: str) -> None:
        build = ev.EnvironmentBuild(name=NAME, stage=stage, detail=detail)
        await self._journal.append(cid, ev.make(build))


async def _read_script(sandbox: Sandbox) -> bytes | None:
    try:
        entry = await sandbox.stat(SCRIPT)
    except SandboxError as exc:
        if exc.code == ErrorCode.NOT_FOUND:
            return None
        raise
    if entry.kind != "file" or entry.size > MAX_SETUP_BYTES:
        return None
    return await sandbox.read_file(SCRIPT)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
