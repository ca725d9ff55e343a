"""provider_from_config: what each model setting means, and what to do when it is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burrow.llm.anthropic_messages import AnthropicProvider
from burrow.llm.base import Message, ModelError
from burrow.llm.demo import DemoProvider
from burrow.llm.factory import (
    Endpoint,
    ModelConfig,
    ModelNotConfigured,
    provider_from_config,
    split_model,
)
from burrow.llm.openai_compat import OpenAICompatProvider
from burrow.llm.retry import RetryingProvider
from burrow.llm.scripted import ScriptedProvider
from tests.fakes import FakeOpenAIServer, collect, text_reply

HELLO = [Message(role="user", content="hello")]


def test_demo_needs_no_key() -> None:
    assert isinstance(provider_from_config(ModelConfig(model="demo")), DemoProvider)


async def test_scripted_model_continues_from_the_conversation(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "one"}, {"text": "two"}]))
    provider = provider_from_config(ModelConfig(model=f"scripted:{script}"))
    assert isinstance(provider, ScriptedProvider)
    history = [*HELLO, Message(role="assistant", content="one"), Message(role="user", content="?")]
    assert (await collect(provider.stream(history, []))).text == "two"


def test_missing_script_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Cannot read the model script"):
        provider_from_config(ModelConfig(model=f"scripted:{tmp_path / 'none.json'}"))


@pytest.mark.parametrize("model", [None, "gpt-4o"])
def test_no_key_and_no_server_says_what_to_set(model: str | None) -> None:
    with pytest.raises(ModelNotConfigured) as caught:
        provider_from_config(ModelConfig(model=model))
    assert isinstance(caught.value, ModelError)
    assert not caught.value.retryable
    assert caught.value.message == (
        "No model configured: set OPENAI_API_KEY (and BURROW_MODEL, OPENAI_BASE_URL for other "
        "servers) or start with --model demo."
    )


def test_openai_model_is_retried_and_named() -> None:
    provider = provider_from_config(ModelConfig(model="gpt-4.1", api_key="sk-x"))
    assert isinstance(provider, RetryingProvider)
    assert isinstance(provider.inner, OpenAICompatProvider)
    assert provider.name == "openai:gpt-4.1"
    assert provider.inner.base_url == "https://api.openai.com/v1"


def test_key_without_model_uses_the_default_openai_model() -> None:
    assert provider_from_config(ModelConfig(api_key="sk-x")).name == "openai:gpt-4o-mini"


def test_local_server_without_model_name_asks_for_one() -> None:
    with pytest.raises(ModelNotConfigured, match="set BURROW_MODEL to a model the server at"):
        provider_from_config(ModelConfig(base_url="http://127.0.0.1:11434/v1"))


async def test_local_server_needs_no_key(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue(text_reply("local hello"))
    config = ModelConfig(model="llama3.2", base_url=fake_openai.base_url)
    answer = await collect(provider_from_config(config).stream(HELLO, []))
    assert answer.text == "local hello"
    assert fake_openai.requests[0]["model"] == "llama3.2"
    assert fake_openai.headers[0]["authorization"] == "Bearer not-needed"


def test_anthropic_prefix_builds_a_retried_anthropic_provider() -> None:
    config = ModelConfig(
        model="anthropic:claude-haiku-4-5",
        anthropic=Endpoint("sk-ant-x", "http://127.0.0.1:9/"),
        thinking_budget=2048,
    )
    provider = provider_from_config(config)
    assert isinstance(provider, RetryingProvider)
    assert isinstance(provider.inner, AnthropicProvider)
    assert provider.name == "anthropic:claude-haiku-4-5"
    assert provider.inner.base_url == "http://127.0.0.1:9"
    assert provider.inner.thinking == {"type": "enabled", "budget_tokens": 2048}


def test_anthropic_without_a_key_says_what_to_set() -> None:
    with pytest.raises(ModelNotConfigured) as caught:
        provider_from_config(ModelConfig(model="anthropic:claude-haiku-4-5", api_key="sk-openai"))
    assert caught.value.message == (
        "No Anthropic API key for claude-haiku-4-5: set ANTHROPIC_API_KEY (or the key on the "
        "settings page), or start with --model demo."
    )


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", ("openai", "gpt-4o")),
        ("openai:gpt-4o", ("openai", "gpt-4o")),
        ("anthropic:claude-x", ("anthropic", "claude-x")),
        ("llama3.2:8b", ("openai", "llama3.2:8b")),  # Ollama's tags are part of the name
        ("scripted:/tmp/a.json", ("scripted", "/tmp/a.json")),
        ("demo", ("demo", "")),
    ],
)
def test_split_model(model: str, expected: tuple[str, str]) -> None:
    assert split_model(model) == expected


async def test_openai_prefix_reaches_the_server_without_it(fake_openai: FakeOpenAIServer) -> None:
    config = ModelConfig(model="openai:fake-model", base_url=fake_openai.base_url)
    await collect(provider_from_config(config).stream(HELLO, []))
    assert fake_openai.requests[0]["model"] == "fake-model"
