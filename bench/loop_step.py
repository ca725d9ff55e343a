"""Agent-loop overhead per step (DESIGN.md §7: <= 2 ms), scripted model and a no-op tool.

Baseline, in the same run: the same scripted answers consumed and the same no-op tool
called by a bare loop that journals nothing. The difference is what the loop adds: the
journal writes, context projection and event fan-out of every step.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import report
from burrow.llm.base import Message, ScriptedTurn, ToolSpec
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.context import ModelContext
from burrow.runs.journal import Journal
from burrow.runs.loop import AgentRun, LoopConfig, RunEnv
from burrow.sandbox.backend import Sandbox
from burrow.store.accounts import AccountStore
from burrow.store.conversations import ConversationStore
from burrow.store.database import open_database
from burrow.store.events import EventStore
from burrow.tools.base import ToolContext, ToolResult

STEPS = 300


class NoopTool:
    spec = ToolSpec("noop", "Does nothing.", {"type": "object", "properties": {}})

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(output="ok")


def script() -> list[ScriptedTurn]:
    return [ScriptedTurn(tool_calls=[("noop", {})]) for _ in range(STEPS)] + [
        ScriptedTurn(text="done")
    ]


async def no_sandbox() -> Sandbox:
    raise AssertionError("the no-op tool never asks for the sandbox")


async def bare_loop() -> float:
    provider, tool = ScriptedProvider(script()), NoopTool()
    messages = [Message(role="user", content="go")]
    start = time.perf_counter()
    for _ in range(STEPS + 1):
        async for _item in provider.stream(messages, [tool.spec]):
            pass
        await tool.run({}, ToolContext(sandbox=no_sandbox, call_id="c"))
    return (time.perf_counter() - start) / (STEPS + 1)


async def agent_loop(data: Path) -> float:
    db = await open_database(f"sqlite+aiosqlite:///{data / 'loop.db'}")
    user = await AccountStore(db).get_or_create("bench")
    cid = (await ConversationStore(db).create(user.id, "bench")).id
    journal = Journal(EventStore(db))
    env = RunEnv(
        journal=journal,
        provider=ScriptedProvider(script()),
        tools={"noop": NoopTool()},
        sandbox=no_sandbox,
        config=LoopConfig(max_steps=STEPS + 5),
    )
    with journal.subscribe(cid) as feed:
        run = AgentRun(env, cid, "r_bench", ModelContext(), feed)
        start = time.perf_counter()
        status = await run.execute()
        elapsed = time.perf_counter() - start
    assert status == "completed", status
    await db.close()
    return elapsed / (STEPS + 1)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = min([await bare_loop() for _ in range(3)])
        step = min(
            [
                await agent_loop(Path(tmp) / str(i))
                for i in range(3)
                if not (Path(tmp) / str(i)).mkdir()
            ]
        )
    report(
        "agent loop, time per step",
        step * 1000,
        "ms",
        "bare loop, no journal",
        base * 1000,
        "overhead <= 2 ms",
    )
    print(f"agent loop overhead per step: {(step - base) * 1000:.3f} ms (target <= 2 ms)")


if __name__ == "__main__":
    asyncio.run(main())
