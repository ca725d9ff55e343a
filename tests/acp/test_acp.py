"""`burrow acp` as a child process, driven over stdio against a real server on 127.0.0.1
with a scripted model: a whole conversation, then hostile input."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.acp.client import AcpClient
from tests.api.harness import RunningServer, running_server

WRITE = {"path": "a.txt", "content": "hello\n"}
INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}


async def _token(srv: RunningServer) -> str:
    answer = await srv.client.post("/api/auth/tokens", json={"name": "acp"})
    assert answer.status_code in (200, 201), answer.text
    return str(answer.json()["token"])


async def test_a_whole_conversation(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(text="Writing it.", tool_calls=[("write_file", WRITE)]),
            ScriptedTurn(tool_calls=[("bash", {"command": "rm -rf build && cat a.txt"})]),
            ScriptedTurn(text="Done."),
            ScriptedTurn(tool_calls=[("bash", {"command": "sleep 60"})]),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        acp = await AcpClient.start(srv.base_url, await _token(srv))
        try:
            init = await acp.call("initialize", INIT)
            assert init["result"]["protocolVersion"] == 1
            assert init["result"]["agentCapabilities"]["loadSession"] is True
            new = await acp.call("session/new", {"cwd": "/home/me/project", "mcpServers": []})
            sid = new["result"]["sessionId"]
            assert new["result"]["modes"]["currentModeId"] == "ask"

            answer = await acp.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            assert answer["result"] == {"stopReason": "end_turn"}, answer
            kinds = acp.kinds(sid)
            assert "agent_message_chunk" in kinds and "tool_call" in kinds
            calls = [
                u["update"] for u in acp.updates if u["update"]["sessionUpdate"] == "tool_call"
            ]
            assert calls[0]["kind"] == "edit"
            assert calls[0]["content"][0] == {
                "type": "diff",
                "path": "/workspace/a.txt",
                "oldText": None,
                "newText": "hello\n",
            }
            assert calls[1]["kind"] == "execute"
            [asked] = acp.permission_requests
            assert asked["toolCall"]["toolCallId"] == calls[1]["toolCallId"]
            assert {o["kind"] for o in asked["options"]} == {"allow_once", "reject_once"}
            finals = [
                u["update"]
                for u in acp.updates
                if u["update"]["sessionUpdate"] == "tool_call_update"
                and u["update"]["status"] == "completed"
            ]
            assert "hello" in finals[-1]["content"][-1]["content"]["text"]
            text = "".join(
                u["update"]["content"]["text"]
                for u in acp.updates
                if u["update"]["sessionUpdate"] == "agent_message_chunk"
            )
            assert text == "Writing it.Done."

            # Cancel: a long command in auto mode, interrupted through session/cancel.
            assert (await acp.call("session/set_mode", {"sessionId": sid, "modeId": "auto"}))[
                "result"
            ] == {}
            going = acp.send(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}
            )
            deadline = time.monotonic() + 30
            while sum(k == "tool_call" for k in acp.kinds(sid)) < 3:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            acp.notify("session/cancel", {"sessionId": sid})
            assert (await asyncio.wait_for(going, 30))["result"] == {"stopReason": "cancelled"}
        finally:
            await acp.close()

        # A second agent attaches to the conversation and is shown its history.
        acp = await AcpClient.start(srv.base_url, await _token(srv))
        try:
            await acp.call("initialize", INIT)
            loaded = await acp.call(
                "session/load", {"sessionId": sid, "cwd": "/x", "mcpServers": []}
            )
            assert loaded["result"]["modes"]["currentModeId"] == "auto"
            kinds = acp.kinds(sid)
            assert kinds.count("user_message_chunk") == 2
            assert kinds.count("tool_call") == 3 and "agent_message_chunk" in kinds
        finally:
            await acp.close()


async def test_plan_mode_shows_the_plan_and_asks_to_approve_it(tmp_path: Path) -> None:
    todo = {"items": [{"text": "write out.txt", "done": False}]}
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("todo", todo)]),
            ScriptedTurn(text="That is the plan."),
            ScriptedTurn(tool_calls=[("write_file", {"path": "out.txt", "content": "x\n"})]),
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        acp = await AcpClient.start(srv.base_url, await _token(srv))
        try:
            await acp.call("initialize", INIT)
            new = await acp.call("session/new", {"cwd": "/p", "mcpServers": []})
            sid = new["result"]["sessionId"]
            modes = {m["id"] for m in new["result"]["modes"]["availableModes"]}
            assert "plan" in modes
            await acp.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})
            answer = await acp.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            assert answer["result"] == {"stopReason": "end_turn"}, answer
            plans = [u["update"] for u in acp.updates if u["update"]["sessionUpdate"] == "plan"]
            assert plans[-1]["entries"][0]["content"] == "write out.txt"
            asked = acp.permission_requests[0]
            assert asked["toolCall"]["title"] == "Carry out this plan"
            assert asked["toolCall"]["rawInput"]["items"] == todo["items"]
            # Approved: the run went on past plan mode and wrote the file.
            events = await srv.events(sid)
            written = [e for e in events if e["type"] == "tool.finished"]
            assert written and not written[-1]["data"]["is_error"], written
            read = await srv.client.get(
                f"/api/conversations/{sid}/files/content", params={"path": "out.txt"}
            )
            assert read.status_code == 200 and read.text == "x\n", read.text
        finally:
            await acp.close()


async def test_hostile_input_is_answered_and_the_agent_stays_responsive(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        made = await srv.client.post(
            "/api/users", json={"username": "eve", "password": "eve-pw-12"}
        )
        assert made.status_code == 201, made.text
        theirs = await srv.create_conversation("admin's")
        async with httpx.AsyncClient(base_url=srv.base_url) as eve:
            await eve.post("/api/auth/login", json={"username": "eve", "password": "eve-pw-12"})
            eve_token = (await eve.post("/api/auth/tokens", json={"name": "e"})).json()["token"]
        acp = await AcpClient.start(srv.base_url, eve_token)
        try:
            acp.write(b"{not json\n")
            acp.write(b"x" * (9 * 1024 * 1024) + b"\n")  # past the 8 MiB bound
            acp.write(b"[1, 2]\n")
            acp.write(b'{"jsonrpc": "2.0", "id": [1], "result": {}}\n')  # answers nothing
            acp.write(b'{"jsonrpc": "2.0", "id": 70, "method": 3}\n')
            init = await acp.call("initialize", INIT)
            assert "result" in init
            codes = [m["error"]["code"] for m in acp.unsolicited]
            assert codes == [-32700, -32600, -32600, -32600]  # the id-[1] answer is ignored

            stolen = await acp.call(
                "session/prompt", {"sessionId": theirs, "prompt": [{"type": "text", "text": "hi"}]}
            )
            assert stolen["error"]["code"] == -32002
            assert (await acp.call("session/load", {"sessionId": theirs, "cwd": "/"}))["error"][
                "code"
            ] == -32002
            bad = await acp.call("session/prompt", {"sessionId": theirs})
            assert bad["error"]["code"] in (-32602, -32002)
            assert (await acp.call("nope/nothing", {}))["error"]["code"] == -32601

            flood = [
                acp.send("session/load", {"sessionId": f"c_{i}", "cwd": "/"}) for i in range(500)
            ]
            started = time.monotonic()
            during = await acp.call("initialize", INIT, timeout=10)  # answered at once
            assert "result" in during or during["error"]["code"] == -32001
            answers = await asyncio.wait_for(asyncio.gather(*flood), 60)
            codes = {a["error"]["code"] for a in answers}
            assert codes <= {-32002, -32001} and -32001 in codes  # the cap held
            assert "result" in await acp.call("initialize", INIT)
            assert time.monotonic() - started < 60
            assert (await srv.client.get("/api/health")).status_code == 200
        finally:
            await acp.close()

        # Without a token, and with no server: what to do, said precisely.
        acp = await AcpClient.start(srv.base_url, None)
        try:
            answer = await acp.call("session/new", {"cwd": "/"})
            assert (
                answer["error"]["code"] == -32000 and "BURROW_TOKEN" in answer["error"]["message"]
            )
        finally:
            await acp.close()
    acp = await AcpClient.start("http://127.0.0.1:9", "t")
    try:
        answer = await acp.call("session/new", {"cwd": "/"})
        assert "burrow serve" in answer["error"]["message"]
    finally:
        await acp.close()
