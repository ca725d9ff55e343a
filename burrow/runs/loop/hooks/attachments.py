"""Files attached to a user message: where they live, what they are, what the model sees.

Uploads land in the workspace (`.burrow/attachments/` unless the user names a path); the
journal's `user.message` keeps only their paths. Before each model request the
`Attachments` hook reads them back from the sandbox: an image becomes an image block for a
model that sees images, anything else (or an image for a text-only model) a note naming
the path, so the agent can still open it with its tools.
"""

from __future__ import annotations

import base64
import posixpath
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace

from burrow.llm.base import Image, Message
from burrow.runs.loop.context import ModelContext
from burrow.runs.loop.hooks.base import Hook, Run
from burrow.sandbox.backend import Sandbox, SandboxError

ATTACHMENTS_DIR = ".burrow/attachments"
WORKSPACE = "/workspace"
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # Anthropic's per-image limit; OpenAI's is larger
MAX_IMAGES_PER_REQUEST = 20
MAX_ATTACHMENTS = 20  # per message
MAX_NAME = 120

# Magic bytes of the image types both providers accept.
SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class BadPath(ValueError):
    """A path no upload or attachment may have; the message says why."""


def image_type(head: bytes) -> str | None:
    """The image type `head` (a file's first bytes) starts with, or None when not an image."""
    for magic, media_type in SIGNATURES:
        if head.startswith(magic):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def workspace_path(path: str) -> str:
    """`path` as a normalised workspace-relative path, or `BadPath`. Absolute paths are
    accepted inside /workspace; `..` is refused outright rather than resolved."""
    if not path or "\0" in path or len(path) > 4096:
        raise BadPath("The path is empty, too long or contains a NUL byte.")
    if path.startswith("/"):
        if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
            raise BadPath(f"{path} is outside the workspace: give a path relative to it.")
        path = path[len(WORKSPACE) :].lstrip("/")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BadPath(f"{path}: '..' is not allowed; give a path inside the workspace.")
    if not parts:
        raise BadPath("The path names the workspace itself: give a file name.")
    return "/".join(parts)


def upload_name(filename: str) -> str:
    """A safe, fresh file name under .burrow/attachments/ for an upload called `filename`."""
    base = posixpath.basename(filename.replace("\\", "/")).strip()
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in base).lstrip(".")
    return f"{secrets.token_hex(4)}-{(safe or 'file')[-MAX_NAME:]}"


class Attachments(Hook):
    """Turns the attachments of user messages into image blocks or notes, per request."""

    def __init__(
        self,
        context: ModelContext,
        sandbox: Callable[[], Awaitable[Sandbox]],
        *,
        vision: bool,
    ) -> None:
        self._context = context
        self._sandbox = sandbox
        self._vision = vision
        self._read: dict[str, Image | str] = {}  # path -> image, or why it is only a note

    async def before_model_call(self, run: Run) -> None:
        wanted = {p for m in self._context.messages for p in m.attachments} - set(self._read)
        for path in sorted(wanted):
            self._read[path] = await self._load(path)

    async def _load(self, path: str) -> Image | str:
        if not self._vision:
            return "attached"
        try:
            sandbox = await self._sandbox()
            data = await sandbox.read_file(path, 0, MAX_IMAGE_BYTES + 1)
        except SandboxError as exc:
            return f"attached, but it could not be read ({exc.message})"
        media_type = image_type(data[:16])
        if media_type is None:
            return "attached"
        if len(data) > MAX_IMAGE_BYTES:
            return f"an image larger than {MAX_IMAGE_BYTES // 2**20} MB, not sent to the model"
        return Image(media_type, base64.b64encode(data).decode("ascii"))

    def transform_context(self, messages: list[Message]) -> list[Message]:
        budget = MAX_IMAGES_PER_REQUEST
        # The newest images are the ones kept when there are too many.
        out: list[Message] = []
        for message in reversed(messages):
            if message.attachments:
                images: list[Image] = []
                notes: list[str] = []
                for path in message.attachments:
                    found = self._read.get(path, "attached")
                    if isinstance(found, Image) and budget > 0:
                        images.append(found)
                        notes.append(f"{path}: an image, sent with this message")
                        budget -= 1
                    elif isinstance(found, Image):
                        notes.append(f"{path}: an image, left out (too many in this request)")
                    else:
                        notes.append(f"{path}: {found}")
                if not self._vision:
                    notes.insert(0, "This model cannot see images; open files with the tools.")
                text = message.content
                if notes:
                    text += "\n\n[Attached files in the workspace]\n" + "\n".join(notes)
                message = replace(message, content=text, images=tuple(images))
            out.append(message)
        out.reverse()
        return out
