"""What Burrow knows about well-known models: context window, vision, output limit, price.

Names match by the longest known prefix, so dated snapshots (`claude-sonnet-4-5-20250929`,
`gpt-4o-2024-08-06`) find their family. Unknown models still work; they just have no
price (cost 0 unless BURROW_PRICE_* says otherwise) and a conservative window.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from burrow.llm.base import Pricing

# Prompt-cache prices as multiples of the prompt price: Anthropic charges 1.25x to write
# (five-minute cache) and 0.1x to read; OpenAI caches on its own, reads at 0.5x or less.
CACHE_MULTIPLIERS = {"anthropic": (0.1, 1.25), "openai": (0.5, 1.0)}
DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_OUTPUT = 16_384


@dataclass(frozen=True)
class ModelInfo:
    provider: str
    name: str
    context_window: int
    vision: bool
    max_output: int
    pricing: Pricing
    thinking: Literal["", "budget", "adaptive"] = ""
    """How an Anthropic model is asked to think: with a token budget, or adaptively
    (the newer models, which decide how much); "": it cannot."""

    @property
    def id(self) -> str:
        return f"{self.provider}:{self.name}"


def _anthropic(
    name: str,
    prompt: float,
    completion: float,
    max_output: int,
    *,
    thinking: Literal["", "budget", "adaptive"] = "budget",
) -> ModelInfo:
    read, write = CACHE_MULTIPLIERS["anthropic"]
    price = Pricing(prompt, completion, cache_read=prompt * read, cache_write=prompt * write)
    return ModelInfo("anthropic", name, 200_000, True, max_output, price, thinking)


def _adaptive(name: str) -> ModelInfo:
    """A newer Claude family that thinks adaptively. Its price is not in this table:
    costs show 0 unless BURROW_PRICE_PROMPT and BURROW_PRICE_COMPLETION are set."""
    return ModelInfo("anthropic", name, 200_000, True, 32_000, Pricing(), "adaptive")


def _openai(
    name: str, prompt: float, completion: float, cached: float, window: int, max_output: int
) -> ModelInfo:
    price = Pricing(prompt, completion, cache_read=cached, cache_write=prompt)
    return ModelInfo("openai", name, window, True, max_output, price)


KNOWN: tuple[ModelInfo, ...] = (
    _anthropic("claude-opus-4-5", 5.0, 25.0, 64_000),
    _anthropic("claude-opus-4-1", 15.0, 75.0, 32_000),
    _anthropic("claude-opus-4", 15.0, 75.0, 32_000),
    _anthropic("claude-sonnet-4-5", 3.0, 15.0, 64_000),
    _anthropic("claude-sonnet-4", 3.0, 15.0, 64_000),
    _anthropic("claude-3-7-sonnet", 3.0, 15.0, 64_000),
    _anthropic("claude-haiku-4-5", 1.0, 5.0, 64_000),
    _anthropic("claude-3-5-haiku", 0.8, 4.0, 8_192, thinking=""),
    *(
        _adaptive(name)
        for name in (
            "claude-opus-4-6",
            "claude-opus-4-7",
            "claude-opus-4-8",
            "claude-sonnet-4-6",
            "claude-opus-5",
            "claude-sonnet-5",
            "claude-haiku-5",
            "claude-fable-5",
            "claude-mythos",
        )
    ),
    _openai("gpt-5", 1.25, 10.0, 0.125, 400_000, 128_000),
    _openai("gpt-5-mini", 0.25, 2.0, 0.025, 400_000, 128_000),
    _openai("gpt-4.1", 2.0, 8.0, 0.5, 1_047_576, 32_768),
    _openai("gpt-4.1-mini", 0.4, 1.6, 0.1, 1_047_576, 32_768),
    _openai("gpt-4.1-nano", 0.1, 0.4, 0.025, 1_047_576, 32_768),
    _openai("gpt-4o", 2.5, 10.0, 1.25, 128_000, 16_384),
    _openai("gpt-4o-mini", 0.15, 0.6, 0.075, 128_000, 16_384),
    _openai("o4-mini", 1.1, 4.4, 0.275, 200_000, 100_000),
)


def lookup(provider: str, model: str) -> ModelInfo | None:
    """The known model `model` is a version of, by the longest matching name."""
    matches = [i for i in KNOWN if i.provider == provider and model.startswith(i.name)]
    return max(matches, key=lambda info: len(info.name), default=None)


def known_models(provider: str) -> list[ModelInfo]:
    return [info for info in KNOWN if info.provider == provider]


def describe(provider: str, model: str) -> ModelInfo:
    """What is known of `model`, or conservative defaults for one Burrow has not met."""
    info = lookup(provider, model)
    if info is None:
        return ModelInfo(
            provider,
            model,
            DEFAULT_CONTEXT_WINDOW,
            False,
            DEFAULT_MAX_OUTPUT,
            Pricing(),
            thinking="adaptive" if provider == "anthropic" else "",  # as newer Claudes do
        )
    return replace(info, name=model)


def pricing(provider: str, model: str, overrides: Pricing | None = None) -> Pricing:
    """The price table's entry, with what the operator set (BURROW_PRICE_*) taking over.

    An overridden prompt price moves the cache prices with it, by the provider's
    multipliers, unless those are set too.
    """
    table = lookup(provider, model)
    price = table.pricing if table is not None else Pricing()
    if overrides is None:
        return price
    prompt = overrides.prompt or price.prompt
    completion = overrides.completion or price.completion
    read_x, write_x = CACHE_MULTIPLIERS.get(provider, (1.0, 1.0))
    cache_read, cache_write = price.cache_read, price.cache_write
    if overrides.prompt:
        cache_read, cache_write = prompt * read_x, prompt * write_x
    if overrides.cache_read is not None:
        cache_read = overrides.cache_read
    if overrides.cache_write is not None:
        cache_write = overrides.cache_write
    return Pricing(prompt, completion, cache_read=cache_read, cache_write=cache_write)
