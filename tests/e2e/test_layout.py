"""The app fits its window: no page scroll on a desktop or a phone, with a conversation
open and the panel's terminal focused (the page itself never scrolls; its parts do)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from burrow.llm.base import ScriptedTurn
from tests.e2e.tour import DESKTOP, PHONE, base_of, harness, sign_in


async def overflow(page: Page) -> int:
    """How many pixels the page is taller than its window."""
    return int(await page.evaluate("document.scrollingElement.scrollHeight - window.innerHeight"))


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_the_app_is_never_taller_than_its_window(
    tmp_path: Path, browser: Browser, viewport: dict[str, int]
) -> None:
    turns = [ScriptedTurn(text="Hello.")]
    async with harness(tmp_path, browser, turns, viewport) as (srv, page):
        cid = await srv.create_conversation("a conversation with a rather long title to wrap")
        await srv.run_finished(cid, (await srv.send(cid, "hi"))["run_id"])
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await expect(page.locator(".run-end")).to_be_visible()
        assert await overflow(page) <= 0
        if viewport is PHONE:
            await page.get_by_role("button", name="Toggle sandbox panel").click()
        await page.get_by_role("tab", name="Terminal").click()
        await expect(page.locator(".xterm")).to_be_visible()
        await page.locator(".xterm").click()
        await page.wait_for_timeout(300)
        assert await overflow(page) <= 0
        assert await page.evaluate("window.scrollY") == 0
