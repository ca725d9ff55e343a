"""Sandboxes on an E2B endpoint (E2B cloud, a self-hosted one, or `burrow sandbox-host`).

The SDK reads its own variables (`E2B_API_KEY`, `E2B_DOMAIN`, `E2B_API_URL`,
`E2B_SANDBOX_URL`, ...). Which remote sandbox belongs to which conversation is kept where
every replica can see it: in the database (`RemoteIds`, one row per sandbox), so a restarted
server or another replica finds it by one lookup on whichever host of a fleet it lives. The
remote sandbox's metadata (`burrow_sandbox=<id>`) says the same for sandboxes made before
that row existed, or without a database (tests): then the endpoint is asked to list them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

import e2b
from e2b import ALL_TRAFFIC, AsyncSandbox, SandboxNetworkOpts, SandboxQuery, SandboxState

from burrow.sandbox.allowlist import DomainAllowlist
from burrow.sandbox.backend import (
    Capabilities,
    ErrorCode,
    ExecChunk,
    ExecRequest,
    Hibernation,
    NetworkPlan,
    NetworkPolicy,
    RemoteIds,
    RootLayer,
    RootPlan,
    Sandbox,
    SandboxError,
    closing_exec,
)
from burrow.sandbox.e2b.errors import mapped
from burrow.sandbox.e2b.process import RemoteProcesses
from burrow.sandbox.e2b.sandbox import E2BSandbox

log = logging.getLogger(__name__)

METADATA_KEY = "burrow_sandbox"
PauseMode = Literal["full", "filesystem"]


class E2BBackend:
    """Creates, finds, pauses and kills remote sandboxes, one per conversation."""

    name = "e2b"

    def __init__(
        self,
        *,
        template: str | None = None,
        timeout: int = 3600,
        network: NetworkPolicy = "egress",
        hibernation: Hibernation = "memory",
        workspace: str | None = None,
        api: dict[str, Any] | None = None,
        remote_ids: RemoteIds | None = None,
    ) -> None:
        self.template = template or None  # None: the SDK's default template
        self.timeout = timeout  # seconds the remote side keeps a sandbox without a renewal
        self.network: NetworkPolicy = network
        self.workspace = workspace  # None: the remote user's home (where commands start)
        self._api = api or {}  # ApiParams for the SDK (tests); empty: its own variables
        self._remote_ids = remote_ids  # None: found by the metadata alone
        self.capabilities = Capabilities(
            pty=True,
            preview="http",
            hibernation=hibernation,
            network_policies=("none", "egress"),
            egress_allowlist=False,
            running_commands=True,
        )
        self._sandboxes: dict[str, E2BSandbox] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def network_plan(
        self, network: NetworkPolicy | None, allow_domains: DomainAllowlist | None = None
    ) -> NetworkPlan:
        if (network or self.network) == "none" or (allow_domains is not None and not allow_domains):
            return NetworkPlan("none", "no internet access (E2B network.denyOut 0.0.0.0/0)")
        if allow_domains is not None:
            entries = tuple(allow_domains.entries())
            how = f"egress only to {', '.join(entries)} (E2B network.allowOut)"
            return NetworkPlan("egress", how, allow_domains=entries)
        return NetworkPlan("egress", "internet access as the E2B endpoint allows it")

    def get(self, sandbox_id: str) -> E2BSandbox | None:
        return self._sandboxes.get(sandbox_id)

    async def create(
        self,
        sandbox_id: str,
        *,
        network: NetworkPolicy | None = None,
        allow_domains: DomainAllowlist | None = None,
        environment: str | None = None,
    ) -> E2BSandbox:
        if environment is not None:  # Environments builds only on EnvironmentLayers backends
            raise SandboxError(
                ErrorCode.BOOT_FAILED,
                "Environments are built by the local sandbox backend; on an E2B endpoint "
                "choose a template (BURROW_E2B_TEMPLATE).",
            )
        async with self._locks.setdefault(sandbox_id, asyncio.Lock()):
            known = self._sandboxes.get(sandbox_id)
            if known is not None and known.status == "ready":
                return known
            try:
                remote = await self._connect_or_create(
                    sandbox_id, self.network_plan(network, allow_domains)
                )
                workspace = (
                    self.workspace or (known.workspace if known else "") or await _home(remote)
                )
            except SandboxError as exc:
                raise SandboxError(
                    ErrorCode.BOOT_FAILED, f"Sandbox {sandbox_id}: {exc.message}"
                ) from None
            sandbox = E2BSandbox(sandbox_id, remote, workspace, self.timeout)
            self._sandboxes[sandbox_id] = sandbox
            return sandbox

    async def _connect_or_create(self, sandbox_id: str, plan: NetworkPlan) -> AsyncSandbox:
        found = await self._find(sandbox_id)
        if found is not None:
            try:
                with mapped("resume the sandbox"):  # connect resumes a paused one
                    return await AsyncSandbox.connect(found, timeout=self.timeout, **self._api)
            except SandboxError as exc:
                if not _gone(exc):
                    raise  # unreachable, refused...: never a fresh, empty one in its place
                # Killed behind our back (its endpoint's own timeout, say): as if never made.
                log.warning("sandbox %s: its remote sandbox %s is gone", sandbox_id, found)
                await self._forget(sandbox_id)
        with mapped("create a sandbox"):
            remote = await AsyncSandbox.create(
                self.template,
                timeout=self.timeout,
                metadata={METADATA_KEY: sandbox_id},
                # Said both ways: an endpoint that reads only one of them still closes it.
                allow_internet_access=plan.policy == "egress",
                network=_network_options(plan),
                # Past its timeout (a server gone, say) it pauses, files kept, not killed.
                lifecycle={"on_timeout": "pause"},
                **self._api,
            )
        if self._remote_ids is not None:
            await self._remote_ids.put(sandbox_id, remote.sandbox_id)
        return remote

    async def _find(self, sandbox_id: str) -> str | None:
        """The remote id of this conversation's sandbox, running or paused, if any."""
        known = self._sandboxes.get(sandbox_id)
        if known is not None:
            return known.remote_id
        if self._remote_ids is not None:
            stored = await self._remote_ids.get(sandbox_id)
            if stored is not None:
                return stored
        listed = await self._list(sandbox_id)
        if listed is not None and self._remote_ids is not None:
            await self._remote_ids.put(sandbox_id, listed)  # made before the row existed
        return listed

    async def _list(self, sandbox_id: str) -> str | None:
        """Ask the endpoint which of its sandboxes carries this id in its metadata."""
        query = SandboxQuery(
            metadata={METADATA_KEY: sandbox_id}, state=[SandboxState.RUNNING, SandboxState.PAUSED]
        )
        with mapped("list sandboxes"):
            pages = AsyncSandbox.list(query=query, **self._api)
            while pages.has_next:
                for info in await pages.next_items():
                    # Filtered here too: an endpoint may ignore the metadata query.
                    if info.metadata.get(METADATA_KEY) == sandbox_id:
                        return info.sandbox_id
        return None

    def root_plan(self, sandbox_id: str) -> RootPlan:
        template = self.template or "base"
        own = "the sandbox's own file system, which the endpoint keeps with it"
        return RootPlan(
            environment=template,
            writable=True,
            detail=f"the E2B template {template} under {own}",
            layers=(RootLayer(template, False, "the template"), RootLayer("sandbox", True, own)),
        )

    async def copy_root(self, source_id: str, target_id: str) -> None:
        """Nothing: a fork's E2B sandbox starts from the template (its workspace is copied
        by the runs layer, as on every backend)."""

    def disk_used(self, sandbox_id: str) -> int | None:
        """Unknown here: the remote host bounds its sandboxes' disks itself."""
        return None

    async def hibernate(self, sandbox: Sandbox) -> None:
        """Pause it: with its memory (processes resume where they were) or files only."""
        own = self._sandboxes.get(sandbox.id)
        if own is None or own.status != "ready":
            return
        mode: PauseMode = "full" if self.capabilities.hibernation == "memory" else "filesystem"
        own.mark("hibernated", "paused")
        with mapped("pause the sandbox"):
            await own.remote.pause(mode=mode)

    async def destroy(self, sandbox_id: str) -> None:
        async with self._locks.setdefault(sandbox_id, asyncio.Lock()):
            remote_id = await self._find(sandbox_id)
            sandbox = self._sandboxes.pop(sandbox_id, None)
            if sandbox is not None:
                sandbox.mark("stopped", "destroyed")
            if remote_id is not None:
                try:
                    with mapped("kill the sandbox"):
                        await AsyncSandbox.kill(remote_id, **self._api)
                except SandboxError as exc:
                    if not _gone(exc):
                        raise
            await self._forget(sandbox_id)
        self._locks.pop(sandbox_id, None)

    async def _forget(self, sandbox_id: str) -> None:
        if self._remote_ids is not None:
            await self._remote_ids.forget(sandbox_id)

    async def recover(self) -> None:
        """Nothing to reap here: a sandbox a dead server left is found by its metadata and
        resumed on the next `create`, or paused by the endpoint when its timeout passes."""

    async def close(self) -> None:
        """Pause what this server started (its hibernation mode), so nothing runs unwatched."""
        sandboxes = list(self._sandboxes.values())
        results = await asyncio.gather(
            *(self.hibernate(sandbox) for sandbox in sandboxes), return_exceptions=True
        )
        for sandbox, result in zip(sandboxes, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("could not pause sandbox %s: %s", sandbox.id, result)
        self._sandboxes.clear()


async def _home(remote: AsyncSandbox) -> str:
    """Where a command starts by default: the workspace, on a template that sets none."""
    out = b""
    events = RemoteProcesses(remote).run(ExecRequest(argv=["pwd"]), workspace="")
    async with closing_exec(events) as stream:
        async for event in stream:
            if isinstance(event, ExecChunk):
                out += event.data
    home = out.decode(errors="replace").strip()
    if not home.startswith("/"):
        raise SandboxError(ErrorCode.BOOT_FAILED, f"no working directory ({home[:80]!r})")
    return home


def _gone(error: SandboxError) -> bool:
    """The endpoint says that remote sandbox does not exist (killed, or never there) — not
    that it could not be reached."""
    return isinstance(error.__cause__, (e2b.SandboxNotFoundException, e2b.NotFoundException))


def _network_options(plan: NetworkPlan) -> SandboxNetworkOpts | None:
    if plan.policy == "none":
        return {"deny_out": [ALL_TRAFFIC]}
    if plan.allow_domains:
        return {"allow_out": list(plan.allow_domains), "deny_out": [ALL_TRAFFIC]}
    return None
