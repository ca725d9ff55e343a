"""Project instructions: the workspace's `AGENTS.md`, added to the system prompt.

Read at each run's start through the conversation's sandbox, never from the host: the
file is the model's (and whoever wrote the repository's) to shape, so it is treated as
untrusted. The sandbox's file API refuses a path that resolves outside the workspace (a
symlink to /etc/shadow); a binary file is ignored; a large one is cut at
`MAX_INSTRUCTIONS_BYTES` with a note.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Awaitable, Callable

from burrow.llm.base import Message
from burrow.runs.journal import events as ev
from burrow.runs.loop.hooks.base import Hook, Run
from burrow.sandbox.backend import ErrorCode, Sandbox, SandboxError

log = logging.getLogger(__name__)

INSTRUCTIONS_FILE = "AGENTS.md"
MAX_INSTRUCTIONS_BYTES = 32 * 1024
HEADER = "# Project instructions (AGENTS.md in the workspace)"
TRUNCATED = "[… {what} is longer than {limit} bytes: the rest is left out …]"


def instructions_text(
    data: bytes, limit: int = MAX_INSTRUCTIONS_BYTES, what: str = INSTRUCTIONS_FILE
) -> str | None:
    """The file's text as it goes to the model (`data` holds up to limit + 1 bytes), or
    None when it is not UTF-8 text."""
    truncated = len(data) > limit
    data = data[:limit]
    if b"\0" in data:
        return None
    try:  # a cut may split the last character: not final then
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not truncated)
    except UnicodeDecodeError:
        return None
    text = text.strip()
    if truncated:
        text += "\n\n" + TRUNCATED.format(what=what, limit=limit)
    return text


class ProjectInstructions(Hook):
    """Loads AGENTS.md before the run's first model call and appends it to the system
    prompt of every request of that run; `instructions.loaded` tells the timeline."""

    def __init__(
        self, sandbox: Callable[[], Awaitable[Sandbox]], limit: int = MAX_INSTRUCTIONS_BYTES
    ) -> None:
        self._sandbox = sandbox
        self._limit = limit
        self._loaded = False
        self._text: str | None = None

    async def before_model_call(self, run: Run) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            sandbox = await self._sandbox()
            entry = await sandbox.stat(INSTRUCTIONS_FILE)
            if entry.kind != "file":  # a FIFO would block the read, a directory fail it
                log.info("AGENTS.md of %s is a %s; ignored", run.cid, entry.kind)
                return
            data = await sandbox.read_file(INSTRUCTIONS_FILE, 0, self._limit + 1)
        except SandboxError as exc:
            if exc.code != ErrorCode.NOT_FOUND:
                log.info("AGENTS.md of %s not read: %s", run.cid, exc.message)
            return
        self._text = instructions_text(data, self._limit)
        if not self._text:
            log.info("AGENTS.md of %s is not text; ignored", run.cid)
            return
        truncated = len(data) > self._limit
        await run.emit(
            ev.make(
                ev.InstructionsLoaded(
                    path=INSTRUCTIONS_FILE, bytes=min(len(data), self._limit), truncated=truncated
                ),
                run.run_id,
            )
        )

    def transform_context(self, messages: list[Message]) -> list[Message]:
        if not self._text:
            return messages
        addition = f"{HEADER}\n\n{self._text}"
        if messages and messages[0].role == "system":
            system = messages[0]
            return [
                Message(role="system", content=f"{system.content}\n\n{addition}"),
                *messages[1:],
            ]
        return [Message(role="system", content=addition), *messages]
