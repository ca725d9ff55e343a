"""The model catalog: which known model a name is, and what its tokens cost."""

from __future__ import annotations

import pytest

from burrow.llm.base import Pricing, Usage
from burrow.llm.catalog import describe, lookup, pricing

CACHED = Usage(prompt_tokens=1_000_000, completion_tokens=0, cache_read_tokens=800_000)


def test_dated_snapshots_find_their_family_by_the_longest_name() -> None:
    mini = lookup("openai", "gpt-4o-mini-2024-07-18")
    assert mini is not None and mini.name == "gpt-4o-mini"
    assert lookup("openai", "gpt-4o-2024-08-06").name == "gpt-4o"  # type: ignore[union-attr]
    assert lookup("anthropic", "claude-haiku-4-5-20251001").name == "claude-haiku-4-5"  # type: ignore[union-attr]
    assert lookup("openai", "claude-haiku-4-5") is None  # providers do not mix


def test_unknown_models_get_conservative_defaults_and_no_price() -> None:
    info = describe("openai", "llama3.2:8b")
    assert (info.context_window, info.vision, info.pricing) == (128_000, False, Pricing())
    assert info.id == "openai:llama3.2:8b"


def test_cache_reads_cost_the_providers_share() -> None:
    # gpt-4o: $2.50 per million, cached $1.25: 200k uncached + 800k cached.
    assert pricing("openai", "gpt-4o").cost(CACHED) == pytest.approx(0.5 + 1.0)


def test_an_overridden_prompt_price_moves_the_cache_prices_with_it() -> None:
    price = pricing("anthropic", "claude-haiku-4-5", Pricing(prompt=2.0, completion=0.0))
    assert (price.prompt, price.completion, price.cache_write) == (2.0, 5.0, 2.5)
    assert price.cache_read == pytest.approx(0.2)
    explicit = Pricing(prompt=2.0, cache_read=0.0, cache_write=9.0)
    assert pricing("anthropic", "claude-x", explicit) == Pricing(2.0, 0.0, 0.0, 9.0)
