"""The conversation's sandbox: its status (with why), and a restart when it misbehaves."""

from __future__ import annotations

from dataclasses import asdict
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel

from burrow.api.deps import ConversationDep, ServicesDep
from burrow.api.schemas import Network, SandboxOut
from burrow.services import Services

router = APIRouter(prefix="/api/conversations", tags=["sandbox"])
BUILT = "the environment as its build left it, shared read-only by its conversations"
DEBIAN = "a Debian {} system mmdebstrap built, shared read-only by every environment on it"


class CapabilitiesOut(BaseModel):
    """What the sandbox backend can do (see `burrow.sandbox.backend.Capabilities`)."""

    pty: bool
    preview: Literal["tunnel", "http"]
    hibernation: Literal["files", "memory"]
    """`files`: hibernation stops every process; `memory`: processes resume on wake."""
    network_policies: list[Network]
    egress_allowlist: bool
    running_commands: bool


class LayerOut(BaseModel):
    name: str
    writable: bool
    detail: str


class SandboxStatusOut(SandboxOut):
    detail: str = ""
    """Why it is in that status: a boot failure's reason, what hibernation kept, ..."""
    capabilities: CapabilitiesOut | None = None
    environment: str = "host"
    """What the sandbox's system starts from: `host` (the host's own), or a template."""
    root_writable: bool = False
    """Whether the sandbox may change its system (apt-get, pip, npm -g install there)."""
    root_detail: str = ""
    layers: list[LayerOut] = []
    """What its `/` is made of, bottom first."""


@router.get("/{cid}/sandbox")
async def sandbox_status(conversation: ConversationDep, svc: ServicesDep) -> SandboxStatusOut:
    state = svc.conversations.workspace.state(conversation.id)
    status, detail = state.status, state.detail
    if status == "none":  # not started by this server process: the journal's last word
        latest = await svc.conversations.get(conversation.id)
        status = latest.sandbox_status if latest else conversation.sandbox_status
    return await sandbox_out(svc, conversation.id, status, detail)


@router.post("/{cid}/sandbox/restart", status_code=202)
async def restart_sandbox(conversation: ConversationDep, svc: ServicesDep) -> SandboxStatusOut:
    """Stop every process, boot again on the same files, start recorded services again.
    Also the way out of a failed boot."""
    state = await svc.conversations.workspace.restart(conversation.id)
    return await sandbox_out(svc, conversation.id, state.status, state.detail)


async def sandbox_out(svc: Services, cid: str, status: str, detail: str) -> SandboxStatusOut:
    backend = svc.conversations.workspace.backend
    policy = await svc.conversations.network_of(cid)
    plan = backend.network_plan(policy)
    root = backend.root_plan(cid)
    layers = [LayerOut(**asdict(layer)) for layer in root.layers]
    environment = await svc.conversations.workspace.environment_of(cid)
    if environment is not None and root.writable:  # between the base and its own layer
        built = LayerOut(name=f"environment {environment}", writable=False, detail=BUILT)
        layers.insert(1, built)
        spec = svc.environments.get(environment)
        suite = spec.debian_suite if spec is not None else None
        if suite is not None:  # not the host's system at the bottom, a Debian one
            layers[0] = LayerOut(
                name=f"debian:{suite}", writable=False, detail=DEBIAN.format(suite)
            )
    return SandboxStatusOut(
        environment=environment or root.environment,
        root_writable=root.writable,
        root_detail=root.detail,
        layers=layers,
        status=status,
        backend=backend.name,
        detail=detail,
        network=policy,
        allow_domains=list(plan.allow_domains),
        network_detail=plan.detail,
        capabilities=CapabilitiesOut(**asdict(backend.capabilities)),
    )
