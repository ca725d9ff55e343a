"""Which provider a model setting means: `[provider:]model`, `demo` or `scripted:<file>`.

`openai:` (the default without a prefix) is any OpenAI-compatible server, `anthropic:` the
Anthropic Messages API, and `<slug>:` one of the OpenAI-compatible servers an administrator
named (`ollama:llama3.2:8b`). Other colons belong to the model name (`llama3.2:8b` on
Ollama): a prefix is a provider only when it names one.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from burrow.llm.base import ModelError, Pricing, Provider
from burrow.llm.catalog import pricing
from burrow.llm.demo import DemoProvider
from burrow.llm.retry import RetryingProvider
from burrow.llm.scripted import load_provider
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
    servers: tuple[tuple[str, Endpoint], ...] = ()
    """The OpenAI-compatible servers an administrator named: (slug, its endpoint)."""
    removed: frozenset[str] = frozenset()
    """Slugs of named servers since removed: their models get an error, never another server."""

    def endpoint(self, provider: str) -> Endpoint:
        """The key and URL of `provider` (openai, anthropic or a named server's slug)."""
        if provider == "anthropic":
            return self.anthropic
        if provider == "openai":
            return Endpoint(self.api_key, self.base_url)
        for slug, endpoint in self.servers:
            if slug == provider:
                return endpoint
        raise KeyError(provider)  # never another provider's key by default

    @property
    def server_names(self) -> tuple[str, ...]:
        return tuple(slug for slug, _ in self.servers)

    def split(self, model: str | None = None) -> tuple[str, str]:
        """`split_model` of `model` (None: this configuration's), knowing its servers."""
        named = (*self.server_names, *self.removed)
        return split_model(self.model or "" if model is None else model, named)

    def pricing(self) -> Pricing:
        provider, name = self.split()
        return pricing(provider, name, self.prices)


SLUG = re.compile(r"[a-z][a-z0-9_-]{0,31}")
RESERVED = frozenset({*PROVIDERS, "demo", "scripted"})


def slug_problem(slug: str) -> str | None:
    """Why `slug` cannot name an OpenAI-compatible server, or None."""
    if slug in RESERVED:
        return f"{slug} is a name Burrow uses itself: choose another (e.g. ollama, local)."
    if not SLUG.fullmatch(slug):
        return (
            "A server's name is 1-32 lowercase letters, digits, - or _, starting with a "
            "letter (e.g. ollama, gpu-box): its models are named <name>:<model>."
        )
    return None


class ModelNotConfigured(ModelError):
    """No usable model setting; the message says which variables to set."""


NOT_CONFIGURED = (
    "No model configured: set OPENAI_API_KEY (and BURROW_MODEL, OPENAI_BASE_URL for other "
    "servers) or start with --model demo."
)


def split_model(model: str, servers: Collection[str] = ()) -> tuple[str, str]:
    """(provider, name): `anthropic:claude-x` -> ("anthropic", "claude-x"), `gpt-4o` ->
    ("openai", "gpt-4o"), `demo` -> ("demo", ""), `scripted:f` -> ("scripted", "f"), and
    `<slug>:m` -> (slug, "m") for a slug among `servers` (the named OpenAI-compatible ones)."""
    model = model.strip()
    if model == "demo":
        return "demo", ""
    prefix, colon, rest = model.partition(":")
    if colon and (prefix in (*PROVIDERS, "scripted") or prefix in servers):
        return prefix, rest.strip()
    return "openai", model


def missing(cfg: ModelConfig) -> str | None:
    """What must still be set before `cfg` names a usable model, or None."""
    provider, model = cfg.split()
    if provider in cfg.removed:
        return f"The model server {provider} was removed in Settings: choose another model."
    if provider in cfg.server_names:
        if not model:
            return f"No model name after {provider}: write e.g. {provider}:<model>."
    elif provider == "anthropic":
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
    provider, model = cfg.split()
    if provider == "demo":
        return DemoProvider()
    if provider == "scripted":
        # Chosen from the conversation, so each run and a restarted server continue the script.
        return load_provider(model)
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

    if provider in cfg.server_names:  # a named server: set on the settings page, always
        endpoint, names = cfg.endpoint(provider), ON_SETTINGS_PAGE
    else:
        endpoint = cfg.endpoint("openai")
        names = SettingNames(**{f: getattr(ON_SETTINGS_PAGE, f) for f in cfg.on_settings_page})
    return RetryingProvider(
        OpenAICompatProvider(
            model or DEFAULT_OPENAI_MODEL,
            endpoint.api_key or PLACEHOLDER_KEY,
            endpoint.base_url,
            first_token_timeout=cfg.limits.first_token,
            idle_timeout=cfg.limits.idle,
            names=names,
        )
    )
