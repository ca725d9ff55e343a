"""Fixtures for the model-access tests: a real fake OpenAI server per test."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.fakes import FakeOpenAIServer
from tests.fakes.anthropic_server import FakeAnthropicServer


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def no_server_left_running() -> Iterator[None]:
    yield
    left = [t.name for t in threading.enumerate() if t.name.startswith("fake-")]
    assert not left, f"fake model servers still running: {left}"
