"""The Changes tab says what checkpoints take: each one's size in the list, and the total."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.test_workspace import open_app, serving

ADD = "head -c 2097152 /dev/urandom > two.bin"


async def test_the_changes_tab_shows_checkpoint_sizes(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": ADD})]),
            ScriptedTurn(text="Added."),
            ScriptedTurn(text="Again."),
        ],
        turn_from_context=True,
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("sizes")
        await open_app(page, srv, f"/c/{cid}")
        # Two runs, two checkpoints: the second message waits for the first run to end
        # (sent during it, it would steer that run instead).
        for runs, text in enumerate(("add", "again"), start=1):
            await page.get_by_label("Message").fill(text)
            await page.get_by_role("button", name="Send", exact=True).click()
            await expect(page.locator(".run-end")).to_have_count(runs, timeout=60_000)
        await page.get_by_role("tab", name="Changes").click()
        since = page.get_by_label("Since checkpoint")
        options = since.locator("option")
        await expect(options).to_have_count(2)
        await expect(options.nth(0)).to_contain_text("· 0 B")
        await expect(options.nth(1)).to_contain_text("· 2.0 MB")
        await expect(page.get_by_test_id("checkpoints-size")).to_have_text(
            "2 checkpoints · 2.0 MB stored (the oldest are pruned)"
        )
