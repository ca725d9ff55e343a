"""A profile is chosen on the home screen, before the first message: the conversation is
created with it, and the approval mode and model shown are the profile's."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.test_workspace import open_app, serving


async def test_a_profile_chosen_before_the_first_message_is_the_conversations(
    tmp_path: Path, page: Page
) -> None:
    async with serving(tmp_path, page, ScriptedProvider([ScriptedTurn(text="Read.")])) as srv:
        made = await srv.client.put(
            "/api/profiles/reviewer",
            json={"system_prompt": "Review only.", "approval_mode": "read_only"},
        )
        assert made.status_code in (200, 201), made.text
        await open_app(page, srv)
        start = page.get_by_role("group", name="Start with")
        chooser = start.get_by_label("Profile for this conversation")
        await expect(chooser.locator("option")).to_have_text(["Default", "reviewer"])
        await chooser.select_option("reviewer")
        # What will be sent is what is shown: the profile's approval mode.
        await expect(start.get_by_label("Approval mode for this conversation")).to_have_value(
            "read_only"
        )
        await page.get_by_label("Message").fill("look at it")
        await page.get_by_label("Message").press("Enter")
        await expect(page).to_have_url(re.compile(r"/c/c_"))
        # Its run ends before the test does: a sandbox still booting at the server's
        # shutdown once held the test's event loop past its timeout.
        await expect(page.locator(".run-end")).to_contain_text("Done")
        cid = page.url.rsplit("/", 1)[1]
        created = (await srv.client.get(f"/api/conversations/{cid}")).json()
        assert created["profile"] == "reviewer" and created["approval_mode"] == "read_only"
        # The next new conversation starts from the default again.
        await page.goto(srv.base_url.replace("127.0.0.1", "localhost") + "/")
        await expect(page.get_by_label("Profile for this conversation")).to_have_value("")
