"""Run assembly as a unit: an `AgentRun` built from a real SQLite journal, the conversation's
row and profile, and a scripted model, with no server (runs/conversations/assembly.py). The
sandbox pool is a real local one, which a build never starts: only a run does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from burrow.llm.base import Pricing, Provider, ScriptedTurn, ToolSpec
from burrow.llm.catalog import ModelInfo, describe
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.conversations.assembly import RunAssembly, RuntimeOptions
from burrow.runs.journal.journal import Journal
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.approvals import ApprovalGate
from burrow.runs.loop.hooks.base import SystemPrompt
from burrow.runs.loop.hooks.budget import Budget
from burrow.runs.loop.hooks.profiles import ProfileMissing
from burrow.runs.workspace.checkpoints import Checkpoints
from burrow.runs.workspace.sandboxes import SandboxPool
from burrow.sandbox.local import LocalBackend
from burrow.store.accounts import AccountStore
from burrow.store.approvals import ApprovalStore
from burrow.store.conversations import ConversationStore
from burrow.store.events import EventStore
from burrow.store.migrate import open_database
from burrow.store.profiles import Profile, ProfileStore
from burrow.tools.base import Tool, ToolContext, ToolKind, ToolResult


class EchoTool:
    def __init__(self, name: str) -> None:
        self.spec = ToolSpec(name, f"The {name} tool.", {"type": "object", "properties": {}})
        self.kind = ToolKind(reads=True)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(output=self.spec.name)


class McpServers:
    """A tool source with one tool of its own, one that clashes with a built-in, and a
    server that could not be reached."""

    async def tools_for(self, cid: str, run_id: str) -> tuple[dict[str, Tool], dict[str, str]]:
        return {"mcp__x__y": EchoTool("mcp__x__y"), "read": EchoTool("shadow")}, {
            "down": "connection refused"
        }

    async def forget(self, cid: str) -> None: ...

    async def close(self) -> None: ...


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    db = await open_database(f"sqlite+aiosqlite:///{tmp_path / 'burrow.db'}")
    user = await AccountStore(db).get_or_create("ada")
    conversations = ConversationStore(db)
    journal = Journal(EventStore(db))
    pool = SandboxPool(LocalBackend(tmp_path / "data", network="none"), journal, idle_seconds=None)
    world = {
        "db": db,
        "user": user,
        "conversations": conversations,
        "journal": journal,
        "pool": pool,
        "profiles": ProfileStore(db),
        "gate": ApprovalGate(ApprovalStore(db), conversations),
    }
    yield world
    await pool.close()
    await db.close()


def assembly(world: dict[str, Any], provider: Provider, **options: Any) -> RunAssembly:
    chosen = RuntimeOptions(profiles=world["profiles"], **options)
    return RunAssembly(
        world["journal"],
        world["conversations"],
        world["pool"],
        {"read": EchoTool("read")},
        lambda: provider,
        world["gate"],
        Checkpoints(world["pool"].get),
        chosen,
    )


def hook_names(run: Any) -> list[str]:
    return [type(hook).__name__ for hook in run.env.hooks]


async def test_a_run_has_every_hook_in_its_order(world: dict[str, Any]) -> None:
    cid = (await world["conversations"].create(world["user"].id, "t")).id
    built = assembly(world, ScriptedProvider([ScriptedTurn(text="hi")]))
    with world["journal"].subscribe(cid) as feed:
        run, budget = await built.build(cid, "r_1", ModelContext(), feed)
    assert hook_names(run) == [
        "Subagents",  # first: a task call is routed before anyone reviews it as a tool
        "SystemPrompt",
        "ProjectInstructions",
        "Approvals",
        "PreviewOpened",
        "Checklist",  # a todo call's plan.updated
        "PlanMode",  # plan.proposed, and the wait for the owner, as the run would end
        "LoopGuard",
        "Skills",
        "CheckpointAtStart",  # after the hooks that read the sandbox: beside the model's call
        "BudgetHook",  # before attachments: a stopped run need not wake the sandbox
        "Attachments",
        "Compactor",  # last: it measures the request as the others shaped it
    ]
    assert budget in run.env.hooks
    assert world["pool"].state(cid).status == "none"  # built, and nothing started
    assert set(run.env.tools) >= {"read", "task"}


async def test_without_subagents_there_is_no_task_tool(world: dict[str, Any]) -> None:
    cid = (await world["conversations"].create(world["user"].id, "t")).id
    built = assembly(world, ScriptedProvider([]), max_subagents=0)
    with world["journal"].subscribe(cid) as feed:
        run, _ = await built.build(cid, "r_1", ModelContext(), feed)
    assert "Subagents" not in hook_names(run)
    assert "task" not in run.env.tools


async def test_a_profile_brings_its_prompt_allowlist_and_model(world: dict[str, Any]) -> None:
    user = world["user"]
    await world["profiles"].put(
        user.id,
        Profile("reviewer", False, system_prompt="Review only.", model="demo", tools=("read",)),
    )
    cid = (await world["conversations"].create(user.id, "t", "reviewer")).id
    chosen: list[str | None] = []

    class Models:
        def provider_for(self, model: str | None) -> Provider:
            chosen.append(model)
            return ScriptedProvider([ScriptedTurn(text="ok")])

        def pricing_for(self, model: str | None) -> Pricing:
            return Pricing()

        def describe(self, model: str | None) -> ModelInfo:
            return describe("demo", model or "demo")

    built = assembly(world, ScriptedProvider([]), models=Models())
    with world["journal"].subscribe(cid) as feed:
        run, _ = await built.build(cid, "r_1", ModelContext(), feed)
        assert hook_names(run)[0] == "ToolAllowlist"  # refused before anyone is asked
        [system, *_] = next(
            h for h in run.env.hooks if isinstance(h, SystemPrompt)
        ).transform_context([])
        assert system.content == "Review only."
        assert await run.execute() == "completed"
    assert chosen == ["demo"]  # the profile's model, as the conversation chose none


async def test_a_missing_profile_fails_the_build_with_its_name(world: dict[str, Any]) -> None:
    cid = (await world["conversations"].create(world["user"].id, "t", "gone")).id
    built = assembly(world, ScriptedProvider([]))
    with world["journal"].subscribe(cid) as feed, pytest.raises(ProfileMissing, match="gone"):
        await built.build(cid, "r_1", ModelContext(), feed)


async def test_the_conversations_budget_overrides_the_servers(world: dict[str, Any]) -> None:
    cid = (await world["conversations"].create(world["user"].id, "t")).id
    await world["conversations"].update(cid, budget={"steps": 3})
    built = assembly(world, ScriptedProvider([]), budget=Budget(steps=50, tokens=1000))
    with world["journal"].subscribe(cid) as feed:
        _, budget = await built.build(cid, "r_1", ModelContext(), feed)
    assert (budget.budget.steps, budget.budget.tokens) == (3, 1000)


async def test_tool_sources_add_tools_never_replace_them_and_warn(world: dict[str, Any]) -> None:
    cid = (await world["conversations"].create(world["user"].id, "t")).id
    built = assembly(world, ScriptedProvider([]), tool_sources=[McpServers()])
    with world["journal"].subscribe(cid) as feed:
        run, _ = await built.build(cid, "r_1", ModelContext(), feed)
    assert run.env.tools["read"].spec.description == "The read tool."  # the built-in stays
    assert "mcp__x__y" in run.env.tools
    [warning] = [e for e in await world["journal"].read(cid) if e.type == "mcp.warning"]
    assert warning.data == {"server": "down", "message": "connection refused"}


async def test_a_missing_key_fails_the_run_not_the_build(world: dict[str, Any]) -> None:
    """The provider is built on the first model call: its error is journaled with the run."""
    cid = (await world["conversations"].create(world["user"].id, "t")).id

    def no_key() -> Provider:
        raise ValueError("OPENAI_API_KEY is not set")

    built = RunAssembly(
        world["journal"],
        world["conversations"],
        world["pool"],
        {},
        no_key,
        world["gate"],
        Checkpoints(world["pool"].get),
        RuntimeOptions(max_subagents=0),
    )
    with world["journal"].subscribe(cid) as feed:
        run, _ = await built.build(cid, "r_1", ModelContext(), feed)
        assert await run.execute() == "failed"
    [finished] = [e for e in await world["journal"].read(cid) if e.type == "run.finished"]
    assert "OPENAI_API_KEY is not set" in finished.data["error"]
