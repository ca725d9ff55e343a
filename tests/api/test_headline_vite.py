"""DESIGN §8's headline task on the default settings: "create a Vite + React app, install,
build, preview", driven by a scripted model, against npm's real registry.

Needs the network (registry.npmjs.org) through the sandbox's default egress: where that is
unreachable this test fails, it does not skip — the default must let this work.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.harness import running_server
from tests.preview.harness import Preview

SCRIPT = Path(__file__).parent / "scripts" / "vite_react.json"


@pytest.mark.timeout(600)
async def test_create_install_build_and_preview_a_vite_react_app(tmp_path: Path) -> None:
    # No network setting: the default. No provider: the server's model, a scripted file.
    async with running_server(tmp_path, None, preview=True, model=f"scripted:{SCRIPT}") as srv:
        created = await srv.client.post(
            "/api/conversations", json={"title": "vite", "approval_mode": "auto"}
        )
        assert created.status_code == 201, created.text
        assert created.json()["network"] == "egress"
        cid = created.json()["id"]
        run_id = (await srv.send(cid, "Create a Vite + React app, install, build, preview."))[
            "run_id"
        ]
        finished = await srv.run_finished(cid, run_id, timeout=540)
        events = await srv.events(cid)
        tools: list[dict[str, Any]] = [e["data"] for e in events if e["type"] == "tool.finished"]
        summary = [(t.get("name"), t.get("is_error"), str(t.get("output"))[-600:]) for t in tools]
        assert finished["data"]["status"] == "completed", summary
        assert len(tools) == 4 and not any(t["is_error"] for t in tools), summary

        assert srv.preview_port is not None
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{srv.preview_port}", timeout=30
        ) as proxy:
            preview = Preview(srv, cid, proxy)
            cookie = await preview.sign_in(4173)
            page = await preview.get(4173, "/", cookie)
            assert page.status_code == 200, page.text
            assert '<div id="root"></div>' in page.text
            # The built bundle, not the dev server's source modules.
            [bundle] = re.findall(r'src="(/assets/index-[^"]+\.js)"', page.text)
            script = await preview.get(4173, bundle, cookie)
            assert script.status_code == 200
            assert "createRoot" in script.text or "react" in script.text.lower()
