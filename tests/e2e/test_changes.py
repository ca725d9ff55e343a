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
        diff = page.get_by_role("table", name="Diff of notes.txt")
        await expect(diff.locator("tr.diff-line.del")).to_contain_text("two")
        await expect(diff.locator("tr.diff-line.add")).to_contain_text("TWO")
        await shot(page, "changes-1-diff")

        await page.get_by_role("button", name="Restore this checkpoint").click()
        await expect(page.get_by_text("No changes since then.")).to_be_visible()
        assert await shell(srv, cid, "cat notes.txt old.txt") == "one\ntwo\nbye\n"
        await page.get_by_role("button", name="Undo restore").click()
        await expect(changed.get_by_role("button", name="D old.txt +0 -1")).to_be_visible()
        assert await shell(srv, cid, "cat notes.txt; ls") == "one\nTWO\nnotes.txt\n"
        await shot(page, "changes-2-undone")


async def test_a_review_comments_lines_reverts_one_file_and_marks_files_reviewed(
    tmp_path: Path, page: Page
) -> None:
    """The review: comments on two lines go to the model as one message; a revert of one
    file leaves the others; a "reviewed" mark holds until that file changes again."""
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[
                    ("bash", {"command": "printf 'a\\nB\\nc\\n' > app.py && echo new > b.txt"})
                ]
            ),
            ScriptedTurn(text="Changed."),
            ScriptedTurn(tool_calls=[("bash", {"command": "echo more >> b.txt"})]),
            ScriptedTurn(text="Addressed."),
        ]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("review")
        await shell(srv, cid, "printf 'a\\nb\\nc\\n' > app.py && echo keep > c.txt")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("edit")
        await page.get_by_role("button", name="Send", exact=True).click()
        await expect(page.locator(".run-end")).to_contain_text("Done")

        await page.get_by_role("tab", name="Changes").click()
        changed = page.get_by_role("list", name="Changed files")
        await changed.get_by_role("button", name="M app.py +1 -1").click()
        await changed.get_by_role("button", name="A b.txt +1 -0").click()
        app = page.get_by_role("table", name="Diff of app.py")
        await expect(app.locator("tr.diff-line")).to_have_count(4)  # a, -b, +B, c
        # Side by side: the deleted and the added line on one row.
        await page.get_by_label("Side by side").check()
        await expect(app.locator("tr.diff-line")).to_have_count(3)
        await page.get_by_label("Side by side").uncheck()

        await page.get_by_role("button", name="Comment on app.py line 2").click()
        await page.get_by_label("Comment on line 2").fill("keep it lowercase")
        await page.get_by_role("button", name="Add comment").click()
        await page.get_by_role("button", name="Comment on b.txt line 1").click()
        await page.get_by_label("Comment on line 1").fill("say why")
        await page.get_by_role("button", name="Add comment").click()
        await expect(page.locator(".diff-comment")).to_have_count(2)
        await page.get_by_label("Reviewed b.txt").check()
        await shot(page, "changes-3-review")

        # Revert app.py: b.txt stays as the run left it, c.txt untouched.
        await changed.get_by_role("button", name="Revert app.py").click()
        await expect(changed.get_by_role("button", name="M app.py +1 -1")).to_have_count(0)
        assert await shell(srv, cid, "cat app.py b.txt c.txt") == "a\nb\nc\nnew\nkeep\n"
        # The app.py comment went with its file; the other is sent as one message.
        await page.get_by_role("button", name="Request changes (1)").click()
        await expect(page.get_by_role("status").filter(has_text="Sent 1 comment")).to_be_visible()
        await expect(page.locator(".run-end")).to_have_count(2)  # the run it started ended
        said = [m.content for m in provider.requests[-1] if m.role == "user"]
        assert said[-1] == (
            "Please address these review comments on your changes:\n\n"
            "b.txt:\n- line 1 (`+new`): say why"
        ), said
        # b.txt changed again in that run: its reviewed mark is gone.
        await expect(changed.get_by_role("button", name="A b.txt +2 -0")).to_be_visible()
        await expect(page.get_by_label("Reviewed b.txt")).not_to_be_checked()


async def test_a_review_comment_stays_on_its_line_when_the_diff_is_drawn_again(
    tmp_path: Path, page: Page
) -> None:
    """A comment is keyed by its file and line numbers, not by the parsed line it was made
    on: closing and reopening the file, or a reload of the tab after another file's revert,
    parses the diff anew and the comment still shows on its line (on main it vanished)."""
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[("bash", {"command": "printf 'x\\ny\\n' > a.txt && echo z > b.txt"})]
            ),
            ScriptedTurn(text="Changed."),
        ]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("comments")
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_label("Message").fill("edit")
        await page.get_by_role("button", name="Send", exact=True).click()
        await expect(page.locator(".run-end")).to_contain_text("Done")

        await page.get_by_role("tab", name="Changes").click()
        changed = page.get_by_role("list", name="Changed files")
        a = changed.get_by_role("button", name="A a.txt +2 -0")
        await a.click()
        await page.get_by_role("button", name="Comment on a.txt line 2").click()
        await page.get_by_label("Comment on line 2").fill("why y?")
        await page.get_by_role("button", name="Add comment").click()
        comment = page.get_by_role("table", name="Diff of a.txt").locator(".diff-comment")
        await expect(comment).to_have_text("why y?")

        await a.click()  # closed
        await expect(page.get_by_role("table", name="Diff of a.txt")).to_have_count(0)
        await a.click()  # open again: the diff is parsed anew
        await expect(comment).to_have_text("why y?")
        # It sits under line 2 (the row after it), not anywhere else.
        row = page.get_by_role("table", name="Diff of a.txt").locator("tr.diff-comments")
        await expect(row.locator("xpath=preceding-sibling::tr[1]")).to_contain_text("y")

        await changed.get_by_role("button", name="Revert b.txt").click()
        await expect(changed.get_by_role("button", name="A b.txt +1 -0")).to_have_count(0)
        await expect(comment).to_have_text("why y?")
        await expect(page.get_by_role("button", name="Request changes (1)")).to_be_visible()
