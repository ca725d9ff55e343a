"""A budget stop in a real browser: it says which limit, and Continue carries on from there."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.test_workspace import open_app, serving


async def test_a_budget_stop_says_which_limit_and_continue_carries_on(
    tmp_path: Path, page: Page
) -> None:
    step = lambda n: ScriptedTurn(tool_calls=[("bash", {"command": f"echo step {n} >> steps.txt"})])  # noqa: E731
    provider = ScriptedProvider(
        [step(1), step(2), step(3), ScriptedTurn(text="All three steps are written.")]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("budget")
        limited = await srv.client.patch(f"/api/conversations/{cid}", json={"budget": {"steps": 2}})
        assert limited.status_code == 200, limited.text
        await open_app(page, srv, f"/c/{cid}")

        await page.get_by_label("Message").fill("write three steps")
        await page.get_by_label("Message").press("Enter")
        stop = page.get_by_role("alert").filter(has_text="Budget reached.")
        await expect(stop).to_be_visible(timeout=30_000)
        await expect(stop).to_contain_text("steps")
        [finished] = [e for e in await srv.events(cid) if e["type"] == "run.finished"]
        assert finished["data"]["status"] == "budget_exceeded"
        assert finished["data"]["budget"]["kind"] == "steps"

        await stop.get_by_role("button", name="Continue").click()
        await expect(page.get_by_text("All three steps are written.")).to_be_visible(timeout=30_000)
        # The stop is history now: its Continue is gone, and the run carried on from there.
        await expect(page.get_by_role("button", name="Continue")).to_have_count(0)
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        assert (await sandbox.read_file("steps.txt")).decode() == "step 1\nstep 2\nstep 3\n"
        messages = [
            e["data"]["content"] for e in await srv.events(cid) if e["type"] == "user.message"
        ]
        assert messages == ["write three steps", "continue"]
