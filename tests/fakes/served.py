"""An ASGI app served by uvicorn on 127.0.0.1 in the test's own event loop, for as long as
a `with` block lasts: peers, fake providers and hostile servers of the tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn


@contextlib.asynccontextmanager
async def served(app: Any, port: int) -> AsyncIterator[None]:
    server = uvicorn.Server(uvicorn.Config(app, "127.0.0.1", port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
