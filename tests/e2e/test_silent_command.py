"""A running command that prints nothing for a while says so on its card, counted from its
last output; one that prints keeps the count at bay, and the note goes when it ends."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving

COMMAND = "echo started; while [ ! -e go ]; do sleep 0.2; done; echo done"


async def test_a_quiet_command_says_how_long_it_has_been_quiet(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=[("bash", {"command": COMMAND})]), ScriptedTurn(text="Over.")]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("quiet")
        await srv.client.patch(f"/api/conversations/{cid}", json={"approval_mode": "auto"})
        await page.clock.install()
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("wait")
        await page.get_by_role("button", name="Send", exact=True).click()
        card = page.locator(".tool-card")
        await expect(card.locator(".tool-output")).to_contain_text("started")
        await page.clock.fast_forward("00:10")
        await expect(card.get_by_role("status")).to_have_count(0)
        await page.clock.fast_forward("00:25")
        await expect(card.get_by_role("status")).to_have_text("no output for 35 s")
        await shot(page, "silent-command")

        sandbox = await srv.services.runtime.sandboxes.get(cid)
        await sandbox.write_file("go", b"")
        await expect(page.locator(".assistant").filter(has_text="Over.")).to_be_visible()
        await expect(card.get_by_role("status")).to_have_count(0)
        await expect(card).to_have_attribute("data-state", "ok")
