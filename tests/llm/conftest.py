"""Fixtures for the model-access tests: a real fake OpenAI server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes import FakeOpenAIServer


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv
