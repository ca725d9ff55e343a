"""The conversation's machine as the API may reach it: its sandbox (woken on use), the
sandbox's state and terminals, and its checkpoints to read.

What changes a workspace in a way the conversation must know of (a restore, a revert, a
save from the editor) is the service's (conversations/service.py), which journals it;
nothing here journals. The pool, the checkpoint store and the import queue stay behind
this: a route gets a sandbox or a fact, never the thing that keeps them.
"""

from __future__ import annotations

from burrow.runs.workspace.checkpoints import Checkpoint, Checkpoints
from burrow.runs.workspace.git.repo_import import RepoImports
from burrow.runs.workspace.sandboxes import SandboxPool, SandboxState
from burrow.runs.workspace.workspace_diff import Diff
from burrow.sandbox.backend import Backend, NetworkPolicy, Sandbox
from burrow.sandbox.terminals import Terminal


class WorkspaceAccess:
    def __init__(self, pool: SandboxPool, checkpoints: Checkpoints, imports: RepoImports) -> None:
        self._pool = pool
        self._checkpoints = checkpoints
        self._imports = imports

    @property
    def backend(self) -> Backend:
        """What runs the sandboxes: its name, capabilities and network plans (read only)."""
        return self._pool.backend

    async def sandbox(self, cid: str) -> Sandbox:
        """The conversation's sandbox, started or woken if need be."""
        return await self._pool.get(cid)

    def running(self, cid: str) -> Sandbox | None:
        """The sandbox if it runs now (never woken just to be looked at)."""
        return self._pool.running(cid)

    def state(self, cid: str) -> SandboxState:
        return self._pool.state(cid)

    async def restart(self, cid: str) -> SandboxState:
        """Every process stopped, booted again on the same files, services started again."""
        await self._pool.restart(cid)
        return self._pool.state(cid)

    async def environment_of(self, cid: str) -> str | None:
        return await self._pool.environment_of(cid)

    async def network_of(self, cid: str) -> NetworkPolicy | None:
        """The conversation's own network policy (None: the server's default)."""
        return await self._pool.network_of(cid)

    def importing(self, cid: str) -> bool:
        """A repository is still being cloned into the workspace."""
        return self._imports.busy(cid)

    async def open_terminal(self, cid: str, cols: int, rows: int) -> Terminal:
        return await self._pool.open_terminal(cid, cols, rows)

    def terminals(self, cid: str) -> list[Terminal]:
        return self._pool.terminals.list(cid)

    def terminal(self, cid: str, tid: str) -> Terminal | None:
        return self._pool.terminals.get(cid, tid)

    async def close_terminal(self, cid: str, tid: str) -> bool:
        return await self._pool.terminals.close(cid, tid)

    async def checkpoints(self, cid: str) -> list[Checkpoint]:
        """Oldest first."""
        return await self._checkpoints.list(cid)

    async def diff(self, cid: str, start: str | None, end: str | None) -> Diff:
        return await self._checkpoints.diff(cid, start, end)

    async def patch(self, cid: str, start: str | None, end: str | None) -> str:
        return await self._checkpoints.patch(cid, start, end)
