"""What a conversation's journal has opened and not closed, and the events that close it.

One copy for both ends a run can have: a run that stops (interrupt, failure, budget) pairs
its own open calls and approvals, and recovery after a crash pairs whatever a dead server
left open. Either way every `tool.started` gets its `tool.finished` and every
`approval.requested` its `approval.resolved` (DESIGN.md §4).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from burrow.llm.base import Usage
from burrow.runs.journal import events as ev
from burrow.runs.journal.events import EventType
from burrow.store.records import Event, NewEvent


def ending(journal: Sequence[Event], reason: str) -> tuple[OpenWork, list[NewEvent]]:
    """What `journal` left open, and the events that close all of it: approvals denied,
    calls finished with `reason`, runs finished `failed` with the usage they had spent."""
    work = OpenWork()
    spent: dict[str, Usage] = {}  # each run's usage so far, for its run.finished
    for event in journal:
        work.apply(event)
        if event.type == EventType.USAGE and event.run_id:
            spent[event.run_id] = spent.get(event.run_id, Usage()) + ev.Usage.read(event.data)
    open_runs = list(work.runs)
    approvals = dict(work.approvals)
    closing = work.closing(reason, timed=False)
    work.approvals = approvals  # still listed, for the caller to abandon
    closing += [
        ev.make(ev.RunFinished(status="failed", error=reason, usage=_spent(spent, r)), r)
        for r in open_runs
    ]
    return work, closing


def _spent(spent: dict[str, Usage], run_id: str) -> ev.Usage:
    # A run that never reached the model reports zeros without the optional cache counts.
    return ev.Usage.of(spent[run_id]) if run_id in spent else ev.Usage()


class OpenWork:
    def __init__(self) -> None:
        self.runs: dict[str, None] = {}  # run_id, in order
        # call_id -> (run_id, started, parent_call_id: set on a subagent's call)
        self.calls: dict[str, tuple[str | None, datetime, str | None]] = {}
        self.approvals: dict[str, tuple[str | None, str | None]] = {}  # -> (run_id, parent)
        # call_id -> when its latest committed output was: after a crash, how long it ran
        # at least (the server was down from some moment after it)
        self.last_output: dict[str, datetime] = {}

    def apply(self, event: Event | NewEvent) -> None:
        """Follow one event: a committed one (recovery) or one about to be written (a run)."""
        if event.type not in _TRACKED:
            return
        data = event.data
        parent = data.get("parent_call_id")
        if event.type == EventType.RUN_STARTED and event.run_id:
            self.runs[event.run_id] = None
        elif event.type == EventType.RUN_FINISHED and event.run_id:
            self.runs.pop(event.run_id, None)
        elif event.type == EventType.TOOL_STARTED:
            started = datetime.fromisoformat(event.ts) if isinstance(event, Event) else _now()
            self.calls[str(data["call_id"])] = (event.run_id, started, parent)
        elif event.type == EventType.TOOL_OUTPUT and isinstance(event, Event):
            self.last_output[str(data["call_id"])] = datetime.fromisoformat(event.ts)
        elif event.type == EventType.TOOL_FINISHED:
            self.calls.pop(str(data["call_id"]), None)
            self.last_output.pop(str(data["call_id"]), None)
        elif event.type == EventType.APPROVAL_REQUESTED:
            self.approvals[str(data["request_id"])] = (event.run_id, parent)
        elif event.type == EventType.APPROVAL_RESOLVED:
            self.approvals.pop(str(data["request_id"]), None)

    def closing(self, reason: str, *, timed: bool) -> list[NewEvent]:
        """Each open approval answered no, then each open call finished with `reason`;
        `timed`: with how long the call ran until now; else (after a crash: the server was
        down for a while) until its last output, or 0 if it had none."""
        events = [
            _as_of(
                ev.make(ev.ApprovalResolved(request_id=request_id, decision="deny"), run_id),
                parent,
            )
            for request_id, (run_id, parent) in self.approvals.items()
        ]
        now = _now()
        for call_id, (run_id, started, parent) in self.calls.items():
            until = now if timed else self.last_output.get(call_id, started)
            ms = round((until - started).total_seconds() * 1000)
            finished = ev.ToolFinished(
                call_id=call_id, output=reason, is_error=True, duration_ms=max(0, ms)
            )
            events.append(_as_of(ev.make(finished, run_id or ""), parent))
        self.approvals.clear()
        self.calls.clear()
        self.last_output.clear()
        return events


def _as_of(event: NewEvent, parent_call_id: object) -> NewEvent:
    """A subagent's call or approval is closed as the subagent's (nested in the timeline)."""
    return ev.nested(event, parent_call_id) if isinstance(parent_call_id, str) else event


def _now() -> datetime:
    return datetime.now(UTC)


_TRACKED = {
    EventType.RUN_STARTED,
    EventType.RUN_FINISHED,
    EventType.TOOL_STARTED,
    EventType.TOOL_OUTPUT,
    EventType.TOOL_FINISHED,
    EventType.APPROVAL_REQUESTED,
    EventType.APPROVAL_RESOLVED,
}
