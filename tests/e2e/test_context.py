"""The context meter and the compaction point, in a real browser against a real server."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving

SUMMARY = "The agent printed a block of x with python."


async def test_the_meter_shows_the_context_and_compacting_marks_the_timeline(
    tmp_path: Path, page: Page
) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": "python3 -c \"print('x' * 8000)\""})]),
            ScriptedTurn(text="Printed."),
            ScriptedTurn(text=SUMMARY),  # the summary call of the Compact button
            ScriptedTurn(text="Still here."),
        ]
    )
    async with serving(tmp_path, page, provider, context_window=8_000) as srv:
        cid = await srv.create_conversation("context")
        await open_app(page, srv, f"/c/{cid}")
        meter = page.get_by_test_id("context-meter")
        await expect(meter).to_contain_text("0 / 8.0k")

        await page.get_by_label("Message").fill("print a block of x")
        await page.get_by_label("Message").press("Enter")
        await expect(page.get_by_text("Printed.")).to_be_visible()
        # The last answer's prompt + completion tokens, as the provider counted them.
        gauge = page.get_by_label("Context used")
        await expect(gauge).not_to_have_attribute("value", "0")
        before = float(await gauge.get_attribute("value") or 0)
        assert 1_000 < before < 8_000
        await expect(meter).to_contain_text(re.compile(r"\d\.\dk / 8\.0k"))
        await shot(page, "context-meter")

        await page.get_by_role("button", name="Compact").click()
        marker = page.get_by_test_id("compaction-marker")
        await expect(marker).to_be_visible()
        await expect(marker).to_contain_text("Context compacted")
        [event] = [e for e in await srv.events(cid) if e["type"] == "context.compacted"]
        after = event["data"]["tokens_after"]
        assert after < before
        await expect(gauge).to_have_attribute("value", str(after))
        await marker.get_by_role("separator").click()  # opens the summary
        await expect(marker).to_contain_text(SUMMARY)
        await shot(page, "context-compacted")

        # The marker is part of the journal: a reload replays it in place.
        await page.reload()
        await expect(page.get_by_test_id("compaction-marker")).to_be_visible()
        await expect(page.get_by_label("Context used")).to_have_attribute("value", str(after))
