"""Subagents: the `task` tool runs a loop of its own and returns its report.

A subagent works in the same sandbox as its parent run but with a fresh context (its
system prompt and the task's prompt), so a long search or a side investigation does not
fill the parent's context: only the report comes back, as the `task` call's result. Its
events go into the same journal, tagged `parent_call_id` (the timeline nests them, the
parent's context leaves them out); it spends from the parent's tally, so the parent's
budget stops it, and a hit ends the parent run too. Its calls pass the same approval gate.
A subagent is not offered `task`: subagents do not spawn subagents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from burrow.llm.base import ToolSpec
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.base import Hook, Run, SystemPrompt
from burrow.runs.loop.loop import AgentRun, RunEnv
from burrow.tools.arguments import json_schema, parse_arguments
from burrow.tools.base import ShellState, Tool, ToolContext, ToolError, ToolKind, ToolResult

TASK_TOOL = "task"
DEFAULT_MAX_SUBAGENTS = 8

SUBAGENT_NOTE = """You are a subagent: another agent gave you the task below. You share its \
sandbox and workspace but not its conversation. Do the task, then answer with a concise \
report of what you found or did; the report is all the other agent sees."""

DESCRIPTION = """Hand a self-contained task to a subagent: it works in the same sandbox with a \
fresh context and returns a report. Use it for searches or investigations whose details you \
do not need to keep; several task calls in one answer run at once. The prompt must say \
everything the subagent needs: it does not see this conversation."""


class TaskArguments(BaseModel):
    description: str = Field(
        min_length=1, max_length=200, description="A short label for the task (3-6 words)."
    )
    prompt: str = Field(
        min_length=1, max_length=50_000, description="The full task for the subagent."
    )


@dataclass
class SubagentSetup:
    """What every subagent of a run gets; `hooks` makes a fresh set for each one."""

    env: RunEnv  # the parent's: journal, provider, sandbox, pricing, ...
    system_prompt: str
    hooks: Callable[[], list[Hook]]
    max_subagents: int = DEFAULT_MAX_SUBAGENTS  # per run; 0: none


class Subagents(Hook):
    """The `task` tool of one run. As a hook it learns the run it belongs to (before that
    run's first model call, so before any call of its tools)."""

    def __init__(self, setup: SubagentSetup) -> None:
        self.setup = setup
        self.tool = TaskTool(self)
        self._parent: Run | None = None
        self._started = 0

    async def before_model_call(self, run: Run) -> None:
        self._parent = self._parent or run

    @property
    def system_prompt(self) -> str:
        return f"{self.setup.system_prompt}\n\n{SUBAGENT_NOTE}"

    def tools(self, tools: Mapping[str, Tool]) -> dict[str, Tool]:
        """The parent's tools with `task` added."""
        return {**tools, TASK_TOOL: self.tool}

    async def run_task(self, arguments: TaskArguments, call_id: str) -> ToolResult:
        parent = self._parent
        if parent is None:
            raise ToolError("The task tool is not part of a run.")
        limit = self.setup.max_subagents
        if self._started >= limit:  # counted before any await: parallel calls see each other
            raise ToolError(
                f"This run has already started its {limit} subagents (BURROW_RUN_MAX_SUBAGENTS);"
                " do the rest of the work yourself."
            )
        self._started += 1
        base = self.setup.env
        env = RunEnv(
            journal=base.journal,
            provider=base.provider,
            tools={n: t for n, t in base.tools.items() if n != TASK_TOOL},
            sandbox=base.sandbox,
            shell=ShellState(),  # its own working directory
            limits=base.limits,
            pricing=base.pricing,
            hooks=[
                SystemPrompt(f"{self.setup.system_prompt}\n\n{SUBAGENT_NOTE}"),
                *self.setup.hooks(),
            ],
            preview_url=base.preview_url,
        )
        context = ModelContext(scope=call_id, last_seq=parent.context.last_seq)
        context.open_with(arguments.prompt)
        with base.journal.subscribe(parent.cid) as feed:
            sub = AgentRun(
                env,
                parent.cid,
                parent.run_id,
                context,
                feed,
                parent_call_id=call_id,
                tally=parent.tally,
            )
            # Its own task: a stop of the subagent (which swallows its cancellation to close
            # cleanly) must not swallow the parent's.
            child = asyncio.create_task(sub.execute(), name=f"subagent {call_id}")
            try:
                status = await asyncio.shield(child)
            except asyncio.CancelledError:
                child.cancel()
                await asyncio.wait({child})
                raise
        report = next(
            (m.content for m in reversed(context.messages) if m.role == "assistant" and m.content),
            "",
        )
        # The report goes into the parent's context: bounded like any tool's output.
        limit = base.limits.output_head + base.limits.output_tail
        truncated = len(report) > limit
        if truncated:
            report = f"{report[:limit]}\n[… the report was cut at {limit} characters …]"
        if status == "completed":
            return ToolResult(
                output=report or "(The subagent finished without a report.)", truncated=truncated
            )
        shown = f"The subagent stopped ({status}): {sub.error}"
        if report:
            shown += f"\n\nIts last words:\n{report}"
        return ToolResult(output=shown, is_error=True, truncated=truncated)


class TaskTool:
    spec = ToolSpec(TASK_TOOL, DESCRIPTION, json_schema(TaskArguments))
    # Its own calls are each judged by the approval gate; the task itself only reads.
    kind = ToolKind(reads=True, subloop=True)

    def __init__(self, subagents: Subagents) -> None:
        self._subagents = subagents

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        parsed = parse_arguments(TaskArguments, arguments, TASK_TOOL)
        return await self._subagents.run_task(parsed, ctx.call_id)
