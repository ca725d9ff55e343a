"""The header's Secrets popover behaves as a popover: a click elsewhere and Esc close it, and
the egress warning it can cause is never under it (issue 26)."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app
from tests.e2e.tour import eventually, unobstructed


async def test_the_secrets_popover_closes_on_outside_click_and_esc_and_shows_the_warning(
    tmp_path: Path, page: Page
) -> None:
    provider = ScriptedProvider([])
    async with running_server(tmp_path, lambda: provider, sandbox_network="egress") as srv:
        await srv.client.put("/api/secrets/DEPLOY_TOKEN", json={"value": "v-123456789"})
        cid = await srv.create_conversation("popover")
        await open_app(page, srv, f"/c/{cid}")
        summary = page.get_by_text("Secrets", exact=True)
        menu = page.get_by_role("group", name="Secrets for this conversation")

        await summary.click()
        await expect(menu).to_be_visible()
        await page.locator(".timeline").click(position={"x": 40, "y": 200})
        await expect(menu).to_be_hidden()

        await summary.click()
        await expect(menu).to_be_visible()
        await page.keyboard.press("Escape")
        await expect(menu).to_be_hidden()

        # Choosing a secret with open egress warns, and the warning is readable, on top.
        await summary.click()
        await menu.get_by_label("DEPLOY_TOKEN").check()
        warning = page.get_by_role("alert").filter(has_text="can reach any internet host")
        await expect(warning).to_have_count(1)
        await eventually(lambda: unobstructed(page, warning), "the warning is not covered")
        await shot(page, "secrets-popover-warning")
        await page.keyboard.press("Escape")
        await expect(menu).to_be_hidden()
        await expect(warning).to_have_count(1)  # below the header again, now nothing covers it
        await eventually(lambda: unobstructed(page, warning), "the bar is not covered")
        await page.context.close()
