"""Which provider a model setting means: `[provider:]model`, `demo` or `scripted:<file>`.

`openai:` (the default without a prefix) is any OpenAI-compatible server, `anthropic:` the
Anthropic Messages API. Other colons belong to the model name (`llama3.2:8b` on Ollama).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from burrow.llm.base import ModelError, Pricing, Provider
from burrow.llm.catalog import pricing
from burrow.llm.demo import DemoProvider
from burrow.llm.retry import RetryingProvider
from burrow.llm.scripted import ScriptedProvider, read_script
from burrow.llm.stalls import StallLimits

PROVIDERS = ("openai", "anthropic")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"  # only when talking to api.openai.com itself
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True)
class Endpoint:
    api_key: str | None = None
    base_url: str | None = None
    """None: the provider's own API (api.openai.com, api.anthropic.com)."""


@dataclass(frozen=True)
class ModelConfig:
    model: str | None = None
    """`[openai:|anthropic:]<model>`, `demo` or `scripted:<file.json>`."""
    api_key: str | None = None
    """The OpenAI-compatible server's key."""
    base_url: str | None = None
    """An OpenAI-compatible server; None means api.openai.com."""
    on_settings_page: frozenset[str] = frozenset()
    """Which of model, api_key, base_url were saved on the settings page (errors name them)."""
    anthropic: Endpoint = field(default_factory=Endpoint)
    prices: Pricing | None = None
    """Overrides of the price table (BURROW_PRICE_*); zero or None: the table's price."""
    limits: StallLimits = field(default_factory=StallLimits)
    thinking_budget: int = 0
    """Tokens of extended thinking per Anthropic answer; 0: none."""

    def endpoint(self, provider: str) -> Endpoint:
        if provider == "anthropic":
            return self.anthropic
        return Endpoint(self.api_key, self.base_url)

    def pricing(self) -> Pricing:
        provider, name = split_model(self.model or "")
        return pricing(provider, name, self.prices)


class ModelNotConfigured(ModelError):
    """No usable model setting; the message says which variables to set."""


NOT_CONFIGURED = (
    "No model configured: set OPENAI_API_KEY (and BURROW_MODEL, OPENAI_BASE_URL for other "
    "servers) or start with --model demo."
)


def split_model(model: str) -> tuple[str, str]:
    """(provider, name): `anthropic:claude-x` -> ("anthropic", "claude-x"), `gpt-4o` ->
    ("openai", "gpt-4o"), `demo` -> ("demo", ""), `scripted:f` -> ("scripted", "f")."""
    model = model.strip()
    if model == "demo":
        return "demo", ""
    prefix, colon, rest = model.partition(":")
    if colon and prefix in (*PROVIDERS, "scripted"):
        return prefix, rest.strip()
    return "openai", model


def missing(cfg: ModelConfig) -> str | None:
    """What must still be set before `cfg` names a usable model, or None."""
    provider, model = split_model(cfg.model or "")
    if provider == "anthropic":
        if not model:
            return "No model name after anthropic: set BURROW_MODEL to e.g. " + (
                "anthropic:claude-sonnet-4-5."
            )
        if not cfg.anthropic.api_key:
            return (
                f"No Anthropic API key for {model}: set ANTHROPIC_API_KEY (or the key on the "
                "settings page), or start with --model demo."
            )
    elif provider == "openai":
        if not cfg.api_key and not cfg.base_url:
            return NOT_CONFIGURED
        if not model and cfg.base_url:
            return (
                f"No model name: set BURROW_MODEL to a model the server at {cfg.base_url} "
                "offers, or start with --model demo."
            )
    return None


def provider_from_config(cfg: ModelConfig) -> Provider:
    problem = missing(cfg)
    if problem is not None:
        raise ModelNotConfigured(problem)
    provider, model = split_model(cfg.model or "")
    if provider == "demo":
        return DemoProvider()
    if provider == "scripted":
        # Chosen from the conversation, so each run and a restarted server continue the script.
        turns, subagents = read_script(model)
        return ScriptedProvider(turns, turn_from_context=True, subagents=subagents)
    if provider == "anthropic":
        from burrow.llm.anthropic_messages import AnthropicProvider

        return RetryingProvider(
            AnthropicProvider(
                model,
                cfg.anthropic.api_key or "",
                cfg.anthropic.base_url,
                first_token_timeout=cfg.limits.first_token,
                idle_timeout=cfg.limits.idle,
                thinking_budget=cfg.thinking_budget,
            )
        )
    # Imported here: the SDKs cost more start-up time than the rest of the server.
    from burrow.llm.openai_compat import PLACEHOLDER_KEY, OpenAICompatProvider
    from burrow.llm.openai_errors import ON_SETTINGS_PAGE, SettingNames

    names = SettingNames(**{f: getattr(ON_SETTINGS_PAGE, f) for f in cfg.on_settings_page})

    return RetryingProvider(
        OpenAICompatProvider(
            model or DEFAULT_OPENAI_MODEL,
            cfg.api_key or PLACEHOLDER_KEY,
            cfg.base_url,
            first_token_timeout=cfg.limits.first_token,
            idle_timeout=cfg.limits.idle,
            names=names,
        )
    )
