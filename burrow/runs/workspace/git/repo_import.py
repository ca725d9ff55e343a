"""A repository cloned into a new conversation's workspace, in the background.

`POST /api/conversations` with `repo` answers at once; the clone runs in the conversation's
sandbox (started for it), its progress journaled as `workspace.import` events: `started`,
`progress` at each of git's phases ("Receiving objects", ...), then `done` or `failed`
with git's own message. A run waits for the import to end before it starts, so the agent
never looks at a half-cloned workspace. A failed import leaves the conversation usable
(an empty workspace, or the files the clone had not yet put there).

The clone goes to a fresh folder inside the workspace whose `.git` is then moved into
place and checked out: the workspace may already hold Burrow's `.burrow/` folder, which
`git clone` into a non-empty folder would refuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal
from burrow.runs.workspace.git.in_sandbox import run_git
from burrow.runs.workspace.git.remote import CREDENTIAL_ENV, Remote, git_options
from burrow.runs.workspace.quotas import QuotaExceeded
from burrow.runs.workspace.repo_setup import Imported, RepoSetups
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.backend import SandboxError
from burrow.sandbox.masking import SecretMask
from burrow.store.events import ConversationGone
from burrow.store.records import Conversation

log = logging.getLogger(__name__)

# $1 the URL, $2 the ref ("" for the remote's default branch), then git's -c options.
CLONE = r"""
set -u
url=$1; ref=$2; shift 2
if [ -e .git ]; then echo "the workspace already holds a .git" >&2; exit 3; fi
tmp=$(mktemp -d .burrow-import.XXXXXX) || exit 3
trap 'rm -rf "$tmp"' EXIT
git "$@" clone --progress --no-checkout ${ref:+--branch "$ref"} -- "$url" "$tmp" || exit 4
mv "$tmp/.git" .git || exit 3
if git rev-parse -q --verify HEAD >/dev/null; then
  git "$@" reset -q --hard || exit 5
  git log -1 --format='%H %h %s'
fi
"""


@dataclass(frozen=True)
class RepoSource:
    remote: Remote
    ref: str | None
    credential: str | None  # the chosen secret's value


class RepoImports:
    def __init__(
        self,
        journal: Journal,
        sandboxes: SandboxPool,
        *,
        setups: RepoSetups | None = None,
        conversation_of: Callable[[str], Awaitable[Conversation | None]] | None = None,
    ) -> None:
        self._journal = journal
        self._sandboxes = sandboxes
        self._setups = setups  # the repository's own .burrow/setup.sh, after the clone
        self._conversation_of = conversation_of
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Imports whose last event is journaled and that have nothing left to do but end:
        # a client that read `done` or `failed` finds the workspace free at once.
        self._settled: set[str] = set()

    def start(self, cid: str, source: RepoSource) -> None:
        task = asyncio.create_task(self._import(cid, source), name=f"import into {cid}")
        self._tasks[cid] = task
        self._settled.discard(cid)

        def ended(_: asyncio.Task[None]) -> None:
            self._tasks.pop(cid, None)
            self._settled.discard(cid)

        task.add_done_callback(ended)

    def busy(self, cid: str) -> bool:
        """Cloning, or running the repository's setup after the clone."""
        return cid in self._tasks and cid not in self._settled

    async def wait(self, cid: str) -> None:
        """Return once the conversation's import (if any) has ended; being cancelled here
        (an interrupted run) does not cancel the import."""
        task = self._tasks.get(cid)
        if task is not None:
            await asyncio.wait({task})

    async def forget(self, cid: str) -> None:
        """The conversation is being deleted: stop its import."""
        task = self._tasks.pop(cid, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        for cid in list(self._tasks):
            await self.forget(cid)

    async def _import(self, cid: str, source: RepoSource) -> None:
        mask = SecretMask([source.credential] if source.credential else [])
        what = source.remote.url + (f" at {source.ref}" if source.ref else "")
        try:
            await self._event(cid, "started", f"Cloning {what}")
            stage, detail, commit = await self._clone(cid, source, mask)
            if stage != "done":
                await self._last_event(cid, stage, mask.text(detail))
                return
            # The setup script is read before `done` is said, so that `done` without a
            # setup to follow means the workspace is free.
            script = await self._setups.script_of(cid) if self._setups and commit else None
            if script is None:
                await self._last_event(cid, stage, mask.text(detail))
                return
            await self._event(cid, stage, mask.text(detail))
            await self._set_up(cid, source, commit, script)
        except ConversationGone:
            return  # deleted meanwhile
        except SandboxError as exc:
            with contextlib.suppress(ConversationGone):
                await self._last_event(cid, "failed", mask.text(f"The sandbox: {exc.message}"))
        except QuotaExceeded as exc:  # too many live sandboxes: the message says what to do
            with contextlib.suppress(ConversationGone):
                await self._last_event(cid, "failed", str(exc))
        except Exception as exc:
            log.exception("importing a repository into %s failed", cid)
            with contextlib.suppress(ConversationGone):
                await self._last_event(cid, "failed", f"Internal error: {type(exc).__name__}")

    async def _set_up(self, cid: str, source: RepoSource, commit: str, script: bytes) -> None:
        if self._setups is None or self._conversation_of is None:
            return
        conversation = await self._conversation_of(cid)
        if conversation is None:
            return
        imported = Imported(
            cid,
            conversation.owner_id,
            source.remote.url,
            source.ref or "",
            commit,
            conversation.approval_mode,
        )
        await self._setups.after_clone(imported, script, lambda: self._settled.add(cid))

    async def _clone(
        self, cid: str, source: RepoSource, mask: SecretMask
    ) -> tuple[ev.ImportStage, str, str]:
        """(stage, what to say, HEAD's full hash or "")."""
        sandbox = await self._sandboxes.get(cid)
        phase = ""

        async def progress(text: str) -> None:
            # One event per phase of git's progress, not per percent: the journal stays short.
            nonlocal phase
            for line in text.replace("\r", "\n").splitlines():
                said = line.removeprefix("remote: ").strip()
                name, colon, _ = said.partition(":")
                if colon and name and name != phase and not said.startswith("fatal"):
                    phase = name
                    await self._event(cid, "progress", mask.text(said))

        credential = source.credential is not None
        argv = ["bash", "-c", CLONE, "burrow-import", source.remote.url, source.ref or ""]
        argv += git_options(source.remote, with_credential=credential)
        env = {CREDENTIAL_ENV: source.credential} if source.credential is not None else {}
        result = await run_git(sandbox, argv, env, on_stderr=progress)
        if not result.ok:
            return "failed", result.message(), ""
        commit, _, head = result.stdout.strip().partition(" ")
        said = f"Cloned {source.remote.url}" + (f" (HEAD {head})" if head else " (empty)")
        return "done", said, commit

    async def _last_event(self, cid: str, stage: ev.ImportStage, detail: str) -> None:
        self._settled.add(cid)
        await self._event(cid, stage, detail)

    async def _event(self, cid: str, stage: ev.ImportStage, detail: str) -> None:
        await self._journal.append(cid, ev.make(ev.WorkspaceImport(stage=stage, detail=detail)))
