"""The agent loop as a unit: `AgentRun` on a real SQLite journal with a scripted model, no
server. What crosses HTTP (routes, SSE, the sandbox behind the tools) is tested in tests/api."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from burrow.llm.base import Message, ScriptedTurn, ToolSpec
from burrow.llm.scripted import ScriptedProvider
from burrow.runs.journal import events as ev
from burrow.runs.loop.hooks.base import Call, Hook, Outcome, Run, RunStop
from burrow.store.records import Event, NewEvent
from tests.fakes.loop import Echo, Gate, HeldProvider, loop_journal, of_type, types


def assert_whole(events: list[Event]) -> None:
    """Numbered without a gap, every call and the run paired."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    started = [d["call_id"] for d in of_type(events, "tool.started")]
    finished = [d["call_id"] for d in of_type(events, "tool.finished")]
    assert started == finished
    runs = [d["run_id"] for d in of_type(events, "run.started")]
    assert runs == [e.run_id for e in events if e.type == "run.finished"]


async def test_a_tool_call_round_trip(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                thinking="The user wants an echo.",
                text="Echoing.",
                tool_calls=[("echo", {"text": "hi there"})],
            ),
            ScriptedTurn(text="All done."),
        ]
    )
    async with loop_journal(tmp_path / "loop.db") as lj:
        run, status = await lj.run(lj.env(provider, [Echo()]), "say hi")
        events = await lj.events()

    assert status == "completed" and run.error is None
    assert_whole(events)
    kinds = types(events)
    assert kinds[:2] == ["user.message", "run.started"]
    assert kinds[-1] == "run.finished"
    # Deltas stream before the answer; the call starts after the answer it belongs to.
    first_answer = kinds.index("assistant.message")
    assert {"assistant.thinking.delta", "assistant.text.delta"} <= set(kinds[:first_answer])
    assert kinds[first_answer : first_answer + 5] == [
        "assistant.message",
        "usage",
        "tool.started",
        "tool.output",
        "tool.finished",
    ]
    [answer, final] = of_type(events, "assistant.message")
    assert answer["content"] == "Echoing." and answer["thinking"] == "The user wants an echo."
    [call] = answer["tool_calls"]
    assert call["name"] == "echo" and call["arguments"] == {"text": "hi there"}
    [started] = of_type(events, "tool.started")
    assert started["call_id"] == call["id"] and started["arguments"] == {"text": "hi there"}
    assert started["kind"]["reads"] and not started["kind"]["writes"]
    [output] = of_type(events, "tool.output")
    assert output == {"call_id": call["id"], "stream": "stdout", "text": "hi there"}
    [finished] = of_type(events, "tool.finished")
    assert finished["output"] == "hi there" and not finished["is_error"]
    assert finished["exit_code"] == 0
    assert final["content"] == "All done." and final["tool_calls"] == []
    # The model saw its own call, then the result, in the next request.
    second = provider.requests[1]
    assert [m.role for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2].tool_calls[0].id == call["id"]
    assert (second[3].tool_call_id, second[3].content) == (call["id"], "hi there")
    assert [spec.name for spec in provider.tool_requests[0]] == ["echo"]
    # run.finished sums the usage of every model call.
    usage = of_type(events, "usage")
    [end] = of_type(events, "run.finished")
    assert end["status"] == "completed" and end["error"] is None
    assert end["usage"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in usage) > 0
    assert end["usage"]["completion_tokens"] == sum(u["completion_tokens"] for u in usage)


async def test_bad_calls_come_back_to_the_model_as_errors(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[
                    ("echo", '{"text": "unterminated'),
                    ("echo", "[1, 2]"),
                    ("launch_rockets", {}),
                ]
            ),
            ScriptedTurn(text="Sorry."),
        ]
    )
    async with loop_journal(tmp_path / "loop.db") as lj:
        _, status = await lj.run(lj.env(provider, [Echo()]))
        events = await lj.events()

    assert status == "completed"
    assert_whole(events)
    results = of_type(events, "tool.finished")
    assert [r["is_error"] for r in results] == [True, True, True]
    assert "not valid JSON" in results[0]["output"]
    assert "must be a JSON object, not list" in results[1]["output"]
    assert results[2]["output"] == "Unknown tool 'launch_rockets'. Available: echo."
    # The invalid arguments are kept verbatim.
    assert of_type(events, "tool.started")[0]["arguments"] == '{"text": "unterminated'
    tool_messages = [m.content for m in provider.requests[1] if m.role == "tool"]
    assert tool_messages == [r["output"] for r in results]


async def test_a_model_error_mid_stream_fails_the_run_and_loses_nothing(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("echo", {"text": "step one"})]),
            ScriptedTurn(text="Half an answer, then", error="connection reset by peer"),
        ]
    )
    async with loop_journal(tmp_path / "loop.db") as lj:
        with lj.journal.subscribe(lj.cid) as watcher:
            run, status = await lj.run(lj.env(provider, [Echo()]))
            live = watcher.drain()
        events = await lj.events()

    assert status == "failed"
    assert run.error == "connection reset by peer"
    [end] = of_type(events, "run.finished")
    assert end["status"] == "failed" and end["error"] == "connection reset by peer"
    assert_whole(events)
    assert live == events  # what a watcher saw live is what the journal holds
    # The first step is all there; of the second, every delta and the answer they make.
    [finished] = of_type(events, "tool.finished")
    assert finished["output"] == "step one" and not finished["is_error"]
    streamed = "".join(d["text"] for d in of_type(events, "assistant.text.delta"))
    assert streamed == "Half an answer, then"
    partial = of_type(events, "assistant.message")[-1]
    assert partial == {"content": streamed, "thinking": "", "tool_calls": []}
    assert types(events)[-2:] == ["assistant.message", "run.finished"]


async def test_an_error_before_any_output_keeps_no_empty_answer(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn(error="model not found")])
    async with loop_journal(tmp_path / "loop.db") as lj:
        _, status = await lj.run(lj.env(provider))
        events = await lj.events()
    assert status == "failed"
    assert types(events) == ["user.message", "run.started", "run.finished"]
    assert of_type(events, "run.finished")[0]["error"] == "model not found"


async def test_interrupt_during_a_tool_closes_the_open_call(tmp_path: Path) -> None:
    gate = Gate()
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[("echo", {"text": "a"}), ("wait", {}), ("echo", {"text": "b"})])]
    )
    async with loop_journal(tmp_path / "loop.db") as lj:
        run, task = await lj.start(lj.env(provider, [Echo(), gate]))
        await asyncio.wait_for(gate.entered.wait(), 30)
        task.cancel()
        status = await asyncio.wait_for(task, 30)
        events = await lj.events()

    assert status == "canceled" and run.error is None
    assert not gate.finished
    assert_whole(events)
    first, second = of_type(events, "tool.finished")  # the third call never started
    assert first["output"] == "a" and not first["is_error"]
    assert second["is_error"] and second["output"] == "Interrupted by the user."
    [end] = of_type(events, "run.finished")
    assert end["status"] == "canceled" and end["error"] is None
    assert len(provider.requests) == 1


async def test_interrupt_during_a_model_stream_keeps_what_was_shown(tmp_path: Path) -> None:
    provider = HeldProvider(
        [ScriptedTurn(text="The first words and then more"), ScriptedTurn(text="Short answer.")]
    )
    async with loop_journal(tmp_path / "loop.db") as lj:
        env = lj.env(provider)
        _, task = await lj.start(env)
        await asyncio.wait_for(provider.holding.wait(), 30)
        task.cancel()
        assert await asyncio.wait_for(task, 30) == "canceled"
        events = await lj.events()
        streamed = "".join(d["text"] for d in of_type(events, "assistant.text.delta"))
        assert streamed == "The "
        [partial] = of_type(events, "assistant.message")
        assert partial["content"] == streamed and partial["tool_calls"] == []
        assert_whole(events)

        # The next run's model call has the partial answer in its context.
        _, status = await lj.run(env, "short please")
    assert status == "completed"
    assert any(m.role == "assistant" and m.content == streamed for m in provider.requests[1])


async def test_steering_during_a_tool_reaches_the_next_model_call(tmp_path: Path) -> None:
    gate = Gate()
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[("wait", {})]), ScriptedTurn(text="Saw your note.")]
    )
    async with loop_journal(tmp_path / "loop.db") as lj:
        run, task = await lj.start(lj.env(provider, [gate]))
        await asyncio.wait_for(gate.entered.wait(), 30)
        await lj.steer(run, "also use tabs")
        gate.opened.set()
        assert await asyncio.wait_for(task, 30) == "completed"
        events = await lj.events()

    assert_whole(events)
    assert len(provider.requests) == 2
    roles = [(m.role, m.content) for m in provider.requests[1]]
    tool_at = next(i for i, (role, _) in enumerate(roles) if role == "tool")
    assert roles[tool_at + 1] == ("user", "also use tabs")
    assert roles[tool_at + 1 :] == [("user", "also use tabs")]


async def test_steering_while_the_model_answers_gets_an_answer_too(tmp_path: Path) -> None:
    """An answer without tool calls would end the run; a message that came in while it
    streamed is answered by one more model call, in the same run."""
    provider = HeldProvider([ScriptedTurn(text="A first answer."), ScriptedTurn(text="Noted.")])
    async with loop_journal(tmp_path / "loop.db") as lj:
        run, task = await lj.start(lj.env(provider))
        await asyncio.wait_for(provider.holding.wait(), 30)
        await lj.steer(run, "and a haiku")
        provider.release()
        assert await asyncio.wait_for(task, 30) == "completed"
        events = await lj.events()

    assert_whole(events)
    assert len(provider.requests) == 2
    # Journaled while the answer streamed, the message comes before the answer it interrupted.
    second = [(m.role, m.content) for m in provider.requests[1]]
    assert second[1:] == [
        ("user", "go"),
        ("user", "and a haiku"),
        ("assistant", "A first answer."),
    ]
    answers = [d["content"] for d in of_type(events, "assistant.message")]
    assert answers == ["A first answer.", "Noted."]
    assert types(events).count("run.finished") == 1


class Recorder(Hook):
    """Notes every seam it is called at, as `name.seam`."""

    def __init__(self, name: str, seen: list[str], *, refuse: str | None = None) -> None:
        self.name, self.seen, self.refuse = name, seen, refuse

    async def before_model_call(self, run: Run) -> None:
        self.seen.append(f"{self.name}.before_model_call")

    def transform_context(self, messages: list[Message]) -> list[Message]:
        self.seen.append(f"{self.name}.transform_context")
        return [*messages, Message(role="user", content=f"[{self.name}]")]

    def transform_tools(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        self.seen.append(f"{self.name}.transform_tools")
        return specs

    async def before_tool_call(self, run: Run, call: Call) -> str | None:
        self.seen.append(f"{self.name}.before_tool_call")
        return self.refuse

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        self.seen.append(f"{self.name}.after_tool_call")

    async def close(self, run: Run) -> list[NewEvent]:
        self.seen.append(f"{self.name}.close")
        return []


async def test_hooks_run_in_order_at_every_seam(tmp_path: Path) -> None:
    seen: list[str] = []
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), ScriptedTurn(text="done")]
    )
    hooks = [Recorder("a", seen), Recorder("b", seen)]
    async with loop_journal(tmp_path / "loop.db") as lj:
        _, status = await lj.run(lj.env(provider, [Echo()], hooks))
    assert status == "completed"
    step = [
        "a.before_model_call",
        "b.before_model_call",
        "a.transform_context",
        "a.transform_tools",
        "b.transform_context",
        "b.transform_tools",
    ]
    tool = ["a.before_tool_call", "b.before_tool_call", "a.after_tool_call", "b.after_tool_call"]
    assert seen == [*step, *tool, *step, "a.close", "b.close"]
    # Each transform sees the one before it.
    assert [m.content for m in provider.requests[0][-2:]] == ["[a]", "[b]"]


async def test_the_first_refusal_wins_and_the_tool_never_runs(tmp_path: Path) -> None:
    seen: list[str] = []
    gate = Gate()
    provider = ScriptedProvider([ScriptedTurn(tool_calls=[("wait", {})]), ScriptedTurn()])
    hooks = [Recorder("a", seen, refuse="Not now."), Recorder("b", seen, refuse="Never.")]
    async with loop_journal(tmp_path / "loop.db") as lj:
        _, status = await lj.run(lj.env(provider, [gate], hooks))
        events = await lj.events()
    assert status == "completed"
    assert not gate.entered.is_set()
    assert "b.before_tool_call" not in seen
    assert seen.count("a.after_tool_call") == seen.count("b.after_tool_call") == 1
    [finished] = of_type(events, "tool.finished")
    assert finished["is_error"] and finished["output"] == "Not now."


class StopAfter(Hook):
    """Ends the run after a tool call, adding an event of its own to the result."""

    async def after_tool_call(self, run: Run, call: Call, outcome: Outcome) -> None:
        outcome.events.append(ev.make(ev.Retry(attempt=9, delay_s=0, reason="side"), run.run_id))
        raise RunStop("budget_exceeded", "The step budget is spent.")


async def test_a_stop_from_a_hook_still_writes_the_result_and_ends_the_run(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[("echo", {"text": "x"})]), ScriptedTurn(text="never")]
    )
    hooks: list[Hook] = [StopAfter(), Recorder("later", seen)]
    async with loop_journal(tmp_path / "loop.db") as lj:
        run, status = await lj.run(lj.env(provider, [Echo()], hooks))
        events = await lj.events()
    assert status == "budget_exceeded" and run.error == "The step budget is spent."
    assert "later.after_tool_call" in seen  # every after-hook still sees the call
    assert len(provider.requests) == 1
    assert_whole(events)
    kinds = types(events)
    assert kinds[-3:] == ["tool.finished", "retry", "run.finished"]
    [finished] = of_type(events, "tool.finished")
    assert finished["output"] == "x" and not finished["is_error"]
    end: dict[str, Any] = of_type(events, "run.finished")[0]
    assert end["status"] == "budget_exceeded" and end["error"] == "The step budget is spent."


async def test_runs_continue_one_conversation(tmp_path: Path) -> None:
    """A second run's context is the journal's: the first run's call and answer included."""
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("echo", {"text": "remember me"})]),
            ScriptedTurn(text="First done."),
            ScriptedTurn(text="Second done."),
        ]
    )
    async with loop_journal(tmp_path / "loop.db") as lj:
        env = lj.env(provider, [Echo()])
        await lj.run(env, "first")
        _, status = await lj.run(env, "second")
        events: list[Event] = await lj.events()
    assert status == "completed"
    assert_whole(events)
    third = [(m.role, m.content) for m in provider.requests[2]]
    assert third[1:] == [
        ("user", "first"),
        ("assistant", ""),
        ("tool", "remember me"),
        ("assistant", "First done."),
        ("user", "second"),
    ]
