"""Plan mode in the browser: chosen in the mode selector, the run proposes its plan as a
card with Approve / Edit / Reject, and Approve (edited, going on in auto) lets it write."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.sandbox.local import LocalBackend
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving

PLAN = [{"text": "read notes", "done": False}, {"text": "write out.txt", "done": False}]


async def test_a_plan_is_proposed_edited_and_approved_from_its_card(
    tmp_path: Path, page: Page
) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("todo", {"items": PLAN})]),
            ScriptedTurn(text="That is my plan."),
            ScriptedTurn(tool_calls=[("write_file", {"path": "out.txt", "content": "ok\n"})]),
            ScriptedTurn(text="Wrote it."),
        ]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("plan")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Approval mode").select_option("plan")
        await expect(page.get_by_label("Approval mode")).to_have_value("plan")
        await page.get_by_label("Message").fill("plan it")
        await page.get_by_role("button", name="Send", exact=True).click()

        card = page.get_by_test_id("plan-proposal")
        await expect(card).to_contain_text("Proposed plan · 0/2 done")
        await expect(card.get_by_role("checkbox", name="write out.txt")).to_be_visible()
        await shot(page, "plan-proposed")
        await card.get_by_role("button", name="Edit").click()
        await card.get_by_label("Plan steps, one a line").fill("read notes\nwrite out.txt now")
        await card.get_by_label("Go on in").select_option("auto")
        await card.get_by_role("button", name="Approve").click()

        await expect(page.locator(".assistant").filter(has_text="Wrote it.")).to_be_visible()
        await expect(card.get_by_role("button", name="Approve")).to_have_count(0)
        edited = page.get_by_test_id("plan-card").last
        await expect(edited.get_by_role("checkbox", name="write out.txt now")).to_be_visible()
        backend = srv.services.runtime.sandboxes.backend
        assert isinstance(backend, LocalBackend)
        assert (backend.workspace_dir(cid) / "out.txt").read_text() == "ok\n"
        told = provider.requests[2][-1]
        assert "write out.txt now" in str(told.content)


async def test_reject_ends_the_run_from_its_card(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Plan: nothing.")])
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("plan")
        await srv.client.patch(f"/api/conversations/{cid}", json={"approval_mode": "plan"})
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("plan it")
        await page.get_by_role("button", name="Send", exact=True).click()
        card = page.get_by_test_id("plan-proposal")
        await card.get_by_role("button", name="Reject").click()
        await expect(card.get_by_role("button", name="Reject")).to_have_count(0)
        assert len(provider.requests) == 1
