"""What this process has seen each OpenAI-compatible server do with tools, by base URL.

Detected, not configured: a server that refuses a streamed request with tools gets its
tool turns unstreamed (openai_compat.py), and a server whose calls come back as text is
read for them (text_tool_calls.py). The settings page shows what was seen, so an operator
knows why a local model's turns look as they do. Kept for the process's life: a restarted
server learns again from its first tool turn (one refused request at most).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ToolFormat = Literal["native", "text"]


@dataclass
class Traits:
    stream_tools: bool | None = None  # None: no tool turn seen yet
    tool_format: ToolFormat | None = None  # how its last calls came: tool_calls, or text


SEEN: dict[str, Traits] = {}


def traits(base_url: str | None) -> Traits:
    """What was seen of the server at `base_url` (a fresh record if nothing was)."""
    return SEEN.get((base_url or "").rstrip("/"), Traits())


def saw(base_url: str, **seen: object) -> None:
    """Record what a tool turn showed of the server (stream_tools=, tool_format=)."""
    record = SEEN.setdefault(base_url.rstrip("/"), Traits())
    for name, value in seen.items():
        setattr(record, name, value)
