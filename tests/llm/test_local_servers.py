"""OpenAICompatProvider against the ways local model servers differ from OpenAI.

The answers are the shapes those servers send, not recordings of a run: llama-cpp-python
0.3's server (its chat handlers raise "Automatic streaming tool choice is not supported" for
a streamed request with tools, which its error route answers as a 500 in OpenAI's error
shape; its whole answers carry `tool_calls` without an `index`), and servers that leave a
Hermes-style `<tool_call>` block or a bare JSON call in the text (llama.cpp's server without
`--jinja`, Ollama and vLLM with some templates). Each test failed before the provider knew
the quirk: the 500 ended the turn, the calls were prose that ended the run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from burrow.llm.base import Message, ModelError, TextDelta, ToolCall, ToolSpec
from burrow.llm.openai_compat import (
    OpenAICompatProvider,
)
from burrow.llm.server_traits import forget, traits
from burrow.llm.text_tool_calls import TextToolCallReader
from tests.fakes import FakeOpenAIServer, StreamReply, chunk, collect, text_reply, tool_call_reply
from tests.fakes.openai_server import ErrorReply, Reply, WholeReply

BASH = ToolSpec("bash", "Run a command", {"type": "object", "properties": {}})
LS = json.dumps({"command": "ls"})
# What SmolLM2 on chatml-function-calling writes for `ls > out.txt`: the template escaped
# what it read, and it copies the escape (measured in the real-models issue).
ESCAPED = json.dumps({"command": "ls &gt; out.txt"})
UNESCAPED = json.dumps({"command": "ls > out.txt"})


def provider(srv: FakeOpenAIServer) -> OpenAICompatProvider:
    return OpenAICompatProvider("fake-model", "not-needed", srv.base_url)


def llama_cpp_python(body: dict[str, Any]) -> Reply:
    """llama-cpp-python's server with `--chat_format chatml-function-calling`."""
    if body.get("stream") and body.get("tools"):
        return ErrorReply(
            500, "Automatic streaming tool choice is not supported", type="internal_server_error"
        )
    if not body.get("tools"):
        return text_reply("Hi.")
    return WholeReply(
        {
            "id": "chatcmpl-7c1d",
            "object": "chat.completion",
            "created": 1764670000,
            "model": "smollm2-135m-instruct",
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "index": 0,
                    "logprobs": None,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call__0_bash_cmpl-7c1d",
                                "type": "function",
                                "function": {"name": "bash", "arguments": ESCAPED},
                            }
                        ],
                        "function_call": {"name": "bash:", "arguments": ESCAPED},
                    },
                }
            ],
            "usage": {"prompt_tokens": 171, "completion_tokens": 12, "total_tokens": 183},
        }
    )


async def test_a_server_refusing_streamed_tools_is_asked_unstreamed_from_then_on() -> None:
    with FakeOpenAIServer(responder=llama_cpp_python) as srv:
        forget(srv.base_url)
        first = await collect(provider(srv).stream([], [BASH]))
        # Known by its refusal for llama-cpp-python, whose templates escape: undone.
        assert first.tool_calls == [ToolCall("call__0_bash_cmpl-7c1d", "bash", UNESCAPED)]
        assert first.usage is not None and first.usage.prompt_tokens == 171
        assert first.finish_reason == "tool_calls"
        assert [r.get("stream") for r in srv.requests] == [True, None]
        assert "stream_options" not in srv.requests[1]
        # Learned: the next tool turn (a new provider, as each run builds) goes unstreamed
        # at once; a turn without tools still streams.
        again = await collect(provider(srv).stream([], [BASH]))
        assert again.tool_calls == first.tool_calls
        plain = await collect(provider(srv).stream([], []))
        assert plain.text == "Hi."
        assert [r.get("stream") for r in srv.requests] == [True, None, None, True]
        assert traits(srv.base_url).stream_tools is False  # what the settings page shows
        forget(srv.base_url)


async def test_another_server_error_is_not_taken_for_the_refusal() -> None:
    def busy(_body: dict[str, Any]) -> Reply:
        return ErrorReply(500, "CUDA out of memory while decoding", type="internal_server_error")

    with FakeOpenAIServer(responder=busy) as srv:
        with pytest.raises(ModelError, match="CUDA out of memory"):
            await collect(provider(srv).stream([], [BASH]))
        assert len(srv.requests) == 1 and traits(srv.base_url).stream_tools is None


async def test_a_tool_call_block_in_the_text_is_a_call_and_never_shown(
    fake_openai: FakeOpenAIServer,
) -> None:
    # llama.cpp's server without --jinja, a Qwen2.5 / Hermes template: the block streamed
    # in pieces that split its tags.
    pieces = ["I'll list the files.\n<tool", '_call>\n{"name": "bash", "argu',
              'ments": {"command": "ls"}}\n</tool_', "call>"]  # fmt: skip
    fake_openai.enqueue(
        StreamReply([chunk(content=p) for p in pieces] + [chunk(finish_reason="stop")])
    )
    answer = await collect(provider(fake_openai).stream([], [BASH]))
    assert answer.tool_calls == [ToolCall("call_text_0", "bash", LS)]
    assert answer.text == "I'll list the files.\n"
    assert traits(fake_openai.base_url).tool_format == "text"
    assert all("<tool" not in e.text for e in answer.events if isinstance(e, TextDelta))


async def test_an_answer_that_is_a_json_call_is_a_call(fake_openai: FakeOpenAIServer) -> None:
    # Ollama and vLLM with some templates: the call as the whole content, its arguments a
    # JSON string as the wire would have them.
    whole = json.dumps({"name": "bash", "arguments": LS})
    fake_openai.enqueue(text_reply(whole), text_reply(f"[{whole}, {whole}]"))
    answer = await collect(provider(fake_openai).stream([], [BASH]))
    assert answer.tool_calls == [ToolCall("call_text_0", "bash", LS)] and answer.text == ""
    two = await collect(provider(fake_openai).stream([], [BASH]))
    assert [c.name for c in two.tool_calls] == ["bash", "bash"]


async def test_text_that_only_looks_like_a_call_stays_text(fake_openai: FakeOpenAIServer) -> None:
    prose = [
        '{"answer": 42}',  # JSON, but no call
        json.dumps({"name": "rm_rf", "arguments": {}}),  # a tool that was not offered
        '<tool_call>{"name": "bash", "arguments": [1]}</tool_call> done',  # not an object
        "a < b and <tool_call> never closed",
    ]
    for text in prose:
        fake_openai.enqueue(text_reply(text))
        answer = await collect(provider(fake_openai).stream([], [BASH]))
        assert (answer.text, answer.tool_calls) == (text, []), text


async def test_without_tools_text_is_never_held(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(text_reply('{"a": 1, "b": 2}'))
    answer = await collect(provider(fake_openai).stream([], []))
    assert sum(isinstance(e, TextDelta) for e in answer.events) == 4  # word by word


async def test_the_servers_own_calls_win_and_the_block_stays_text(
    fake_openai: FakeOpenAIServer,
) -> None:
    block = f'<tool_call>{{"name": "bash", "arguments": {LS}}}</tool_call>'
    fake_openai.enqueue(tool_call_reply([("bash", {"command": "pwd"})], text=block))
    answer = await collect(provider(fake_openai).stream([], [BASH]))
    assert answer.tool_calls == [ToolCall("call_0", "bash", json.dumps({"command": "pwd"}))]
    assert answer.text == block


def test_the_reader_holds_only_what_may_open_a_block() -> None:
    reader = TextToolCallReader({"bash"})
    assert reader.feed("a <") == "a "
    assert reader.feed("b> c <tool_") == "<b> c "
    assert reader.feed("x") == "<tool_x"
    assert reader.finish() == "" and reader.calls == []


async def test_a_server_refusing_null_content_gets_empty_strings_from_then_on() -> None:
    """A validator that wants a string where OpenAI's wire form has `content: null` (an
    assistant turn that only called tools): asked again with "", and from then on."""

    def strict(body: dict[str, Any]) -> Reply:
        for n, m in enumerate(body["messages"]):
            if m.get("content", "") is None:
                return ErrorReply(400, f"messages[{n}].content: expected a string, got null")
        return text_reply("Done.")

    history = [
        Message(role="user", content="list"),
        Message(role="assistant", tool_calls=(ToolCall("c1", "bash", LS),)),
        Message(role="tool", content="a.txt", tool_call_id="c1", name="bash"),
    ]
    with FakeOpenAIServer(responder=strict) as srv:
        forget(srv.base_url)
        answer = await collect(provider(srv).stream(history, [BASH]))
        assert answer.text == "Done."
        assert [r["messages"][1]["content"] for r in srv.requests] == [None, ""]
        again = await collect(provider(srv).stream(history, [BASH]))
        assert again.text == "Done." and srv.requests[-1]["messages"][1]["content"] == ""
        assert len(srv.requests) == 3  # no refused request the second time
        forget(srv.base_url)


async def test_a_refusal_of_something_else_is_not_retried_as_null_content() -> None:
    def refuses(_body: dict[str, Any]) -> Reply:
        return ErrorReply(400, "messages[1].content: expected a string, got null")

    with FakeOpenAIServer(responder=refuses) as srv:
        # No null content in the request: the same refusal is the request's fault, said once.
        with pytest.raises(ModelError, match="expected a string"):
            await collect(provider(srv).stream([Message(role="user", content="hi")], []))
        assert len(srv.requests) == 1 and not traits(srv.base_url).empty_content
