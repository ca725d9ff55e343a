"""Which model a run talks to: the environment's defaults, overridden from the settings page.

The API key is kept encrypted in the settings table and only decrypted here, on its way
to the provider; it is never journaled, never returned in full, never given to a sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from burrow.llm.base import Provider
from burrow.llm.factory import ModelConfig, provider_from_config
from burrow.store.secrets import Redactor, SecretBox, mask
from burrow.store.settings import SettingsStore

MODEL, BASE_URL, API_KEY = "model.name", "model.base_url", "model.api_key"


@dataclass(frozen=True)
class ModelView:
    """What the settings page may show."""

    model: str | None
    base_url: str | None
    api_key_set: bool
    api_key_hint: str | None
    configured: bool


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

    async def load(self) -> None:
        stored = await self._store.all()
        config = self._defaults
        saved: set[str] = set()  # named as the settings page's fields in model errors
        if stored.get(MODEL):
            config = replace(config, model=stored[MODEL])
            saved.add("model")
        if BASE_URL in stored:
            config = replace(config, base_url=stored[BASE_URL] or None)
            saved.add("base_url")
        if stored.get(API_KEY):
            config = replace(config, api_key=self._box.open(str(stored[API_KEY])))
            saved.add("api_key")
        config = replace(config, on_settings_page=frozenset(saved))
        self._config = config
        self._redactor.add(config.api_key)

    @property
    def config(self) -> ModelConfig:
        return self._config

    def view(self) -> ModelView:
        c = self._config
        configured = bool(c.model in ("demo",) or (c.model or "").startswith("scripted:"))
        configured = configured or bool(c.api_key) or bool(c.base_url and c.model)
        return ModelView(
            model=c.model,
            base_url=c.base_url,
            api_key_set=bool(c.api_key),
            api_key_hint=mask(c.api_key) if c.api_key else None,
            configured=configured,
        )

    async def update(
        self, *, model: str | None = None, base_url: str | None = None, api_key: str | None = None
    ) -> ModelView:
        """Change what is given; an empty string clears base_url or api_key."""
        values: dict[str, str | None] = {}
        if model is not None:
            values[MODEL] = model.strip() or None
        if base_url is not None:
            values[BASE_URL] = base_url.strip() or None
        if api_key is not None:
            values[API_KEY] = self._box.seal(api_key.strip()) if api_key.strip() else None
        await self._store.put(values)
        await self.load()
        return self.view()

    def provider(self) -> Provider:
        """The provider for the current settings, built once per distinct configuration."""
        if self._provider is None or self._provider[0] != self._config:
            self._provider = (self._config, provider_from_config(self._config))
        return self._provider[1]
