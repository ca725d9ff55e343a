"""The preview as the user sees it: an iframe of the app, in a real Chromium.

The app and `*.preview.localhost` are different sites, so this is where the cookie's
attributes are proven: a Lax cookie would never reach the preview inside the iframe. And
with previews under the app's own domain, where a preview page can set a cookie for the
app's host, this is where the session cookie is proven not to be planted.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx
from playwright.async_api import async_playwright

from burrow.ports import free_port
from tests.api.harness import ADMIN_PASSWORD, log_in, running_server
from tests.conftest import unavailable
from tests.preview.harness import Preview

CHROMIUM = Path(os.environ.get("BURROW_TEST_CHROMIUM", "/usr/bin/chromium"))
HAVE_CHROMIUM = CHROMIUM.exists()
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]


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
            # A reload rides on the cookie too; the link itself, used once, opens nothing.
            async with inner.expect_navigation():
                await inner.evaluate("location.reload()")
            assert await frame.locator("#x").text_content() == "second page"
            await page.evaluate(
                "u => { const f = document.createElement('iframe'); f.src = u;"
                " document.body.appendChild(f); }",
                url,
            )
            replayed = page.frame_locator("iframe").nth(1)
            await asyncio.wait_for(replayed.locator("text=has been used already").wait_for(), 10)
        finally:
            await browser.close()


# A page of conversation X, framed by the app beside Y's preview, turns on Y: a WebSocket
# that would read Y's service, a credentialed POST and an image GET that would change it.
# Its own hot-reload socket and its own POST are what a dev server needs.
ATTACK = """async ({victim}) => {
  const socket = (url) => new Promise((resolve) => {
    const ws = new WebSocket(url);
    ws.onopen = () => ws.send("ping");
    ws.onmessage = (e) => { resolve("read: " + e.data); ws.close(); };
    ws.onerror = () => resolve("refused");
  });
  const own = await socket(`ws://${location.host}/hmr`);
  const stolen = await socket(`ws://${victim}/hmr`);
  await fetch(`http://${victim}/notes`,
              {method: "POST", body: "forged by X", credentials: "include", mode: "no-cors"})
    .catch(() => null);
  await new Promise((resolve) => {  // a GET that changes state, fired by an <img>
    const img = new Image();
    img.onload = img.onerror = resolve;
    img.src = `http://${victim}/notes/add?text=img`;
  });
  const posted = await fetch("/notes", {method: "POST", body: "X's own"});
  return {own, stolen, posted: posted.status};
}"""


async def test_a_preview_cannot_drive_another_previews_service(preview: Preview) -> None:
    if not HAVE_CHROMIUM:
        unavailable(f"Chromium at {CHROMIUM}")
    victim = Preview(preview.server, await preview.server.create_conversation("Y"), preview.proxy)
    await preview.start(8031, "dev_server.py")
    await victim.start(8031, "dev_server.py")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = await browser.new_page()
            # The app's own page: its policy frames previews (an /api/ answer frames nothing).
            await page.goto(preview.server.base_url.replace("127.0.0.1", "localhost") + "/")
            for url in (await preview.signed_url(8031), await victim.signed_url(8031)):
                await page.evaluate(
                    "u => { const f = document.createElement('iframe'); f.src = u;"
                    " document.body.appendChild(f); }",
                    url,
                )
            for index in range(2):
                await page.frame_locator("iframe").nth(index).locator("#ready").wait_for()
            [attacker] = [f for f in page.frames if preview.host(8031) in f.url]
            result = await attacker.evaluate(ATTACK, {"victim": victim.host(8031)})
            assert result == {"own": "read: ping", "stolen": "refused", "posted": 200}
        finally:
            await browser.close()
    # Y's service never saw X's POST; X's own went through.
    assert await _notes(victim, 8031) == []
    assert await _notes(preview, 8031) == ["X's own"]


async def _notes(preview: Preview, port: int) -> list[str]:
    response = await preview.get(port, "/notes", await preview.sign_in(port))
    assert response.status_code == 200, response.text
    notes: list[str] = json.loads(response.text)
    return notes


# The documented scale-out layout in miniature: the app on burrow.example.test, previews
# under it (*.preview.burrow.example.test), both resolved to 127.0.0.1 by Chromium itself.
APP_HOST = "burrow.example.test"
RESOLVE = f"--host-resolver-rules=MAP *.example.test 127.0.0.1, MAP {APP_HOST} 127.0.0.1"
PLANT = """<p id=x>planted</p><script>
document.cookie = "burrow_session=%s; domain=burrow.example.test; path=/";
</script>"""


async def test_a_preview_page_cannot_sign_the_app_into_another_account(tmp_path: Path) -> None:
    if not HAVE_CHROMIUM:
        unavailable(f"Chromium at {CHROMIUM}")
    preview_port = free_port()
    domain = f"http://preview.{APP_HOST}:{preview_port}"
    async with running_server(
        tmp_path / "data", None, preview=True, preview_port=preview_port, preview_domain=domain
    ) as server:
        made = await server.client.post(
            "/api/users", json={"username": "mallory", "password": "mallory-password"}
        )
        assert made.status_code == 201, made.text
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as mallory:
            await log_in(mallory, "mallory", "mallory-password")
            planted = mallory.cookies["burrow_session"]
        cid = await server.create_conversation()
        preview = Preview(server, cid, httpx.AsyncClient())
        sandbox = await preview.sandbox()
        # A page the victim's service serves, written by whoever wrote that service.
        await sandbox.write_file("index.html", (PLANT % planted).encode())
        await preview.start(8050, command="python3 -m http.server 8050")
        app = f"http://{APP_HOST}:{server.base_url.rsplit(':', 1)[1]}"
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=[*ARGS, RESOLVE])
            try:
                page = await browser.new_page()
                await page.goto(f"{app}/")  # the app's page: an /api/ answer's policy bars fetch
                signed_in = await page.evaluate(LOG_IN, ADMIN_PASSWORD)
                assert signed_in == 200
                await page.goto(await preview.signed_url(8050))
                assert await page.locator("#x").text_content() == "planted"
                await page.goto(f"{app}/")
                # The planted cookie did reach the app's host (it is not HttpOnly: visible)…
                assert planted in await page.evaluate("document.cookie")
                # …and the app does not take it for the victim's session.
                me = await page.evaluate(ME)
                assert me["status"] == 400, me
                assert me["body"]["error"]["code"] == "duplicate_session_cookie"
                assert "mallory" not in json.dumps(me)
            finally:
                await browser.close()


LOG_IN = """async (password) => (await fetch("/api/auth/login", {method: "POST",
  headers: {"content-type": "application/json"},
  body: JSON.stringify({username: "admin", password})})).status"""
ME = """async () => { const r = await fetch("/api/me");
  return {status: r.status, body: await r.json()}; }"""
