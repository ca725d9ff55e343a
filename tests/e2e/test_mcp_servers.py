"""MCP servers in a real browser: settings lists each server of mcp.json with its status
and its tools; a server left out is a warning in the conversation's timeline."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving
from tests.mcp.conftest import WORKBENCH, write_config


async def test_settings_show_servers_tools_and_warnings(tmp_path: Path, page: Page) -> None:
    write_config(
        tmp_path,
        {
            "bench": {"command": sys.executable, "args": [str(WORKBENCH)], "host": True},
            "keyed": {"url": "https://mcp.example.com/mcp", "headers": {"X": "${MCP_KEY}"}},
        },
    )
    provider = ScriptedProvider([ScriptedTurn(text="Tools are ready.")])
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("with mcp")
        run = await srv.send(cid, "hello")
        await srv.run_finished(cid, run["run_id"], timeout=60)

        await open_app(page, srv, f"/c/{cid}")
        await expect(page.get_by_text(re.compile(r"MCP server keyed: .*MCP_KEY"))).to_be_visible()

        await page.get_by_role("button", name=re.compile("Settings")).click()
        dialog = page.get_by_role("dialog")
        servers = dialog.get_by_role("list", name="MCP servers")
        bench = servers.locator("li[data-status=connected]").filter(has_text="bench")
        await expect(bench.get_by_text("connected", exact=True)).to_be_visible()
        tools = dialog.get_by_role("list", name="Tools of bench")
        await expect(tools.get_by_text("mcp__bench__echo")).to_be_visible()
        wipe = tools.get_by_role("listitem").filter(has_text="mcp__bench__wipe")
        await expect(wipe).to_contain_text("asks first: may destroy")
        echo = tools.get_by_role("listitem").filter(has_text="mcp__bench__echo")
        await expect(echo).to_contain_text("read-only")
        keyed = servers.locator("li[data-status=failed]").filter(has_text="keyed")
        await expect(keyed).to_contain_text("MCP_KEY")
        await shot(page, "mcp-servers-settings")

        # An administrator edits mcp.json here; a host server cannot be added from the page.
        await dialog.get_by_role("button", name="Edit mcp.json").click()
        editor = dialog.get_by_label("mcp.json")
        document = json.loads(await editor.input_value())
        assert set(document["mcpServers"]) == {"bench", "keyed"}
        document["mcpServers"]["extra"] = {"command": "sh", "args": ["-c", "id"], "host": True}
        await editor.fill(json.dumps(document))
        await dialog.get_by_role("button", name="Save mcp.json").click()
        await expect(dialog.get_by_role("alert")).to_contain_text("only in mcp.json")
        document["mcpServers"]["extra"] = {"command": "python3", "args": ["-m", "server"]}
        await editor.fill(json.dumps(document))
        await dialog.get_by_role("button", name="Save mcp.json").click()
        extra = servers.get_by_role("listitem").filter(has_text="extra").first
        await expect(extra).to_contain_text("starts at a conversation's next run")
        assert '"extra"' in (tmp_path / "mcp.json").read_text()
