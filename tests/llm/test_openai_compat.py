"""OpenAICompatProvider against a real HTTP server that speaks the chat-completions stream."""

from __future__ import annotations

import json

import pytest

from burrow.llm.base import (
    CONTEXT_TOO_LONG,
    Done,
    Image,
    Message,
    ModelError,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from burrow.llm.openai_compat import OpenAICompatProvider, list_models
from burrow.llm.openai_wire import wire_messages
from burrow.ports import free_port
from tests.fakes import (
    FakeOpenAIServer,
    StreamReply,
    chunk,
    collect,
    error_reply,
    text_reply,
    tool_call_reply,
    tool_fragment,
)
from tests.fakes.openai_server import context_length_error

KEY = "sk-test-0123456789"
HELLO = [Message(role="user", content="hello")]
PNG = Image("image/png", "iVBORw0KGgo=")
BASH = ToolSpec("bash", "Run a command", {"type": "object", "properties": {}})


def provider(srv: FakeOpenAIServer, **kwargs: float) -> OpenAICompatProvider:
    return OpenAICompatProvider("fake-model", KEY, srv.base_url, **kwargs)  # type: ignore[arg-type]


async def failure(srv: FakeOpenAIServer, **kwargs: float) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await collect(provider(srv, **kwargs).stream(HELLO, []))
    assert KEY not in caught.value.message
    return caught.value


async def test_streams_text_reasoning_usage_and_one_done(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(text_reply("Hello there, friend.", reasoning="The user greets me."))
    answer = await collect(provider(fake_openai).stream(HELLO, []))
    assert answer.text == "Hello there, friend."
    assert answer.thinking == "The user greets me."
    assert sum(isinstance(e, TextDelta) for e in answer.events) == 3  # streamed, not batched
    assert answer.usage == Usage(prompt_tokens=12, completion_tokens=7)
    assert answer.events[-2:] == [Usage(12, 7), Done("stop")]
    assert sum(isinstance(e, Done) for e in answer.events) == 1


async def test_reasoning_field_of_newer_servers(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(text_reply("ok", reasoning="thinking hard", reasoning_field="reasoning"))
    answer = await collect(provider(fake_openai).stream(HELLO, []))
    assert answer.thinking == "thinking hard"


async def test_parallel_tool_calls_with_interleaved_fragments(
    fake_openai: FakeOpenAIServer,
) -> None:
    calls: list[tuple[str, dict[str, object] | str]] = [
        ("bash", {"command": "ls -la /workspace", "timeout": 30}),
        ("write_file", {"path": "a.txt", "content": "one\ntwo"}),
    ]
    fake_openai.enqueue(tool_call_reply(calls, text="Let me look."))
    answer = await collect(provider(fake_openai).stream(HELLO, [BASH]))
    assert answer.text == "Let me look."
    assert answer.tool_calls == [
        ToolCall("call_0", "bash", json.dumps(calls[0][1])),
        ToolCall("call_1", "write_file", json.dumps(calls[1][1])),
    ]
    fragments = [e.index for e in answer.events if isinstance(e, ToolCallDelta)]
    assert fragments == [0, 1, 0, 1, 0, 1, 0, 1]  # passed on in arrival order
    assert answer.finish_reason == "tool_calls"


async def test_calls_told_apart_by_id_when_every_index_is_zero(
    fake_openai: FakeOpenAIServer,
) -> None:
    # Some servers send each complete call with index 0.
    fake_openai.enqueue(
        StreamReply(
            [
                chunk(tool_calls=[tool_fragment(0, id="a", name="bash", arguments='{"x": 1}')]),
                chunk(tool_calls=[tool_fragment(0, id="b", name="bash", arguments='{"x": 2}')]),
                chunk(finish_reason="tool_calls"),
            ]
        )
    )
    answer = await collect(provider(fake_openai).stream(HELLO, [BASH]))
    assert answer.tool_calls == [
        ToolCall("a", "bash", '{"x": 1}'),
        ToolCall("b", "bash", '{"x": 2}'),
    ]
    assert answer.usage is None  # the server sent none: no invented usage


async def test_request_carries_conversation_tools_and_usage_option(
    fake_openai: FakeOpenAIServer,
) -> None:
    conversation = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="list files"),
        Message(
            role="assistant",
            thinking="I should run ls.",
            tool_calls=(ToolCall("call_9", "bash", '{"command": "ls"}'),),
        ),
        Message(role="tool", content="a.txt\n", tool_call_id="call_9", name="bash"),
        Message(role="tool", content="", tool_call_id="call_10", name="bash"),
    ]
    await collect(provider(fake_openai).stream(conversation, [BASH]))
    body = fake_openai.requests[0]
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a command",
                "parameters": BASH.parameters,
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "a.txt\n"},
        {"role": "tool", "tool_call_id": "call_10", "content": "(no output)"},
    ]
    assert fake_openai.headers[0]["authorization"] == f"Bearer {KEY}"


def test_wire_messages_drops_thinking_only_answers_and_keeps_text() -> None:
    wire = wire_messages(
        [
            Message(role="assistant", thinking="half a thought"),
            Message(role="assistant", content="Hi!", thinking="greet"),
            Message(role="assistant", tool_calls=(ToolCall("c", "bash", ""),)),
        ]
    )
    assert wire[0] == {"role": "assistant", "content": "Hi!"}
    assert wire[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert len(wire) == 2


async def test_no_tools_means_no_tools_field(fake_openai: FakeOpenAIServer) -> None:
    await collect(provider(fake_openai).stream(HELLO, []))
    assert "tools" not in fake_openai.requests[0]


async def test_rejected_key_is_not_retryable_and_never_echoed() -> None:
    with FakeOpenAIServer(api_key="the-right-key") as srv:
        error = await failure(srv)
    assert error.message == (
        f"The model server at {srv.base_url} rejected the API key (401: Incorrect API key "
        "provided: ***): check OPENAI_API_KEY."
    )
    assert not error.retryable


async def test_server_message_echoing_the_key_is_redacted(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(error_reply(400, f"bad key format {KEY}"))
    error = await failure(fake_openai)
    assert error.message == (
        f"The model server at {fake_openai.base_url} rejected the request "
        "(400: bad key format ***)."
    )
    assert not error.retryable


async def test_unknown_model_names_model_url_and_setting() -> None:
    with FakeOpenAIServer(models={"other-model"}) as srv:
        error = await failure(srv)
    assert error.message == (
        f"Model 'fake-model' was not found at {srv.base_url} (The model `fake-model` does not "
        "exist.): set BURROW_MODEL to a model that server offers, or OPENAI_BASE_URL to the "
        "server that has it."
    )
    assert not error.retryable


async def test_rate_limit_is_retryable_with_retry_after(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(error_reply(429, headers={"retry-after": "2"}))
    error = await failure(fake_openai)
    assert error.retryable
    assert error.retry_after == 2.0
    assert "rate limiting requests (429: Rate limit reached for requests.)" in error.message


async def test_exhausted_quota_is_not_retryable(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(error_reply(429, "You exceeded your quota.", code="insufficient_quota"))
    error = await failure(fake_openai)
    assert not error.retryable
    assert "out of quota (You exceeded your quota.): check its billing" in error.message


async def test_server_error_is_retryable(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(error_reply(500))
    error = await failure(fake_openai)
    assert error.retryable
    assert error.message == (
        f"The model server at {fake_openai.base_url} failed "
        "(500: The server had an error while processing your request.)."
    )


async def test_connection_dropped_mid_stream(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(StreamReply([chunk(content="Half an ans")], end="drop"))
    seen: list[object] = []
    with pytest.raises(ModelError) as caught:
        async for event in provider(fake_openai).stream(HELLO, []):
            seen.append(event)
    assert seen == [TextDelta("Half an ans")]
    assert caught.value.retryable
    assert caught.value.message.startswith(
        f"The model stream ended early: the connection to {fake_openai.base_url} was lost"
    )


async def test_stream_closed_without_finish(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(StreamReply([chunk(content="Half")], end="eof"))
    error = await failure(fake_openai)
    assert error.retryable
    assert error.message == (
        f"The model stream ended early: the server at {fake_openai.base_url} closed it before "
        "the answer was finished. Trying again usually helps."
    )


async def test_garbage_chunk_is_named_precisely(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(StreamReply([chunk(content="ok"), "<html>502 Bad Gateway</html>"]))
    error = await failure(fake_openai)
    assert error.message == (
        f"The model server at {fake_openai.base_url} sent a stream chunk that is not JSON "
        "(Expecting value at position 0): '<html>502 Bad Gateway</html>'"
    )


async def test_chunk_of_the_wrong_shape(fake_openai: FakeOpenAIServer) -> None:
    bad = chunk(content="x")
    bad["choices"][0]["delta"]["tool_calls"] = [{"index": 0, "function": {"name": 7}}]
    fake_openai.enqueue(StreamReply([bad]))
    error = await failure(fake_openai)
    assert error.message.startswith(
        f"The model server at {fake_openai.base_url} sent a malformed stream chunk "
        "(tool call name is int, not a string)"
    )


async def test_error_event_inside_the_stream(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(StreamReply([json.dumps({"error": {"message": "overloaded"}})]))
    error = await failure(fake_openai)
    assert error.retryable
    assert error.message == (
        f"The model server at {fake_openai.base_url} reported an error: overloaded"
    )


async def test_first_token_timeout(fake_openai: FakeOpenAIServer) -> None:
    slow = text_reply("too late")
    slow.delay = 2.0
    fake_openai.enqueue(slow)
    error = await failure(fake_openai, first_token_timeout=0.3)
    assert error.retryable
    assert error.message == (
        f"The model server at {fake_openai.base_url} sent nothing for 0.3 s: it may be "
        "overloaded. Try again."
    )


async def test_unreachable_server() -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with pytest.raises(ModelError) as caught:
        await collect(OpenAICompatProvider("m", KEY, base_url).stream(HELLO, []))
    assert caught.value.retryable
    assert caught.value.message.startswith(f"Could not reach the model server at {base_url} (")
    assert caught.value.message.endswith("): check OPENAI_BASE_URL and that the server is running.")


async def test_idle_timeout_mid_answer(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(StreamReply([chunk(content="Half"), chunk(content=" more")], chunk_delay=2))
    seen: list[object] = []
    with pytest.raises(ModelError) as caught:
        async for event in provider(fake_openai, idle_timeout=0.3).stream(HELLO, []):
            seen.append(event)
    assert seen == [TextDelta("Half")]
    assert caught.value.retryable
    assert caught.value.message == (
        f"The model stream stalled: the server at {fake_openai.base_url} sent nothing for "
        "0.3 s in the middle of the answer (limit: BURROW_MODEL_IDLE_TIMEOUT)."
    )


async def test_cached_prompt_tokens_are_counted(fake_openai: FakeOpenAIServer) -> None:
    reply = text_reply("ok", usage=None)
    usage = chunk(usage=(1000, 5))
    usage["usage"]["prompt_tokens_details"] = {"cached_tokens": 768}
    reply.chunks.append(usage)
    fake_openai.enqueue(reply)
    answer = await collect(provider(fake_openai).stream(HELLO, []))
    assert answer.usage == Usage(prompt_tokens=1000, completion_tokens=5, cache_read_tokens=768)


async def test_list_models_names_what_the_server_offers() -> None:
    with FakeOpenAIServer(api_key=KEY, models={"b-model", "a-model"}) as srv:
        assert await list_models(KEY, srv.base_url) == ["a-model", "b-model"]
        refused = r"rejected the API key \(401: .*\): check OPENAI_API_KEY"
        with pytest.raises(ModelError, match=refused):
            await list_models("sk-wrong-key-000", srv.base_url)


def test_images_go_as_data_urls_before_the_text() -> None:
    [wire] = wire_messages([Message(role="user", content="what is this?", images=(PNG,))])
    assert wire == {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": "what is this?"},
        ],
    }


async def test_a_context_over_the_window_is_named_so_it_can_be_compacted(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.enqueue(
        context_length_error(8192, 9000),  # OpenAI: the code says it
        error_reply(400, "This model's maximum context length is 4096 tokens."),  # vLLM
        error_reply(400, "Invalid 'messages[1].content': string too long."),  # something else
    )
    first, second, other = [await failure(fake_openai) for _ in range(3)]
    assert first.code == second.code == CONTEXT_TOO_LONG
    assert not first.retryable and "maximum context length is 8192" in first.message
    assert other.code == ""


async def test_a_bounded_call_says_so_in_the_request() -> None:
    """A compaction's summary call: `max_tokens`, the name every OpenAI-compatible server
    knows (OpenAI's own API gets `max_completion_tokens`)."""
    with FakeOpenAIServer() as srv:
        provider = OpenAICompatProvider("fake-model", "k", srv.base_url)
        await collect(provider.stream([Message("user", "sum up")], [], max_tokens=120))
        assert srv.requests[0]["max_tokens"] == 120
        assert "max_completion_tokens" not in srv.requests[0]
