"""The Files editor and the workspace downloads in a real browser: edit, save with Ctrl+S,
see the save in the timeline and the Changes tab, a conflict warned about; the zip and
tar.gz downloads and the patch, opened and read."""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from pathlib import Path

from playwright.async_api import Browser, Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.test_checkpoints import shell
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving
from tests.e2e.tour import PHONE, base_of, eventually, harness, sign_in, unobstructed


def wrote_notes() -> ScriptedProvider:
    return ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("write_file", {"path": "notes.txt", "content": "one\n"})]),
            ScriptedTurn(text="Written."),
        ]
    )


async def test_edit_save_and_see_it_in_the_timeline_and_changes(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, wrote_notes()) as srv:
        cid = await srv.create_conversation("editor")
        sent = await srv.send(cid, "write notes")
        await srv.run_finished(cid, sent["run_id"])
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_role("tab", name="Files").click()
        await (
            page.get_by_role("tree").get_by_role("button", name=re.compile(r"^notes\.txt")).click()
        )
        await expect(page.locator(".viewer pre.code")).to_contain_text("one")
        await page.get_by_role("tabpanel", name="Files").get_by_role("button", name="Edit").click()
        editor = page.get_by_label("Edit notes.txt")
        await expect(editor).to_be_focused()
        await editor.press("Control+End")
        await editor.type("two\n")
        await expect(page.get_by_label("unsaved changes")).to_be_visible()
        await editor.press("Control+s")
        await expect(page.locator(".viewer").get_by_role("status")).to_contain_text("Saved")
        await expect(page.get_by_label("unsaved changes")).to_have_count(0)
        assert await shell(srv, cid, "cat notes.txt") == "one\ntwo\n"
        await expect(page.get_by_text("You saved notes.txt in the editor.")).to_be_visible()
        await shot(page, "editor-1-saved")

        # The agent changes the file meanwhile: the next save warns instead of overwriting.
        await shell(srv, cid, "printf 'agent\\n' > notes.txt")
        await editor.press("Control+End")
        await editor.type("three\n")
        await page.get_by_role("button", name="Save", exact=True).click()
        warning = page.get_by_role("alert")
        await expect(warning).to_contain_text("notes.txt changed since you opened it")
        assert await shell(srv, cid, "cat notes.txt") == "agent\n"
        await shot(page, "editor-2-conflict")
        await warning.get_by_role("button", name="Overwrite").click()
        await expect(page.locator(".viewer").get_by_role("status")).to_contain_text("Saved")
        assert await shell(srv, cid, "cat notes.txt") == "one\ntwo\nthree\n"

        await page.get_by_role("tab", name="Changes").click()
        changed = page.get_by_role("list", name="Changed files")
        await expect(changed.get_by_role("button", name="A notes.txt +3 -0")).to_be_visible()
        async with page.expect_download() as patch_download:
            await page.get_by_role("link", name="Download patch").click()
        patch = (await (await patch_download.value).path()).read_text()
        assert "+two\n+three\n" in patch and "notes.txt" in patch


async def test_download_the_workspace_as_zip_and_tar_gz(tmp_path: Path, page: Page) -> None:
    async with serving(tmp_path, page, wrote_notes()) as srv:
        cid = await srv.create_conversation("Download me")
        sent = await srv.send(cid, "write notes")
        await srv.run_finished(cid, sent["run_id"])
        await shell(srv, cid, "mkdir -p src .burrow/outputs && echo x > src/a.py && "
                    "echo log > .burrow/outputs/o.log")  # fmt: skip
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_role("tab", name="Files").click()
        async with page.expect_download() as zipped:
            await page.get_by_role("link", name="⤓ zip").click()
        download = await zipped.value
        assert download.suggested_filename == "Download me.zip"
        with zipfile.ZipFile(await download.path()) as zf:
            names = set(zf.namelist())
            assert zf.read("notes.txt") == b"one\n"
        assert {"notes.txt", "src/", "src/a.py"} <= names
        assert not [n for n in names if n.startswith((".burrow/outputs", ".burrow/checkpoints"))]
        async with page.expect_download() as tarred:
            await page.get_by_role("link", name="⤓ tar.gz").click()
        download = await tarred.value
        assert download.suggested_filename == "Download me.tar.gz"
        data = (await download.path()).read_bytes()  # a small file
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
            tar_names = {m.name + ("/" if m.isdir() else "") for m in tf}
        assert tar_names == names


async def test_the_editor_and_downloads_fit_a_phone(tmp_path: Path, browser: Browser) -> None:
    turns = [
        ScriptedTurn(tool_calls=[("write_file", {"path": "notes.txt", "content": "one\n"})]),
        ScriptedTurn(text="Written."),
    ]
    async with harness(tmp_path, browser, turns, PHONE) as (srv, page):
        cid = await srv.create_conversation("phone edit")
        sent = await srv.send(cid, "write")
        await srv.run_finished(cid, sent["run_id"])
        await sign_in(page, base_of(srv), f"/c/{cid}")
        panel = page.get_by_role("complementary", name="Sandbox")
        if not await panel.is_visible():
            await page.get_by_role("button", name="Toggle sandbox panel").click()
        await page.get_by_role("tab", name="Files").click()
        await (
            page.get_by_role("tree").get_by_role("button", name=re.compile(r"^notes\.txt")).click()
        )
        await page.get_by_role("tabpanel", name="Files").get_by_role("button", name="Edit").click()
        await page.get_by_label("Edit notes.txt").fill("one\nfrom a phone\n")
        for control in (
            page.get_by_text("⤒ Import"),
            page.get_by_role("link", name="⤓ zip"),
            page.get_by_role("link", name="⤓ tar.gz"),
            page.get_by_role("button", name="Refresh files"),
            page.get_by_role("button", name="Save", exact=True),
            page.get_by_role("link", name="Download", exact=True),
        ):
            await eventually(lambda c=control: unobstructed(page, c), "the control is on screen")
        await shot(page, "editor-3-phone")
        await page.get_by_role("button", name="Save", exact=True).click()
        await expect(page.locator(".viewer").get_by_role("status")).to_contain_text("Saved")
        assert await shell(srv, cid, "cat notes.txt") == "one\nfrom a phone\n"


async def test_import_an_archive_from_the_files_panel(tmp_path: Path, page: Page) -> None:
    good = io.BytesIO()
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("site/index.html", "<h1>imported</h1>")
    evil = io.BytesIO()
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../escape.txt", "x")
    async with serving(tmp_path, page, wrote_notes()) as srv:
        cid = await srv.create_conversation("import")
        await shell(srv, cid, "true")  # the sandbox is up: Files lists at once
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_role("tab", name="Files").click()
        chooser = page.get_by_label("Import an archive")
        await chooser.set_input_files(
            {"name": "site.zip", "mimeType": "application/zip", "buffer": good.getvalue()}
        )
        await expect(page.locator(".files-tree").get_by_role("status")).to_contain_text(
            "site.zip: 1 file unpacked."
        )
        await expect(page.get_by_role("tree").get_by_role("button", name="site")).to_be_visible()
        await chooser.set_input_files(
            {"name": "evil.zip", "mimeType": "application/zip", "buffer": evil.getvalue()}
        )
        alert = page.locator(".files-tree").get_by_role("alert")
        await expect(alert).to_contain_text("evil.zip was not unpacked")
        await expect(alert).to_contain_text("'../escape.txt' climbs out")
        await shot(page, "editor-4-import-refused")
        left = await shell(srv, cid, "ls -A; test -e ../escape.txt || echo 'no escape'")
        assert left == "site\nno escape\n"


async def test_the_editor_is_a_code_editor_numbered_highlighted_and_searchable(
    tmp_path: Path, page: Page
) -> None:
    code = "def greet(name):\n    return 'hi ' + name\n\nprint(greet('x'))\n"
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("write_file", {"path": "app.py", "content": code})]),
            ScriptedTurn(text="Written."),
        ]
    )
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("code")
        await srv.run_finished(cid, (await srv.send(cid, "write it"))["run_id"])
        await open_app(page, srv, f"/c/{cid}")
        await page.get_by_role("tab", name="Files").click()
        await page.get_by_role("tree").get_by_role("button", name=re.compile(r"^app\.py")).click()
        await page.get_by_role("tabpanel", name="Files").get_by_role("button", name="Edit").click()
        editor = page.get_by_label("Edit app.py")
        await expect(editor).to_be_focused()
        # Numbered lines, and Python's keywords styled apart from the names around them.
        gutter = page.locator(".code-editor .cm-lineNumbers .cm-gutterElement")
        await expect(gutter.filter(has_text=re.compile(r"^4$"))).to_have_count(1)
        keyword = page.locator(".code-editor .cm-line").first.locator("span").first
        await expect(keyword).to_have_text("def")
        # Search: Ctrl+F opens it inside the editor and marks what it finds.
        await editor.press("Control+f")
        query = page.locator(".code-editor .cm-search input[name=search]")
        await expect(query).to_be_focused()
        await query.fill("greet")
        await query.press("Enter")
        await expect(page.locator(".code-editor .cm-searchMatch")).to_have_count(2)
        await shot(page, "editor-2-code")
        # Edits still save through If-Match like before.
        await editor.press("Control+Home")
        await editor.type("# hello\n")
        await editor.press("Control+s")
        await expect(page.locator(".viewer").get_by_role("status")).to_contain_text("Saved")
        assert (await shell(srv, cid, "head -1 app.py")) == "# hello\n"
