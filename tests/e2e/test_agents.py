"""Subagents and profiles in a real browser: a task's subagent renders nested in its card,
and the settings' profiles editor saves a profile the API then uses."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving


async def test_a_subagent_renders_nested_under_its_task_card(tmp_path: Path, page: Page) -> None:
    task = {"description": "survey the files", "prompt": "Survey: list the workspace"}
    provider = ScriptedProvider(
        [
            ScriptedTurn(text="Handing it off.", tool_calls=[("task", task)]),
            ScriptedTurn(text="The subagent found nothing to worry about."),
        ],
        subagents={
            "Survey": [
                ScriptedTurn(
                    text="Listing the workspace.",
                    tool_calls=[("bash", {"command": "echo subagent-was-here"})],
                ),
                ScriptedTurn(text="Survey report: the workspace is empty."),
            ]
        },
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("subagents")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("survey it")
        await page.get_by_label("Message").press("Enter")
        await expect(page.get_by_text("The subagent found nothing to worry about.")).to_be_visible(
            timeout=30_000
        )
        [call_id] = [
            e["data"]["call_id"]
            for e in await srv.events(cid)
            if e["type"] == "tool.started" and e["data"]["name"] == "task"
        ]
        card = page.locator(f'article.tool-card[data-call-id="{call_id}"]')
        await expect(card.locator(":scope > header .tool-summary")).to_have_text("survey the files")
        nested = card.get_by_test_id("subagent")
        await expect(nested).to_be_visible()
        # The subagent's own text and bash call are inside the task card, not beside it.
        await expect(nested.get_by_text("Listing the workspace.")).to_be_visible()
        inner = nested.locator("article.tool-card")
        await expect(inner).to_have_count(1)
        await expect(inner).to_contain_text("echo subagent-was-here")
        await expect(inner).to_contain_text("subagent-was-here")
        await expect(card.locator(":scope > .tool-body > .tool-output")).to_contain_text(
            "Survey report"
        )
        top_level = page.locator(".timeline-inner > .row > article.tool-card")
        await expect(top_level).to_have_count(1)
        await shot(page, "subagent-nested")

        # A reload replays the journal into the same nesting.
        await page.reload()
        card = page.locator(f'article.tool-card[data-call-id="{call_id}"]')
        await expect(card.get_by_test_id("subagent").locator("article.tool-card")).to_have_count(1)
        await expect(page.locator(".timeline-inner > .row > article.tool-card")).to_have_count(1)


async def test_the_profiles_editor_saves_a_profile(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, ScriptedProvider([])) as srv:
        await open_app(page, srv)
        await page.get_by_role("button", name=re.compile("Settings")).click()
        section = page.get_by_role("dialog").get_by_role("region", name="Profiles")
        await expect(section.get_by_text("No profiles yet.")).to_be_visible()
        await section.get_by_label("Profile name").fill("reviewer")
        await section.get_by_label("System prompt").fill("You review code.")
        await section.get_by_label("Tools").fill("read_file, task")
        await section.get_by_label("Approval mode").select_option("read_only")
        await section.get_by_label("Shared with every user").check()
        await section.get_by_role("button", name="Set profile").click()
        row = section.get_by_role("list", name="Profiles").get_by_role("listitem")
        await expect(row).to_contain_text("reviewer")
        await expect(row).to_contain_text("shared")
        await expect(row).to_contain_text("tools: read_file, task")
        profile = (await srv.client.get("/api/profiles/reviewer")).json()
        assert profile["shared"] is True and profile["tools"] == ["read_file", "task"]
        assert profile["system_prompt"] == "You review code."
        assert profile["approval_mode"] == "read_only"

        await row.get_by_role("button", name="Edit reviewer").click()
        await expect(section.get_by_label("System prompt")).to_have_value("You review code.")
        await row.get_by_role("button", name="Delete reviewer").click()
        await expect(section.get_by_text("No profiles yet.")).to_be_visible()
        assert (await srv.client.get("/api/profiles")).json() == []
