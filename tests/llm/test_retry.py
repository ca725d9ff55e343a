"""RetryingProvider: transient failures are retried, a started answer never is."""

from __future__ import annotations

import pytest

from burrow.llm.base import Message, ModelError, Retry, ScriptedTurn
from burrow.llm.openai_compat import OpenAICompatProvider
from burrow.llm.retry import KEPT, RetryingProvider
from burrow.llm.scripted import ScriptedProvider
from tests.fakes import FakeOpenAIServer, StreamReply, chunk, collect, error_reply, text_reply

HELLO = [Message(role="user", content="hello")]
FLAKY = ScriptedTurn(error="The model server is busy.", error_retryable=True)


def retrying(*turns: ScriptedTurn, attempts: int = 3) -> tuple[RetryingProvider, ScriptedProvider]:
    inner = ScriptedProvider(turns)
    return RetryingProvider(inner, attempts=attempts, base_delay=0.001, max_delay=0.01), inner


async def test_retries_a_transient_failure_then_answers() -> None:
    provider, inner = retrying(FLAKY, FLAKY, ScriptedTurn(text="Hello!"))
    answer = await collect(provider.stream(HELLO, []))
    assert answer.text == "Hello!"
    assert len(inner.requests) == 3


async def test_gives_up_with_the_attempt_count() -> None:
    provider, inner = retrying(FLAKY, FLAKY, FLAKY, ScriptedTurn(text="never"))
    with pytest.raises(ModelError) as caught:
        await collect(provider.stream(HELLO, []))
    assert caught.value.message == "The model server is busy. (gave up after 3 attempts)"
    assert len(inner.requests) == 3


async def test_does_not_retry_what_cannot_get_better() -> None:
    provider, inner = retrying(ScriptedTurn(error="Bad key."), ScriptedTurn(text="never"))
    with pytest.raises(ModelError, match=r"^Bad key\.$"):
        await collect(provider.stream(HELLO, []))
    assert len(inner.requests) == 1


async def test_never_replays_a_partial_answer() -> None:
    partial = ScriptedTurn(text="Half of", error="Connection lost.", error_retryable=True)
    provider, inner = retrying(partial, ScriptedTurn(text="a second copy"))
    seen = []
    with pytest.raises(ModelError, match=rf"^Connection lost\. {KEPT}$"):
        async for event in provider.stream(HELLO, []):
            seen.append(event)
    assert len(inner.requests) == 1
    assert "".join(getattr(e, "text", "") for e in seen) == "Half of"


def test_backoff_grows_is_capped_and_honours_retry_after() -> None:
    provider = RetryingProvider(ScriptedProvider([]), base_delay=1, max_delay=8, max_retry_after=30)
    plain = ModelError("busy", retryable=True)
    assert 0.5 <= provider.delay(1, plain) <= 1
    assert 2 <= provider.delay(3, plain) <= 4
    assert 4 <= provider.delay(10, plain) <= 8
    # The server's Retry-After wins over a shorter backoff, up to max_retry_after.
    assert provider.delay(1, ModelError("429", retryable=True, retry_after=20)) == 20
    assert provider.delay(1, ModelError("429", retryable=True, retry_after=600)) == 30


async def test_server_error_then_success_over_http(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(error_reply(500), error_reply(429), text_reply("Recovered."))
    inner = OpenAICompatProvider("fake-model", "sk-test", fake_openai.base_url)
    provider = RetryingProvider(inner, base_delay=0.001, max_delay=0.01)
    answer = await collect(provider.stream(HELLO, []))
    assert answer.text == "Recovered."
    assert len(fake_openai.requests) == 3
    assert provider.name == "openai:fake-model"


async def test_drop_after_text_is_not_retried_over_http(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(StreamReply([chunk(content="Half")], end="drop"), text_reply("again"))
    inner = OpenAICompatProvider("fake-model", "sk-test", fake_openai.base_url)
    provider = RetryingProvider(inner, base_delay=0.001, max_delay=0.01)
    with pytest.raises(ModelError, match=r"^The model stream ended early"):
        await collect(provider.stream(HELLO, []))
    assert len(fake_openai.requests) == 1
    assert fake_openai.pending == 1


async def test_each_retry_is_announced_before_the_wait() -> None:
    provider, _ = retrying(FLAKY, ScriptedTurn(text="Hello!"))
    answer = await collect(provider.stream(HELLO, []))
    [retry] = [e for e in answer.events if isinstance(e, Retry)]
    assert answer.events[0] is retry  # first, before anything of the answer
    assert retry.attempt == 1
    assert retry.reason == "The model server is busy."
    assert 0 < retry.delay_s <= 0.01
