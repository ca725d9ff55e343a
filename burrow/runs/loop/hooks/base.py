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
    # For the run's footer (run.finished's model_ms, tool_ms): time in the model's streams
    # (retries' waits included), and the wall time of its tool calls (subagents run at once
    # count once; approval waits excluded). What is left of the run's time was Burrow's own.
    model_seconds: float = 0.0
    tool_wall_seconds: float = 0.0
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
    """A seam implementation; override only what it needs. The defaults do nothing.

    The contract of every method: it never raises anything but `RunStop` (any other
    exception fails the run as an internal error); it never blocks the event loop (no
    synchronous I/O or long computation: every run of the server shares the loop), and
    what it awaits ends when the run is cancelled (an interrupt cancels it there, and the
    `CancelledError` must not be swallowed); it writes to the journal only through
    `run.emit` (which tags a subagent's events and notes what they leave open for
    closing), never through the journal or the store itself.
    """

    async def before_model_call(self, run: Run) -> None:
        """Before each model call (a compaction runs here). Never raises but `RunStop`;
        never blocks the loop, and gives way to cancellation while it awaits; writes only
        through `run.emit`."""
        return None

    def transform_context(self, messages: list[Message]) -> list[Message]:
        """The messages the next model call sends (the previous hook's output). Pure and
        synchronous: never raises, never does I/O, never changes `messages` in place (they
        are the run's context), never writes anything."""
        return messages

    def transform_tools(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """The tools the model is offered (a profile's allowlist narrows them). Pure and
        synchronous like `transform_context`: never raises, never does I/O, never changes
        `specs` in place."""
        return specs

    async def context_too_long(self, run: Run) -> bool:
        """The model refused the context as too long: True when this hook made it shorter
        (the call is then tried once more). Never raises but `RunStop` (False says it
        could not help); never blocks the loop, and gives way to cancellation; writes only
        through `run.emit`."""
        return False

    async def before_tool_call(self, run: Run, call: Call) -> str | None:
        """None when the call may run, else why not (shown to the model and the user).
        Never raises but `RunStop`: a refusal is the returned text, not an exception. It may
        wait (for a person's approval) but never blocks the loop, and an interrupt must end
        that wait; writes only through `run.emit`."""
        return None

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        """The call has run; amend `outcome` before `tool.finished` is written. Never
        raises but `RunStop` (the result is still written, then the run ends); never
        blocks the loop; adds its events to `outcome.events` or writes through
        `run.emit`, nothing else."""
        return None

    async def before_end(self, run: Run) -> bool:
        """The model answered without a tool call: the run would end. True when this hook
        gave the model more to do (what it wrote is context), and the run goes on. It may
        wait for a person (plan mode) and must give way to cancellation; writes only
        through `run.emit`; never raises but `RunStop`."""
        return False

    async def close(self, run: Run) -> list[NewEvent]:
        """Events that pair what this hook left open; the run is ending on any path. Never
        raises, not even `RunStop` (the run is already stopping, and the other hooks and
        `run.finished` must still be written); never blocks the loop or waits for anyone
        (it runs after an interrupt too); returns its events instead of writing them."""
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


class Checklist(Hook):
    """A `todo` call (`extra["todo"]`: the whole list) shows the list to the user."""

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        items = outcome.result.extra.get("todo")
        if isinstance(items, list) and not outcome.result.is_error:
            payload = ev.PlanUpdated(
                plan_id=ev.plan_id_of(run.run_id),
                items=[ev.PlanItem(text=i["text"], done=i["done"]) for i in items],
            )
            outcome.events.append(ev.make(payload, run.run_id))
