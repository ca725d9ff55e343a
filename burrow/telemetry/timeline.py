"""Committed events -> the intervals they bracket: runs, model calls, tool calls, sandbox
starts. The journal is the record of a run, so the loop carries no timing code: each
interval starts and ends at the commit of the events around it (observed right after the
commit, on the server's clock).

A model call starts at the event that preceded it in its run (run.started, the last
tool.finished, an approval's answer, a usage of the call before) and ends at its `usage`;
its first streamed output (thinking or text) gives the time to first token.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from burrow.store.records import Event

# A call's streamed output. Tool calls are journaled only once the answer is complete (after
# its usage), so a call that only asks for tools has no time to first token here.
MODEL_OUTPUT = {"assistant.thinking.delta", "assistant.text.delta"}
# Events after which the model is asked again (or for the first time) within a run.
MODEL_ASKED_AFTER = {"run.started", "tool.finished", "approval.resolved", "usage", "retry"}


@dataclass(frozen=True)
class Span:
    """A finished interval, in nanoseconds since the epoch."""

    cid: str
    run_id: str | None
    name: str  # the tool's name for tool calls, the model call's kind, the sandbox's status
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9


class TelemetrySink(Protocol):
    """Where the intervals go: metrics, traces, or both."""

    def run_started(self, cid: str, run_id: str, start_ns: int) -> None: ...

    def run_finished(self, span: Span) -> None: ...

    def model_call(self, span: Span) -> None: ...

    def tool_call(self, span: Span) -> None: ...

    def sandbox_start(self, span: Span) -> None: ...

    def retried(self, cid: str, run_id: str | None, reason: str) -> None: ...

    def committed(self, events: int, lag_s: float) -> None: ...


@dataclass
class _Run:
    start_ns: int
    asked_ns: int  # when the model was last asked: the start of the call now going
    first_output_ns: int | None = None
    tools: dict[str, tuple[str, int]] = field(default_factory=dict)  # call id -> (name, start)


class Timeline:
    """Feeds `sinks` from batches of committed events (a Journal observer)."""

    def __init__(self, sinks: Sequence[TelemetrySink]) -> None:
        self.sinks = list(sinks)
        self._runs: dict[str, _Run] = {}  # by run id
        self._sandbox_starting: dict[str, int] = {}  # by conversation

    def __call__(self, batch: Sequence[Event]) -> None:
        now = time.time_ns()
        for event in batch:
            self._feed(event, now)
        if batch:
            lag = max(0.0, (now - _ns(batch[0].ts)) / 1e9) if batch[0].ts else 0.0
            for sink in self.sinks:
                sink.committed(len(batch), lag)

    def _feed(self, event: Event, now: int) -> None:
        kind, cid, run_id = event.type, event.conversation_id, event.run_id
        if kind == "sandbox.status":
            self._sandbox(event, now)
            return
        if run_id is None:
            return
        if kind == "run.started":
            self._runs[run_id] = _Run(now, now)
            for sink in self.sinks:
                sink.run_started(cid, run_id, now)
            return
        run = self._runs.get(run_id)
        if run is None:
            return  # a run that began before this process (recovery closes it)
        if kind in MODEL_OUTPUT and run.first_output_ns is None:
            run.first_output_ns = now
        if kind == "tool.started":
            data = event.data
            run.tools[str(data["call_id"])] = (str(data["name"]), now)
        elif kind == "tool.finished":
            data = event.data
            name, start = run.tools.pop(str(data["call_id"]), ("unknown", now))
            span = Span(cid, run_id, name, start, now, {"is_error": bool(data["is_error"])})
            for sink in self.sinks:
                sink.tool_call(span)
        elif kind == "usage":
            self._model_call(event, run, now)
        elif kind == "retry":
            for sink in self.sinks:
                sink.retried(cid, run_id, str(event.data.get("reason", "")))
        elif kind == "run.finished":
            self._finished(event, run, now)
        if kind in MODEL_ASKED_AFTER:
            run.asked_ns, run.first_output_ns = now, None

    def _model_call(self, event: Event, run: _Run, now: int) -> None:
        data = event.data
        first = run.first_output_ns
        attributes: dict[str, Any] = {
            "prompt_tokens": int(data.get("prompt_tokens", 0)),
            "completion_tokens": int(data.get("completion_tokens", 0)),
            "cost": float(data.get("cost", 0.0)),
            "compaction": bool(data.get("compaction")),
        }
        if first is not None:
            attributes["time_to_first_token_s"] = max(0, first - run.asked_ns) / 1e9
        span = Span(event.conversation_id, event.run_id, "model", run.asked_ns, now, attributes)
        for sink in self.sinks:
            sink.model_call(span)

    def _finished(self, event: Event, run: _Run, now: int) -> None:
        assert event.run_id is not None
        self._runs.pop(event.run_id, None)
        data = event.data
        usage = data.get("usage") or {}
        budget = data.get("budget") or {}
        attributes = {
            "status": str(data["status"]),
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
            "cost": float(usage.get("cost", 0.0)),
            "budget_kind": str(budget.get("kind", "")),
            "error": str(data.get("error") or ""),
        }
        span = Span(event.conversation_id, event.run_id, "run", run.start_ns, now, attributes)
        for sink in self.sinks:
            sink.run_finished(span)

    def _sandbox(self, event: Event, now: int) -> None:
        status, cid = str(event.data["status"]), event.conversation_id
        if status == "starting":
            self._sandbox_starting[cid] = now
            return
        start = self._sandbox_starting.pop(cid, None)
        if start is not None:
            detail = str(event.data.get("detail") or "")
            span = Span(cid, None, status, start, now, {"detail": detail})
            for sink in self.sinks:
                sink.sandbox_start(span)


def _ns(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1e9)
