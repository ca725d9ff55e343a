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
    stream_tools: bool | None = None  # None: no tool turn seen yet; False: it refused one
    tool_format: ToolFormat | None = None  # how its last calls came: tool_calls, or text
    escapes_html: bool = False  # llama-cpp-python: its templates escape what the model reads
    empty_content: bool = False  # it refused `content: null` on a turn that only called tools

    def saved(self) -> dict[str, object]:
        return dict(self.__dict__)


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


def remember(base_url: str, saved: dict[str, object]) -> None:
    """Take what an earlier process saw of a server (`Traits.saved()`), unless this one has
    seen it itself; a value of the wrong type is left unknown."""
    key = base_url.rstrip("/")
    if key in SEEN:
        return
    stream_tools, tool_format = saved.get("stream_tools"), saved.get("tool_format")
    SEEN[key] = Traits(
        stream_tools if isinstance(stream_tools, bool) else None,
        "native" if tool_format == "native" else "text" if tool_format == "text" else None,
        saved.get("escapes_html") is True,
        saved.get("empty_content") is True,
    )


def forget(base_url: str) -> None:
    """Learn the server at `base_url` afresh (tests; a server replaced at the same URL)."""
    SEEN.pop(base_url.rstrip("/"), None)
