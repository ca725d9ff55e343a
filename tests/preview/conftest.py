from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.api.harness import running_server
from tests.preview.harness import Preview
from tests.sandbox.harness import backend, sandbox

__all__ = ["backend", "preview", "sandbox"]


@pytest.fixture
async def preview(tmp_path: Path) -> AsyncIterator[Preview]:
    async with running_server(tmp_path / "data", None, preview=True) as server:
        cid = await server.create_conversation()
        base = f"http://127.0.0.1:{server.preview_port}"
        async with httpx.AsyncClient(base_url=base, timeout=30) as proxy:
            yield Preview(server, cid, proxy)
