"""The offline `demo` model: shows a new user the whole product without an API key.

It writes a small site about the user's prompt, serves it and explains how to connect a
real model. Each step is read from the conversation since the last user message (which
tools it already called), never from a counter, so it behaves the same across several
messages, a new run or a restarted server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from burrow.llm.base import Message, ScriptedTurn, StreamEvent, ToolSpec
from burrow.llm.demo_site import site_files
from burrow.llm.scripted import play

PORT = 8000
SERVE_COMMAND = f"python3 -m http.server {PORT} --bind 0.0.0.0"
BACKGROUND_SERVE = f"nohup {SERVE_COMMAND} > .server.log 2>&1 &"
# The server needs a moment to bind, so poll instead of asking once.
CHECK_COMMAND = f"""python3 - <<'EOF'
import time, urllib.request
for attempt in range(40):
    try:
        with urllib.request.urlopen("http://127.0.0.1:{PORT}/", timeout=2) as response:
            print("HTTP", response.status, response.headers.get_content_type())
            break
    except OSError:
        time.sleep(0.25)
else:
    raise SystemExit("The server did not answer on port {PORT}: see .server.log")
EOF"""

CONFIGURE = (
    "This was Burrow's offline **demo** model: it follows a fixed plan and does not read "
    "your request. To use a real model, set `OPENAI_API_KEY` and `BURROW_MODEL` (add "
    "`OPENAI_BASE_URL` for DeepSeek, vLLM, Ollama, LM Studio or another OpenAI-compatible "
    "server) and restart `burrow serve`, or choose a model on the settings page."
)


class DemoProvider:
    name = "demo"

    def __init__(self, *, chunk_delay: float = 0.02) -> None:
        self.chunk_delay = chunk_delay  # slow enough that streaming is visible in the UI

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None = None,
    ) -> AsyncIterator[StreamEvent]:
        turn = next_turn(messages, {tool.name for tool in tools})
        replay = play(turn, messages, chunk_delay=self.chunk_delay)
        async with contextlib.aclosing(replay) as events:
            async for event in events:
                yield event


def since_last_user(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    """The last user message's text and everything after it."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return messages[i].content, list(messages[i + 1 :])
    return "", list(messages)


def next_turn(messages: Sequence[Message], tools: set[str]) -> ScriptedTurn:
    prompt, recent = since_last_user(messages)
    calls = [call for m in recent if m.role == "assistant" for call in m.tool_calls]
    names = {call.name for call in calls}
    commands = " ".join(call.arguments for call in calls if call.name == "bash")
    if "write_file" not in tools:
        return ScriptedTurn(
            text="The demo needs the `write_file` tool to build its page, and it is not "
            "available here.\n\n" + CONFIGURE
        )
    if "write_file" not in names:
        return write_site(prompt)
    refusals = [m.content for m in recent if m.role == "tool" and m.content.startswith(REFUSED)]
    if refusals:
        return refused(refusals[0])
    if "preview" in names:
        return finish(f"open the preview of port {PORT} to see it")
    if "http.server" not in commands:
        return serve("preview" in tools)
    if "urllib" not in commands:
        return ScriptedTurn(
            thinking="Started in the background; I should check that it actually answers.",
            text="Let me check that the server answers.",
            tool_calls=[("bash", {"command": CHECK_COMMAND, "timeout": 30})],
        )
    results = [m.content for m in recent if m.role == "tool"]
    if results and "HTTP 200" in results[-1]:
        return finish(f"it answers on port {PORT}")
    return finish(f"it should listen on port {PORT}, but the check got no answer yet")


def write_site(prompt: str) -> ScriptedTurn:
    files = site_files(prompt)
    return ScriptedTurn(
        thinking="The user wants something built. As the demo model I will make a small "
        "static page that shows their request, style it, add a touch of JavaScript, "
        "and serve it so they can open it in the preview.",
        text="I'm Burrow's offline demo model, so I'll show you how the agent works: I'll "
        "write a small web page about your request, then start a server for it in this "
        "conversation's sandbox.",
        tool_calls=[
            ("write_file", {"path": path, "content": body}) for path, body in files.items()
        ],
    )


def serve(with_preview: bool) -> ScriptedTurn:
    if with_preview:
        return ScriptedTurn(
            thinking="The files are written. The preview tool starts the server and keeps it "
            "running, so the user can open the page.",
            text=f"The files are in place. Now I'll serve them on port {PORT}.",
            tool_calls=[("preview", {"command": SERVE_COMMAND, "port": PORT})],
        )
    return ScriptedTurn(
        thinking="The files are written. No preview tool here, so I start the server in the "
        "background with bash.",
        text=f"The files are in place. Now I'll start a web server on port {PORT}.",
        tool_calls=[("bash", {"command": BACKGROUND_SERVE})],
    )


# How a tool result begins when the call was not run: refused by the approval mode or a
# rule (runs/loop/hooks/approvals.py), or denied by the person.
REFUSED = ("Refused:", "Denied by the user.")


def refused(reason: str) -> ScriptedTurn:
    """Stop and say so: claiming the page was written when it was not would mislead."""
    return ScriptedTurn(
        text="I could not build the page: my calls were not run, so nothing was written "
        f"and no server was started.\n\n> {reason.splitlines()[0]}\n\n"
        "To let it run, set the conversation's approval mode (the selector at the top) to "
        f"ask or auto, or allow the calls, and send your request again.\n\n{CONFIGURE}"
    )


def finish(status: str) -> ScriptedTurn:
    return ScriptedTurn(
        text=f"Done! I wrote `index.html`, `style.css` and `app.js` and started a web server "
        f"for them: {status}. Try the button on the page.\n\n{CONFIGURE}"
    )
