"""The Changes tab in a real browser: what a run's bash did since its checkpoint, its
patch, and a restore that the same tab can undo."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.test_checkpoints import shell
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving


async def test_changes_tab_shows_the_diff_and_restores(tmp_path: Path, page: Page) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[
                    ("bash", {"command": "printf 'one\\nTWO\\n' > notes.txt && rm old.txt"})
                ]
            ),
            ScriptedTurn(text="Changed."),
        ]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("changes")
        await shell(srv, cid, "printf 'one\\ntwo\\n' > notes.txt && echo bye > old.txt")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("edit")
        await page.get_by_role("button", name="Send", exact=True).click()
        await expect(page.locator(".run-end")).to_contain_text("Done")

        await page.get_by_role("tab", name="Changes").click()
        changed = page.get_by_role("list", name="Changed files")
        notes = changed.get_by_role("button", name="M notes.txt +1 -1")
        await expect(notes).to_be_visible()
        await expect(changed.get_by_role("button", name="D old.txt +0 -1")).to_be_visible()
        await notes.click()
        await expect(page.locator(".change-patch")).to_contain_text("-two\n+TWO")
        await shot(page, "changes-1-diff")

        await page.get_by_role("button", name="Restore this checkpoint").click()
        await expect(page.get_by_text("No changes since then.")).to_be_visible()
        assert await shell(srv, cid, "cat notes.txt old.txt") == "one\ntwo\nbye\n"
        await page.get_by_role("button", name="Undo restore").click()
        await expect(changed.get_by_role("button", name="D old.txt +0 -1")).to_be_visible()
        assert await shell(srv, cid, "cat notes.txt; ls") == "one\nTWO\nnotes.txt\n"
        await shot(page, "changes-2-undone")
