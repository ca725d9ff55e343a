"""The closed vocabulary of journal events (DESIGN.md §4) and their constructors."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from burrow.store.records import NewEvent


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


def make(kind: EventType, run_id: str | None = None, /, **data: Any) -> NewEvent:
    return NewEvent(type=kind.value, data=data, run_id=run_id)


def user_message(
    content: str, *, steering: bool, run_id: str | None, attachments: Sequence[str] = ()
) -> NewEvent:
    """`attachments`: workspace paths of uploaded files (references, never their bytes)."""
    extra = {"attachments": list(attachments)} if attachments else {}
    return make(EventType.USER_MESSAGE, run_id, content=content, steering=steering, **extra)


def run_started(run_id: str) -> NewEvent:
    return make(EventType.RUN_STARTED, run_id, run_id=run_id)


def tool_finished(
    run_id: str,
    call_id: str,
    *,
    output: str,
    is_error: bool,
    exit_code: int | None = None,
    truncated: bool = False,
    duration_ms: int = 0,
) -> NewEvent:
    return make(
        EventType.TOOL_FINISHED,
        run_id,
        call_id=call_id,
        is_error=is_error,
        exit_code=exit_code,
        output=output,
        truncated=truncated,
        duration_ms=duration_ms,
    )


USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cost")


def run_finished(
    run_id: str, status: str, error: str | None, usage: dict[str, Any], **extra: Any
) -> NewEvent:
    """`extra`: fields some endings add, e.g. `budget` for budget_exceeded."""
    # Always a full usage object (a run that never reached the model spent 0): clients show it.
    usage = dict.fromkeys(USAGE_FIELDS, 0) | usage
    return make(EventType.RUN_FINISHED, run_id, status=status, error=error, usage=usage, **extra)
