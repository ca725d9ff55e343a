"""Pasting an image into the composer in a real browser: uploaded, shown, sent, replayed."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from playwright.async_api import Page, expect

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.e2e.conftest import shot
from tests.e2e.test_workspace import open_app, serving

# A real 4x4 PNG (red), so a loaded thumbnail has a natural size to check.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg=="
)

PASTE = """(b64) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], "", { type: "image/png" }));  // a screenshot: no name
  const box = document.querySelector('textarea[aria-label="Message"]');
  box.focus();
  box.dispatchEvent(
    new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true })
  );
}"""


async def test_a_pasted_image_is_uploaded_shown_and_sent_with_the_message(
    tmp_path: Path, page: Page
) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="A red square.")])
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("paste")
        await open_app(page, srv, f"/c/{cid}")
        await page.evaluate(PASTE, base64.b64encode(PNG).decode())
        pending = page.get_by_label("Attached files").locator("img.thumbnail")
        await expect(pending).to_have_count(1)
        await expect(pending).to_have_js_property("naturalWidth", 4)  # loaded from the server
        await page.get_by_label("Message").fill("what is this?")
        await page.get_by_role("button", name="Send", exact=True).click()
        await expect(page.get_by_text("A red square.")).to_be_visible()
        await expect(page.get_by_label("Attached files")).to_have_count(0)  # sent with it
        sent = page.locator(".row-user img.thumbnail")
        await expect(sent).to_have_count(1)
        await expect(sent).to_have_js_property("naturalWidth", 4)
        await shot(page, "attachments-pasted")
        # The journal holds the path; a reload shows the same thumbnail from it.
        [message] = [e for e in await srv.events(cid) if e["type"] == "user.message"]
        [path] = message["data"]["attachments"]
        assert path.startswith(".burrow/attachments/") and path.endswith("-pasted.png")
        await page.reload()
        await expect(page.locator(".row-user img.thumbnail")).to_have_js_property("naturalWidth", 4)


DROP = """(text) => {
  const data = new DataTransfer();
  data.items.add(new File([text], "notes.txt", { type: "text/plain" }));
  const form = document.querySelector("form.composer");
  for (const type of ["dragover", "drop"]) {
    const init = { dataTransfer: data, bubbles: true, cancelable: true };
    form.dispatchEvent(new DragEvent(type, init));
  }
}"""


async def test_a_dropped_file_is_uploaded_and_named_to_the_model(
    tmp_path: Path, page: Page
) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Read it.")])
    async with serving(tmp_path, page, provider) as srv:
        cid = await srv.create_conversation("drop")
        await open_app(page, srv, f"/c/{cid}")
        await page.evaluate(DROP, "remember the milk\n")
        pending = page.get_by_label("Attached files")
        await expect(pending.locator(".attachment-chip")).to_have_text(
            re.compile(r"^[0-9a-f]{8}-notes\.txt$"), timeout=10_000
        )
        await expect(pending.locator("img")).to_have_count(0)  # not an image: a chip
        await page.get_by_label("Message").fill("what does it say?")
        await page.get_by_label("Message").press("Enter")
        await expect(page.get_by_text("Read it.")).to_be_visible()
        [message] = [e for e in await srv.events(cid) if e["type"] == "user.message"]
        [path] = message["data"]["attachments"]
        assert path.startswith(".burrow/attachments/") and path.endswith("-notes.txt")
        sandbox = await srv.services.runtime.sandboxes.get(cid)
        assert (await sandbox.read_file(path)).decode() == "remember the milk\n"
        # The model is told where the file is (the scripted model sees no images).
        [user] = [m for m in provider.requests[0] if m.role == "user"]
        assert f"{path}: attached" in user.content
