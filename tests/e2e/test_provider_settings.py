"""The settings dialog tests an Anthropic key against the (fake) Messages API without saving
it, stores it on Save and never shows it back."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving
from tests.fakes.anthropic_server import FakeAnthropicServer

KEY = "sk-ant-browser-0123456789abcd"


async def test_anthropic_key_is_tested_unsaved_then_saved_and_hidden(
    tmp_path: Path, page: Page
) -> None:
    with FakeAnthropicServer(api_key=KEY, models=["claude-test"]) as fake:
        async with serving(tmp_path, page, ScriptedProvider([])) as srv:
            await open_app(page, srv)
            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            dialog = page.get_by_role("dialog", name="Model")
            await dialog.get_by_label("Anthropic key").fill(KEY)
            await dialog.get_by_label("Anthropic endpoint").fill(fake.base_url)
            await dialog.get_by_role("button", name="Test the Anthropic key").click()
            # The first test imports the Anthropic SDK on the server: allow for a slow machine.
            await expect(dialog.get_by_role("status")).to_have_text(
                "✓ anthropic: the key works; 1 model offered.", timeout=20_000
            )
            await shot(page, "13-anthropic-settings")
            # A test never saves: Cancel leaves no key behind.
            await dialog.get_by_role("button", name="Cancel").click()
            [_, anthropic] = (await srv.client.get("/api/settings/providers")).json()
            assert anthropic["api_key_set"] is False and anthropic["base_url"] is None
            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            await dialog.get_by_label("Anthropic key").fill(KEY)
            await dialog.get_by_label("Anthropic endpoint").fill(fake.base_url)
            await dialog.get_by_label("Model name").fill("anthropic:claude-test")
            await dialog.get_by_role("button", name="Save").click()
            await expect(dialog).to_have_count(0)
            assert (await srv.client.get("/api/health")).json()["model"] == "anthropic:claude-test"

            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            key = page.get_by_role("dialog", name="Model").get_by_label("Anthropic key")
            await expect(key).to_have_value("")  # never shown back
            placeholder = await key.get_attribute("placeholder") or ""
            assert placeholder == "set (…abcd) — type to replace"
