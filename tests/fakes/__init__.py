"""Fakes at the model boundary, shared by the test suites."""

from tests.fakes.answers import Answer, collect
from tests.fakes.openai_server import (
    ErrorReply,
    FakeOpenAIServer,
    StreamReply,
    chunk,
    error_reply,
    text_reply,
    tool_call_reply,
    tool_fragment,
)

__all__ = [
    "Answer",
    "ErrorReply",
    "FakeOpenAIServer",
    "StreamReply",
    "chunk",
    "collect",
    "error_reply",
    "text_reply",
    "tool_call_reply",
    "tool_fragment",
]
