"""Environments in a real browser: an administrator defines one in Settings and watches it
build; the home screen then offers it, and the conversation started on it has what the
setup made."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.test_checkpoints import shell
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving


async def test_define_an_environment_watch_it_build_and_start_a_conversation_on_it(
    tmp_path: Path, page: Page
) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Ready.")])
    async with serving(tmp_path, page, provider) as srv:
        await open_app(page, srv)
        await page.get_by_role("button", name=re.compile("Settings")).click()
        dialog = page.get_by_role("dialog")
        section = dialog.locator("section.environments")
        await expect(section.get_by_text("No environments are defined.")).to_be_visible()
        await section.get_by_label("Environment name").fill("tools")
        await section.get_by_label("Setup script").fill("echo from-setup > /etc/from-env")
        await section.get_by_role("button", name="Define and build").click()
        listed = section.get_by_role("list", name="Environments").get_by_role("listitem")
        await expect(listed.filter(has_text="tools")).to_be_visible()
        for _ in range(60):  # the list shows the build as it was when loaded: refresh
            if await listed.filter(has_text="tools").get_attribute("data-status") == "ready":
                break
            await section.get_by_role("button", name="Refresh").click()
            await page.wait_for_timeout(500)
        await expect(listed.filter(has_text="tools")).to_have_attribute("data-status", "ready")
        await shot(page, "environments-settings")
        await page.keyboard.press("Escape")

        await page.reload()
        choice = page.get_by_role("group", name="Start with").get_by_label(
            "Environment for this conversation"
        )
        await choice.select_option("tools")
        await page.get_by_label("Message").fill("hi")
        await page.get_by_label("Message").press("Enter")
        await expect(page).to_have_url(re.compile(r"/c/c_"))
        cid = page.url.rsplit("/", 1)[1]
        created = (await srv.client.get(f"/api/conversations/{cid}")).json()
        assert created["environment"] == "tools"
        assert await shell(srv, cid, "cat /etc/from-env") == "from-setup\n"
        # The repository form offers it too.
        await page.get_by_text("From a git repository…").click()
        picker = page.get_by_label("Environment", exact=True)
        await expect(picker.locator("option", has_text="tools")).to_have_count(1)
