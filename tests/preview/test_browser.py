"""The preview as the user sees it: an iframe of the app, in a real Chromium.

The app and `*.preview.localhost` are different sites, so this is where the cookie's
attributes are proven: a Lax cookie would never reach the preview inside the iframe.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from playwright.async_api import async_playwright

from tests.conftest import unavailable
from tests.preview.harness import Preview

CHROMIUM = Path(os.environ.get("BURROW_TEST_CHROMIUM", "/usr/bin/chromium"))
HAVE_CHROMIUM = CHROMIUM.exists()
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


async def test_the_signed_link_opens_the_preview_inside_the_apps_iframe(preview: Preview) -> None:
    if not HAVE_CHROMIUM:
        unavailable(f"Chromium at {CHROMIUM}")
    sandbox = await preview.sandbox()
    await sandbox.write_file("index.html", b"<p id=x>inside the preview</p><a href=two.html>2</a>")
    await sandbox.write_file("two.html", b"<p id=x>second page</p>")
    await preview.start(8030, command="python3 -m http.server 8030")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = await browser.new_page()
            # The app's own page: its policy frames previews (an /api/ answer frames nothing).
            await page.goto(preview.server.base_url.replace("127.0.0.1", "localhost") + "/")
            url = await preview.signed_url(8030)
            await page.evaluate(
                "u => { const f = document.createElement('iframe'); f.src = u;"
                " document.body.appendChild(f); }",
                url,
            )
            frame = page.frame_locator("iframe")
            await frame.locator("#x").wait_for()
            assert await frame.locator("#x").text_content() == "inside the preview"
            # The token is gone from the address; later navigations ride on the cookie.
            [inner] = [f for f in page.frames if f != page.main_frame]
            assert "burrow_token" not in inner.url
            await frame.locator("a").click()
            await asyncio.wait_for(frame.locator("text=second page").wait_for(), 10)
            # Script in the preview cannot read the cookie (HttpOnly).
            assert "burrow_preview" not in await inner.evaluate("document.cookie")
        finally:
            await browser.close()
