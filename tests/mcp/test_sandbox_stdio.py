"""MCP servers over stdio inside the conversation's sandbox, through the real API: tool
names, annotation-driven approvals, ${SECRET} expansion, cancellation, crashes, and no
process left behind."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, running_server
from tests.api.test_secrets import choose
from tests.mcp.conftest import in_sandbox, install, processes_tagged, write_config

TOKEN = "mcp-test-token-" + "q" * 12


async def _answer(srv: RunningServer, cid: str, request_id: str, decision: str) -> None:
    response = await srv.client.post(
        f"/api/conversations/{cid}/approvals/{request_id}", json={"decision": decision}
    )
    assert response.status_code == 200, response.text


def _finished(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    started = {e["data"]["call_id"]: e["data"] for e in events if e["type"] == "tool.started"}
    return {
        started[e["data"]["call_id"]]["name"]: e["data"]
        for e in events
        if e["type"] == "tool.finished"
    }


async def _wait_until(check: Any, timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # noqa: ASYNC110 (polling the host's /proc)
            await asyncio.sleep(0.05)


async def test_sandbox_server_tools_risk_and_secrets(tmp_path: Path, bundle: bytes) -> None:
    tag = f"wb-{secrets.token_hex(4)}"
    entry = in_sandbox(tag)
    entry["env"] = {**entry["env"], "TOKEN": "${API_TOKEN}"}  # type: ignore[dict-item]
    write_config(tmp_path, {"bench": entry})
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[
                    ("mcp__bench__echo", {"text": "hi"}),
                    ("mcp__bench__secret_digest", {"name": "TOKEN"}),
                    ("mcp__bench__wipe", {"path": "build"}),  # destructive: asked, allowed
                    ("mcp__bench__plain", {"value": 21}),  # unannotated: asked, denied
                    ("mcp__bench__flood", {"chars": 200_000}),  # bounded like any output
                ]
            ),
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider, sandbox_limits=False) as srv:
        put = await srv.client.put("/api/secrets/API_TOKEN", json={"value": TOKEN})
        assert put.status_code == 200, put.text
        cid = await srv.create_conversation()
        await choose(srv, cid, ["API_TOKEN"])  # ${NAME} expands from chosen secrets only
        await install(srv, cid, bundle)
        run = await srv.send(cid, "use the workbench")

        asked = await srv.wait_for(cid, lambda e: e["type"] == "approval.requested")
        assert asked["data"]["tool"] == "mcp__bench__wipe"
        assert asked["data"]["risk"] == "dangerous"
        await _answer(srv, cid, asked["data"]["request_id"], "allow_once")
        second = await srv.wait_for(
            cid, lambda e: e["type"] == "approval.requested" and e["seq"] > asked["seq"]
        )
        assert second["data"]["tool"] == "mcp__bench__plain"
        await _answer(srv, cid, second["data"]["request_id"], "deny")
        finished = await srv.run_finished(cid, run["run_id"], timeout=60)
        assert finished["data"]["status"] == "completed"

        offered = {spec.name: spec for spec in provider.tool_requests[0]}
        assert {"bash", "mcp__bench__echo", "mcp__bench__wipe", "mcp__bench__slow"} <= set(offered)
        echo_schema = offered["mcp__bench__echo"].parameters
        assert echo_schema["properties"]["text"]["type"] == "string"
        assert echo_schema["required"] == ["text"]

        events = await srv.events(cid)
        results = _finished(events)
        assert results["mcp__bench__echo"]["output"] == "echo: hi"
        assert not results["mcp__bench__echo"]["is_error"]
        digest = hashlib.sha256(TOKEN.encode()).hexdigest()
        assert results["mcp__bench__secret_digest"]["output"] == digest  # ${API_TOKEN} expanded
        assert results["mcp__bench__wipe"]["output"] == "wiped build"
        assert results["mcp__bench__plain"]["is_error"]  # denied, never sent to the server
        flood = results["mcp__bench__flood"]
        assert flood["truncated"] and len(flood["output"]) < 20_000
        asked_tools = [e["data"]["tool"] for e in events if e["type"] == "approval.requested"]
        assert asked_tools == ["mcp__bench__wipe", "mcp__bench__plain"]
        kinds = {
            e["data"]["name"]: e["data"]["kind"] for e in events if e["type"] == "tool.started"
        }
        assert kinds["mcp__bench__echo"]["reads"] and not kinds["mcp__bench__echo"]["writes"]
        assert kinds["mcp__bench__wipe"]["destructive"]
        assert TOKEN not in str(events)

        # The server runs inside the sandbox: in another pid namespace than this process.
        [pid] = processes_tagged(tag)
        assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")

        servers = (await srv.client.get("/api/mcp/servers")).json()
        [bench] = servers
        assert bench["name"] == "bench" and bench["status"] == "connected"
        assert bench["transport"] == "sandbox"
        assert "mcp__bench__echo" in [t["name"] for t in bench["tools"]]

        # Hibernation stops the server with every other process of the sandbox.
        assert await srv.services.runtime.sandboxes.hibernate(cid)
        await _wait_until(lambda: not processes_tagged(tag))
        # Deleting the conversation leaves nothing either (the next run had restarted it).
        await install(srv, cid, bundle)
        again = await srv.send(cid, "once more")
        await srv.run_finished(cid, again["run_id"], timeout=60)
        assert processes_tagged(tag)
        assert (await srv.client.delete(f"/api/conversations/{cid}")).status_code == 204
        await _wait_until(lambda: not processes_tagged(tag))


async def test_interrupting_a_call_cancels_it_on_the_server(tmp_path: Path, bundle: bytes) -> None:
    tag = f"wb-{secrets.token_hex(4)}"
    write_config(tmp_path, {"bench": in_sandbox(tag)})
    provider = ScriptedProvider([ScriptedTurn(tool_calls=[("mcp__bench__slow", {"seconds": 60})])])
    async with running_server(tmp_path, lambda: provider, sandbox_limits=False) as srv:
        cid = await srv.create_conversation()
        await install(srv, cid, bundle)
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        run = await srv.send(cid, "wait a minute")
        await srv.wait_for(cid, lambda e: e["type"] == "tool.started")

        async def marker() -> str:
            try:
                return (await sandbox.read_file("slow.marker")).decode()
            except Exception:
                return ""

        async with asyncio.timeout(20):
            while "started" not in await marker():  # noqa: ASYNC110 (a file in the sandbox)
                await asyncio.sleep(0.05)
        response = await srv.client.post(f"/api/conversations/{cid}/interrupt", json={})
        assert response.status_code == 202
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "canceled"
        async with asyncio.timeout(10):  # notifications/cancelled reached the tool
            while "cancelled" not in await marker():  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert "finished" not in await marker()
        assert processes_tagged(tag)  # the server itself lives on for the next run
    # Server shutdown: no MCP server is left running.
    await _wait_until(lambda: not processes_tagged(tag))


async def test_missing_secret_and_crashing_server_are_warnings(
    tmp_path: Path, bundle: bytes
) -> None:
    tag = f"wb-{secrets.token_hex(4)}"
    needs = in_sandbox(tag)
    needs["env"] = {**needs["env"], "KEY": "${NOT_SET_ANYWHERE}"}  # type: ignore[dict-item]
    write_config(
        tmp_path,
        {"needs": needs, "crashy": in_sandbox(tag, "--crash"), "fine": in_sandbox(tag)},
    )
    os.environ["NOT_SET_ANYWHERE"] = "from the server's environment: never used"
    provider = ScriptedProvider([ScriptedTurn(text="Hello.")])
    try:
        async with running_server(tmp_path, lambda: provider, sandbox_limits=False) as srv:
            cid = await srv.create_conversation()
            await install(srv, cid, bundle)
            run = await srv.send(cid, "hi")
            finished = await srv.run_finished(cid, run["run_id"], timeout=60)
            assert finished["data"]["status"] == "completed"
            events = await srv.events(cid)
            warnings = {
                e["data"]["server"]: e["data"]["message"]
                for e in events
                if e["type"] == "mcp.warning"
            }
            assert set(warnings) == {"needs", "crashy"}
            assert "NOT_SET_ANYWHERE" in warnings["needs"]
            assert "exited with code 3" in warnings["crashy"]
            assert "refusing to start" in warnings["crashy"]
            offered = {spec.name for spec in provider.tool_requests[0]}
            assert "mcp__fine__echo" in offered
            assert not [n for n in offered if n.startswith(("mcp__needs__", "mcp__crashy__"))]

            states = {s["name"]: s for s in (await srv.client.get("/api/mcp/servers")).json()}
            assert states["needs"]["status"] == "failed"
            assert "NOT_SET_ANYWHERE" in states["needs"]["error"]
            assert states["crashy"]["status"] == "failed"
            assert states["fine"]["status"] == "connected"

            # The same trouble is not repeated at every run.
            again = await srv.send(cid, "again")
            await srv.run_finished(cid, again["run_id"], timeout=60)
            later = await srv.events(cid, after=events[-1]["seq"])
            assert not [e for e in later if e["type"] == "mcp.warning"]
    finally:
        del os.environ["NOT_SET_ANYWHERE"]
    await _wait_until(lambda: not processes_tagged(tag))


async def test_a_conversation_that_chose_no_secret_gives_its_servers_none(
    tmp_path: Path, bundle: bytes
) -> None:
    """`${NAME}` for a server in the sandbox expands only from the secrets the conversation
    chose: the owner's other secrets never reach an MCP process's environment."""
    tag = f"wb-{secrets.token_hex(4)}"
    entry = in_sandbox(tag)
    entry["env"] = {**entry["env"], "TOKEN": "${API_TOKEN}"}  # type: ignore[dict-item]
    write_config(tmp_path, {"bench": entry})
    provider = ScriptedProvider([ScriptedTurn(text="Hello."), ScriptedTurn(text="Hello.")])
    async with running_server(tmp_path, lambda: provider, sandbox_limits=False) as srv:
        for name, value in (("API_TOKEN", TOKEN), ("OTHER", "other-value-" + "o" * 12)):
            assert (await srv.client.put(f"/api/secrets/{name}", json={"value": value})).is_success
        cid = await srv.create_conversation()
        assert (await choose(srv, cid, ["OTHER"])).status_code == 200  # not API_TOKEN
        await install(srv, cid, bundle)
        run = await srv.send(cid, "hi")
        assert (await srv.run_finished(cid, run["run_id"], timeout=60))["data"]["status"] == (
            "completed"
        )
        warnings = {
            e["data"]["server"]: e["data"]["message"]
            for e in await srv.events(cid)
            if e["type"] == "mcp.warning"
        }
        assert "API_TOKEN" in warnings["bench"] and "choose" in warnings["bench"], warnings
        assert not [s.name for s in provider.tool_requests[0] if s.name.startswith("mcp__")]
        assert not processes_tagged(tag)  # never started with the owner's unchosen secret

        assert (await choose(srv, cid, ["API_TOKEN"])).status_code == 200
        run = await srv.send(cid, "again")
        assert (await srv.run_finished(cid, run["run_id"], timeout=60))["data"]["status"] == (
            "completed"
        )
        assert "mcp__bench__secret_digest" in {s.name for s in provider.tool_requests[1]}


async def test_a_servers_tool_descriptions_reach_the_model_masked(
    tmp_path: Path, bundle: bytes
) -> None:
    """A server in the sandbox that writes the secret it was given into a tool's
    description: the model request carries `****`, never the value."""
    tag = f"wb-{secrets.token_hex(4)}"
    entry = in_sandbox(tag)
    entry["env"] = {**entry["env"], "WORKBENCH_DESCRIBE": "${API_TOKEN}"}  # type: ignore[dict-item]
    write_config(tmp_path, {"bench": entry})
    provider = ScriptedProvider([ScriptedTurn(text="Hello.")])
    async with running_server(tmp_path, lambda: provider, sandbox_limits=False) as srv:
        assert (await srv.client.put("/api/secrets/API_TOKEN", json={"value": TOKEN})).is_success
        cid = await srv.create_conversation()
        assert (await choose(srv, cid, ["API_TOKEN"])).status_code == 200
        await install(srv, cid, bundle)
        run = await srv.send(cid, "hi")
        assert (await srv.run_finished(cid, run["run_id"], timeout=60))["data"]["status"] == (
            "completed"
        )
        offered = {spec.name: spec for spec in provider.tool_requests[0]}
        deploy = offered["mcp__bench__deploy"]
        assert "Deploys with ****" in deploy.description, deploy
        assert TOKEN not in repr(provider.tool_requests) + repr(provider.requests)
        servers = (await srv.client.get("/api/mcp/servers")).text
        assert TOKEN not in servers  # the settings page shows the descriptions too
