"""A new user's tour (issue 12), the comforts: approval waits told apart from run time,
choices before the first message, search, example prompts, a remembered panel tab, a
terminal lost to a restart, and the installable app."""

from __future__ import annotations

import re
import time
from pathlib import Path

from playwright.async_api import Browser, Locator, Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server
from tests.e2e.conftest import shot
from tests.e2e.tour import DESKTOP, PHONE, SLOW, base_of, harness, serve, sign_in

WAIT_S = 3.0  # how long the person takes to approve


def seconds(text: str) -> float:
    """`12.1 s` or `340 ms` as seconds (the first duration in `text`)."""
    match = re.search(r"([\d.]+) (ms|s)\b", text)
    assert match, text
    value = float(match[1])
    return value / 1000 if match[2] == "ms" else value


async def test_time_waiting_for_approval_is_shown_apart_from_run_time(
    tmp_path: Path, browser: Browser
) -> None:
    turns = [
        ScriptedTurn(text="Cleaning.", tool_calls=[("bash", {"command": "rm -rf build"})]),
        ScriptedTurn(text="Clean."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("approval wait")
        await sign_in(page, base_of(srv), f"/c/{cid}")
        sent = time.monotonic()
        await page.get_by_label("Message").fill("clean")
        await page.get_by_label("Message").press("Enter")
        allow = page.get_by_role("button", name="Allow once")
        await expect(allow).to_be_visible(timeout=SLOW)
        await page.wait_for_timeout(WAIT_S * 1000)
        await allow.click()
        run_end = page.locator(".run-end")
        await expect(run_end).to_contain_text("Done", timeout=SLOW)
        wall = time.monotonic() - sent

        card = page.locator(".tool-card", has_text="rm -rf build")
        waited = await card.locator(".approval-waited").inner_text()
        assert waited.startswith("waited ") and waited.endswith(" for approval"), waited
        assert WAIT_S <= seconds(waited) < wall
        assert seconds(await card.get_by_test_id("tool-time").inner_text()) < WAIT_S

        await expect(run_end).to_contain_text("for approval")  # re-rendered as it settles
        summary = await run_end.inner_text()
        assert "for approval" in summary, summary
        run_time = seconds(summary.split("·")[1])
        run_wait = seconds(summary.split("waited")[1])
        assert run_wait >= WAIT_S
        assert run_time + run_wait <= wall + 0.5, (summary, wall)  # the wait is not in it
        await shot(page, "tour-8-approval-wait")


async def expect_focused(page: Page, locator: Locator) -> None:
    """`to_be_focused`, saying on failure where the focus was: on another element (the
    shortcut did not move it), or out of the page (the browser took the key itself)."""
    try:
        await expect(locator).to_be_focused()
    except AssertionError as failure:
        where = await page.evaluate(
            "() => ({active: document.activeElement && (document.activeElement.id || "
            "document.activeElement.tagName), pageHasFocus: document.hasFocus()})"
        )
        raise AssertionError(f"{failure}\nfocus was at: {where}") from None


async def test_search_finds_a_message_and_opens_its_conversation_there(
    tmp_path: Path, browser: Browser
) -> None:
    filler = "\n\n".join(f"Paragraph {i} of a long answer." for i in range(80))
    turns = [ScriptedTurn(text="The okapi enclosure is ready."), ScriptedTurn(text=filler)]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("Zoo plans")
        for prompt in ("build the okapi enclosure", "now write a lot"):
            sent = await srv.send(cid, prompt)
            await srv.run_finished(cid, sent["run_id"])
        other = await srv.create_conversation("Unrelated")
        await sign_in(page, base_of(srv), f"/c/{other}")
        # As a person would: once the conversation is open (its message box has the focus).
        await expect(page.get_by_label("Message")).to_be_focused()
        await page.keyboard.press("Control+k")
        box = page.get_by_role("searchbox", name="Search conversations")
        await expect_focused(page, box)
        await box.fill("OKAPI")
        results = page.get_by_role("list", name="Search results")
        hits = results.get_by_role("button")
        await expect(hits).to_have_count(2)  # the answer and the prompt, not the title
        await expect(hits.first).to_contain_text("The okapi enclosure is ready.")
        await expect(results.locator("mark").first).to_have_text("okapi")
        await shot(page, "tour-search")
        await hits.first.click()
        await expect(page).to_have_url(re.compile(f"/c/{cid}$"))
        found = page.locator(".row.found")
        await expect(found).to_contain_text("The okapi enclosure is ready.")
        await expect(found).to_be_in_viewport()  # not left at the end of the long answer

        await box.fill("nothing like this")
        await expect(results).to_contain_text("Nothing found")
        await box.press("Escape")
        await expect(page.get_by_role("navigation").locator(f'[data-cid="{cid}"]')).to_be_visible()


async def test_approval_mode_and_model_are_chosen_before_the_first_message(
    tmp_path: Path, browser: Browser
) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Hello."), ScriptedTurn(text="Again.")])
    key = {"openai_api_key": "sk-test-not-used"}  # so the server lists OpenAI's models
    async with running_server(tmp_path, lambda: provider, **key) as srv:
        context = await browser.new_context(viewport=PHONE)  # type: ignore[arg-type]
        page = await context.new_page()
        try:
            await sign_in(page, base_of(srv))
            options = page.get_by_role("group", name="Start with")
            await options.get_by_label("Approval mode for this conversation").select_option(
                "read_only"
            )
            model = options.get_by_label("Model for this conversation")
            await expect(model.locator("option")).not_to_have_count(1)  # the list arrived
            chosen = await model.locator("option").nth(1).get_attribute("value")
            assert chosen
            await model.select_option(chosen)
            await shot(page, "tour-start-options-phone")
            await page.get_by_label("Message").fill("hi there")
            await page.get_by_label("Message").press("Enter")
            await expect(page).to_have_url(re.compile(r"/c/c_"))
            cid = page.url.rsplit("/", 1)[1]
            created = (await srv.client.get(f"/api/conversations/{cid}")).json()
            assert (created["approval_mode"], created["model"]) == ("read_only", chosen)
            # The message goes once the new conversation has opened: wait for it, then look.
            await srv.wait_for(cid, lambda e: e["type"] == "user.message", 15)
            said = [e for e in await srv.events(cid) if e["type"] == "user.message"]
            assert [e["data"]["content"] for e in said] == ["hi there"]
            await expect(options).to_have_count(0)  # the header has them from now on
            header = page.get_by_label("Approval mode", exact=True)
            await expect(header).to_have_value("read_only")
        finally:
            await context.close()


async def test_an_example_prompt_is_put_in_the_composer_to_send(
    tmp_path: Path, browser: Browser
) -> None:
    # `burrow serve --model scripted:…`: a model is configured, so the welcome shows.
    with serve(tmp_path, [{"text": "On it."}]) as server:
        context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        context.set_default_timeout(15_000)
        page = await context.new_page()
        await sign_in(page, server.base)
        examples = page.get_by_role("list", name="Example prompts").get_by_role("button")
        await expect(examples).not_to_have_count(0)
        await shot(page, "tour-empty-state")
        prompt = await examples.first.inner_text()
        await examples.first.click()
        # Picked, not sent: it waits in the composer to be read and changed first.
        composer = page.get_by_label("Message")
        await expect(composer).to_have_value(prompt)
        await expect(composer).to_be_focused()
        await expect(page).not_to_have_url(re.compile(r"/c/"))
        await composer.press("End")
        await composer.type(" with a dark theme")
        await composer.press("Enter")
        await expect(page.locator(".user-text")).to_have_text(prompt + " with a dark theme")
        await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
        await context.close()


async def test_the_panel_tab_is_remembered(tmp_path: Path, browser: Browser) -> None:
    async with harness(tmp_path, browser, [], DESKTOP) as (srv, page):
        first = await srv.create_conversation("one")
        second = await srv.create_conversation("two")
        await sign_in(page, base_of(srv), f"/c/{first}")
        changes = page.get_by_role("tab", name="Changes")
        await expect(page.get_by_role("tab", name="Files")).to_have_attribute(
            "aria-selected", "true"
        )
        await changes.click()
        await expect(changes).to_have_attribute("aria-selected", "true")
        await page.goto(f"{base_of(srv)}/c/{second}")  # another conversation, a reload
        await expect(changes).to_have_attribute("aria-selected", "true")


async def test_a_terminal_lost_to_a_restart_says_so(tmp_path: Path, browser: Browser) -> None:
    with serve(tmp_path, []) as server:
        context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        context.set_default_timeout(15_000)
        page = await context.new_page()
        try:
            await sign_in(page, server.base)
            made = await page.request.post(f"{server.base}/api/conversations", data={})
            cid = (await made.json())["id"]
            await page.goto(f"{server.base}/c/{cid}")
            await page.get_by_role("tab", name="Terminal").click()
            view = page.locator(".terminal-view")
            await expect(view).to_have_attribute("data-link", "open", timeout=SLOW)

            server.kill()
            await expect(page.get_by_text("Connection lost — reconnecting…")).to_be_visible()
            server.start()
            lost = page.get_by_role("alert").filter(has_text="ended when the server restarted")
            await expect(lost).to_be_visible(timeout=SLOW)
            await expect(page.locator(".terminal-host")).to_be_hidden()  # no dead pane
            await shot(page, "tour-terminal-lost")
            await lost.get_by_role("button", name="Open a new terminal").click()
            await expect(view).to_have_attribute("data-link", "open", timeout=SLOW)
            await expect(page.get_by_role("tab", name="Shell 1")).to_have_count(1)
        finally:
            await context.close()


async def test_the_app_is_installable(tmp_path: Path, browser: Browser) -> None:
    async with harness(tmp_path, browser, [], DESKTOP) as (srv, page):
        base = base_of(srv)
        await sign_in(page, base)
        link = await page.locator('link[rel="manifest"]').get_attribute("href")
        assert link == "/manifest.webmanifest"
        theme = page.locator('meta[name="theme-color"]')
        assert re.fullmatch(r"#[0-9a-f]{6}", await theme.get_attribute("content") or "")
        served = await page.request.get(base + link)
        assert served.ok and served.headers["content-type"] == "application/manifest+json"
        manifest = await served.json()
        assert manifest["start_url"] == "/" and manifest["display"] == "standalone"
        assert manifest["theme_color"] and manifest["name"] == "Burrow"
        sizes = set()
        for icon in manifest["icons"]:
            image = await page.request.get(base + icon["src"])
            assert image.ok and image.headers["content-type"] == "image/png"
            body = await image.body()
            assert body.startswith(b"\x89PNG\r\n\x1a\n")
            width, height = int.from_bytes(body[16:20], "big"), int.from_bytes(body[20:24], "big")
            assert icon["sizes"] == f"{width}x{height}"
            sizes.add(width)
        assert {192, 512} <= sizes  # what browsers ask of an installable app
        # Fetched by the page itself, under its Content-Security-Policy (the page fixture's
        # console check is not used here: a refusal would fail the fetch).
        fetched = await page.evaluate("fetch('/manifest.webmanifest').then(r => r.ok, () => false)")
        assert fetched


async def test_notifications_are_asked_for_on_a_click_and_then_sent_while_hidden(
    tmp_path: Path, browser: Browser
) -> None:
    turns = [
        ScriptedTurn(text="Cleaning.", tool_calls=[("bash", {"command": "rm -rf build"})]),
        ScriptedTurn(text="Clean."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        base = base_of(srv)
        await page.context.grant_permissions(["notifications"], origin=base)
        cid = await srv.create_conversation("Cleanup")
        await sign_in(page, base)
        await page.get_by_role("button", name=re.compile("Settings")).click()
        section = page.get_by_role("dialog").get_by_role("region", name="Notifications")
        toggle = section.get_by_role("checkbox")
        await expect(toggle).not_to_be_checked()  # off until asked for
        await toggle.check()
        await expect(toggle).to_be_checked()
        assert await page.evaluate("localStorage.getItem('burrow.notify')") == "on"
        await shot(page, "tour-settings-notifications")

        # The tab "hidden", the notifications recorded: headless Chromium shows none.
        await page.add_init_script(
            """
            Object.defineProperty(Document.prototype, "hidden", { get: () => true });
            window.__shown = [];
            window.Notification = class {
              static permission = "granted";
              static requestPermission() { return Promise.resolve("granted"); }
              constructor(title, options) { window.__shown.push([title, options.body]); }
              close() {}
            };
            """
        )
        await page.goto(f"{base}/c/{cid}")
        await page.get_by_label("Message").fill("clean")
        await page.get_by_label("Message").press("Enter")
        await page.get_by_role("button", name="Allow once").click(timeout=SLOW)
        await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
        shown = await page.evaluate("window.__shown")
        assert shown == [
            ["Cleanup", "The agent needs your approval to go on."],
            ["Cleanup", "The run finished."],
        ]
