"""A ToolContext on a real sandbox that records the live output."""

from __future__ import annotations

import asyncio
from typing import Literal

from burrow.sandbox.backend import Sandbox
from burrow.sandbox.local import LocalSandbox
from burrow.tools.base import ToolContext, ToolLimits


class RecordingContext:
    def __init__(self, sandbox: LocalSandbox, limits: ToolLimits | None = None) -> None:
        self.chunks: list[tuple[str, str]] = []
        self.output_seen = asyncio.Event()
        self.ctx = ToolContext(
            sandbox=self._sandbox,
            call_id="call_1",
            limits=limits or ToolLimits(),
            on_output=self._record,
        )
        self._target = sandbox

    async def _sandbox(self) -> Sandbox:
        return self._target

    async def _record(self, stream: Literal["stdout", "stderr"], text: str) -> None:
        self.chunks.append((stream, text))
        self.output_seen.set()
