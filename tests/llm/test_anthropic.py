"""AnthropicProvider against a real HTTP server that speaks the Messages API's SSE stream."""

from __future__ import annotations

import json
import time

import pytest

from burrow.llm.anthropic_messages import AnthropicProvider, list_models
from burrow.llm.anthropic_wire import wire_messages
from burrow.llm.base import (
    Done,
    Image,
    Message,
    ModelError,
    Retry,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from burrow.llm.catalog import pricing
from burrow.llm.retry import KEPT, RetryingProvider
from tests.fakes import collect
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    given_key,
    message,
    overloaded,
    prompt_too_long,
    rate_limited,
    redacted,
    text,
    thinking,
    tool_use,
)

KEY = "sk-ant-test-0123456789"
HELLO = [Message(role="system", content="Be brief."), Message(role="user", content="hello")]
BASH = ToolSpec("bash", "Run a command", {"type": "object", "properties": {}})
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+" + "x" * 200 + "=="


def provider(
    srv: FakeAnthropicServer, model: str = "claude-test", **kwargs: float
) -> AnthropicProvider:
    return AnthropicProvider(model, KEY, srv.base_url, **kwargs)  # type: ignore[arg-type]


def retrying(srv: FakeAnthropicServer, **kwargs: float) -> RetryingProvider:
    inner = provider(srv, "claude-test", **kwargs)
    return RetryingProvider(inner, base_delay=0.001, max_delay=0.01)


async def failure(srv: FakeAnthropicServer, **kwargs: float) -> ModelError:
    with pytest.raises(ModelError) as caught:
        await collect(provider(srv, "claude-test", **kwargs).stream(HELLO, []))
    assert KEY not in caught.value.message
    return caught.value


async def test_streams_text_usage_and_one_done(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(message([text("Hello there, friend.")], usage=(25, 12)))
    answer = await collect(provider(fake_anthropic).stream(HELLO, []))
    assert answer.text == "Hello there, friend."
    assert sum(isinstance(e, TextDelta) for e in answer.events) == 3  # streamed, not batched
    assert answer.events[-2:] == [Usage(prompt_tokens=25, completion_tokens=12), Done("stop")]
    assert given_key(fake_anthropic.headers[0]) == KEY
    assert fake_anthropic.headers[0]["anthropic-version"]


async def test_two_parallel_tool_calls(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(
        message(
            [
                text("Let me look."),
                tool_use("toolu_01", "bash", {"command": "ls -la"}),
                tool_use("toolu_02", "read_file", {"path": "README.md"}),
            ]
        )
    )
    answer = await collect(provider(fake_anthropic).stream(HELLO, [BASH]))
    assert answer.text == "Let me look."
    assert answer.tool_calls == [
        ToolCall("toolu_01", "bash", '{"command": "ls -la"}'),
        ToolCall("toolu_02", "read_file", '{"path": "README.md"}'),
    ]
    assert answer.finish_reason == "tool_calls"


async def test_thinking_signature_comes_back_unchanged(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(
        message(
            [
                thinking("The user wants files listed; bash with ls.", SIGNATURE),
                tool_use("toolu_01", "bash", {"command": "ls"}),
            ]
        ),
        message([text("Two files.")]),
    )
    first = await collect(provider(fake_anthropic).stream(HELLO, [BASH]))
    assert first.thinking == "The user wants files listed; bash with ls."
    assert sum(isinstance(e, ThinkingDelta) for e in first.events) == 2
    [block] = [e for e in first.events if isinstance(e, ThinkingBlock)]
    assert block == ThinkingBlock(first.thinking, SIGNATURE)

    history = [
        *HELLO,
        Message(
            role="assistant",
            thinking=first.thinking,
            tool_calls=tuple(first.tool_calls),
            thinking_blocks=(block,),
        ),
        Message(role="tool", content="a.txt\nb.txt\n", tool_call_id="toolu_01", name="bash"),
    ]
    await collect(provider(fake_anthropic).stream(history, [BASH]))
    assistant = fake_anthropic.requests[1]["messages"][1]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": first.thinking, "signature": SIGNATURE},
            {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "ls"}},
        ],
    }
    assert json.dumps(SIGNATURE).encode() in fake_anthropic.raw_requests[1]


async def test_redacted_thinking_is_kept_opaque(fake_anthropic: FakeAnthropicServer) -> None:
    opaque = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP" * 3
    fake_anthropic.enqueue(message([redacted(opaque), text("Done.")]))
    answer = await collect(provider(fake_anthropic).stream(HELLO, []))
    assert answer.thinking == ""  # nothing readable to show
    [block] = [e for e in answer.events if isinstance(e, ThinkingBlock)]
    assert block == ThinkingBlock(redacted=opaque)
    history = [
        *HELLO,
        Message(role="assistant", content="Done.", thinking_blocks=(block,)),
        Message(role="user", content="thanks"),
    ]
    await collect(provider(fake_anthropic).stream(history, []))
    assert fake_anthropic.requests[1]["messages"][1]["content"][0] == {
        "type": "redacted_thinking",
        "data": opaque,
    }


async def test_overloaded_529_is_retried_and_announced(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(overloaded(), message([text("Recovered.")]))
    answer = await collect(retrying(fake_anthropic).stream(HELLO, []))
    assert answer.text == "Recovered."
    [retry] = [e for e in answer.events if isinstance(e, Retry)]
    assert retry.attempt == 1
    assert retry.reason == (
        f"The Anthropic API at {fake_anthropic.base_url} is overloaded (529: Overloaded)."
    )
    assert len(fake_anthropic.requests) == 2


async def test_overloaded_error_event_mid_stream_is_retried(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(
        message([], error=("overloaded_error", "Overloaded")), message([text("Second try.")])
    )
    answer = await collect(retrying(fake_anthropic).stream(HELLO, []))
    assert answer.text == "Second try."
    assert len(fake_anthropic.requests) == 2


async def test_rate_limit_waits_as_long_as_retry_after_says(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(rate_limited(retry_after="0.4"), message([text("ok")]))
    started = time.monotonic()
    answer = await collect(retrying(fake_anthropic).stream(HELLO, []))
    assert time.monotonic() - started >= 0.4
    [retry] = [e for e in answer.events if isinstance(e, Retry)]
    assert retry.delay_s == 0.4
    assert "rate limiting requests (429: Number of request tokens" in retry.reason


async def test_cache_tokens_are_counted_and_priced(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(message([text("Cached.")], usage=(30, 12), cache=(100, 2000)))
    answer = await collect(provider(fake_anthropic, "claude-haiku-4-5").stream(HELLO, []))
    assert answer.usage == Usage(
        prompt_tokens=2130, completion_tokens=12, cache_read_tokens=2000, cache_write_tokens=100
    )
    # $1 per million uncached, 0.1x read, 1.25x write, $5 per million out.
    expected = (30 * 1.0 + 2000 * 0.1 + 100 * 1.25 + 12 * 5.0) / 1e6
    assert pricing("anthropic", "claude-haiku-4-5").cost(answer.usage) == pytest.approx(expected)


async def test_bad_key_is_explained_and_not_retried() -> None:
    with FakeAnthropicServer(api_key="sk-ant-the-right-one") as srv:
        with pytest.raises(ModelError) as caught:
            await collect(retrying(srv).stream(HELLO, []))
        assert len(srv.requests) == 1
    assert caught.value.message == (
        f"The Anthropic API at {srv.base_url} rejected the API key (invalid x-api-key): check "
        "ANTHROPIC_API_KEY, or set the key on the settings page."
    )
    assert not caught.value.retryable


async def test_prompt_too_long_asks_to_compact(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(prompt_too_long())
    error = await failure(fake_anthropic)
    assert error.code == "context_too_long"
    assert not error.retryable
    assert error.message == (
        "The conversation is too long for claude-test (prompt is too long: 212345 tokens > "
        "200000 maximum): compact it or start a new conversation."
    )


async def test_request_carries_system_tools_thinking_and_cache_breakpoints(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    conversation = [
        *HELLO,
        Message(role="assistant", tool_calls=(ToolCall("toolu_9", "bash", '{"command": "ls"}'),)),
        Message(role="tool", content="", tool_call_id="toolu_9", name="bash"),
        Message(role="user", content="and now?"),  # steering: shares the tool results' turn
    ]
    anthropic = AnthropicProvider(
        "claude-haiku-4-5", KEY, fake_anthropic.base_url, thinking_budget=2048
    )
    await collect(anthropic.stream(conversation, [BASH]))
    body = fake_anthropic.requests[0]
    ephemeral = {"type": "ephemeral"}
    assert body["model"] == "claude-haiku-4-5"
    assert body["stream"] is True
    assert body["max_tokens"] == 64_000
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": ephemeral}]
    assert body["tools"] == [
        {
            "name": "bash",
            "description": "Run a command",
            "input_schema": BASH.parameters,
            "cache_control": ephemeral,
        }
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hello", "cache_control": ephemeral}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_9", "name": "bash", "input": {"command": "ls"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_9", "content": "(no output)"},
                {"type": "text", "text": "and now?", "cache_control": ephemeral},
            ],
        },
    ]


async def test_models_without_thinking_are_not_asked_to_think(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    old = AnthropicProvider(
        "claude-3-5-haiku-latest", KEY, fake_anthropic.base_url, thinking_budget=4096
    )
    await collect(old.stream(HELLO, []))
    assert "thinking" not in fake_anthropic.requests[0]
    assert fake_anthropic.requests[0]["max_tokens"] == 8192


async def test_a_bounded_call_asks_for_that_many_tokens_and_no_thinking(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    """A compaction's summary is bounded: thinking would need a budget under the bound."""
    anthropic = AnthropicProvider(
        "claude-haiku-4-5", KEY, fake_anthropic.base_url, thinking_budget=2048
    )
    await collect(anthropic.stream(HELLO, [], max_tokens=300))
    assert fake_anthropic.requests[0]["max_tokens"] == 300
    assert "thinking" not in fake_anthropic.requests[0]


async def test_stream_closed_before_the_end(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.enqueue(message([text("Half an answer")], stop_after=4))
    error = await failure(fake_anthropic)
    assert error.retryable
    assert error.message == (
        f"The model stream ended early: the Anthropic API at {fake_anthropic.base_url} closed "
        "it before the answer was finished. Trying again usually helps."
    )


async def test_list_models_with_a_good_and_a_bad_key() -> None:
    with FakeAnthropicServer(api_key=KEY, models=["claude-a", "claude-b"]) as srv:
        assert await list_models(KEY, srv.base_url) == ["claude-a", "claude-b"]
        with pytest.raises(ModelError, match="rejected the API key") as from_environment:
            await list_models("sk-ant-wrong-key", srv.base_url)
        with pytest.raises(ModelError) as from_the_field:
            await list_models("sk-ant-wrong-key", srv.base_url, key_in_settings=True)
    assert "ANTHROPIC_API_KEY" in from_environment.value.message
    # Typed into the settings page: that field is named, not a variable never set.
    assert from_the_field.value.message == (
        f"The Anthropic API at {srv.base_url} rejected the API key (invalid x-api-key): check "
        "the API key in Settings (copy it again from the Anthropic console)."
    )


async def test_first_token_timeout(fake_anthropic: FakeAnthropicServer) -> None:
    slow = message([text("too late")])
    slow.delay = 2.0
    fake_anthropic.enqueue(slow)
    error = await failure(fake_anthropic, first_token_timeout=0.3)
    assert error.retryable
    assert error.message == (
        f"The model server at {fake_anthropic.base_url} sent nothing for 0.3 s: it may be "
        "overloaded. Try again."
    )


async def test_a_stall_before_any_text_is_retried(fake_anthropic: FakeAnthropicServer) -> None:
    # message_start and a ping, then silence: nothing was shown, so try again.
    fake_anthropic.enqueue(message([text("lost")], stop_after=2, end="hang"), message([text("ok")]))
    # 1 s, not less: on a loaded machine the second answer's first event took over 0.3 s.
    answer = await collect(retrying(fake_anthropic, first_token_timeout=1.0).stream(HELLO, []))
    assert answer.text == "ok"
    [retry] = [e for e in answer.events if isinstance(e, Retry)]
    assert "sent nothing for 1 s" in retry.reason


async def test_a_stall_after_text_keeps_it_and_is_not_retried(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.enqueue(
        message([text("Half of it")], stop_after=4, end="hang"), message([text("a copy")])
    )
    seen: list[object] = []
    with pytest.raises(ModelError) as caught:
        async for event in retrying(fake_anthropic, idle_timeout=0.3).stream(HELLO, []):
            seen.append(event)
    assert seen == [TextDelta("Half ")]
    assert caught.value.message == (
        f"The model stream stalled: the server at {fake_anthropic.base_url} sent nothing for "
        f"0.3 s in the middle of the answer (limit: BURROW_MODEL_IDLE_TIMEOUT). {KEPT}"
    )
    assert fake_anthropic.pending == 1  # the second reply was never asked for


def test_images_go_as_base64_blocks_before_the_text() -> None:
    image = Image("image/png", "iVBORw0KGgo=")
    [turn] = wire_messages([Message(role="user", content="what is this?", images=(image,))])
    assert turn["content"] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": image.data},
        },
        {"type": "text", "text": "what is this?"},
    ]


async def test_newer_models_think_adaptively(fake_anthropic: FakeAnthropicServer) -> None:
    newer = AnthropicProvider("claude-opus-4-7", KEY, fake_anthropic.base_url, thinking_budget=4096)
    await collect(newer.stream(HELLO, []))
    assert fake_anthropic.requests[0]["thinking"] == {"type": "adaptive", "display": "summarized"}
    off = AnthropicProvider("claude-opus-4-7", KEY, fake_anthropic.base_url, thinking_budget=0)
    await collect(off.stream(HELLO, []))
    assert "thinking" not in fake_anthropic.requests[1]
