"""Which model a run talks to: the environment's defaults, overridden from the settings page.

API keys are kept encrypted in the settings table and only decrypted here, on their way
to the provider; they are never journaled, never returned in full, never given to a
sandbox. Each provider (openai, anthropic) has its own key and base URL.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from burrow.llm.base import ModelError, Pricer, Provider, Usage
from burrow.llm.catalog import ModelInfo, describe, known_models
from burrow.llm.factory import (
    PROVIDERS,
    Endpoint,
    ModelConfig,
    missing,
    provider_from_config,
    split_model,
)
from burrow.store.secrets import Redactor, SecretBox, mask
from burrow.store.settings import SettingsStore

MODEL = "model.name"
# (api key, base URL) rows per provider; OpenAI's keep their first names.
ROWS = {
    "openai": ("model.api_key", "model.base_url"),
    "anthropic": ("anthropic.api_key", "anthropic.base_url"),
}


@dataclass(frozen=True)
class ModelView:
    """What the settings page may show."""

    model: str | None
    base_url: str | None
    api_key_set: bool
    api_key_hint: str | None
    configured: bool


@dataclass(frozen=True)
class ProviderView:
    provider: str
    base_url: str | None
    api_key_set: bool
    api_key_hint: str | None


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str
    models: list[str] | None = None


class ModelSettings:
    def __init__(
        self, defaults: ModelConfig, store: SettingsStore, box: SecretBox, redactor: Redactor
    ) -> None:
        self._defaults = defaults
        self._redactor = redactor
        self._store = store
        self._box = box
        self._config = defaults
        self._provider: tuple[ModelConfig, Provider] | None = None
        self._chosen: dict[ModelConfig, Provider] = {}  # providers of conversations' models

    async def load(self) -> None:
        stored = await self._store.all()
        config = self._defaults
        saved: set[str] = set()  # the OpenAI-compatible settings saved here (errors name them)
        if stored.get(MODEL):
            config = replace(config, model=stored[MODEL])
            saved.add("model")
        for provider, (key_row, url_row) in ROWS.items():
            endpoint = config.endpoint(provider)
            if url_row in stored:
                endpoint = replace(endpoint, base_url=stored[url_row] or None)
                if provider == "openai":
                    saved.add("base_url")
            if stored.get(key_row):
                endpoint = replace(endpoint, api_key=self._box.open(str(stored[key_row])))
                if provider == "openai":
                    saved.add("api_key")
            config = _with_endpoint(config, provider, endpoint)
            self._redactor.add(endpoint.api_key)
        self._config = replace(config, on_settings_page=frozenset(saved))

    @property
    def config(self) -> ModelConfig:
        return self._config

    def view(self) -> ModelView:
        c = self._config
        return ModelView(
            model=c.model,
            base_url=c.base_url,
            api_key_set=bool(c.api_key),
            api_key_hint=mask(c.api_key) if c.api_key else None,
            configured=missing(c) is None,
        )

    def provider_view(self, provider: str) -> ProviderView:
        endpoint = self._config.endpoint(provider)
        key = endpoint.api_key
        return ProviderView(provider, endpoint.base_url, bool(key), mask(key) if key else None)

    async def update(
        self, *, model: str | None = None, base_url: str | None = None, api_key: str | None = None
    ) -> ModelView:
        """Change what is given; an empty string clears base_url or api_key (OpenAI's)."""
        if model is not None:
            await self._store.put({MODEL: model.strip() or None})
        await self.update_provider("openai", base_url=base_url, api_key=api_key)
        return self.view()

    async def update_provider(
        self, provider: str, *, base_url: str | None = None, api_key: str | None = None
    ) -> ProviderView:
        key_row, url_row = ROWS[provider]
        values: dict[str, str | None] = {}
        if base_url is not None:
            values[url_row] = base_url.strip() or None
        if api_key is not None:
            values[key_row] = self._box.seal(api_key.strip()) if api_key.strip() else None
        await self._store.put(values)
        await self.load()
        return self.provider_view(provider)

    def provider(self) -> Provider:
        """The provider for the current settings, built once per distinct configuration."""
        if self._provider is None or self._provider[0] != self._config:
            self._provider = (self._config, provider_from_config(self._config))
        return self._provider[1]

    def problem_with(self, model: str) -> str | None:
        """Why a conversation cannot use `model` (`[provider:]model` or `demo`), or None."""
        provider, name = split_model(model)
        if provider == "scripted" and model.strip() != (self._config.model or ""):
            # A script is a file on the server: only the operator names one (--model).
            return "A conversation cannot choose a scripted model: use demo or [provider:]model."
        if provider in PROVIDERS and not name:
            return f"No model name after {provider}: write e.g. {provider}:<model>."
        config = replace(self._config, model=model.strip())
        problem = missing(config)
        if problem is None:
            try:
                self.provider_for(model)
            except (ModelError, ValueError, OSError) as exc:
                problem = str(exc)
        return problem

    def provider_for(self, model: str | None) -> Provider:
        """The provider a conversation that chose `model` (None: the server's) talks to."""
        if model is None:
            return self.provider()
        config = replace(self._config, model=model)
        built = self._chosen.get(config)
        if built is None:
            if len(self._chosen) >= 64:  # distinct models chosen since the settings changed
                self._chosen.clear()
            built = self._chosen[config] = provider_from_config(config)
        return built

    def pricing_for(self, model: str | None) -> Pricer:
        if model is None:
            return self
        return replace(self._config, model=model).pricing()

    def describe(self, model: str | None) -> ModelInfo:
        """What the catalog knows of `model` (None: the server's), e.g. whether it sees images."""
        provider, name = split_model(model or self._config.model or "")
        return describe(provider, name)

    def cost(self, usage: Usage) -> float:
        """Dollars for `usage` at the current model's prices (table or BURROW_PRICE_*)."""
        return self._config.pricing().cost(usage)

    def models(self) -> list[ModelInfo]:
        """The chosen model, then the known models of every provider with a key for its own
        API (another server at OPENAI_BASE_URL offers models of its own, not OpenAI's)."""
        listed: list[ModelInfo] = []
        provider, name = split_model(self._config.model or "")
        if provider in PROVIDERS and name:
            listed.append(describe(provider, name))
        for candidate in PROVIDERS:
            endpoint = self._config.endpoint(candidate)
            if endpoint.api_key and (candidate == "anthropic" or not endpoint.base_url):
                listed += [m for m in known_models(candidate) if m.id not in {i.id for i in listed}]
        return listed

    async def probe(self, provider: str) -> ProbeResult:
        """Whether the stored key and base URL of `provider` work: its model list, or why not."""
        endpoint = self._config.endpoint(provider)
        if provider == "anthropic":
            from burrow.llm.anthropic_messages import list_models
        else:
            from burrow.llm.openai_compat import list_models
        if not endpoint.api_key and not (provider == "openai" and endpoint.base_url):
            variable = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
            return ProbeResult(False, f"No API key for {provider}: set one here or {variable}.")
        try:
            names = await list_models(endpoint.api_key or "", endpoint.base_url)
        except ModelError as exc:
            return ProbeResult(False, self._redactor.apply(exc.message))
        offered = f"{len(names)} model{'' if len(names) == 1 else 's'} offered"
        return ProbeResult(True, f"{provider}: the key works; {offered}.", names)


def _with_endpoint(config: ModelConfig, provider: str, endpoint: Endpoint) -> ModelConfig:
    if provider == "anthropic":
        return replace(config, anthropic=endpoint)
    return replace(config, api_key=endpoint.api_key, base_url=endpoint.base_url)
