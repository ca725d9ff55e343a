"""A new user's tour (issue 12), the conversation itself: what the timeline shows after a
restart, while steering, on a phone, for denials and refusals, and when the model fails."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Browser, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.demo import DemoProvider
from tests.api.harness import free_port, running_server
from tests.e2e.conftest import shot
from tests.e2e.tour import (
    DESKTOP,
    PHONE,
    SLOW,
    base_of,
    eventually,
    harness,
    serve,
    sign_in,
    unobstructed,
)


async def test_a_server_killed_mid_run_leaves_a_failed_run_not_a_blank_page(
    tmp_path: Path, browser: Browser
) -> None:
    context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    context.set_default_timeout(30_000)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    text = " ".join(f"word{i}" for i in range(200))
    with serve(tmp_path, [{"text": text, "delay": 0.05}]) as server:
        try:
            await sign_in(page, server.base)
            composer = page.get_by_label("Message")
            await composer.fill("Tell me a long story")
            await composer.press("Enter")
            await expect(page.locator(".assistant")).to_contain_text("word10")
            server.kill()
            await expect(page.locator(".pill[data-connection=reconnecting]")).to_be_visible(
                timeout=SLOW
            )
            # While the server is down nothing claims the run is still going.
            await expect(page.locator(".pill[data-status=running]")).to_have_count(0)
            entry = page.get_by_role("navigation", name="Conversations").locator(".conv-status")
            await expect(entry).to_have_text("server unreachable", timeout=SLOW)
            # Said there and in the header, not in a toast over Stop and Steer.
            await expect(page.locator(".toast")).to_have_count(0)
            stop = page.get_by_role("button", name="Stop", exact=True)
            await eventually(lambda: unobstructed(page, stop), "Stop can be pressed")
            await shot(page, "tour-1-server-down")
            server.start()
            # The repaired run.finished arrives on reconnect: a failed run, a usable app.
            await expect(page.locator(".run-end.failed")).to_be_visible(timeout=SLOW)
            await expect(page.locator(".run-end.failed")).to_contain_text("tokens")
            await expect(page.get_by_label("Message")).to_be_visible()
            await page.reload()
            await expect(page.locator(".run-end.failed")).to_be_visible(timeout=SLOW)
            await expect(page.get_by_label("Message")).to_be_visible()
            await shot(page, "tour-1-restarted")
            assert not errors, errors
        finally:
            await context.close()


async def test_steering_while_text_streams_keeps_the_answer_whole(
    tmp_path: Path, browser: Browser
) -> None:
    story = " ".join(f"w{i}" for i in range(60)) + " THE END."
    turns = [ScriptedTurn(text=story, delay=0.05), ScriptedTurn(text="Shorter next time.")]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("steer")
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_label("Message").fill("Tell me a story")
        await page.get_by_label("Message").press("Enter")
        await expect(page.locator(".assistant").first).to_contain_text("w3")
        steer = page.get_by_label("Steer the running agent")
        await steer.fill("make it short")
        await steer.press("Enter")
        bubble = page.locator(".row-user", has_text="make it short")
        await expect(bubble).to_be_visible()
        # Live: the words after the bubble appeared still stream into the one answer above it.
        await expect(page.locator(".assistant").first).to_contain_text("w40")
        await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
        rows = await page.locator(".timeline .row").all_inner_texts()
        shot_rows = [r.strip() for r in rows]
        answers = [r for r in shot_rows if "w0" in r]
        assert len(answers) == 1 and "THE END." in answers[0], shot_rows
        order = [i for i, r in enumerate(shot_rows) if "THE END." in r or "make it short" in r]
        assert shot_rows[order[0]].startswith("w0") and "make it short" in shot_rows[order[1]]
        await page.reload()  # the replay shows the same
        await expect(page.locator(".run-end")).to_contain_text("Done")
        assert [r.strip() for r in await page.locator(".timeline .row").all_inner_texts()] == (
            shot_rows
        )
        await shot(page, "tour-2-steered")


async def test_a_phone_opens_a_conversation_at_its_end_with_the_approval_in_reach(
    tmp_path: Path, browser: Browser
) -> None:
    long_answer = "\n\n".join(f"Paragraph {i} of a long answer." for i in range(60))
    turns = [
        ScriptedTurn(text=long_answer),
        ScriptedTurn(text="Cleaning up.", tool_calls=[("bash", {"command": "rm -rf build"})]),
        ScriptedTurn(text="Clean."),
    ]
    async with harness(tmp_path, browser, turns, PHONE) as (srv, page):
        cid = await srv.create_conversation("long one")
        first = await srv.send(cid, "write a lot")
        await srv.run_finished(cid, first["run_id"])
        await srv.send(cid, "clean the build")
        await srv.wait_for(cid, lambda e: e["type"] == "approval.requested")
        await sign_in(page, base_of(srv))
        await page.get_by_role("button", name="Conversations").click()
        await page.get_by_role("navigation").locator(f'[data-cid="{cid}"] .conv-open').click()
        allow = page.get_by_role("button", name="Allow once")
        await expect(allow).to_be_visible()
        await eventually(lambda: unobstructed(page, allow), "Allow once is on screen, on top")
        await shot(page, "tour-3-phone-approval")
        await allow.click()
        await expect(page.locator(".run-end").last).to_contain_text("Done", timeout=SLOW)


async def test_a_denied_call_is_shown_once(tmp_path: Path, browser: Browser) -> None:
    turns = [
        ScriptedTurn(text="Cleaning.", tool_calls=[("bash", {"command": "rm -rf build"})]),
        ScriptedTurn(text="Left it alone."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("deny")
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_label("Message").fill("clean")
        await page.get_by_label("Message").press("Enter")
        request = page.get_by_role("article", name="Approval request")
        await request.get_by_role("button", name="Deny").click()
        await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
        await expect(page.locator(".tool-card", has_text="rm -rf build")).to_contain_text("denied")
        await expect(request).to_have_count(0)  # the tool card tells it; not a second card
        await page.reload()
        await expect(page.locator(".run-end")).to_contain_text("Done")
        await expect(request).to_have_count(0)


async def test_an_approval_is_shown_in_its_tool_card_above_the_result(
    tmp_path: Path, browser: Browser
) -> None:
    """The request sits in the card of the call it is about, between its command and its
    output, live and after a reload; not as a card of its own below the result (on main it
    was a row after the tool card)."""
    turns = [
        ScriptedTurn(
            text="Cleaning.", tool_calls=[("bash", {"command": "rm -rf build; echo gone"})]
        ),
        ScriptedTurn(text="Clean."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("allow")
        await sign_in(page, base_of(srv), f"/c/{cid}")
        await page.get_by_label("Message").fill("clean")
        await page.get_by_label("Message").press("Enter")
        card = page.locator(".tool-card", has_text="rm -rf build")
        request = card.get_by_role("article", name="Approval request")
        await request.get_by_role("button", name="Allow once").click()
        await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
        for _ in range(2):
            await expect(request).to_contain_text("Allowed once")
            # One request in all, and no row of its own.
            await expect(page.get_by_role("article", name="Approval request")).to_have_count(1)
            await expect(page.locator(".timeline .row-approval")).to_have_count(0)
            output = card.locator(".tool-output")
            above = await request.bounding_box()
            below = await output.bounding_box()
            assert above and below and above["y"] + above["height"] <= below["y"], (above, below)
            await page.reload()
            await expect(page.locator(".run-end")).to_contain_text("Done")


async def test_the_demo_in_read_only_mode_says_its_calls_were_refused(
    tmp_path: Path, browser: Browser
) -> None:
    async with running_server(tmp_path, lambda: DemoProvider(chunk_delay=0)) as srv:
        context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        try:
            page = await context.new_page()
            cid = await srv.create_conversation("read only")
            await sign_in(page, base_of(srv), f"/c/{cid}")
            await page.get_by_label("Approval mode").select_option("read_only")
            await expect(page.get_by_label("Approval mode")).to_have_value("read_only")
            await page.get_by_label("Message").fill("a page about owls")
            await page.get_by_label("Message").press("Enter")
            await expect(page.locator(".run-end")).to_contain_text("Done", timeout=SLOW)
            answer = page.locator(".assistant").last
            await expect(answer).to_contain_text("nothing was written")
            await expect(answer).to_contain_text("read-only")
            await expect(page.locator(".timeline")).not_to_contain_text("I wrote")
            await shot(page, "tour-10-read-only-demo")
        finally:
            await context.close()


async def test_an_unreachable_model_set_in_the_ui_names_the_settings_field(
    tmp_path: Path, browser: Browser
) -> None:
    async with running_server(tmp_path, None) as srv:
        context = await browser.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        try:
            page = await context.new_page()
            cid = await srv.create_conversation("unreachable")
            await sign_in(page, base_of(srv), f"/c/{cid}")
            await page.get_by_role("button", name=re.compile("^⚙? ?Settings")).click()
            dialog = page.get_by_role("dialog", name="Model")
            await dialog.get_by_label("Model name").fill("gpt-test")
            await dialog.get_by_label("Base URL").fill(f"http://127.0.0.1:{free_port()}/v1")
            await dialog.get_by_label("API key").fill("sk-test-unreachable")
            await dialog.get_by_role("button", name="Save").click()
            await expect(dialog).to_have_count(0)
            await page.get_by_label("Message").fill("hello")
            await page.get_by_label("Message").press("Enter")
            failed = page.locator(".run-end.failed")
            await expect(failed).to_contain_text("Could not reach the model server", timeout=SLOW)
            await expect(failed).to_contain_text("check the base URL in Settings")
            await expect(failed).not_to_contain_text("OPENAI_BASE_URL")
            await shot(page, "tour-10-unreachable-model")
        finally:
            await context.close()
