"""How big a model context is, and how big it may be.

The window comes from the model catalog (llm/catalog.py), or `BURROW_CONTEXT_WINDOW`.
The size is what the provider reported for the last answer (its prompt plus completion
tokens: exactly what the next request repeats) plus an estimate of what came after; with
no report (a new conversation, or just compacted) everything is estimated. The estimate
is a cheap characters / 4, the usual ratio for English and code: tokenizers differ per
model, and the compaction threshold (`BURROW_COMPACT_AT`) leaves the margin for the error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from burrow.llm.base import Message, ToolSpec
from burrow.llm.catalog import describe
from burrow.llm.factory import PROVIDERS, split_model
from burrow.runs.journal.events import EventType, Usage
from burrow.runs.journal.journal import Journal

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # tokens of role and framing per message, as chat formats spend them
IMAGE_TOKENS = 1_600  # what a large image costs at Anthropic and OpenAI (high detail)


def context_window(model: str | None, override: int | None = None) -> int:
    """Tokens the model accepts in one request: the operator's override, else the
    catalog's entry (a conservative default for models it does not know)."""
    if override:
        return override
    provider, name = split_model(model or "")
    return describe(provider if provider in PROVIDERS else "openai", name).context_window


def estimate_text(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_message(m: Message) -> int:
    chars = len(m.content) + len(m.thinking)
    chars += sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
    chars += sum(len(b.text) + len(b.signature) + len(b.redacted) for b in m.thinking_blocks)
    return MESSAGE_OVERHEAD + -(-chars // CHARS_PER_TOKEN) + IMAGE_TOKENS * len(m.images)


def estimate(messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """Tokens of a request, by characters / 4."""
    total = sum(estimate_message(m) for m in messages)
    for spec in tools:
        total += estimate_text(spec.name + spec.description + json.dumps(spec.parameters))
    return total


async def context_used(journal: Journal, cids: Sequence[str]) -> dict[str, int]:
    """Tokens each conversation's context holds, as the UI's meter shows it: the provider's
    count for the last answer (prompt + completion), or the size a later compaction left.
    Conversations with neither yet are left out (0)."""
    last = await journal.last_of(cids, EventType.USAGE, EventType.CONTEXT_COMPACTED)
    used = {}
    for cid, event in last.items():
        data = event.data
        if event.type == EventType.CONTEXT_COMPACTED:
            used[cid] = int(data.get("tokens_after") or 0)
        else:  # a summary call's usage is always followed by its context.compacted
            used[cid] = Usage.read(data).tokens
    return used
