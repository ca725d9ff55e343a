"""The agent loop: ask the model, run the tools it asks for, repeat until it stops.

Every step is written to the journal as it happens; the loop keeps no state that the
journal does not have, so an interrupted or crashed run can always be closed and resumed.
What a run adds to that (the system prompt, approvals, budgets, the loop guard, a tool's
side events) comes in through hooks (runs/loop/hooks/base.py): the loop names none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from burrow.llm.base import (
    CONTEXT_TOO_LONG,
    Done,
    Message,
    ModelError,
    Pricer,
    Pricing,
    Provider,
    Retry,
    StreamEvent,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from burrow.runs.journal import events as ev
from burrow.runs.journal.closing import OpenWork
from burrow.runs.journal.coalesce import Coalescer
from burrow.runs.journal.events import RunStatus
from burrow.runs.journal.journal import Journal, Subscription
from burrow.runs.loop.context import ModelContext, thinking_blocks_data
from burrow.runs.loop.hooks.base import Call, Hook, Outcome, RunStop, Tally
from burrow.sandbox.backend import Sandbox, SandboxError
from burrow.store.database import storage_trouble
from burrow.store.records import NewEvent
from burrow.tools.base import (
    ShellState,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    ToolLimits,
    ToolResult,
)

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You are Burrow, a coding agent working in a sandboxed Linux machine that \
belongs to this conversation. The workspace is /workspace; paths you give to file tools are \
relative to it. Use the tools to inspect, write and run code; start long-running servers \
with the preview tool when it is available (or in the background with bash). Be concise: \
explain what you did and what the user can do next."""


@dataclass
class LoopConfig:
    system_prompt: str = SYSTEM_PROMPT


@dataclass
class RunEnv:
    """Everything a run needs, passed in explicitly."""

    journal: Journal
    provider: Provider
    tools: Mapping[str, Tool]
    sandbox: Callable[[], Awaitable[Sandbox]]
    shell: ShellState = field(default_factory=ShellState)
    limits: ToolLimits = field(default_factory=ToolLimits)
    pricing: Pricer = field(default_factory=Pricing)
    hooks: Sequence[Hook] = ()  # approvals, budgets, ...: in order, at every seam
    preview_url: Callable[[str, int], str] | None = None  # (cid, port) -> preview address


@dataclass
class _Answer:
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    thinking_blocks: list[ThinkingBlock] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def tool_calls(self) -> list[dict[str, str]]:
        calls = [self.calls[i] for i in sorted(self.calls)]
        for call in calls:
            call["id"] = call["id"] or f"call_{secrets.token_hex(6)}"
        return calls


def parse_arguments(name: str, raw: str) -> tuple[dict[str, Any] | None, str]:
    """The call's arguments as an object, or None and an error the model can act on."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        snippet = raw if len(raw) <= 200 else raw[:200] + "…"
        return None, (
            f"The arguments for {name} are not valid JSON ({exc.msg} at position {exc.pos}): "
            f"{snippet!r}. Call the tool again with a JSON object."
        )
    if not isinstance(value, dict):
        return None, f"The arguments for {name} must be a JSON object, not {type(value).__name__}."
    return value, ""


class AgentRun:
    """One run of one conversation, from `run.started` to `run.finished`."""

    def __init__(
        self,
        env: RunEnv,
        cid: str,
        run_id: str,
        context: ModelContext,
        feed: Subscription,
        *,
        parent_call_id: str | None = None,
        tally: Tally | None = None,
    ) -> None:
        self.env = env
        self.cid = cid
        self.run_id = run_id
        self.context = context
        # A subagent's run (runs/loop/hooks/subagents.py) is part of its parent's: it writes no
        # run.started/run.finished, tags its events, and spends from the parent's tally.
        self.parent_call_id = parent_call_id
        self.tally = tally if tally is not None else Tally()
        self.error: str | None = None  # why the run did not complete, once it ended
        self.ended = False  # its last event (run.finished) is journaled
        self._started = time.monotonic()
        self._feed = feed
        self._out = Coalescer(env.journal, cid, run_id, parent_call_id=parent_call_id)
        self._open = OpenWork()  # this run's calls and approvals not yet closed
        self._specs = [tool.spec for tool in env.tools.values()]
        self._partial: _Answer | None = None  # the answer being streamed, if any
        self._answer_events: list[NewEvent] = []  # the model's answer, not yet written

    async def emit(self, *batch: NewEvent) -> None:
        if self.parent_call_id is not None:
            batch = tuple(ev.nested(e, self.parent_call_id) for e in batch)
        for event in batch:  # before the write: a stop during it still closes what it opens
            self._open.apply(event)
        await self.env.journal.append(self.cid, *batch)

    async def execute(self, *, announced: bool = False) -> str:
        """Run to the end; `announced`: run.started is already in the journal."""
        if not announced and self.parent_call_id is None:
            await self.emit(ev.make(ev.RunStarted(run_id=self.run_id), self.run_id))
        status: RunStatus = "completed"
        error: str | None = None
        budget: ev.BudgetHit | None = None
        try:
            await self._steps()
        except RunStop as stop:
            status, error, budget = stop.status, stop.error, stop.budget
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            status, error = "canceled", None
        except ModelError as exc:
            status, error = "failed", exc.message
        except Exception as exc:
            status, error = "failed", f"Internal error: {type(exc).__name__}: {exc}"
            if (trouble := storage_trouble(exc)) is not None:  # locked, or the disk full
                log.warning("run %s of %s failed: %s", self.run_id, self.cid, trouble)
                error = str(trouble)
            else:
                log.exception("run %s of %s failed", self.run_id, self.cid)
        self.error = error
        await self._close(status, error, budget)
        self.ended = True
        return status

    def _take_answer_events(self) -> list[NewEvent]:
        events, self._answer_events = self._answer_events, []
        return events

    async def _catch_up(self) -> None:
        """Apply every committed event (the run's own and steering messages) to the context."""
        feed = self._feed
        for event in feed.drain():
            self.context.apply(event)
        if feed.lagged:
            feed.lagged = False
            for event in await self.env.journal.read(self.cid, self.context.last_seq):
                self.context.apply(event)

    def request(self) -> tuple[list[Message], list[ToolSpec]]:
        messages, specs = list(self.context.messages), list(self._specs)
        for hook in self.env.hooks:
            messages = hook.transform_context(messages)
            specs = hook.transform_tools(specs)
        return messages, specs

    async def _steps(self) -> None:
        while True:
            await self._catch_up()
            for hook in self.env.hooks:
                await hook.before_model_call(self)
            await self._catch_up()  # what a hook wrote (a compaction) is context too
            self.tally.steps += 1
            answer, seen_user_messages = await self._ask_fitting()
            calls = answer.tool_calls()
            # Written with the first tool.started (one commit less per step), or now.
            self._answer_events = [
                *await self._out.take(),
                self._assistant_message(answer, calls),
                self._usage_event(answer),
            ]
            self._partial = None
            if not calls:
                await self.emit(*self._take_answer_events())
                await self._catch_up()
                if self.context.user_messages > seen_user_messages:
                    continue  # steering arrived while the model answered: answer it too
                if await self._goes_on():
                    continue
                return
            await self._call_tools(calls)

    async def _goes_on(self) -> bool:
        """Whether a hook gave the model more to do as the run would end (an approved plan)."""
        for hook in self.env.hooks:
            if await hook.before_end(self):
                await self._catch_up()
                return True
        return False

    async def _ask_fitting(self) -> tuple[_Answer, int]:
        """The model's answer, and how many user messages the context it answered held; a
        context the model finds too long is shortened by the hooks (compaction) and tried
        exactly once more."""
        try:
            seen = self.context.user_messages
            return await self._ask(*self.request()), seen
        except ModelError as exc:
            shown = self._partial
            if exc.code != CONTEXT_TOO_LONG or (
                shown is not None and (shown.text or shown.thinking or shown.calls)
            ):
                raise
            shortened = False
            for hook in self.env.hooks:
                shortened = await hook.context_too_long(self) or shortened
            if not shortened:
                raise
        await self._catch_up()
        seen = self.context.user_messages
        return await self._ask(*self.request()), seen

    async def _ask(self, messages: list[Message], specs: list[ToolSpec]) -> _Answer:
        answer = _Answer()
        self._partial = answer
        stream = self.env.provider.stream(messages, specs)
        started = time.monotonic()
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            try:
                await self._read_answer(stream, answer)
            finally:
                self.tally.model_seconds += time.monotonic() - started
        return answer

    async def _read_answer(self, stream: AsyncIterator[StreamEvent], answer: _Answer) -> None:
        async for item in stream:
            if isinstance(item, TextDelta):
                answer.text.append(item.text)
                self._out.add(ev.TextDelta(text=item.text))
            elif isinstance(item, ThinkingDelta):
                answer.thinking.append(item.text)
                self._out.add(ev.ThinkingDelta(text=item.text))
            elif isinstance(item, ThinkingBlock):
                answer.thinking_blocks.append(item)
            elif isinstance(item, Retry):  # shown now: the wait that follows may be long
                retry = ev.make(
                    ev.Retry(attempt=item.attempt, delay_s=item.delay_s, reason=item.reason),
                    self.run_id,
                )
                await self.emit(*await self._out.take(), retry)
            elif isinstance(item, ToolCallDelta):
                call = answer.calls.setdefault(item.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = call["id"] or item.id
                call["name"] = call["name"] or item.name
                call["arguments"] += item.arguments
            elif isinstance(item, Usage):
                answer.usage = item
            elif isinstance(item, Done):
                break

    def _assistant_message(self, answer: _Answer, calls: list[dict[str, str]]) -> NewEvent:
        shown = []
        for call in calls:
            parsed, _ = parse_arguments(call["name"], call["arguments"])
            shown.append(
                ev.ToolCall(
                    id=call["id"],
                    name=call["name"],
                    arguments=parsed if parsed is not None else call["arguments"],
                )
            )
        message = ev.AssistantMessage(
            content="".join(answer.text),
            thinking="".join(answer.thinking),
            tool_calls=shown,
            # As the provider sent them (signatures, redacted data): later requests and a
            # restarted server send them back byte for byte.
            thinking_blocks=thinking_blocks_data(answer.thinking_blocks),
        )
        return ev.make(message, self.run_id)

    def _usage_event(self, answer: _Answer) -> NewEvent:
        usage = answer.usage.priced(self.env.pricing)
        self.tally.usage += usage
        return ev.make(ev.UsageReported.of(usage), self.run_id)

    async def _call_tools(self, calls: list[dict[str, str]]) -> None:
        """In order; consecutive calls of subloop tools (subagents) run at once. A stop
        from one of those ends the run after all of them have finished."""
        started, waited = time.monotonic(), self.tally.approval_wait_seconds
        try:
            await self._call_tool_groups(calls)
        finally:
            waits = self.tally.approval_wait_seconds - waited
            self.tally.tool_wall_seconds += time.monotonic() - started - waits

    async def _call_tool_groups(self, calls: list[dict[str, str]]) -> None:
        i = 0
        while i < len(calls):
            j = i + 1
            while j < len(calls) and self._subloop(calls[i]) and self._subloop(calls[j]):
                j += 1
            if j - i == 1:
                await self._call_tool(calls[i])
            else:
                results = await asyncio.gather(
                    *(self._call_tool(call) for call in calls[i:j]), return_exceptions=True
                )
                for result in results:
                    if isinstance(result, BaseException):
                        raise result
            i = j

    def _subloop(self, raw: dict[str, str]) -> bool:
        tool = self.env.tools.get(raw["name"])
        return tool is not None and tool.kind.subloop

    async def _call_tool(self, raw: dict[str, str]) -> None:
        arguments, problem = parse_arguments(raw["name"], raw["arguments"])
        tool = self.env.tools.get(raw["name"])
        call = Call(raw["id"], raw["name"], raw["arguments"], arguments, tool)
        started = time.monotonic()
        waited_before = self.tally.approval_wait_seconds
        await self.emit(
            *self._take_answer_events(),
            ev.make(
                ev.ToolStarted(
                    call_id=call.id,
                    name=call.name,
                    arguments=arguments if arguments is not None else call.raw,
                    kind=ev.ToolKind.of(tool.kind if tool is not None else ToolKind()),
                ),
                self.run_id,
            ),
        )
        outcome = Outcome(await self._outcome(call, problem))
        stop: RunStop | None = None
        for hook in self.env.hooks:
            try:
                await hook.after_tool_call(self, call, outcome)
            except RunStop as exc:  # the result is still written, then the run ends
                stop = stop or exc
        result = outcome.result
        waited = self.tally.approval_wait_seconds - waited_before
        await self.emit(
            *await self._out.take(),
            ev.make(
                ev.ToolFinished(
                    call_id=call.id,
                    output=result.output,
                    is_error=result.is_error,
                    exit_code=result.exit_code,
                    truncated=result.truncated,
                    duration_ms=round((time.monotonic() - started) * 1000),
                    approval_wait_ms=round(waited * 1000) if waited else None,
                ),
                self.run_id,
            ),
            *outcome.events,
        )
        if stop is not None:
            raise stop

    async def _outcome(self, call: Call, problem: str) -> ToolResult:
        """The call's result: refused before it ran, or what the tool returned."""
        if call.arguments is None:
            return ToolResult(output=problem, is_error=True)
        if call.tool is None:
            known = ", ".join(sorted(self.env.tools))
            return ToolResult(
                output=f"Unknown tool {call.name!r}. Available: {known}.", is_error=True
            )
        for hook in self.env.hooks:
            refusal = await hook.before_tool_call(self, call)
            if refusal is not None:
                return ToolResult(output=refusal, is_error=True)
        started = time.monotonic()  # from here: approval waits are over
        try:
            return await self._run_tool(call.tool, call.id, call.arguments, call.read_only)
        finally:
            if not call.tool.kind.subloop:
                self.tally.tool_seconds += time.monotonic() - started

    async def _run_tool(
        self, tool: Tool, call_id: str, arguments: dict[str, Any], read_only: bool = False
    ) -> ToolResult:
        async def on_output(stream: Literal["stdout", "stderr"], text: str) -> None:
            self._out.add(ev.ToolOutput(call_id=call_id, stream=stream, text=text))

        preview_url = self.env.preview_url
        ctx = ToolContext(
            sandbox=self.env.sandbox,
            call_id=call_id,
            shell=self.env.shell,
            limits=self.env.limits,
            on_output=on_output,
            conversation_id=self.cid,
            preview_url=(lambda port: preview_url(self.cid, port)) if preview_url else None,
            read_only=read_only,
        )
        try:
            return await tool.run(arguments, ctx)
        except ToolError as exc:
            return ToolResult(output=str(exc), is_error=True)
        except SandboxError as exc:
            return ToolResult(output=f"Sandbox error ({exc.code}): {exc.message}", is_error=True)

    async def _close(
        self, status: RunStatus, error: str | None, budget: ev.BudgetHit | None
    ) -> None:
        """Pair every open call and end the run; runs on every exit path."""
        closing: list[NewEvent] = [*await self._out.take(), *self._take_answer_events()]
        if self._partial is not None and (self._partial.text or self._partial.thinking):
            # Keep what was streamed before the stop in the model's memory, without the
            # half-formed tool calls.
            closing.append(self._assistant_message(self._partial, []))
        for hook in self.env.hooks:
            closing += await hook.close(self)
        reason = "Interrupted by the user." if status == "canceled" else f"Run ended: {error}"
        closing += self._open.closing(reason, timed=True)
        if self.parent_call_id is None:
            waited = self.tally.approval_wait_seconds
            finished = ev.RunFinished(
                status=status,
                error=error,
                usage=ev.Usage.of(self.tally.usage),
                budget=budget,
                duration_ms=round((time.monotonic() - self._started - waited) * 1000),
                approval_wait_ms=round(waited * 1000),
                model_ms=round(self.tally.model_seconds * 1000),
                tool_ms=round(self.tally.tool_wall_seconds * 1000),
            )
            closing.append(ev.make(finished, self.run_id))
        if closing:  # a subagent that ended cleanly has nothing left to write
            await self.emit(*closing)
