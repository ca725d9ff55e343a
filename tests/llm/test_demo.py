"""The demo model drives a whole session from the conversation alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

from burrow.llm.base import Message, Provider, ToolSpec
from burrow.llm.demo import CHECK_COMMAND, DemoProvider
from tests.fakes import collect

PROMPT = 'Build a <b>todo</b> app & "more"'


def spec(name: str) -> ToolSpec:
    return ToolSpec(name, name, {"type": "object"})


TOOLS = [spec("bash"), spec("read_file"), spec("write_file"), spec("edit_file")]
WITH_PREVIEW = [*TOOLS, spec("preview")]


def fake_tool(name: str, arguments: dict[str, Any]) -> str:
    if name == "write_file":
        return f"Wrote {len(arguments['content'])} characters to {arguments['path']}"
    if name == "preview":
        return "Serving port 8000 at http://8000-c.preview.localhost:8421/"
    if "urllib" in arguments["command"]:
        return "HTTP 200 text/html"
    return ""


async def drive(
    provider: Provider,
    messages: list[Message],
    tools: list[ToolSpec],
    run_tool: Callable[[str, dict[str, Any]], str] = fake_tool,
) -> list[list[tuple[str, dict[str, Any]]]]:
    """What the agent loop does: ask, run the tools asked for, repeat until only text."""
    steps: list[list[tuple[str, dict[str, Any]]]] = []
    for _ in range(10):
        answer = await collect(provider.stream(messages, tools))
        calls = answer.tool_calls
        messages.append(
            Message(
                role="assistant",
                content=answer.text,
                thinking=answer.thinking,
                tool_calls=tuple(calls),
            )
        )
        if not calls:
            return steps
        steps.append([(call.name, json.loads(call.arguments)) for call in calls])
        for call in calls:
            output = run_tool(call.name, json.loads(call.arguments))
            messages.append(
                Message(role="tool", content=output, tool_call_id=call.id, name=call.name)
            )
    raise AssertionError("the demo never finished")


def files_written(steps: list[list[tuple[str, dict[str, Any]]]]) -> dict[str, str]:
    return {
        args["path"]: args["content"]
        for step in steps
        for name, args in step
        if name == "write_file"
    }


async def test_with_preview_writes_site_serves_it_and_explains() -> None:
    messages = [Message(role="user", content=PROMPT)]
    steps = await drive(DemoProvider(chunk_delay=0), messages, WITH_PREVIEW)
    assert [[name for name, _ in step] for step in steps] == [
        ["write_file", "write_file", "write_file"],
        ["preview"],
    ]
    assert steps[1][0][1] == {"command": "python3 -m http.server 8000 --bind 0.0.0.0", "port": 8000}
    final = messages[-1]
    assert final.role == "assistant" and not final.tool_calls
    for setting in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BURROW_MODEL"):
        assert setting in final.content
    assert "open the preview of port 8000" in final.content
    assert messages[1].thinking and messages[1].content  # it narrates before acting


async def test_page_shows_the_prompt_escaped_and_links_its_assets() -> None:
    messages = [Message(role="user", content=PROMPT)]
    files = files_written(await drive(DemoProvider(chunk_delay=0), messages, WITH_PREVIEW))
    assert set(files) == {"index.html", "style.css", "app.js"}
    page = files["index.html"]
    assert "Build a &lt;b&gt;todo&lt;/b&gt; app &amp; &quot;more&quot;" in page
    assert "<b>todo" not in page
    assert 'href="style.css"' in page and 'src="app.js"' in page
    parser = HTMLParser()
    parser.feed(page)  # parses without raising
    assert "getElementById" in files["app.js"]


async def test_without_preview_serves_in_background_and_checks() -> None:
    messages = [Message(role="user", content="a portfolio")]
    steps = await drive(DemoProvider(chunk_delay=0), messages, TOOLS)
    assert [[name for name, _ in step] for step in steps] == [
        ["write_file", "write_file", "write_file"],
        ["bash"],
        ["bash"],
    ]
    assert steps[1][0][1] == {
        "command": "nohup python3 -m http.server 8000 --bind 0.0.0.0 > .server.log 2>&1 &"
    }
    assert steps[2][0][1]["command"] == CHECK_COMMAND
    assert "it answers on port 8000" in messages[-1].content


async def test_a_failed_check_is_reported() -> None:
    messages = [Message(role="user", content="a portfolio")]
    await drive(DemoProvider(chunk_delay=0), messages, TOOLS, lambda name, args: "refused")
    assert "the check got no answer yet" in messages[-1].content


def test_check_command_is_valid_python() -> None:
    body = re.search(r"<<'EOF'\n(.*)\nEOF$", CHECK_COMMAND, re.S)
    assert body is not None
    compile(body.group(1), "check", "exec")


async def test_follows_the_conversation_across_messages_and_restarts() -> None:
    messages = [Message(role="user", content="first idea")]
    await drive(DemoProvider(chunk_delay=0), messages, WITH_PREVIEW)
    messages.append(Message(role="user", content="second idea"))
    # A new provider, as after a server restart, stopped after its first step.
    first_step = await collect(DemoProvider(chunk_delay=0).stream(messages, WITH_PREVIEW))
    pages = [c for c in first_step.tool_calls if json.loads(c.arguments)["path"] == "index.html"]
    assert "second idea" in json.loads(pages[0].arguments)["content"]
    steps = await drive(DemoProvider(chunk_delay=0), messages, WITH_PREVIEW)
    assert [step[0][0] for step in steps] == ["write_file", "preview"]


async def test_without_file_tools_it_only_explains() -> None:
    messages = [Message(role="user", content="hi")]
    steps = await drive(DemoProvider(chunk_delay=0), messages, [])
    assert steps == []
    assert "OPENAI_API_KEY" in messages[-1].content
