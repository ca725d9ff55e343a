"""What this process has seen each OpenAI-compatible server do with tools, by base URL.

Detected, not configured: a server that refuses a streamed request with tools gets its
tool turns unstreamed (openai_compat.py), and a server whose calls come back as text is
read for them (text_tool_calls.py). The settings page shows what was seen, so an operator
knows why a local model's turns look as they do. The settings keep what was seen of the
configured servers (model_choice.py listens here), so a restarted server starts from it
rather than from one refused request.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Literal, Protocol

ToolFormat = Literal["native", "text"]


@dataclass
class Traits:
    stream_tools: bool | None = None  # None: no tool turn seen yet
    tool_format: ToolFormat | None = None  # how its last calls came: tool_calls, or text


class Listener(Protocol):
    def traits_changed(self) -> None: ...


SEEN: dict[str, Traits] = {}
LISTENERS: weakref.WeakSet[Listener] = weakref.WeakSet()  # told when a record changes


def traits(base_url: str | None) -> Traits:
    """What was seen of the server at `base_url` (a fresh record if nothing was)."""
    return SEEN.get((base_url or "").rstrip("/"), Traits())


def saw(base_url: str, **seen: object) -> None:
    """Record what a tool turn showed of the server (stream_tools=, tool_format=)."""
    record = SEEN.setdefault(base_url.rstrip("/"), Traits())
    changed = any(getattr(record, name) != value for name, value in seen.items())
    for name, value in seen.items():
        setattr(record, name, value)
    if changed:
        for listener in list(LISTENERS):
            listener.traits_changed()


def remember(base_url: str, stream_tools: object, tool_format: object) -> None:
    """Take what an earlier process saw of a server, unless this one has seen it itself."""
    key = base_url.rstrip("/")
    if key not in SEEN:
        SEEN[key] = Traits(
            stream_tools if isinstance(stream_tools, bool) else None,
            tool_format if tool_format in ("native", "text") else None,  # type: ignore[arg-type]
        )
