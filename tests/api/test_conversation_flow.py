"""One conversation end to end through the real API, a real server and real sandboxes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server, sse_events

SERVE_AND_FETCH = (
    'python3 -c "import urllib.request as u; '
    "print(u.urlopen('http://127.0.0.1:8765/hello.txt', timeout=5).read().decode())\""
)


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


async def test_send_streams_the_run_and_tools_act_in_the_sandbox(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                text="Writing a file.",
                thinking="The user wants a file.",
                tool_calls=[("write_file", {"path": "hello.txt", "content": "hi from burrow\n"})],
            ),
            ScriptedTurn(tool_calls=[("bash", {"command": "mkdir -p sub && cd sub"})]),
            ScriptedTurn(tool_calls=[("bash", {"command": "pwd"})]),
            ScriptedTurn(
                tool_calls=[
                    (
                        "bash",
                        {"command": "cd .. && (python3 -m http.server 8765 >/dev/null 2>&1 &)"},
                    )
                ]
            ),
            ScriptedTurn(tool_calls=[("bash", {"command": f"sleep 0.5; {SERVE_AND_FETCH}"})]),
            ScriptedTurn(text="All done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        # Subscribe before sending, as the UI does.
        stream = sse_events(srv.client, cid)
        accepted = await srv.send(cid, "write a file and serve it")
        assert accepted["seq"] == 1
        live: list[dict[str, Any]] = []
        async with asyncio.timeout(60):
            async for event in stream:
                live.append(event)
                if event["type"] == "run.finished":
                    break
        await stream.aclose()

        assert [e["seq"] for e in live] == list(range(1, len(live) + 1))
        assert live == await srv.events(cid)  # live and replay are the same events
        types = _types(live)
        assert types[:2] == ["user.message", "run.started"]
        assert "assistant.thinking.delta" in types and "assistant.text.delta" in types
        assert live[-1]["data"]["status"] == "completed"
        assert types.count("tool.started") == types.count("tool.finished") == 5
        assert "sandbox.status" in types

        finished = [e["data"] for e in live if e["type"] == "tool.finished"]
        assert not any(f["is_error"] for f in finished), finished
        assert finished[2]["output"].strip().endswith("/workspace/sub")
        assert "hi from burrow" in finished[4]["output"]
        outputs = "".join(e["data"]["text"] for e in live if e["type"] == "tool.output")
        assert "/workspace/sub" in outputs  # streamed live as tool.output too

        content = await srv.client.get(
            f"/api/conversations/{cid}/files/content", params={"path": "hello.txt"}
        )
        assert content.status_code == 200
        assert content.text == "hi from burrow\n"
        assert content.headers["x-content-type-options"] == "nosniff"
        listing = await srv.client.get(f"/api/conversations/{cid}/files", params={"path": "."})
        assert {"hello.txt", "sub"} <= {e["name"] for e in listing.json()}

        conversation = (await srv.client.get(f"/api/conversations/{cid}")).json()
        assert conversation["status"] == "idle"
        assert conversation["last_seq"] == len(live)
        assert conversation["usage"]["prompt_tokens"] > 0


async def test_steering_message_reaches_the_next_model_call(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": "sleep 1.5"})]),
            ScriptedTurn(text="Saw your note."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        first = await srv.send(cid, "start")
        await srv.wait_for(cid, lambda e: e["type"] == "tool.started")
        steer = await srv.send(cid, "also use tabs")
        assert steer["run_id"] == first["run_id"]
        await srv.run_finished(cid, first["run_id"])
        events = await srv.events(cid)
        steering = [e for e in events if e["type"] == "user.message" and e["data"]["steering"]]
        assert [e["data"]["content"] for e in steering] == ["also use tabs"]
        second_request = provider.requests[1]
        roles = [(m.role, m.content) for m in second_request]
        # The tool result comes before the steering message, which comes before the answer.
        tool_at = next(i for i, (r, _) in enumerate(roles) if r == "tool")
        assert roles[tool_at + 1] == ("user", "also use tabs")
        assert len(provider.requests) == 2


async def test_the_preview_tool_opens_the_conversations_own_preview_origin(
    tmp_path: Path,
) -> None:
    serve = {"command": "python3 -m http.server 8000 --bind 127.0.0.1", "port": 8000}
    provider = ScriptedProvider([ScriptedTurn(tool_calls=[("preview", serve)])])
    async with running_server(tmp_path, lambda: provider, preview_port=18421) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "serve it")
        await srv.run_finished(cid, run["run_id"])
        events = await srv.events(cid)
        [opened] = [e["data"] for e in events if e["type"] == "preview.opened"]
        assert opened == {"port": 8000, "url": f"http://8000-{cid}.preview.localhost:18421/"}
        previews = (await srv.client.get(f"/api/conversations/{cid}/previews")).json()
        assert [(p["port"], p["status"]) for p in previews] == [(8000, "running")]
