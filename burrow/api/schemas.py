"""Request and response bodies (the source of /openapi.json and the web client's types)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from burrow.store.records import Conversation

ApprovalMode = Literal["ask", "auto", "read_only", "plan"]
# The mode an approved plan goes on in: any but plan itself.
RunMode = Literal["ask", "auto", "read_only"]
Network = Literal["none", "egress"]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    cost: float
    cache_read_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of prompt_tokens, written to it


class Budget(BaseModel):
    """Limits overriding the server's (BURROW_RUN_MAX_*) for this conversation's runs;
    `total_cost` caps what the whole conversation spends. Absent: the server's limit."""

    tokens: int | None = Field(default=None, ge=1)
    cost: float | None = Field(default=None, gt=0)
    steps: int | None = Field(default=None, ge=1)
    tool_seconds: float | None = Field(default=None, gt=0)
    wall_seconds: float | None = Field(default=None, gt=0)
    """Seconds a run may take, approval waits excluded."""
    total_cost: float | None = Field(default=None, gt=0)


class BudgetIn(Budget):
    """A budget as a request sets it. Strict, because a spend cap that silently does
    nothing is worse than an error: a misspelt limit (`step`) or an infinite one is a 422
    naming the field, never a PATCH that answers 200 and leaves the run unlimited."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ContextUse(BaseModel):
    used: int  # tokens: the provider's count for the last answer, or after a compaction
    window: int  # tokens the model accepts (BURROW_CONTEXT_WINDOW, its server, the catalog)


class ConversationOut(BaseModel):
    id: str
    title: str
    created_at: datetime
    updated_at: datetime
    status: Literal["idle", "running", "waiting_approval"]
    approval_mode: ApprovalMode
    sandbox_status: str
    last_seq: int
    usage: Usage
    secrets: list[str]
    """Names of the owner's secrets its sandbox's commands and terminals get."""
    model: str | None
    """`[provider:]model` this conversation uses; null: the server's model."""
    budget: Budget
    context: ContextUse
    network: Network
    """Its sandbox's network policy: `egress` (public addresses, or only the domains of
    BURROW_SANDBOX_ALLOW_DOMAINS) or `none` (loopback only)."""
    profile: str = "default"
    """The profile its runs use ("default": none)."""
    last_run_failed: bool = False
    """The conversation is at rest ("idle") and its last run ended "failed"."""
    environment: str | None = None
    """The environment its sandbox starts from (`/api/environments`); null: the host's
    system."""
    automation_id: str | None = None
    """The automation that started it (`/api/automations`); null: a person did."""

    @classmethod
    def of(cls, c: Conversation, context: ContextUse, default_network: Network) -> ConversationOut:
        return cls(
            id=c.id,
            title=c.title,
            created_at=c.created_at,
            updated_at=c.updated_at,
            # The row's rest state "failed" is "idle" on the wire, plus last_run_failed.
            status="idle" if c.status == "failed" else c.status,  # type: ignore[arg-type]
            approval_mode=c.approval_mode,  # type: ignore[arg-type]
            sandbox_status=c.sandbox_status,
            last_seq=c.last_seq,
            last_run_failed=c.status == "failed",
            usage=Usage(**asdict(c.usage)),
            secrets=list(c.secrets),
            model=c.model,
            budget=Budget.model_validate(c.budget),
            context=context,
            network=c.network if c.network in ("none", "egress") else default_network,  # type: ignore[arg-type]
            profile=c.profile,
            environment=c.environment,
            automation_id=c.automation_id,
        )


class RepoIn(BaseModel):
    """A repository cloned into the new conversation's workspace (in its sandbox)."""

    url: str = Field(max_length=2048, description="https://, http:// or git:// URL")
    ref: str | None = Field(default=None, max_length=255, description="A branch or tag")
    secret: str | None = Field(
        default=None, max_length=128, description="Name of the secret used as the password"
    )


class CreateConversation(BaseModel):
    title: str | None = Field(default=None, max_length=200)
    profile: str | None = Field(default=None, max_length=100)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    approval_mode: ApprovalMode | None = None
    repo: RepoIn | None = None
    network: Network | None = None
    """Default: BURROW_SANDBOX_NETWORK."""
    environment: str | None = Field(default=None, max_length=32)
    """The environment its sandbox starts from (`/api/environments`); default: the host's
    system. Chosen at creation only."""


class UpdateConversation(BaseModel):
    """Change what is given: title, approval mode, chosen secrets, model, budget, profile."""

    title: str | None = Field(default=None, min_length=1, max_length=200)
    profile: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description='The profile of the next runs ("default": none); its approval mode '
        "applies unless this request sets one",
    )
    approval_mode: ApprovalMode | None = None
    secrets: list[str] | None = Field(
        default=None,
        max_length=100,
        description="Names of the caller's secrets, given to the next command and terminal",
    )
    model: str | None = Field(
        default=None,
        max_length=200,
        description="`[provider:]model` for the next runs; an empty string: the server's model",
    )
    budget: BudgetIn | None = Field(
        default=None,
        description="Fields given replace the stored ones; a field given as null goes "
        "back to the server's limit",
    )
    network: Network | None = Field(
        default=None,
        description="Between runs only; an idle sandbox is hibernated to take it at once, "
        "a busy one takes it at its next start",
    )


class Compacted(BaseModel):
    seq: int  # of the context.compacted event
    tokens_before: int
    tokens_after: int
    upto_seq: int


class ApprovalAnswer(BaseModel):
    decision: Literal["allow_once", "allow_session", "deny"]


class PlanStepIn(BaseModel):
    text: str = Field(min_length=1, max_length=500)
    done: bool = False


class PlanDecisionIn(BaseModel):
    """The owner's decision on a `plan.proposed` event."""

    decision: Literal["approve", "reject"]
    items: list[PlanStepIn] | None = Field(
        default=None, max_length=100, description="The plan as edited (approve only)"
    )
    mode: RunMode | None = Field(
        default=None,
        description="The mode the approved run goes on in; default: the conversation's "
        "(ask when the conversation itself is in plan mode)",
    )


class PlanDecided(BaseModel):
    plan_id: str
    decision: str


class ApprovalAnswered(BaseModel):
    request_id: str
    decision: str


class SendMessage(BaseModel):
    content: str = Field(max_length=200_000)
    approval_mode: ApprovalMode | None = Field(
        default=None,
        description="This message's run only (e.g. plan); default: the conversation's. "
        "Ignored for steering (the run going keeps its mode).",
    )
    attachments: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="Workspace-relative paths of uploaded files (POST .../uploads)",
    )

    @field_validator("content")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content is empty: write a message")
        return value


class MessageAccepted(BaseModel):
    run_id: str
    seq: int


class Accepted(BaseModel):
    status: Literal["accepted"] = "accepted"
    run_id: str | None = None


class EventOut(BaseModel):
    seq: int
    type: str
    ts: str
    run_id: str | None
    data: dict[str, object]


class FileEntryOut(BaseModel):
    name: str
    path: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int
    mtime: float


class SandboxOut(BaseModel):
    status: str
    backend: str
    network: Network = "none"
    """The conversation's policy. `egress` without `allow_domains`: commands reach any
    internet host, so a secret given to them can leave."""
    allow_domains: list[str] = []
    """With egress: the only host names reachable (through Burrow's proxy); empty: any."""
    network_detail: str = ""
    """How the sandbox is connected here; says so when egress is unavailable."""


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    sandbox: str
    model: str | None


class Me(BaseModel):
    id: str
    username: str
    is_admin: bool


class Uploaded(BaseModel):
    files: list[str]
    """Workspace-relative paths of the files written (an extract lists the first 1,000)."""
    total: int | None = None
    """Extracts: how many files were written, `files` listed or not."""


class GitPush(BaseModel):
    branch: str = Field(max_length=255)
    remote: str = Field(default="origin", max_length=64)
    secret: str | None = Field(default=None, max_length=128)
    message: str | None = Field(
        default=None, max_length=10_000, description="The commit message, when there is one"
    )


class GitPushed(BaseModel):
    branch: str
    remote: str
    url: str
    """Where the branch went: the remote's URL as the repository configures it."""
    commit: str
    committed: bool
    """A commit of the working tree was made; false: there was nothing new to commit."""


class PullRequestIn(BaseModel):
    title: str = Field(min_length=1, max_length=256)
    body: str | None = Field(default=None, max_length=65_536)
    base: str = Field(max_length=255)
    head: str = Field(max_length=255)
    secret: str = Field(max_length=128, description="Name of the secret holding a GitHub token")


class PullRequestOut(BaseModel):
    number: int
    url: str
