"""Browser fixtures: Debian's Chromium driven by Playwright, against the built web UI.

Locally a missing Chromium or an unbuilt web/dist skips these tests; in CI it fails them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

from burrow.api.web import DIST
from tests.conftest import unavailable

CHROMIUM = Path(os.environ.get("BURROW_TEST_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "e2e"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]


def require_browser_and_build() -> None:
    if not CHROMIUM.exists():
        unavailable(f"Chromium at {CHROMIUM} (make chromium installs Debian's)")
    if not (DIST / "index.html").is_file():
        unavailable(f"the built web UI in {DIST} (make web builds it)")


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    require_browser_and_build()
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
def csp_violations() -> list[str]:
    """What the browser refused under a Content-Security-Policy, as its console said.

    The app's normal flows must cause none (a test that provokes one on purpose takes its
    entries out of this list)."""
    return []


@pytest.fixture
async def page(browser: Browser, csp_violations: list[str]) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(15_000)
    context.on(
        "console",
        lambda message: (
            csp_violations.append(message.text)
            if "Content Security Policy" in message.text
            else None
        ),
    )
    opened = await context.new_page()
    try:
        yield opened
    finally:
        await context.close()
    assert csp_violations == [], "the app broke its own Content-Security-Policy"


async def shot(page: Page, name: str) -> None:
    """A screenshot of the current state, kept as a test artifact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
