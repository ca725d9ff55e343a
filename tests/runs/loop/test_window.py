"""The window comes from the model catalog unless the operator overrides it; the
estimate counts what a request carries."""

from __future__ import annotations

from burrow.llm.base import Image, Message, ToolCall, ToolSpec
from burrow.llm.catalog import DEFAULT_CONTEXT_WINDOW
from burrow.runs.loop.window import IMAGE_TOKENS, MESSAGE_OVERHEAD, context_window, estimate


def test_the_window_is_the_catalogs_or_the_override() -> None:
    assert context_window("anthropic:claude-sonnet-4-5-20250929") == 200_000
    assert context_window("gpt-4.1-mini") == 1_047_576  # no prefix: openai
    assert context_window("openai:llama3.2:8b") == DEFAULT_CONTEXT_WINDOW  # unknown
    assert context_window("demo") == DEFAULT_CONTEXT_WINDOW
    assert context_window(None) == DEFAULT_CONTEXT_WINDOW
    assert context_window("anthropic:claude-sonnet-4-5", 32_000) == 32_000


def test_the_estimate_counts_text_calls_images_and_tools_by_characters_over_four() -> None:
    call = ToolCall("c1", "bash", '{"command": "ls"}')  # 4 + 17 characters
    messages = [
        Message(role="user", content="x" * 400, images=(Image("image/png", "AAAA"),)),
        Message(role="assistant", content="", tool_calls=(call,)),
    ]
    assert estimate(messages) == 2 * MESSAGE_OVERHEAD + 100 + IMAGE_TOKENS + 6
    spec = ToolSpec("t", "d" * 38, {})  # 1 + 38 + 2 characters of "{}"
    assert estimate([], [spec]) == 11
