"""The main screens, photographed at desktop and phone size in both themes (issue 12).

Written to artifacts/e2e/screen-<size>-<theme>-<n>-<screen>.png by walking one real
conversation: sign-in, the empty state, a run with tool cards, an approval, the Changes,
Files and Terminal tabs, and Settings. Each step also checks the screen shows what it
should, so a broken screen fails here rather than being photographed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from tests.api.harness import ADMIN_PASSWORD
from tests.e2e.conftest import shot
from tests.e2e.tour import DESKTOP, PHONE, SLOW, serve

PAGE = """<!doctype html>
<html><head><title>Bakery</title><link rel="stylesheet" href="style.css"></head>
<body><h1>Crumb &amp; Co.</h1><p>Fresh bread every morning.</p></body></html>
"""
SCRIPT: list[dict[str, object]] = [
    {
        "text": "I'll write the page and its stylesheet, then check them.",
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": "index.html", "content": PAGE}},
            {
                "name": "write_file",
                "arguments": {"path": "style.css", "content": "body { font: 18px serif; }\n"},
            },
        ],
    },
    {"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "ls -la && wc -c *"}}]},
    {"text": "Done: **index.html** and **style.css** are in the workspace."},
    {
        "text": "Removing the old build first.",
        "tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}],
    },
    {"text": "Clean."},
]


async def panel(page: Page, tab: str) -> None:
    """The side panel open at `tab` (on a phone it starts closed)."""
    target = page.get_by_role("tab", name=tab, exact=True)
    if not await target.is_visible():
        await page.get_by_role("button", name="Toggle sandbox panel").click()
    await target.click()


async def close_panel_on_phone(page: Page, phone: bool) -> None:
    if phone and await page.get_by_role("complementary", name="Sandbox").is_visible():
        await page.get_by_role("button", name="Close panel").click()


@pytest.mark.parametrize("theme", ["dark", "light"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_the_main_screens(tmp_path: Path, browser: Browser, size: str, theme: str) -> None:
    phone = size == "phone"
    viewport = PHONE if phone else DESKTOP
    with serve(tmp_path, SCRIPT) as server:
        context = await browser.new_context(
            viewport=viewport,  # type: ignore[arg-type]
            color_scheme=theme,  # type: ignore[arg-type]
        )
        context.set_default_timeout(SLOW)
        page = await context.new_page()
        name = f"screen-{size}-{theme}"
        try:
            await page.goto(server.base)
            await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
            assert await page.evaluate("document.documentElement.dataset.theme") == theme
            await shot(page, f"{name}-1-sign-in")

            await page.get_by_label("Username").fill("admin")
            await page.get_by_label("Password").fill(ADMIN_PASSWORD)
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_role("list", name="Example prompts")).to_be_visible()
            await shot(page, f"{name}-2-empty-state")

            await page.get_by_label("Message").fill("Make a landing page for a bakery")
            await page.get_by_label("Message").press("Enter")
            await expect(page.locator(".run-end")).to_contain_text("Done")
            await close_panel_on_phone(page, phone)
            await expect(page.locator(".tool-card")).to_have_count(3)
            await shot(page, f"{name}-3-conversation")

            await page.get_by_label("Message").fill("Clean the old build")
            await page.get_by_label("Message").press("Enter")
            allow = page.get_by_role("button", name="Allow once")
            await expect(allow).to_be_visible()
            await shot(page, f"{name}-4-approval")
            await allow.click()
            await expect(page.locator(".run-end")).to_have_count(2)

            await panel(page, "Changes")
            await expect(page.get_by_role("complementary", name="Sandbox")).to_contain_text(
                "index.html"
            )
            await shot(page, f"{name}-5-changes")

            await panel(page, "Files")
            tree = page.get_by_role("tree")
            await tree.get_by_role("button", name="index.html").first.click()
            await expect(page.locator(".viewer")).to_contain_text("Crumb")
            await shot(page, f"{name}-6-files")

            await panel(page, "Terminal")
            view = page.locator(".terminal-view")
            await expect(view).to_have_attribute("data-link", "open")
            await page.locator(".terminal-host").click()
            await page.keyboard.type("ls\n")
            await expect(page.locator(".xterm-rows")).to_contain_text("style.css")
            await shot(page, f"{name}-7-terminal")

            await close_panel_on_phone(page, phone)
            if phone:
                await page.get_by_role("button", name="Conversations").click()
            await page.get_by_role("button", name="Settings").click()
            await expect(page.get_by_role("dialog")).to_be_visible()
            await shot(page, f"{name}-8-settings")
        finally:
            await context.close()
