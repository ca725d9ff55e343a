"""The sandbox panel on a phone covers the conversation: every tab and ✕ are in reach, and
Esc and Back close it (and Back then leaves nothing behind), as they close a dialog."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Browser, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server
from tests.e2e.tour import PHONE, base_of, eventually, harness, sign_in, unobstructed


async def test_the_panel_on_a_phone_has_its_close_in_reach_and_closes_on_esc_and_back(
    tmp_path: Path, browser: Browser
) -> None:
    async with harness(tmp_path, browser, [ScriptedTurn(text="Hi.")], PHONE) as (srv, page):
        cid = await srv.create_conversation("phone")
        await sign_in(page, base_of(srv), f"/c/{cid}")
        toggle = page.get_by_role("button", name="Toggle sandbox panel")
        panel = page.get_by_role("complementary", name="Sandbox")
        await expect(panel).to_have_count(0)  # closed on a narrow window

        await toggle.click()
        await expect(panel).to_be_visible()
        close = panel.get_by_role("button", name="Close panel")
        # ✕ inside the 390 px screen and on top; every tab reachable (the row scrolls).
        await eventually(lambda: unobstructed(page, close), "✕ is on screen")
        box = await close.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"], box
        for name in ("Preview", "Terminal", "Files", "Changes"):
            tab = panel.get_by_role("tab", name=re.compile(name))
            await tab.scroll_into_view_if_needed()
            await tab.click()
            await expect(tab).to_have_attribute("aria-selected", "true")
        await close.click()
        await expect(panel).to_have_count(0)

        # Esc closes it; the run's Esc (stop) is not what it does.
        await toggle.click()
        await expect(panel).to_be_visible()
        await page.keyboard.press("Escape")
        await expect(panel).to_have_count(0)

        # Back closes it and stays in the conversation ...
        await toggle.click()
        await expect(panel).to_be_visible()
        await page.go_back()
        await expect(panel).to_have_count(0)
        assert page.url.endswith(f"/c/{cid}")
        await expect(page.get_by_role("heading", name="phone")).to_be_visible()
        # ... and a panel closed by ✕ left no entry for Back to eat: Back leaves.
        await toggle.click()
        await close.click()
        await page.go_back()
        await expect(page).not_to_have_url(re.compile(f"/c/{cid}$"))


async def test_a_touch_screen_gets_no_keyboard_hints(tmp_path: Path, browser: Browser) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Hi.")])
    async with running_server(tmp_path, lambda: provider) as srv:
        touch = await browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)  # type: ignore[arg-type]
        desk = await browser.new_context(viewport=PHONE)  # type: ignore[arg-type]
        try:
            for context, shown in ((touch, False), (desk, True)):
                page = await context.new_page()
                await sign_in(page, base_of(srv))
                hint = page.get_by_text(re.compile("Shift\\+Enter for a new line"))
                await expect(hint).to_be_visible() if shown else await expect(hint).to_be_hidden()
        finally:
            await touch.close()
            await desk.close()
