"""The timeline as found wrong in issue 26: a restore named by its run and time, not by
checkpoint ids."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Browser, expect

from burrow.llm.base import ScriptedTurn
from tests.e2e.conftest import shot
from tests.e2e.tour import DESKTOP, base_of, harness, sign_in


async def _row_kinds(page) -> list[str]:  # type: ignore[no-untyped-def]
    return list(
        await page.locator(".timeline .row").evaluate_all(
            "rows => rows.map(r => [...r.classList].find(c => c.startsWith('row-')))"
        )
    )


async def test_the_restore_notice_names_the_run_and_time(tmp_path: Path, browser: Browser) -> None:
    turns = [
        ScriptedTurn(tool_calls=[("write_file", {"path": "a.txt", "content": "one\n"})]),
        ScriptedTurn(text="Wrote a."),
        ScriptedTurn(tool_calls=[("write_file", {"path": "b.txt", "content": "two\n"})]),
        ScriptedTurn(text="Wrote b."),
    ]
    async with harness(tmp_path, browser, turns, DESKTOP) as (srv, page):
        cid = await srv.create_conversation("restore")
        for message in ("write a", "write b"):
            await srv.run_finished(cid, (await srv.send(cid, message))["run_id"])
        checkpoints = (await srv.client.get(f"/api/conversations/{cid}/checkpoints")).json()
        assert len(checkpoints) == 2
        restored = await srv.client.post(
            f"/api/conversations/{cid}/checkpoints/{checkpoints[1]['id']}/restore", json={}
        )
        assert restored.status_code == 200, restored.text
        await sign_in(page, base_of(srv), f"/c/{cid}")
        notice = page.get_by_test_id("restore-notice")
        await expect(notice).to_contain_text(re.compile(r"the start of run 2 · \d{1,2}:\d{2}"))
        await expect(notice).to_contain_text("undo")
        text = await notice.inner_text()
        for c in checkpoints:
            assert c["id"] not in text
        assert restored.json()["undo_checkpoint_id"] not in text
        await shot(page, "restore-notice")
