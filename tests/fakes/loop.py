"""The agent loop without a server: a conversation on a real SQLite journal, and runs of
`AgentRun` on it, started the way the runtime starts them (the user's message and
run.started in one commit, the context projected from the journal, a live feed).

The model is the only fake (a scripted provider); tools are small inline ones that need
no sandbox, so a test can hold a call open (`Gate`) to interrupt or steer the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burrow.llm.base import Message, Provider, ScriptedTurn, StreamEvent, TextDelta, ToolSpec
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal import events as ev
from burrow.runs.journal.journal import Journal
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.base import Hook, SystemPrompt
from burrow.runs.loop.loop import SYSTEM_PROMPT, AgentRun, RunEnv
from burrow.sandbox.backend import Sandbox
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import Database
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from burrow.store.records import Event
from burrow.tools.base import Tool, ToolContext, ToolKind, ToolResult

OBJECT = {"type": "object", "properties": {}}


class Echo:
    """Returns its `text` argument, streaming it as stdout first."""

    spec = ToolSpec("echo", "Echoes text.", {"type": "object", "properties": {"text": {}}})
    kind = ToolKind(reads=True)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        text = str(arguments.get("text", ""))
        await ctx.on_output("stdout", text)
        return ToolResult(output=text, exit_code=0)


class Gate:
    """A tool that runs until the test opens it: `entered` is set while a call is inside."""

    kind = ToolKind(reads=True)

    def __init__(self, name: str = "wait") -> None:
        self.spec = ToolSpec(name, "Waits for the test.", OBJECT)
        self.entered = asyncio.Event()
        self.opened = asyncio.Event()
        self.finished = False  # a call ran to its end (was not cancelled)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.entered.set()
        await self.opened.wait()
        self.finished = True
        return ToolResult(output="opened")


class HeldProvider(ScriptedProvider):
    """The scripted model, its first answer held after its first text chunk until the test
    calls `release`: `holding` is set while it waits (no timing involved)."""

    def __init__(self, turns: Sequence[ScriptedTurn]) -> None:
        super().__init__(turns)
        self.holding = asyncio.Event()
        self._released = asyncio.Event()

    def release(self) -> None:
        self._released.set()

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        first = not self.requests
        async for item in super().stream(messages, tools, max_tokens):
            yield item
            if first and isinstance(item, TextDelta) and not self.holding.is_set():
                self.holding.set()
                await self._released.wait()


async def no_sandbox() -> Sandbox:
    raise AssertionError("these tools never ask for the sandbox")


@dataclass
class LoopJournal:
    """One conversation in a real SQLite journal."""

    db: Database
    journal: Journal
    cid: str
    tasks: list[asyncio.Task[str]] = field(default_factory=list)

    def env(
        self,
        provider: Provider,
        tools: Sequence[Tool] = (),
        hooks: Sequence[Hook] | None = None,
    ) -> RunEnv:
        """A run's environment; the hooks default to the system prompt alone."""
        return RunEnv(
            journal=self.journal,
            provider=provider,
            tools={tool.spec.name: tool for tool in tools},
            sandbox=no_sandbox,
            hooks=[SystemPrompt(SYSTEM_PROMPT)] if hooks is None else hooks,
        )

    async def start(self, env: RunEnv, message: str = "go") -> tuple[AgentRun, asyncio.Task[str]]:
        """Journal `message` with run.started and start the run as a task (-> its status)."""
        run_id = f"r_{secrets.token_hex(4)}"
        await self.journal.append(
            self.cid,
            ev.make(ev.UserMessage(content=message, steering=False), run_id),
            ev.make(ev.RunStarted(run_id=run_id), run_id),
        )
        context = ModelContext()
        for event in await self.journal.read(self.cid, 0):
            context.apply(event)
        ready: asyncio.Future[AgentRun] = asyncio.get_running_loop().create_future()

        async def run() -> str:
            with self.journal.subscribe(self.cid) as feed:
                agent = AgentRun(env, self.cid, run_id, context, feed)
                ready.set_result(agent)
                return await agent.execute(announced=True)

        task = asyncio.create_task(run())
        self.tasks.append(task)
        return await ready, task

    async def run(self, env: RunEnv, message: str = "go") -> tuple[AgentRun, str]:
        """A whole run: -> the run and its status."""
        agent, task = await self.start(env, message)
        return agent, await asyncio.wait_for(task, 60)

    async def steer(self, run: AgentRun, content: str) -> None:
        """A message sent while `run` is active, as the runtime journals it."""
        event = ev.make(ev.UserMessage(content=content, steering=True), run.run_id)
        await self.journal.append(self.cid, event)

    async def events(self) -> list[Event]:
        return await self.journal.read(self.cid, 0)


@contextlib.asynccontextmanager
async def loop_journal(path: Path) -> AsyncIterator[LoopJournal]:
    """A new SQLite file at `path` holding one conversation; closed (its runs ended) after."""
    db = await open_database(f"sqlite+aiosqlite:///{path}")
    try:
        user = await AccountStore(db).get_or_create("loop")
        cid = (await ConversationStore(db).create(user.id, "loop")).id
        bench = LoopJournal(db, Journal(EventStore(db)), cid)
        try:
            yield bench
        finally:
            for task in bench.tasks:
                task.cancel()
            await asyncio.gather(*bench.tasks, return_exceptions=True)
    finally:
        await db.close()


def types(events: Sequence[Event]) -> list[str]:
    return [e.type for e in events]


def of_type(events: Sequence[Event], type_: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == type_]
