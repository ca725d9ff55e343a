"""MCP servers reached from the host: Streamable HTTP through the URL policy, a stdio server
an administrator put on the host, and a published server (from PyPI) in the sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import free_port, running_server
from tests.api.test_secrets import choose
from tests.fakes.served import served
from tests.mcp.conftest import BUNDLE_DIR, WORKBENCH, install, processes_tagged, write_config
from tests.mcp.workbench import build

TOKEN = "mcp-http-token-" + "z" * 12


@contextlib.asynccontextmanager
async def http_server(marker_dir: Path) -> AsyncIterator[tuple[str, list[dict[bytes, bytes]]]]:
    """The workbench over Streamable HTTP on 127.0.0.1; yields its URL and the headers of
    every request it got."""
    inner = build(str(marker_dir)).streamable_http_app()
    seen: list[dict[bytes, bytes]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(dict(scope["headers"]))
        await inner(scope, receive, send)

    port = free_port()
    async with served(app, port):
        yield f"http://127.0.0.1:{port}/mcp", seen


def _warnings(events: list[dict[str, Any]]) -> dict[str, str]:
    return {e["data"]["server"]: e["data"]["message"] for e in events if e["type"] == "mcp.warning"}


def _outputs(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["output"] for e in events if e["type"] == "tool.finished"]


async def test_http_server_needs_an_explicit_entry_for_loopback(tmp_path: Path) -> None:
    async with http_server(tmp_path) as (url, seen):
        write_config(
            tmp_path / "data",
            {"web": {"url": url, "headers": {"Authorization": "Bearer ${API_TOKEN}"}}},
        )
        provider = ScriptedProvider([ScriptedTurn(text="Hi.")])
        async with running_server(tmp_path / "data", lambda: provider) as srv:
            await srv.client.put("/api/secrets/API_TOKEN", json={"value": TOKEN})
            cid = await srv.create_conversation()
            run = await srv.send(cid, "hi")
            assert (await srv.run_finished(cid, run["run_id"]))["data"]["status"] == "completed"
            warning = _warnings(await srv.events(cid))["web"]
            assert "127.0.0.1" in warning and "BURROW_MCP_ALLOW_URLS" in warning
            assert not [s.name for s in provider.tool_requests[0] if s.name.startswith("mcp__")]
            assert not seen  # refused before any byte was sent

        provider = ScriptedProvider(
            [
                ScriptedTurn(tool_calls=[("mcp__web__echo", {"text": "over http"})]),
                ScriptedTurn(text="Done."),
            ]
        )
        async with running_server(tmp_path / "data", lambda: provider, mcp_allow_urls=url) as srv:
            await srv.client.put("/api/secrets/API_TOKEN", json={"value": TOKEN})
            cid = await srv.create_conversation()
            await choose(srv, cid, ["API_TOKEN"])
            run = await srv.send(cid, "hi")
            assert (await srv.run_finished(cid, run["run_id"]))["data"]["status"] == "completed"
            events = await srv.events(cid)
            assert _outputs(events) == ["echo: over http"]
            assert seen[0][b"authorization"] == f"Bearer {TOKEN}".encode()
            [web] = (await srv.client.get("/api/mcp/servers")).json()
            assert web["status"] == "connected" and web["transport"] == "http"


async def test_a_servers_resources_are_named_to_the_model_and_read_by_uri(
    tmp_path: Path,
) -> None:
    """A server with resources gets `mcp__<server>__read_resource`: its description names
    them, it runs unasked in ask mode (it only reads), text comes back as it is, a blob is
    described, and an unknown URI is the server's error, not a broken connection."""
    async with http_server(tmp_path) as (url, _):
        write_config(tmp_path / "data", {"web": {"url": url}})
        reader = "mcp__web__read_resource"
        provider = ScriptedProvider(
            [
                ScriptedTurn(tool_calls=[(reader, {"uri": "note://greeting"})]),
                ScriptedTurn(tool_calls=[(reader, {"uri": "note://logo"})]),
                ScriptedTurn(tool_calls=[(reader, {"uri": "note://nowhere"})]),
                ScriptedTurn(tool_calls=[(reader, {})]),
                ScriptedTurn(tool_calls=[("mcp__web__echo", {"text": "still here"})]),
                ScriptedTurn(text="Done."),
            ]
        )
        async with running_server(tmp_path / "data", lambda: provider, mcp_allow_urls=url) as srv:
            cid = await srv.create_conversation()
            run = await srv.send(cid, "read")
            assert (await srv.run_finished(cid, run["run_id"]))["data"]["status"] == "completed"
            events = await srv.events(cid)
            assert not [e for e in events if e["type"] == "approval.requested"]
            [spec] = [s for s in provider.tool_requests[0] if s.name == reader]
            assert "note://greeting" in spec.description and "A short greeting" in spec.description
            assert "note://logo" in spec.description
            greeting, logo, nowhere, no_uri, echo = _outputs(events)
            assert greeting == "hello from a resource"
            assert logo == "[image/png resource note://logo, 64 bytes]"
            assert "note://nowhere" in nowhere and "MCP server 'web'" in nowhere
            assert "needs `uri`" in no_uri
            assert echo == "echo: still here"
            [web] = (await srv.client.get("/api/mcp/servers")).json()
            assert reader in [t["name"] for t in web["tools"]]


async def test_burrows_own_port_and_names_for_loopback_are_refused(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Hi.")])
    async with running_server(tmp_path, lambda: provider) as srv:
        port = srv.base_url.rsplit(":", 1)[1]
        write_config(
            tmp_path,
            {
                "self": {"url": f"{srv.base_url}/api/health"},
                "named": {"url": f"http://localhost:{free_port()}/mcp"},
                "metadata": {"url": "http://169.254.169.254/latest/meta-data"},
            },
        )
        cid = await srv.create_conversation()
        run = await srv.send(cid, "hi")
        assert (await srv.run_finished(cid, run["run_id"]))["data"]["status"] == "completed"
        warnings = _warnings(await srv.events(cid))
        assert f"own port {port}" in warnings["self"]
        assert "not a public address" in warnings["named"]
        assert "169.254.169.254" in warnings["metadata"]


async def test_host_server_gets_no_burrow_environment_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = f"wb-{secrets.token_hex(4)}"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-never-passed-on")
    write_config(
        tmp_path,
        {
            "local": {
                "command": sys.executable,
                "args": [str(WORKBENCH), "--tag", tag],
                "env": {"GIVEN": "${API_TOKEN}"},
                "host": True,
            }
        },
    )
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[
                    ("mcp__local__secret_digest", {"name": "OPENAI_API_KEY"}),
                    ("mcp__local__secret_digest", {"name": "GIVEN"}),
                    ("mcp__local__echo", {}),  # no `text`: the server's error, shown as one
                ]
            ),
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        await srv.client.put("/api/secrets/API_TOKEN", json={"value": TOKEN})
        cid = await srv.create_conversation()
        await choose(srv, cid, ["API_TOKEN"])
        run = await srv.send(cid, "hi")
        assert (await srv.run_finished(cid, run["run_id"]))["data"]["status"] == "completed"
        events = await srv.events(cid)
        outputs = _outputs(events)
        assert outputs[:2] == [
            hashlib.sha256(b"").hexdigest(),  # Burrow's own environment is not passed on
            hashlib.sha256(TOKEN.encode()).hexdigest(),
        ]
        errors = [e["data"]["is_error"] for e in events if e["type"] == "tool.finished"]
        assert errors == [False, False, True] and "text" in outputs[2]
        [pid] = processes_tagged(tag)
        assert os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
    # Server shutdown stopped it.
    async with asyncio.timeout(10):
        while processes_tagged(tag):  # noqa: ASYNC110 (polling the host's /proc)
            await asyncio.sleep(0.05)


async def test_published_server_from_pypi_in_the_sandbox(tmp_path: Path, bundle: bytes) -> None:
    write_config(
        tmp_path,
        {
            "time": {
                "command": "python3",
                "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                "env": {"PYTHONPATH": f"{BUNDLE_DIR}/sdk"},
            }
        },
    )
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("mcp__time__get_current_time", {"timezone": "UTC"})]),
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider, sandbox_limits=False) as srv:
        created = await srv.client.post(
            "/api/conversations", json={"title": "time", "approval_mode": "auto"}
        )
        cid = created.json()["id"]
        await install(srv, cid, bundle)
        run = await srv.send(cid, "what time is it")
        assert (await srv.run_finished(cid, run["run_id"], 60))["data"]["status"] == "completed"
        events = await srv.events(cid)
        assert not _warnings(events)
        [output] = _outputs(events)
        assert '"timezone": "UTC"' in output or "UTC" in output
        names = {spec.name for spec in provider.tool_requests[0]}
        assert {"mcp__time__get_current_time", "mcp__time__convert_time"} <= names


async def test_an_idle_conversations_host_server_is_stopped(tmp_path: Path) -> None:
    """A conversation without a run for the idle period keeps no host process (its sandbox
    would hibernate too); its next run starts the server again."""
    tag = f"wb-{secrets.token_hex(4)}"
    entry = {"command": sys.executable, "args": [str(WORKBENCH), "--tag", tag], "host": True}
    write_config(tmp_path, {"local": entry})
    provider = ScriptedProvider([])
    async with running_server(
        tmp_path, lambda: provider, sandbox_idle_hibernate_seconds=1.0
    ) as srv:
        first = await srv.create_conversation()
        run = await srv.send(first, "hi")
        await srv.run_finished(first, run["run_id"], 60)
        assert len(processes_tagged(tag)) == 1
        await asyncio.sleep(1.5)
        second = await srv.create_conversation()
        run = await srv.send(second, "hi")
        await srv.run_finished(second, run["run_id"], 60)
        async with asyncio.timeout(10):  # the first one's server stopped, the second's runs
            while len(processes_tagged(tag)) != 1:  # noqa: ASYNC110 (the host's /proc)
                await asyncio.sleep(0.05)
        states = {s["name"]: s for s in (await srv.client.get("/api/mcp/servers")).json()}
        assert states["local"]["status"] == "connected"


async def test_dot_segments_cannot_climb_out_of_a_listed_prefix(tmp_path: Path) -> None:
    """`BURROW_MCP_ALLOW_URLS=<server>/allowed/` admits that path only: `/allowed/../mcp`
    (the client resolves it to `/mcp`) and `/allowed/%2e%2e/mcp` are refused before any
    byte is sent, with the chosen secret in their headers."""
    async with http_server(tmp_path) as (url, seen):
        origin = url.removesuffix("/mcp")
        headers = {"Authorization": "Bearer ${API_TOKEN}"}
        write_config(
            tmp_path / "data",
            {
                "plain": {"url": f"{origin}/allowed/../mcp", "headers": headers},
                "encoded": {"url": f"{origin}/allowed/%2e%2e/mcp", "headers": headers},
            },
        )
        provider = ScriptedProvider([ScriptedTurn(text="Hi.")])
        async with running_server(
            tmp_path / "data", lambda: provider, mcp_allow_urls=f"{origin}/allowed/"
        ) as srv:
            await srv.client.put("/api/secrets/API_TOKEN", json={"value": TOKEN})
            cid = await srv.create_conversation()
            await choose(srv, cid, ["API_TOKEN"])
            run = await srv.send(cid, "hi")
            assert (await srv.run_finished(cid, run["run_id"]))["data"]["status"] == "completed"
            warnings = _warnings(await srv.events(cid))
        assert set(warnings) == {"plain", "encoded"}
        assert all("'..' segment" in w for w in warnings.values()), warnings
        assert not [s.name for s in provider.tool_requests[0] if s.name.startswith("mcp__")]
        assert not seen  # refused before any byte was sent


async def test_http_headers_get_only_chosen_secrets_and_only_at_listed_urls(
    tmp_path: Path,
) -> None:
    """mcp.json is a web administrator's to edit: `${NAME}` in an HTTP server's headers is
    filled only from the secrets the conversation chose, and only for a URL listed in
    BURROW_MCP_ALLOW_URLS (the operator's); a public URL gets no secret at all."""
    async with http_server(tmp_path) as (url, seen):
        public = "https://203.0.113.7/mcp"  # TEST-NET-3: never contacted either way
        write_config(
            tmp_path / "data",
            {
                "web": {"url": url, "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
                "public": {"url": public, "headers": {"X-Api-Key": "${API_TOKEN}"}},
            },
        )
        provider = ScriptedProvider([ScriptedTurn(text="Hi."), ScriptedTurn(text="Hi.")])
        async with running_server(tmp_path / "data", lambda: provider, mcp_allow_urls=url) as srv:
            await srv.client.put("/api/secrets/API_TOKEN", json={"value": TOKEN})
            chose_none = await srv.create_conversation("chose none")
            run = await srv.send(chose_none, "hi")
            assert (await srv.run_finished(chose_none, run["run_id"]))["data"]["status"] == (
                "completed"
            )
            warnings = _warnings(await srv.events(chose_none))
            assert "API_TOKEN" in warnings["web"] and "choose" in warnings["web"], warnings
            assert "sent only to URLs listed in BURROW_MCP_ALLOW_URLS" in warnings["public"]
            assert public in warnings["public"]
            assert not seen  # the listed server got nothing from a conversation that chose none

            chose_it = await srv.create_conversation("chose it")
            assert (await choose(srv, chose_it, ["API_TOKEN"])).status_code == 200
            run = await srv.send(chose_it, "hi")
            assert (await srv.run_finished(chose_it, run["run_id"]))["data"]["status"] == (
                "completed"
            )
            warnings = _warnings(await srv.events(chose_it))
            assert set(warnings) == {"public"}, warnings  # chosen, still not for a public URL
            assert "BURROW_MCP_ALLOW_URLS" in warnings["public"]
            assert seen and seen[0][b"authorization"] == f"Bearer {TOKEN}".encode()
            events = await srv.events(chose_it)
            assert TOKEN not in str(events)
