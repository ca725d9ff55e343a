"""The settings dialog's account sections, the light theme and the keyboard, in a real browser."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from playwright.async_api import Browser, BrowserContext, Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import ADMIN_PASSWORD, RunningServer
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving

NEW_PASSWORD = "changed-in-the-browser-42"


async def _settings(page: Page) -> None:
    await page.get_by_role("button", name=re.compile("Settings")).click()
    await expect(page.get_by_role("dialog")).to_be_visible()


async def test_change_the_password_then_sign_in_with_it(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        await open_app(page, srv)
        await _settings(page)
        dialog = page.get_by_role("dialog")
        section = dialog.get_by_role("region", name="Password")
        await section.get_by_label("Current password").fill("not-the-password")
        await section.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
        await section.get_by_label("New password again").fill(NEW_PASSWORD)
        await section.get_by_role("button", name="Change password").click()
        await expect(section.get_by_role("alert")).to_have_text(
            "The current password is wrong: nothing was changed."
        )

        await section.get_by_label("Current password").fill(ADMIN_PASSWORD)
        await section.get_by_role("button", name="Change password").click()
        await expect(section.get_by_role("status")).to_contain_text("Password changed")
        await dialog.get_by_role("button", name="Cancel").click()

        await page.get_by_role("button", name="Sign out").click()
        await page.get_by_label("Password").fill(ADMIN_PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("alert")).to_contain_text("Wrong username or password")
        await page.get_by_label("Password").fill(NEW_PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("button", name="Sign out")).to_be_visible()


async def test_a_token_is_shown_once_listed_without_its_value_and_revoked(
    tmp_path: Path, page: Page
) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        await open_app(page, srv)
        await _settings(page)
        section = page.get_by_role("dialog").get_by_role("region", name="API tokens")
        await expect(section.get_by_text("No API tokens yet.")).to_be_visible()
        await section.get_by_label("Token name").fill("deploy-bot")
        await section.get_by_role("button", name="Create token").click()
        shown = section.get_by_label("New token value")
        await expect(shown).to_have_text(re.compile(r"^bw_"))
        value = await shown.inner_text()
        bearer = {"Authorization": f"Bearer {value}"}
        async with _anonymous(srv) as client:
            assert (await client.get("/api/me", headers=bearer)).json()["username"] == "admin"

        listed = section.get_by_role("list", name="Your API tokens")
        await expect(listed.get_by_role("listitem")).to_have_count(1)
        await expect(listed).to_contain_text("deploy-bot")
        await shot(page, "settings-api-token")
        await section.get_by_role("button", name="Done").click()
        await expect(shown).to_have_count(0)
        assert value not in await page.content()  # never listed again

        # Reopened, the dialog lists it (from the server) and still without the value.
        await page.keyboard.press("Escape")
        await _settings(page)
        section = page.get_by_role("dialog").get_by_role("region", name="API tokens")
        await expect(section.get_by_role("listitem")).to_have_count(1)
        assert value not in await page.content()
        await section.get_by_role("button", name="Revoke deploy-bot").click()
        await expect(section.get_by_text("No API tokens yet.")).to_be_visible()
        async with _anonymous(srv) as client:
            assert (await client.get("/api/me", headers=bearer)).status_code == 401


@asynccontextmanager
async def _anonymous(srv: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=10) as client:
        yield client


async def _background(page: Page) -> str:
    return await page.evaluate("getComputedStyle(document.body).backgroundColor")


LIGHT_BG = "rgb(251, 250, 247)"
DARK_BG = "rgb(19, 20, 22)"


async def test_light_theme_follows_the_system_and_the_toggle_is_remembered(
    tmp_path: Path, browser: Browser, csp_violations: list[str]
) -> None:
    context: BrowserContext = await browser.new_context(color_scheme="light")
    context.on(
        "console",
        lambda m: csp_violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page = await context.new_page()
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        await open_app(page, srv)
        assert await page.evaluate("document.documentElement.dataset.theme") == "light"
        assert await _background(page) == LIGHT_BG
        await shot(page, "theme-light")

        await page.get_by_role("button", name="Switch to the dark theme").click()
        assert await _background(page) == DARK_BG
        await page.reload()
        await expect(page.get_by_role("button", name="Switch to the light theme")).to_be_visible()
        assert await _background(page) == DARK_BG  # the choice outlives the reload

        # Back to following the system, from the settings' Appearance section.
        await _settings(page)
        await page.get_by_role("dialog").get_by_label("Theme").select_option("system")
        assert await _background(page) == LIGHT_BG
        await page.reload()
        await expect(page.get_by_role("button", name="Switch to the dark theme")).to_be_visible()
        assert await _background(page) == LIGHT_BG
    assert csp_violations == []


async def test_escape_stops_a_running_run_and_the_shortcut_keys(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": "echo sleeping; sleep 60"})]),
            ScriptedTurn(text="Never said."),
        ]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("long")
        await open_app(page, srv, f"/c/{cid}")
        run = await srv.send(cid, "sleep a minute")
        await srv.wait_for(cid, lambda e: e["type"] == "tool.output")  # the sleep is running
        await expect(page.get_by_role("button", name="Stop")).to_be_visible()

        await page.locator("body").click(position={"x": 5, "y": 400})  # focus off any field
        await page.keyboard.press("Escape")
        finished = await srv.run_finished(cid, run["run_id"], timeout=60)
        assert finished["data"]["status"] == "canceled"
        await expect(page.get_by_role("button", name="Stop")).to_have_count(0)

        await page.keyboard.press("?")
        shortcuts = page.get_by_role("dialog", name="Keyboard shortcuts")
        await expect(shortcuts).to_contain_text("Stop the running agent")
        await page.keyboard.press("Escape")
        await expect(shortcuts).to_have_count(0)

        await page.locator("body").click(position={"x": 5, "y": 400})
        await page.keyboard.press("/")
        await expect(page.get_by_role("textbox", name="Message")).to_be_focused()
        await page.keyboard.press("Control+Shift+O")
        await expect(page).to_have_url(re.compile(r"/c/(?!" + re.escape(cid) + ")"))
        listed = await srv.client.get("/api/conversations")
        assert len(listed.json()) == 2


async def test_an_admin_adds_and_disables_an_account_but_not_the_last_admin(
    tmp_path: Path, page: Page
) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        await open_app(page, srv)
        await _settings(page)
        section = page.get_by_role("dialog").get_by_role("region", name="Users")
        await section.get_by_label("Username").fill("bob")
        await section.get_by_label("Password", exact=True).fill("bobs-password-1")
        await section.get_by_role("button", name="Add user").click()
        accounts = section.get_by_role("list", name="Accounts")
        await expect(accounts.get_by_role("listitem")).to_have_count(2)
        async with _anonymous(srv) as bob:
            login = {"username": "bob", "password": "bobs-password-1"}
            assert (await bob.post("/api/auth/login", json=login)).status_code == 200
            await section.get_by_role("button", name="Disable bob").click()
            await expect(section.get_by_role("button", name="Enable bob")).to_be_visible()
            assert (await bob.get("/api/me")).status_code == 401

        await section.get_by_role("button", name="Demote admin").click()
        await expect(section.get_by_role("alert")).to_contain_text(
            "admin is the last enabled administrator"
        )
        await shot(page, "settings-users")
