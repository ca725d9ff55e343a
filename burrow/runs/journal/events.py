"""The closed vocabulary of journal events (DESIGN.md §4, §8): each type and its payload.

Every event's `data` is one frozen class here, one per `EventType` (`PAYLOADS` maps them);
`make` is the only way an event is built, so what the server writes, what the model context
reads and what the browser's types say (`web/src/api/events.gen.ts`, generated from
`schema()` by `make web`) cannot drift apart. Pydantic checks a payload as it is built
(about a microsecond); the journal's stored JSON is what `check` validates again in tests.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict

from burrow.llm import base as llm
from burrow.sandbox.backend import SandboxStatus
from burrow.store.records import NewEvent

if TYPE_CHECKING:
    from burrow.tools import base as tools


class EventType(enum.StrEnum):
    USER_MESSAGE = "user.message"
    RUN_STARTED = "run.started"
    THINKING_DELTA = "assistant.thinking.delta"
    TEXT_DELTA = "assistant.text.delta"
    ASSISTANT_MESSAGE = "assistant.message"
    TOOL_STARTED = "tool.started"
    TOOL_OUTPUT = "tool.output"
    TOOL_FINISHED = "tool.finished"
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_RESOLVED = "approval.resolved"
    SANDBOX_STATUS = "sandbox.status"
    PREVIEW_OPENED = "preview.opened"
    USAGE = "usage"
    CONTEXT_COMPACTED = "context.compacted"
    RUN_FINISHED = "run.finished"
    RETRY = "retry"
    MODEL_CHANGED = "model.changed"
    INSTRUCTIONS_LOADED = "instructions.loaded"
    WORKSPACE_RESTORED = "workspace.restored"
    WORKSPACE_IMPORT = "workspace.import"
    MCP_WARNING = "mcp.warning"
    FILE_SAVED = "file.saved"
    ENVIRONMENT_BUILD = "environment.build"
    PLAN_UPDATED = "plan.updated"
    PLAN_PROPOSED = "plan.proposed"


RunStatus = Literal["completed", "failed", "canceled", "budget_exceeded"]
Decision = Literal["allow_once", "allow_session", "deny"]
Risk = Literal["safe", "mutating", "dangerous"]
# A repository brought into the workspace: started, git's progress, then done or failed.
ImportStage = Literal["started", "progress", "done", "failed"]
BudgetKind = Literal["tokens", "cost", "steps", "tool_seconds", "wall_seconds", "total_cost"]


class Record(BaseModel):
    """A frozen part of an event's data. Fields named in `optional` are additive ones (an
    event written before they existed lacks them): left out when None, optional in TS."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        json_schema_serialization_defaults_required=True,
        defer_build=True,  # built at first use or by `build_validators`, not at import
    )
    optional: ClassVar[frozenset[str]] = frozenset()

    def to_data(self) -> dict[str, Any]:
        """As the journal stores it: plain JSON values, absent optional fields left out."""
        out = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if value is None and name in self.optional:
                continue
            out[name] = _plain(value)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_data()
    if isinstance(value, list) and value and isinstance(value[0], Record):
        return [v.to_data() for v in value]
    # Anything else is already JSON: strings, numbers, and `arguments` as the model sent
    # them, never walked (a hostile model's nesting costs nothing here).
    return value


class Payload(Record):
    """The `data` of one event type."""

    type: ClassVar[EventType]
    # On a subagent's events: the id of the parent's `task` call they belong to (the
    # timeline nests them under it; the parent's model context leaves them out).
    parent_call_id: str | None = None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.optional = cls.optional | {"parent_call_id"}


# Nested records.


class Usage(Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int | None = None  # parts of prompt_tokens read from / written to
    cache_write_tokens: int | None = None  # the provider's prompt cache
    cost: float = 0.0
    compaction: bool | None = None  # set on a compaction's summary call (not context size)
    optional = frozenset({"cache_read_tokens", "cache_write_tokens", "compaction"})

    @classmethod
    def of(cls, usage: llm.Usage, *, compaction: bool | None = None) -> Self:
        """The wire form of `usage` (`compaction`: a summary call's)."""
        return cls(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost=usage.cost,
            compaction=compaction,
        )

    @staticmethod
    def read(data: Mapping[str, Any]) -> llm.Usage:
        """The usage in a stored `usage` event's data (cache counts an older one lacks: 0)."""
        return llm.Usage(
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            cache_read_tokens=int(data.get("cache_read_tokens") or 0),
            cache_write_tokens=int(data.get("cache_write_tokens") or 0),
            cost=float(data.get("cost") or 0.0),
        )


class ToolCall(Record):
    id: str
    name: str
    arguments: Any  # an object, or the raw text when the model sent invalid JSON


class ThinkingBlock(Record):
    """As the provider sent it (signatures, redacted data), to be sent back byte for byte."""

    type: Literal["thinking", "redacted_thinking"]
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None  # redacted_thinking's payload
    optional = frozenset({"thinking", "signature", "data"})


# The wire form of `burrow.tools.base.ToolKind`, the one declaration of what a tool may do:
# there `shell` names the argument holding the command and `subloop` is the loop's own
# business; the UI gets the flags. The class name and docstring are the UI's type.
class ToolKind(Record):
    """What a tool declares it may do; a `shell` tool also does whatever its command does."""

    reads: bool
    writes: bool
    destructive: bool
    network: bool
    shell: bool

    @classmethod
    def of(cls, kind: tools.ToolKind) -> ToolKind:
        return cls.model_validate(kind.as_event())


class BudgetHit(Record):
    kind: BudgetKind
    limit: float
    used: float


class PlanItem(Record):
    """One step of a checklist (the `todo` tool's, or a proposed plan's)."""

    text: str
    done: bool


# One payload per event type.


class UserMessage(Payload):
    type = EventType.USER_MESSAGE
    content: str
    steering: bool
    attachments: list[str] | None = None  # workspace paths of uploads, never their bytes
    optional = frozenset({"attachments"})


class RunStarted(Payload):
    type = EventType.RUN_STARTED
    run_id: str


class ThinkingDelta(Payload):
    type = EventType.THINKING_DELTA
    text: str


class TextDelta(Payload):
    type = EventType.TEXT_DELTA
    text: str


class AssistantMessage(Payload):
    type = EventType.ASSISTANT_MESSAGE
    content: str
    thinking: str
    tool_calls: list[ToolCall]
    thinking_blocks: list[ThinkingBlock] | None = None  # Anthropic's, to send back as sent
    optional = frozenset({"thinking_blocks"})


class ToolStarted(Payload):
    type = EventType.TOOL_STARTED
    call_id: str
    name: str
    arguments: Any  # an object, or the raw text when the model sent invalid JSON
    kind: ToolKind | None = None  # what the tool declares it may do (risk, the UI's badge)
    optional = frozenset({"kind"})


class ToolOutput(Payload):
    type = EventType.TOOL_OUTPUT
    call_id: str
    stream: Literal["stdout", "stderr"]
    text: str


class ToolFinished(Payload):
    type = EventType.TOOL_FINISHED
    call_id: str
    is_error: bool
    exit_code: int | None = None
    output: str
    truncated: bool = False
    duration_ms: int = 0  # from tool.started on, any wait for an approval included
    approval_wait_ms: int | None = None  # how much of duration_ms a person was deciding
    optional = frozenset({"approval_wait_ms"})


class ApprovalRequested(Payload):
    type = EventType.APPROVAL_REQUESTED
    request_id: str
    call_id: str
    tool: str
    arguments: Any
    risk: Risk
    reason: str


class ApprovalResolved(Payload):
    type = EventType.APPROVAL_RESOLVED
    request_id: str
    decision: Decision


class SandboxStatusChanged(Payload):
    type = EventType.SANDBOX_STATUS
    status: SandboxStatus
    detail: str | None


class PreviewOpened(Payload):
    type = EventType.PREVIEW_OPENED
    port: int
    url: str


class UsageReported(Usage, Payload):
    type = EventType.USAGE


class ContextCompacted(Payload):
    type = EventType.CONTEXT_COMPACTED
    tokens_before: int
    tokens_after: int
    summary: str
    upto_seq: int


class RunFinished(Payload):
    type = EventType.RUN_FINISHED
    status: RunStatus
    error: str | None
    usage: Usage  # always whole: a run that never reached the model spent 0
    budget: BudgetHit | None = None  # which limit ended a budget_exceeded run
    # Wall time of the run without its waits for approvals, and those waits (DESIGN §8):
    # absent on runs closed by crash recovery (the server was down, nobody timed them).
    duration_ms: int | None = None
    approval_wait_ms: int | None = None
    # Of duration_ms: time in the model's streams, and the tool calls' wall time; the rest
    # was Burrow's own (sandbox start, run assembly, commits). Absent like duration_ms, and
    # on runs written before they were measured.
    model_ms: int | None = None
    tool_ms: int | None = None
    optional = frozenset({"budget", "duration_ms", "approval_wait_ms", "model_ms", "tool_ms"})


class Retry(Payload):
    type = EventType.RETRY
    attempt: int
    delay_s: float
    reason: str


class ModelChanged(Payload):
    type = EventType.MODEL_CHANGED
    model: str


class InstructionsLoaded(Payload):
    type = EventType.INSTRUCTIONS_LOADED
    path: str
    bytes: int | None = None  # how much of the file the model gets
    truncated: bool | None = None  # the file was longer than the model is given
    optional = frozenset({"bytes", "truncated"})


class WorkspaceRestored(Payload):
    type = EventType.WORKSPACE_RESTORED
    checkpoint_id: str
    # The checkpoint of the state just before the restore: restoring it undoes this one.
    undo_checkpoint_id: str | None = None
    optional = frozenset({"undo_checkpoint_id"})


class WorkspaceImport(Payload):
    type = EventType.WORKSPACE_IMPORT
    stage: ImportStage
    detail: str  # what git said (credentials masked), or what went wrong and what to do


class EnvironmentBuild(Payload):
    """The build of the environment this conversation's sandbox waits for: started,
    progress (its output's last line, at least every 2 s), then done or failed."""

    type = EventType.ENVIRONMENT_BUILD
    name: str
    stage: ImportStage
    detail: str


class McpWarning(Payload):
    """An MCP server could not be used for this run (it failed to start, crashed, its URL
    is refused, a secret it needs is missing); its tools are absent, the run goes on."""

    type = EventType.MCP_WARNING
    server: str
    message: str


class FileSaved(Payload):
    """The user saved a file from the Files editor (PUT …/files/content)."""

    type = EventType.FILE_SAVED
    path: str  # workspace-relative
    bytes: int | None = None
    optional = frozenset({"bytes"})


class PlanUpdated(Payload):
    """The model's checklist as its latest `todo` call left it (the whole list); `plan_id`
    is the run's (`plan_id_of`): one checklist per run, which a plan-mode run's proposal
    will share so its card ticks as the run reports."""

    type = EventType.PLAN_UPDATED
    plan_id: str
    items: list[PlanItem]


class PlanProposed(Payload):
    """A plan-mode run's plan (its latest checklist): the run waits for `POST
    …/plans/{plan_id}` to approve it (the run goes on in the chosen mode) or reject it."""

    type = EventType.PLAN_PROPOSED
    plan_id: str
    items: list[PlanItem]


def plan_id_of(run_id: str) -> str:
    """A run's checklist id: one checklist per run, so no state is needed to find it."""
    return f"p_{run_id.removeprefix('r_')}"


PAYLOADS: dict[EventType, type[Payload]] = {
    cls.type: cls
    for cls in (
        UserMessage, RunStarted, ThinkingDelta, TextDelta, AssistantMessage, ToolStarted,
        ToolOutput, ToolFinished, ApprovalRequested, ApprovalResolved, SandboxStatusChanged,
        PreviewOpened, UsageReported, ContextCompacted, RunFinished, Retry, ModelChanged,
        InstructionsLoaded, WorkspaceRestored, WorkspaceImport, McpWarning, FileSaved,
        EnvironmentBuild, PlanUpdated, PlanProposed,
    )
}  # fmt: skip


def build_validators() -> Iterator[None]:
    """Build each payload class's validator (and its parts'), yielding after each: `burrow
    serve` runs this in slices once it listens, so neither its start nor its first run pays
    for them."""
    for cls in PAYLOADS.values():
        cls.model_rebuild()  # nothing to do for one already used
        yield


def make(payload: Payload, run_id: str | None = None) -> NewEvent:
    return NewEvent(type=payload.type.value, data=payload.to_data(), run_id=run_id)


def nested(event: NewEvent, parent_call_id: str) -> NewEvent:
    """`event` as a subagent's: tagged with the parent's `task` call."""
    return replace(event, data={**event.data, "parent_call_id": parent_call_id})


class UnknownEventType(ValueError):
    pass


def check(kind: str, data: dict[str, Any]) -> Payload:
    """`data` as its type's payload; raises UnknownEventType, or pydantic's ValidationError
    naming each field that drifted."""
    try:
        cls = PAYLOADS[EventType(kind)]
    except ValueError:
        raise UnknownEventType(
            f"{kind!r} is not an event type: add it to EventType and PAYLOADS."
        ) from None
    return cls.model_validate(data, strict=True)  # stored JSON: "no" is not a bool


def schema() -> dict[str, Any]:
    """Every payload's JSON schema as an OpenAPI components document (what openapi-typescript
    turns into `events.gen.ts`); `EventData` maps each event type to its payload."""
    from pydantic.json_schema import models_json_schema

    classes = [*PAYLOADS.values()]
    _, top = models_json_schema(
        [(c, "serialization") for c in classes], ref_template="#/components/schemas/{model}"
    )
    schemas: dict[str, Any] = top.get("$defs", {})
    records = {c.__name__: c for c in _records(classes)}
    for name, cls in records.items():
        _mark_optional(schemas[name], cls.optional)
        props = schemas[name].get("properties", {})
        if "parent_call_id" in props:  # after the type's own fields, as §4 lists them
            props["parent_call_id"] = props.pop("parent_call_id")
    schemas["EventData"] = {
        "type": "object",
        "properties": {
            t.value: {"$ref": f"#/components/schemas/{c.__name__}"} for t, c in PAYLOADS.items()
        },
        "required": [t.value for t in PAYLOADS],
        "additionalProperties": False,
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Burrow event payloads", "version": "1"},
        "paths": {},
        "components": {"schemas": schemas},
    }


def _records(classes: list[type[Payload]]) -> set[type[Record]]:
    found: set[type[Record]] = set()
    todo: list[type[Record]] = list(classes)
    while todo:
        cls = todo.pop()
        if cls in found:
            continue
        found.add(cls)
        for f in cls.model_fields.values():
            for arg in _classes_in(f.annotation):
                todo.append(arg)
    return found


def _classes_in(annotation: Any) -> list[type[Record]]:
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return [annotation]
    return [c for arg in getattr(annotation, "__args__", ()) for c in _classes_in(arg)]


def _mark_optional(model: dict[str, Any], optional: frozenset[str]) -> None:
    """An optional field is absent rather than null: not required, and not nullable."""
    model["required"] = [n for n in model.get("required", []) if n not in optional]
    for name in optional:
        prop = model["properties"][name]
        choices = [c for c in prop.pop("anyOf", []) if c != {"type": "null"}]
        if len(choices) == 1:
            prop.update(choices[0])
        elif choices:
            prop["anyOf"] = choices
        prop.pop("default", None)
