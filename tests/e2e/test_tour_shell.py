"""A new user's tour (issue 12), around the conversation: the list, the sign-in screen, a
conversation that is gone, and the Files and Preview panels."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Browser, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server
from tests.e2e.conftest import shot
from tests.e2e.tour import (
    DESKTOP,
    PHONE,
    SLOW,
    base_of,
    eventually,
    harness,
    sign_in,
    unobstructed,
)


async def test_a_file_with_long_lines_stays_inside_the_files_panel(
    tmp_path: Path, browser: Browser
) -> None:
    line = "const x = [" + ", ".join(str(i) for i in range(600)) + "];\n"
    turns = [
        ScriptedTurn(tool_calls=[("write_file", {"path": "long.js", "content": line * 3})]),
        ScriptedTurn(text="Written."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("long lines")
        sent = await srv.send(cid, "write it")
        await srv.run_finished(cid, sent["run_id"])
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_role("tab", name="Files").click()
        await page.get_by_role("tree").get_by_role("button", name=re.compile(r"^long\.js")).click()
        await expect(page.locator(".viewer pre.code")).to_contain_text("599")
        for control in (
            page.get_by_role("link", name="Download"),
            page.get_by_role("button", name="Refresh files"),
        ):
            await eventually(lambda c=control: unobstructed(page, c), "the control is on screen")
        panel = await page.get_by_role("complementary", name="Sandbox").bounding_box()
        assert panel is not None and panel["x"] + panel["width"] <= DESKTOP["width"]
        code = page.locator(".viewer pre.code")
        scrolls = "el => el.scrollWidth > el.clientWidth"  # inside its panel, once laid out
        await eventually(lambda: code.evaluate(scrolls), "the code scrolls inside its panel")
        await shot(page, "tour-4-long-lines")


async def test_a_missing_or_deleted_conversation_says_it_is_gone(
    tmp_path: Path, browser: Browser
) -> None:
    async with harness(tmp_path, browser, [], DESKTOP) as (srv, page):
        await sign_in(page, base_of(srv), "/c/c_doesnotexist")
        gone = page.get_by_role("alert", name="Conversation not found")
        await expect(gone).to_contain_text("does not exist", timeout=SLOW)
        await expect(page.locator(".pill[data-connection]")).to_have_count(0)
        await shot(page, "tour-5-gone")
        await gone.get_by_role("button", name="Show conversations").click()
        await expect(page).to_have_url(re.compile(r"/$"))

        cid = await srv.create_conversation("short-lived")
        await page.goto(f"{base_of(srv)}/c/{cid}")
        await expect(page.get_by_role("heading", level=1)).to_have_text("short-lived")
        await expect(page.locator(".pill[data-connection]")).to_have_count(0)  # live
        assert (await srv.client.delete(f"/api/conversations/{cid}")).status_code == 204
        await expect(gone).to_be_visible(timeout=SLOW)


async def test_rename_and_delete_are_reachable_on_a_phone(tmp_path: Path, browser: Browser) -> None:
    async with harness(tmp_path, browser, [], PHONE) as (srv, page):
        cid = await srv.create_conversation("Pocket project")
        await sign_in(page, base_of(srv))
        await page.get_by_role("button", name="Conversations").click()
        nav = page.get_by_role("navigation", name="Conversations")
        entry = nav.locator(f'[data-cid="{cid}"]')
        rename = entry.get_by_role("button", name="Rename Pocket project")
        await expect(rename).to_be_visible()  # no hover needed: a finger cannot hover
        await shot(page, "tour-6-phone-actions")
        await rename.click()
        await nav.get_by_label("Conversation title").fill("Pocket garden")
        await nav.get_by_label("Conversation title").press("Enter")
        await expect(entry).to_contain_text("Pocket garden")
        await entry.get_by_role("button", name="Delete Pocket garden").click()
        await entry.get_by_role("button", name="Confirm deleting Pocket garden").click()
        await expect(entry).to_have_count(0)
        assert (await srv.client.get(f"/api/conversations/{cid}")).status_code == 404


async def test_the_list_follows_activity_and_keeps_no_empties(
    tmp_path: Path, browser: Browser
) -> None:
    turns = [ScriptedTurn(text=f"Answer {i}.") for i in range(3)]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        older = await srv.create_conversation("Older")
        await srv.run_finished(older, (await srv.send(older, "one"))["run_id"])
        newer = await srv.create_conversation("Newer")
        await srv.run_finished(newer, (await srv.send(newer, "two"))["run_id"])

        async def order() -> list[str]:
            listed = (await srv.client.get("/api/conversations")).json()
            return [c["title"] for c in listed]

        await srv.services.runtime.sandboxes.hibernate(older)  # so viewing it wakes it
        assert await order() == ["Newer", "Older"]
        await sign_in(page, base_of(srv), f"/c/{older}")
        nav = page.get_by_role("navigation", name="Conversations")
        # Viewing it wakes its sandbox; renaming it: neither is activity.
        await page.get_by_role("button", name="Show files").click()
        await expect(page.get_by_text("The workspace is empty.")).to_be_visible(timeout=SLOW)
        entry = nav.locator(f'[data-cid="{older}"]')
        await entry.hover()
        await entry.get_by_role("button", name="Rename Older").click()
        await nav.get_by_label("Conversation title").fill("Older, renamed")
        await nav.get_by_label("Conversation title").press("Enter")
        await expect(entry).to_contain_text("Older, renamed")
        assert await order() == ["Newer", "Older, renamed"]
        await expect(nav.locator(".conv-title")).to_have_text(["Newer", "Older, renamed"])

        # "+ New conversation" clicked three times stores one empty conversation, not three.
        for _ in range(3):
            await nav.get_by_role("button", name="+ New conversation").click()
            await expect(page).to_have_url(re.compile(r"/c/[^/]+$"))
            await expect(nav.locator(".conv")).to_have_count(3)
        assert len(await order()) == 3

        # A message is activity: that conversation goes to the top.
        await page.goto(f"{base_of(srv)}/c/{older}")
        await page.get_by_label("Message").fill("three")
        await page.get_by_label("Message").press("Enter")
        await expect(page.locator(".run-end")).to_have_count(2, timeout=SLOW)
        assert (await order())[0] == "Older, renamed"


async def test_the_preview_status_follows_the_sandbox_and_speaks_to_the_person(
    tmp_path: Path, browser: Browser
) -> None:
    command = "mkdir -p site && echo '<h1>Hi</h1>' > site/index.html"
    serve_site = "python3 -m http.server 8000 -d site"
    turns = [
        ScriptedTurn(tool_calls=[("bash", {"command": command})]),
        ScriptedTurn(tool_calls=[("preview", {"command": serve_site, "port": 8000})]),
        ScriptedTurn(text="Up."),
    ]
    provider = ScriptedProvider(turns)
    async with running_server(tmp_path, lambda: provider, preview=True) as srv:
        context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        try:
            page = await context.new_page()
            cid = await srv.create_conversation("preview")
            await srv.run_finished(cid, (await srv.send(cid, "serve it"))["run_id"], timeout=60)
            assert await srv.services.runtime.sandboxes.hibernate(cid)
            await sign_in(page, base_of(srv), f"/c/{cid}")
            card = page.locator(".tool-card", has_text="http.server")
            # Open it once the replay has shown its result (a click while the replay still
            # shows it running would fold an open card): its result is what a person reads.
            await expect(card).to_have_attribute("data-state", "ok", timeout=SLOW)
            toggle = card.locator("button.tool-toggle")
            if await toggle.get_attribute("aria-expanded") != "true":
                await toggle.click()
            await expect(toggle).to_have_attribute("aria-expanded", "true")
            await expect(card).to_contain_text("shown in the preview panel", timeout=SLOW)
            await expect(card).not_to_contain_text("the user sees it")
            await page.get_by_role("tab", name="Preview").click()
            heading = page.frame_locator(".preview iframe").locator("h1")
            await expect(heading).to_have_text("Hi", timeout=SLOW)  # opening it woke the sandbox
            # The policy follows the status ("sandbox ready · egress"): only the status counts here.
            await expect(page.locator(".sandbox-state")).to_have_text(
                re.compile(r"^sandbox ready( · .+)?$")
            )
            await expect(page.locator(".preview .badge.warn")).to_have_count(0, timeout=SLOW)
            await shot(page, "tour-9-preview-woken")
        finally:
            await context.close()


async def test_a_failed_run_shows_in_the_list(tmp_path: Path, browser: Browser) -> None:
    turns = [ScriptedTurn(error="The model server answered 500."), ScriptedTurn(text="Back.")]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("Doomed")
        other = await srv.create_conversation("Other")
        await srv.run_finished(cid, (await srv.send(cid, "go"))["run_id"])
        listed = {c["id"]: c for c in (await srv.client.get("/api/conversations")).json()}
        assert listed[cid]["status"] == "idle" and listed[cid]["last_run_failed"]
        await sign_in(page, base_of(srv), f"/c/{other}")
        nav = page.get_by_role("navigation", name="Conversations")
        status = nav.locator(f'[data-cid="{cid}"] .conv-status')
        await expect(status).to_have_text("last run failed")
        await nav.locator(f'[data-cid="{cid}"] .conv-open').click()
        await expect(page.locator(".run-end.failed")).to_be_visible()
        await expect(status).to_have_text("last run failed")
        # Retry starts a new run from where the journal stands.
        await page.locator(".run-end.failed").get_by_role("button", name="Retry").click()
        await expect(page.locator(".run-end").last).to_contain_text("Done")
        await expect(page.get_by_text("Back.")).to_be_visible()
        await expect(page.locator(".run-end.failed").get_by_role("button")).to_have_count(0)


async def test_the_files_tree_hides_burrows_own_folders(tmp_path: Path, browser: Browser) -> None:
    make = "mkdir -p .burrow/outputs .burrow/services && echo log > .burrow/outputs/1.log"
    turns = [
        ScriptedTurn(tool_calls=[("bash", {"command": f"{make} && echo hi > app.py"})]),
        ScriptedTurn(text="Made."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("internals")
        await srv.run_finished(cid, (await srv.send(cid, "make"))["run_id"])
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_role("tab", name="Files").click()
        tree = page.get_by_role("tree")
        await expect(tree.get_by_role("button", name=re.compile(r"^app\.py"))).to_be_visible()
        await expect(tree.get_by_role("button", name=".burrow")).to_have_count(0)
        # Still there on request.
        listed = await srv.client.get(
            f"/api/conversations/{cid}/files", params={"path": ".burrow", "internal": True}
        )
        assert {e["name"] for e in listed.json()} == {"checkpoints", "outputs", "services"}


async def test_the_sign_in_screen_loads_with_one_probe_and_no_401_or_console_error(
    tmp_path: Path, browser: Browser
) -> None:
    async with harness(tmp_path, browser, [], DESKTOP) as (srv, page):
        refused: list[str] = []
        asked: list[str] = []
        errors: list[str] = []
        page.on("response", lambda r: refused.append(r.url) if r.status == 401 else None)
        page.on("request", lambda r: asked.append(r.url) if "/api/" in r.url else None)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        await page.goto(base_of(srv) + "/")
        await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        await expect(page.get_by_label("Password")).to_be_visible()
        await page.wait_for_load_state("networkidle")
        # Signed out is not an error: one probe, answered 200, nothing in the console.
        assert [url.split("/api/", 1)[1] for url in asked] == ["auth/session"]
        assert refused == [] and errors == [], (refused, errors)
