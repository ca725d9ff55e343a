"""The agent loop: ask the model, run the tools it asks for, repeat until it stops.

Every step is written to the journal as it happens; the loop keeps no state that the
journal does not have, so an interrupted or crashed run can always be closed and resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from burrow.llm.base import (
    Done,
    Message,
    ModelError,
    Pricer,
    Pricing,
    Provider,
    Retry,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from burrow.runs import events as ev
from burrow.runs.approvals import ApprovalGate
from burrow.runs.coalesce import Coalescer
from burrow.runs.context import ModelContext, thinking_blocks_data
from burrow.runs.events import EventType
from burrow.runs.journal import Journal, Subscription
from burrow.sandbox.backend import Sandbox, SandboxError
from burrow.store.records import NewEvent
from burrow.tools.base import ShellState, Tool, ToolContext, ToolError, ToolLimits, ToolResult

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You are Burrow, a coding agent working in a sandboxed Linux machine that \
belongs to this conversation. The workspace is /workspace; paths you give to file tools are \
relative to it. Use the tools to inspect, write and run code; start long-running servers \
with the preview tool when it is available (or in the background with bash). Be concise: \
explain what you did and what the user can do next."""


@dataclass
class LoopConfig:
    max_steps: int = 50
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
    config: LoopConfig = field(default_factory=LoopConfig)
    approvals: ApprovalGate | None = None  # None: every call is allowed (benches, tests)
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
        self, env: RunEnv, cid: str, run_id: str, context: ModelContext, feed: Subscription
    ) -> None:
        self.env = env
        self.cid = cid
        self.run_id = run_id
        self.context = context
        self._feed = feed
        self._out = Coalescer(env.journal, cid, run_id)
        self._open_calls: dict[str, float] = {}  # call_id -> start time
        self._partial: _Answer | None = None  # the answer being streamed, if any
        self._open_approval: str | None = None  # request_id while waiting for the owner
        self._answer_events: list[NewEvent] = []  # the model's answer, not yet written
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._cache_read_tokens = 0
        self._cache_write_tokens = 0
        self._cost = 0.0

    async def _emit(self, *batch: NewEvent) -> None:
        await self.env.journal.append(self.cid, *batch)

    async def execute(self, *, announced: bool = False) -> str:
        """Run to the end; `announced`: run.started is already in the journal."""
        if not announced:
            await self._emit(ev.run_started(self.run_id))
        status: Literal["completed", "failed", "canceled"] = "completed"
        error: str | None = None
        try:
            status, error = await self._steps()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            status, error = "canceled", None
        except ModelError as exc:
            status, error = "failed", exc.message
        except Exception as exc:
            log.exception("run %s of %s failed", self.run_id, self.cid)
            status, error = "failed", f"Internal error: {type(exc).__name__}: {exc}"
        await self._close(status, error)
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

    async def _steps(self) -> tuple[Literal["completed", "failed"], str | None]:
        specs = [tool.spec for tool in self.env.tools.values()]
        for _ in range(self.env.config.max_steps):
            await self._catch_up()
            seen_user_messages = self.context.user_messages
            messages = [Message(role="system", content=self.env.config.system_prompt)]
            messages.extend(self.context.messages)
            answer = await self._ask(messages, specs)
            calls = answer.tool_calls()
            # Written with the first tool.started (one commit less per step), or now.
            self._answer_events = [
                *await self._out.take(),
                self._assistant_message(answer, calls),
                self._usage_event(answer),
            ]
            self._partial = None
            if not calls:
                await self._emit(*self._take_answer_events())
                await self._catch_up()
                if self.context.user_messages > seen_user_messages:
                    continue  # steering arrived while the model answered: answer it too
                return "completed", None
            for call in calls:
                await self._call_tool(call)
        limit = self.env.config.max_steps
        return "failed", (
            f"Stopped after {limit} steps: the step limit (BURROW_MAX_STEPS) was reached. "
            "Send a message to continue."
        )

    async def _ask(self, messages: list[Message], specs: list[ToolSpec]) -> _Answer:
        answer = _Answer()
        self._partial = answer
        stream = self.env.provider.stream(messages, specs)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for item in stream:
                if isinstance(item, TextDelta):
                    answer.text.append(item.text)
                    self._out.add(EventType.TEXT_DELTA, item.text)
                elif isinstance(item, ThinkingDelta):
                    answer.thinking.append(item.text)
                    self._out.add(EventType.THINKING_DELTA, item.text)
                elif isinstance(item, ThinkingBlock):
                    answer.thinking_blocks.append(item)
                elif isinstance(item, Retry):  # shown now: the wait that follows may be long
                    retry = ev.make(
                        EventType.RETRY,
                        self.run_id,
                        attempt=item.attempt,
                        delay_s=item.delay_s,
                        reason=item.reason,
                    )
                    await self._emit(*await self._out.take(), retry)
                elif isinstance(item, ToolCallDelta):
                    call = answer.calls.setdefault(
                        item.index, {"id": "", "name": "", "arguments": ""}
                    )
                    call["id"] = call["id"] or item.id
                    call["name"] = call["name"] or item.name
                    call["arguments"] += item.arguments
                elif isinstance(item, Usage):
                    answer.usage = item
                elif isinstance(item, Done):
                    break
        return answer

    def _assistant_message(self, answer: _Answer, calls: list[dict[str, str]]) -> NewEvent:
        shown = []
        for call in calls:
            parsed, _ = parse_arguments(call["name"], call["arguments"])
            shown.append(
                {
                    "id": call["id"],
                    "name": call["name"],
                    "arguments": parsed if parsed is not None else call["arguments"],
                }
            )
        return ev.make(
            EventType.ASSISTANT_MESSAGE,
            self.run_id,
            content="".join(answer.text),
            thinking="".join(answer.thinking),
            tool_calls=shown,
            # As the provider sent them (signatures, redacted data): later requests and a
            # restarted server send them back byte for byte.
            **thinking_blocks_data(answer.thinking_blocks),
        )

    def _usage_event(self, answer: _Answer) -> NewEvent:
        cost = self.env.pricing.cost(answer.usage)
        self._prompt_tokens += answer.usage.prompt_tokens
        self._completion_tokens += answer.usage.completion_tokens
        self._cache_read_tokens += answer.usage.cache_read_tokens
        self._cache_write_tokens += answer.usage.cache_write_tokens
        self._cost += cost
        return ev.make(
            EventType.USAGE,
            self.run_id,
            prompt_tokens=answer.usage.prompt_tokens,
            completion_tokens=answer.usage.completion_tokens,
            cache_read_tokens=answer.usage.cache_read_tokens,
            cache_write_tokens=answer.usage.cache_write_tokens,
            cost=cost,
        )

    async def _call_tool(self, call: dict[str, str]) -> None:
        call_id, name = call["id"], call["name"]
        arguments, problem = parse_arguments(name, call["arguments"])
        tool = self.env.tools.get(name)
        self._open_calls[call_id] = time.monotonic()
        await self._emit(
            *self._take_answer_events(),
            ev.make(
                EventType.TOOL_STARTED,
                self.run_id,
                call_id=call_id,
                name=name,
                arguments=arguments if arguments is not None else call["arguments"],
            ),
        )
        if arguments is None:
            result = ToolResult(output=problem, is_error=True)
        elif tool is None:
            known = ", ".join(sorted(self.env.tools))
            result = ToolResult(output=f"Unknown tool {name!r}. Available: {known}.", is_error=True)
        else:
            refusal = await self._approve(call_id, name, arguments)
            if refusal is not None:
                result = ToolResult(output=refusal, is_error=True)
            else:
                result = await self._run_tool(tool, call_id, arguments)
        started = self._open_calls.pop(call_id)
        await self._emit(
            *await self._out.take(),
            ev.tool_finished(
                self.run_id,
                call_id,
                output=result.output,
                is_error=result.is_error,
                exit_code=result.exit_code,
                truncated=result.truncated,
                duration_ms=round((time.monotonic() - started) * 1000),
            ),
            *self._tool_side_events(result),
        )

    async def _approve(self, call_id: str, name: str, arguments: dict[str, Any]) -> str | None:
        """None when the call may run, else why not (shown to the model and the user)."""
        gate = self.env.approvals
        if gate is None:
            return None
        verdict = await gate.review(self.cid, name, arguments)
        if verdict.action == "allow":
            return None
        if verdict.action == "deny":
            return verdict.reason
        request_id, answer = await gate.open(self.cid, call_id, name, arguments, verdict)
        self._open_approval = request_id
        await self._emit(
            ev.make(
                EventType.APPROVAL_REQUESTED,
                self.run_id,
                request_id=request_id,
                call_id=call_id,
                tool=name,
                arguments=arguments,
                risk=verdict.risk,
                reason=verdict.reason,
            )
        )
        decision = await answer
        self._open_approval = None
        await self._emit(
            ev.make(
                EventType.APPROVAL_RESOLVED, self.run_id, request_id=request_id, decision=decision
            )
        )
        return "Denied by the user." if decision == "deny" else None

    def _tool_side_events(self, result: ToolResult) -> list[NewEvent]:
        preview = result.extra.get("preview")
        if isinstance(preview, dict):
            return [ev.make(EventType.PREVIEW_OPENED, self.run_id, **preview)]
        return []

    async def _run_tool(self, tool: Tool, call_id: str, arguments: dict[str, Any]) -> ToolResult:
        async def on_output(stream: Literal["stdout", "stderr"], text: str) -> None:
            self._out.add(EventType.TOOL_OUTPUT, text, call_id=call_id, stream=stream)

        preview_url = self.env.preview_url
        ctx = ToolContext(
            sandbox=self.env.sandbox,
            call_id=call_id,
            shell=self.env.shell,
            limits=self.env.limits,
            on_output=on_output,
            conversation_id=self.cid,
            preview_url=(lambda port: preview_url(self.cid, port)) if preview_url else None,
        )
        try:
            return await tool.run(arguments, ctx)
        except ToolError as exc:
            return ToolResult(output=str(exc), is_error=True)
        except SandboxError as exc:
            return ToolResult(output=f"Sandbox error ({exc.code}): {exc.message}", is_error=True)

    async def _close(self, status: str, error: str | None) -> None:
        """Pair every open call and end the run; runs on every exit path."""
        closing: list[NewEvent] = [*await self._out.take(), *self._take_answer_events()]
        if self._partial is not None and (self._partial.text or self._partial.thinking):
            # Keep what was streamed before the stop in the model's memory, without the
            # half-formed tool calls.
            closing.append(self._assistant_message(self._partial, []))
        if self._open_approval is not None and self.env.approvals is not None:
            # Stopping while the owner was asked answers the question: no.
            await self.env.approvals.abandon(self._open_approval)
            closing.append(
                ev.make(
                    EventType.APPROVAL_RESOLVED,
                    self.run_id,
                    request_id=self._open_approval,
                    decision="deny",
                )
            )
            self._open_approval = None
        reason = "Interrupted by the user." if status == "canceled" else f"Run ended: {error}"
        now = time.monotonic()
        for call_id, started in self._open_calls.items():
            closing.append(
                ev.tool_finished(
                    self.run_id,
                    call_id,
                    output=reason,
                    is_error=True,
                    duration_ms=round((now - started) * 1000),
                )
            )
        self._open_calls.clear()
        usage = {
            "prompt_tokens": self._prompt_tokens,
            "completion_tokens": self._completion_tokens,
            "cache_read_tokens": self._cache_read_tokens,
            "cache_write_tokens": self._cache_write_tokens,
            "cost": self._cost,
        }
        closing.append(ev.run_finished(self.run_id, status, error, usage))
        await self._emit(*closing)
