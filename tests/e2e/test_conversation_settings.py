"""The conversation's model in the header, in a real browser against a real server."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.scripted import ScriptedProvider
from tests.e2e.test_workspace import open_app, serving


async def test_the_model_select_shows_and_changes_the_conversations_model(
    tmp_path: Path, page: Page
) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        made = await srv.client.post("/api/conversations", json={"model": "demo"})
        cid = made.json()["id"]
        await open_app(page, srv, f"/c/{cid}")
        select = page.get_by_label("Model", exact=True)
        await expect(select).to_have_value("demo")
        await select.select_option("")
        await expect(page.locator(".notice", has_text="from the next run")).to_be_visible()
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["model"] is None
        await expect(select).to_have_value("")
