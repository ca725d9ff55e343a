"""Message actions in a real browser: copy a message, edit and resend one, regenerate a
reply. The last two fork the conversation at the message's run (journal before it, the
workspace that run started from), send in the fork and open it; the source stays."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer
from tests.api.test_checkpoints import shell
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving


def two_runs() -> ScriptedProvider:
    # Chosen by the replies the context holds: a fork at the second run replays its turns.
    return ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": "echo one > a.txt"})]),
            ScriptedTurn(text="First reply."),
            ScriptedTurn(tool_calls=[("bash", {"command": "echo two >> a.txt"})]),
            ScriptedTurn(text="Second reply."),
        ],
        turn_from_context=True,
    )


async def two_exchanges(page: Page, srv: RunningServer) -> str:
    cid = await srv.create_conversation("tour")
    await open_app(page, srv, f"/c/{cid}")
    for text, reply in (("first", "First reply."), ("second", "Second reply.")):
        await page.get_by_label("Message").fill(text)
        await page.get_by_role("button", name="Send", exact=True).click()
        await expect(page.locator(".assistant").filter(has_text=reply)).to_be_visible()
    await expect(page.locator(".run-end")).to_have_count(2)
    return cid


async def opened_fork(page: Page, cid: str) -> str:
    await expect(page).not_to_have_url(re.compile(f"/c/{cid}$"))
    match = re.search(r"/c/([^/]+)$", page.url)
    assert match is not None, page.url
    await expect(page.locator(".conv-header h1")).to_have_text("tour (fork)")
    return match.group(1)


async def test_edit_and_resend_forks_before_the_message(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, two_runs()) as srv:
        cid = await two_exchanges(page, srv)
        second = page.locator(".row-user").filter(has_text="second")
        await second.get_by_role("button", name="Edit").click()
        await page.get_by_label("Edited text").fill("second, edited")
        await shot(page, "message-actions-1-edit")
        await (
            page.get_by_role("form", name="Edit and resend")
            .get_by_role("button", name="Send")
            .click()
        )

        fork = await opened_fork(page, cid)
        await expect(page.locator(".run-end")).to_have_count(2)
        texts = await page.locator(".user-text").all_inner_texts()
        assert texts == ["first", "second, edited"]
        await expect(page.locator(".assistant").filter(has_text="Second reply.")).to_be_visible()
        # The fork's run started from the second run's checkpoint: a.txt held "one".
        assert await shell(srv, fork, "cat a.txt") == "one\ntwo\n"
        # The source is as it was, and listed beside its fork.
        assert await shell(srv, cid, "cat a.txt") == "one\ntwo\n"
        said = [e["data"]["content"] for e in await srv.events(cid) if e["type"] == "user.message"]
        assert said == ["first", "second"]
        sidebar = page.get_by_role("navigation", name="Conversations")
        await expect(sidebar.get_by_text("tour (fork)")).to_have_count(1)
        await expect(sidebar.get_by_text("tour", exact=True)).to_have_count(1)
        await shot(page, "message-actions-2-forked")


async def test_regenerate_forks_at_the_run_and_asks_again(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, two_runs()) as srv:
        cid = await two_exchanges(page, srv)
        # Only a run's final reply offers it.
        reply = page.locator(".assistant").filter(has_text="Second reply.")
        await reply.get_by_role("button", name="Regenerate").click()

        fork = await opened_fork(page, cid)
        await expect(page.locator(".run-end")).to_have_count(2)
        assert await page.locator(".user-text").all_inner_texts() == ["first", "second"]
        await expect(page.locator(".assistant").filter(has_text="Second reply.")).to_be_visible()
        events = await srv.events(fork)
        runs = [e["run_id"] for e in events if e["type"] == "run.started"]
        source_runs = [e["run_id"] for e in await srv.events(cid) if e["type"] == "run.started"]
        assert runs[0] == source_runs[0] and runs[1] != source_runs[1]


async def test_copy_puts_the_message_on_the_clipboard(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, two_runs()) as srv:
        await two_exchanges(page, srv)
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        reply = page.locator(".assistant").filter(has_text="First reply.")
        await reply.get_by_role("button", name="Copy", exact=True).click()
        await expect(reply.get_by_role("button", name="Copied")).to_be_visible()
        assert await page.evaluate("navigator.clipboard.readText()") == "First reply."
        mine = page.locator(".row-user").filter(has_text="second")
        await mine.get_by_role("button", name="Copy", exact=True).click()
        assert await page.evaluate("navigator.clipboard.readText()") == "second"
        # A reply in the middle of a run (a tool call's) is copied, not regenerated.
        assert await reply.get_by_role("button", name="Regenerate").count() == 1


async def test_fork_titles_do_not_pile_up_and_follow_an_edited_first_message(
    tmp_path: Path, page: Page
) -> None:
    async with serving(tmp_path, page, two_runs()) as srv:
        cid = await two_exchanges(page, srv)
        title = page.locator(".conv-header h1")
        sidebar = page.get_by_role("navigation", name="Conversations")
        # A fork of a fork is marked once.
        await (
            page.locator(".assistant")
            .filter(has_text="Second reply.")
            .get_by_role("button", name="Regenerate")
            .click()
        )
        fork = await opened_fork(page, cid)
        await expect(page.locator(".run-end")).to_have_count(2)
        await (
            page.locator(".assistant")
            .filter(has_text="Second reply.")
            .get_by_role("button", name="Regenerate")
            .click()
        )
        await expect(page).not_to_have_url(re.compile(f"/c/{fork}$"))
        await expect(title).to_have_text("tour (fork)")
        await expect(sidebar.get_by_text("(fork) (fork)")).to_have_count(0)
        await expect(page.locator(".run-end")).to_have_count(2)

        # Editing the first message names the fork after the edited message (in the source:
        # a fork's own earlier runs have no checkpoints to fork at).
        await sidebar.locator(f'[data-cid="{cid}"] .conv-open').click()
        await expect(title).to_have_text("tour")
        first = page.locator(".row-user").filter(has_text="first")
        await first.get_by_role("button", name="Edit").click()
        await page.get_by_label("Edited text").fill("Plan a garden\nwith herbs")
        await (
            page.get_by_role("form", name="Edit and resend")
            .get_by_role("button", name="Send")
            .click()
        )
        await expect(title).to_have_text("Plan a garden")
        match = re.search(r"/c/([^/]+)$", page.url)
        assert match is not None
        stored = (await srv.client.get(f"/api/conversations/{match.group(1)}")).json()
        assert stored["title"] == "Plan a garden"
        titles = [c["title"] for c in (await srv.client.get("/api/conversations")).json()]
        assert not any("(fork) (fork)" in t for t in titles), titles
        await shot(page, "fork-titles")
