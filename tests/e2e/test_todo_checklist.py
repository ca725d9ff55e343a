"""The model's checklist (`todo`) shows in the timeline as it is kept: a card while the run
is still going, and a new one as steps are ticked; the todo call's own card gives way."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving

FIRST = [{"text": "read the code", "done": False}, {"text": "fix the bug", "done": False}]
SECOND = [{"text": "read the code", "done": True}, {"text": "fix the bug", "done": False}]
WAIT = "while [ ! -e go ]; do sleep 0.2; done"


async def test_the_checklist_shows_live_and_ticks(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("todo", {"items": FIRST})]),
            ScriptedTurn(tool_calls=[("bash", {"command": WAIT})]),
            ScriptedTurn(tool_calls=[("todo", {"items": SECOND})]),
            ScriptedTurn(text="Halfway."),
        ]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("todo")
        await srv.client.patch(f"/api/conversations/{cid}", json={"approval_mode": "auto"})
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("fix it")
        await page.get_by_role("button", name="Send", exact=True).click()

        cards = page.get_by_test_id("plan-card")
        # Live: the run is still waiting in bash while the first list is shown.
        await expect(cards).to_have_count(1)
        await expect(cards.first).to_contain_text("0/2 done")
        await expect(cards.first.get_by_role("checkbox", name="fix the bug")).not_to_be_checked()
        await expect(page.locator(".tool-card").filter(has_text="todo")).to_have_count(0)

        sandbox = await srv.services.runtime.sandboxes.get(cid)
        await sandbox.write_file("go", b"")
        await expect(page.locator(".assistant").filter(has_text="Halfway.")).to_be_visible()
        await expect(cards).to_have_count(2)
        latest = cards.nth(1)
        await expect(latest).to_contain_text("1/2 done")
        await expect(latest.get_by_role("checkbox", name="read the code")).to_be_checked()
        await expect(latest.get_by_role("checkbox", name="fix the bug")).not_to_be_checked()
        await shot(page, "todo-checklist")
