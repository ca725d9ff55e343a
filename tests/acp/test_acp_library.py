"""`burrow acp` driven by a published ACP client library (PyPI `agent-client-protocol`,
imported as `acp`): its typed models parse every message Burrow's agent sends."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from acp import spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
)

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server


class Editor:
    """The client side: records updates, allows what it is asked."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.asked: list[Any] = []
        self.second_call = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        pass

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.asked.append(tool_call)
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        if sum(isinstance(u, ToolCallStart) for u in self.updates) >= 2:
            self.second_call.set()


async def test_a_published_client_drives_a_whole_conversation(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": "rm -rf build && echo cleaned"})]),
            ScriptedTurn(text="All clean."),
            ScriptedTurn(tool_calls=[("bash", {"command": "sleep 60"})]),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        made = await srv.client.post("/api/auth/tokens", json={"name": "acp"})
        env = {**os.environ, "BURROW_TOKEN": made.json()["token"]}
        editor = Editor()
        command = ("-m", "burrow.cli", "acp", "--server", srv.base_url)
        async with spawn_agent_process(editor, sys.executable, *command, env=env) as (conn, _):
            init = await conn.initialize(protocol_version=1)
            assert init.protocol_version == 1 and init.agent_capabilities is not None
            assert init.agent_capabilities.load_session is True
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            answer = await conn.prompt(session_id=sid, prompt=[text_block("clean up")])
            assert answer.stop_reason == "end_turn"
            [asked] = editor.asked
            assert "rm -rf build" in (asked.title or "")
            starts = [u for u in editor.updates if isinstance(u, ToolCallStart)]
            assert [s.kind for s in starts] == ["execute"]
            done = [u for u in editor.updates if isinstance(u, ToolCallProgress)]
            assert done[-1].status == "completed"
            said = "".join(
                u.content.text for u in editor.updates if isinstance(u, AgentMessageChunk)
            )
            assert said == "All clean."

            await conn.set_session_mode(session_id=sid, mode_id="auto")
            going = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("wait")]))
            await asyncio.wait_for(editor.second_call.wait(), 30)
            await conn.cancel(session_id=sid)
            assert (await asyncio.wait_for(going, 30)).stop_reason == "cancelled"

            before = len(editor.updates)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            replayed = editor.updates[before:]
            assert sum(isinstance(u, ToolCallStart) for u in replayed) == 2
