"""The seams of the agent loop, and the small hooks every run has.

The loop asks the model and runs tools; everything a run may add to that (approvals,
budgets, the loop guard, side events of a tool, compaction, project instructions) is a
`Hook`: before a model call, transforming the context it is sent and the tools it is
offered, when the model found that context too long, before a tool call, after a tool
call, and when the run closes.
A hook ends the run by raising `RunStop`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from burrow.llm.base import Message, ToolSpec, Usage
from burrow.runs.journal import events as ev
from burrow.runs.loop.context import ModelContext
from burrow.store.records import NewEvent
from burrow.tools.base import Tool, ToolResult

StopStatus = Literal["failed", "budget_exceeded"]


class RunStop(Exception):
    """Ends the run with `status`; `error` says why and what to do, `budget` which limit
    was hit (run.finished carries it)."""

    def __init__(self, status: StopStatus, error: str, budget: ev.BudgetHit | None = None) -> None:
        super().__init__(error)
        self.status: StopStatus = status
        self.error = error
        self.budget = budget


@dataclass
class Tally:
    """What a run has used so far. Time waiting for an approval is in none of it."""

    steps: int = 0  # model calls made
    # The model calls' tokens and cost, a compaction's summary calls included.
    usage: Usage = field(default_factory=Usage)
    tool_seconds: float = 0.0  # time tools ran
    approval_wait_seconds: float = 0.0  # time a person took to answer approvals


@dataclass
class Call:
    """One tool call as the model made it."""

    id: str
    name: str
    raw: str  # the arguments as the model sent them
    arguments: dict[str, Any] | None  # parsed; None when `raw` is not a JSON object
    tool: Tool | None  # None when the model named a tool that does not exist
    # Set by the approval gate in a read-only mode: the call runs behind the sandbox's
    # read-only wall (ToolContext.read_only), whatever its rating said.
    read_only: bool = False


@dataclass
class Outcome:
    """How a call ended, before `tool.finished` is written; after-hooks may amend it."""

    result: ToolResult
    events: list[NewEvent] = field(default_factory=list)  # written right after tool.finished


class Run(Protocol):
    """What a hook sees of the run it is part of."""

    cid: str
    run_id: str
    tally: Tally
    context: ModelContext

    async def emit(self, *events: NewEvent) -> None: ...

    def request(self) -> tuple[list[Message], list[ToolSpec]]:
        """What the next model call would send: the context after every hook's transform,
        and the tools."""
        ...


class Hook:
    """A seam implementation; override only what it needs. The defaults do nothing."""

    async def before_model_call(self, run: Run) -> None:
        return None

    def transform_context(self, messages: list[Message]) -> list[Message]:
        return messages

    def transform_tools(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """The tools the model is offered (a profile's allowlist narrows them)."""
        return specs

    async def context_too_long(self, run: Run) -> bool:
        """The model refused the context as too long: True when this hook made it shorter
        (the call is then tried once more)."""
        return False

    async def before_tool_call(self, run: Run, call: Call) -> str | None:
        """None when the call may run, else why not (shown to the model and the user)."""
        return None

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        return None

    async def close(self, run: Run) -> list[NewEvent]:
        """Events that pair what this hook left open; the run is ending on any path."""
        return []


class SystemPrompt(Hook):
    """Puts the system prompt in front of every request."""

    def __init__(self, text: str) -> None:
        self._message = Message(role="system", content=text)

    def transform_context(self, messages: list[Message]) -> list[Message]:
        return [self._message, *messages]


class PreviewOpened(Hook):
    """A tool that opened a preview (`extra["preview"] = {port, url}`) shows it to the user."""

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        preview = outcome.result.extra.get("preview")
        if isinstance(preview, dict):
            outcome.events.append(ev.make(ev.PreviewOpened.model_validate(preview), run.run_id))
