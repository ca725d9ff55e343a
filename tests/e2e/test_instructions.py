"""Project instructions and a retried model call in a real browser: the timeline says the
workspace's AGENTS.md is in use, and why a model call was tried again."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.retry import RetryingProvider
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server
from tests.e2e.test_workspace import open_app, serving


async def test_the_timeline_says_agents_md_is_in_use_and_replays_it(
    tmp_path: Path, page: Page
) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Following the project's rules.")])
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("instructions")
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        await sandbox.write_file("AGENTS.md", b"Always answer in one sentence.\n")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("hello")
        await page.get_by_label("Message").press("Enter")
        await expect(page.get_by_text("Following the project's rules.")).to_be_visible()
        notice = page.get_by_text("Project instructions from AGENTS.md are in use")
        await expect(notice).to_have_count(1)
        assert "Always answer in one sentence." in provider.requests[0][0].content
        await page.reload()  # a journal event: replayed in place
        await expect(
            page.get_by_text("Project instructions from AGENTS.md are in use")
        ).to_have_count(1)


async def test_a_retried_model_call_says_why_in_the_timeline(tmp_path: Path, page: Page) -> None:
    scripted = ScriptedProvider(
        [
            ScriptedTurn(error="The model server is overloaded (529).", error_retryable=True),
            ScriptedTurn(text="Here after all."),
        ]
    )
    retrying = RetryingProvider(scripted, base_delay=0.05, max_delay=0.1)
    async with running_server(tmp_path, lambda: retrying) as srv:
        try:
            cid = await srv.create_conversation("retry")
            await open_app(page, srv, f"/c/{cid}")
            await page.get_by_label("Message").fill("hello")
            await page.get_by_label("Message").press("Enter")
            await expect(page.get_by_text("Here after all.")).to_be_visible()
            notice = page.get_by_text(
                re.compile(
                    r"The model server is overloaded \(529\)\. Trying again in \d\.\d s "
                    r"\(attempt 2\)\."
                )
            )
            await expect(notice).to_have_count(1)
            [retry] = [e["data"] for e in await srv.events(cid) if e["type"] == "retry"]
            assert retry["attempt"] == 1
        finally:
            await page.context.close()
