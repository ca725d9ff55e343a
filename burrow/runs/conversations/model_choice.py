"""Which model a run talks to: the environment's defaults, overridden from the settings page.

API keys are kept encrypted in the settings table and only decrypted here, on their way
to the provider; they are never journaled, never returned in full, never given to a
sandbox. Each provider (openai, anthropic, and each OpenAI-compatible server an
administrator names: `ollama`, `gpu-box`) has its own key and base URL.

A key goes only to the URL it was meant for: changing the base URL on the settings page
drops the stored key (unless a new one comes with it, or the URL goes back to the
operator's), and the environment's key (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`) is sent
only to the environment's base URL unless `BURROW_PROVIDER_ENV_KEY_ANY_URL` allows any.
Otherwise a web administrator could point the URL at a server of their own and read the
key from its first request.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

from burrow.llm.base import ModelError, Pricer, Provider, Usage
from burrow.llm.catalog import ModelInfo, describe, known_models
from burrow.llm.factory import (
    KEY_VARIABLES,
    PROVIDERS,
    Endpoint,
    ModelConfig,
    missing,
    provider_from_config,
    slug_problem,
)
from burrow.llm.server_traits import LISTENERS, SEEN, remember, traits
from burrow.store.secrets import Redactor, SecretBox, mask
from burrow.store.settings import SettingsStore

MODEL = "model.name"
PRESET = "model.preset"  # the OpenAI-compatible server's kind, as the connect flow chose it
PRESETS = ("ollama", "vllm", "llamacpp", "lmstudio", "openrouter")
DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
# (api key, base URL) rows per provider; OpenAI's keep their first names. A named server's
# are `server.<slug>.api_key`, `.base_url` and `.preset`; a removed one keeps its base_url row,
# empty, so its models get "removed" rather than reaching another server.
ROWS = {
    "openai": ("model.api_key", "model.base_url"),
    "anthropic": ("anthropic.api_key", "anthropic.base_url"),
}
TRAITS = "model.server_traits"  # JSON: what tool turns showed of each server (server_traits.py)
OFFERED_MAX = 200  # models listed per named server


def _rows(provider: str) -> tuple[str, str]:
    return ROWS.get(provider) or (f"server.{provider}.api_key", f"server.{provider}.base_url")


def _named(stored: dict[str, str | None]) -> tuple[dict[str, str], set[str]]:
    """The named servers' base URLs by slug, and the slugs removed."""
    live, removed = {}, set()
    for name, value in stored.items():
        head, _, rest = name.partition(".")
        slug, _, field = rest.rpartition(".")
        if head == "server" and field == "base_url" and slug:
            if value:
                live[slug] = value
            else:
                removed.add(slug)
    return live, removed


@dataclass(frozen=True)
class ModelView:
    """What the settings page may show."""

    model: str | None
    base_url: str | None
    api_key_set: bool
    api_key_hint: str | None
    configured: bool
    source: str | None = None  # where `model` came from (see ModelSettings.load)
    saved_model: str | None = None  # the settings page's, shown even while not used


@dataclass(frozen=True)
class ProviderView:
    provider: str  # its id: openai, anthropic, or a named server's slug
    base_url: str | None
    api_key_set: bool
    api_key_hint: str | None
    kind: str  # openai (its own API), anthropic, or openai_compatible (any other server)
    preset: str | None  # the kind of server an administrator chose it as (ollama, vllm, ...)
    capabilities: Capabilities


@dataclass(frozen=True)
class Capabilities:
    """What was detected of the provider's server (None: not yet seen)."""

    stream_tools: bool | None
    tool_format: str | None
    context_window: int | None


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str
    models: list[str] | None = None


log = logging.getLogger(__name__)
ANY_URL = "BURROW_PROVIDER_ENV_KEY_ANY_URL"
ASK_AGAIN_AFTER = 60.0  # seconds before a server that did not say its window is asked again


class ModelSettings:
    def __init__(
        self,
        defaults: ModelConfig,
        store: SettingsStore,
        box: SecretBox,
        redactor: Redactor,
        *,
        env_key_any_url: bool = False,
        process_source: str = "BURROW_MODEL",
        fallback: str | None = None,
    ) -> None:
        self._defaults = defaults
        self._process_source = process_source
        self._fallback = fallback
        self._source: str | None = None
        self._saved_model: str | None = None
        self._presets: dict[str, str | None] = {}  # provider -> preset (openai and named ones)
        self._redactor = redactor
        self._store = store
        self._box = box
        self._env_key_any_url = env_key_any_url
        self._config = defaults
        # provider -> the changed base URL its key is not sent to (the environment's key,
        # withheld; or the stored one, dropped at the change while this process ran)
        self._no_key_for: dict[str, str] = {}
        self._dropped: dict[str, str] = {}
        self._provider: tuple[ModelConfig, Provider] | None = None
        self._chosen: dict[ModelConfig, Provider] = {}  # providers of conversations' models
        # (base URL, model) -> the window its server said; and when each was last asked
        self._windows: dict[tuple[str, str], int] = {}
        self._asked: dict[tuple[str, str], float] = {}
        self._asking: set[asyncio.Task[None]] = set()
        self._offered: dict[str, list[str]] = {}  # named server -> the models it listed
        LISTENERS.add(self)

    async def load(self) -> None:
        stored = await self._store.all()
        config = self._defaults
        saved: set[str] = set()  # the OpenAI-compatible settings saved here (errors name them)
        self._no_key_for = dict(self._dropped)
        self._keys_saved_here: set[str] = set()  # providers whose key the settings page saved
        # The process's model (--model, BURROW_MODEL) wins over the saved one: an operator who
        # starts `burrow serve --model demo` gets the demo, whatever the settings page says.
        self._saved_model = stored.get(MODEL) or None
        live, removed = _named(stored)
        self._presets = {"openai": stored.get(PRESET) or None}
        self._presets |= {slug: stored.get(f"server.{slug}.preset") or None for slug in live}
        servers = []
        for slug in sorted(live):
            sealed = stored.get(_rows(slug)[0])
            key = self._box.open(str(sealed)) if sealed else None
            self._redactor.add(key)
            servers.append((slug, Endpoint(key, live[slug].rstrip("/"))))
        config = replace(config, servers=tuple(servers), removed=frozenset(removed - set(live)))
        self._offered = {s: m for s, m in self._offered.items() if s in live}
        self._remember_traits(stored.get(TRAITS))
        if config.model:
            self._source = self._process_source
        elif self._saved_model:
            config = replace(config, model=self._saved_model)
            self._source = "the settings page"
            saved.add("model")
        elif self._fallback:
            config = replace(config, model=self._fallback)
            self._source = "BURROW_DEFAULT_MODEL"
        else:
            self._source = None
        for provider, (key_row, url_row) in ROWS.items():
            endpoint = home = config.endpoint(provider)
            self._redactor.add(home.api_key)
            if url_row in stored:
                endpoint = replace(endpoint, base_url=stored[url_row] or None)
                if provider == "openai":
                    saved.add("base_url")
            if stored.get(key_row):
                endpoint = replace(endpoint, api_key=self._box.open(str(stored[key_row])))
                self._keys_saved_here.add(provider)
                if provider == "openai":
                    saved.add("api_key")
            elif (
                endpoint.api_key
                and not _same_url(endpoint.base_url, home.base_url)
                and not self._env_key_any_url
            ):
                self._no_key_for[provider] = endpoint.base_url or DEFAULT_URLS[provider]
                endpoint = replace(endpoint, api_key=None)
            config = _with_endpoint(config, provider, endpoint)
            self._redactor.add(endpoint.api_key)
        self._config = replace(config, on_settings_page=frozenset(saved))
        self._learn_window(None)
        for slug in live:
            self._learn_offered(slug)

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
            source=self._source,
            saved_model=self._saved_model,
        )

    def banner(self) -> str:
        """The start banner's line: the model a run uses, and where that came from."""
        model, source = self._config.model, self._source
        if not model:
            return (
                "Model: not set: set OPENAI_API_KEY (and BURROW_MODEL, OPENAI_BASE_URL for "
                "other servers), connect one on the settings page, or start with --model demo."
            )
        line = f"Model: {model} (from {source})"
        if self._saved_model and self._saved_model != model:
            line += f"; the settings page's {self._saved_model} is not used while it is set"
        return line

    def provider_ids(self) -> list[str]:
        """openai, anthropic, then the named servers by slug."""
        return [*PROVIDERS, *self._config.server_names]

    def provider_view(self, provider: str) -> ProviderView:
        """What the settings page shows of `provider`; KeyError for one not configured."""
        endpoint = self._config.endpoint(provider)
        key = endpoint.api_key
        if provider == "anthropic":
            kind, capabilities = "anthropic", Capabilities(True, "native", None)
        else:
            own = not endpoint.base_url or _same_url(endpoint.base_url, DEFAULT_URLS["openai"])
            base = endpoint.base_url or DEFAULT_URLS["openai"]
            seen = traits(base)
            kind = "openai" if own and provider == "openai" else "openai_compatible"
            capabilities = Capabilities(seen.stream_tools, seen.tool_format, self._window_of(base))
        return ProviderView(
            provider,
            endpoint.base_url,
            bool(key),
            mask(key) if key else None,
            kind=kind,
            preset=self._presets.get(provider),
            capabilities=capabilities,
        )

    def _window_of(self, base: str) -> int | None:
        """The window the server at `base` said for the server's model if it serves it,
        else for any model it was asked about (a llama.cpp server serves one)."""
        key = self._window_key(None)
        if key and key[0] == base.rstrip("/") and key in self._windows:
            return self._windows[key]
        return next((w for (b, _), w in self._windows.items() if b == base.rstrip("/")), None)

    async def update(
        self, *, model: str | None = None, base_url: str | None = None, api_key: str | None = None
    ) -> ModelView:
        """Change what is given; an empty string clears base_url or api_key (OpenAI's)."""
        if model is not None:
            await self._store.put({MODEL: model.strip() or None})
        await self.update_provider("openai", base_url=base_url, api_key=api_key)
        return self.view()

    async def update_provider(
        self,
        provider: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        preset: str | None = None,
    ) -> ProviderView:
        """Change what is given ('' clears); `preset` names the server's kind (not for
        anthropic). A provider id other than openai and anthropic is a named
        OpenAI-compatible server: created with its base URL, which it cannot be without."""
        key_row, url_row = _rows(provider)
        named = provider not in PROVIDERS
        values: dict[str, str | None] = {}
        if named:
            problem = slug_problem(provider)
            url = (
                (base_url or "").strip()
                if base_url is not None
                else self._endpoint(provider).base_url
            )
            if problem or not url:
                raise ValueError(
                    problem or f"The server {provider} needs a base URL (http://…/v1)."
                )
        if preset is not None and provider != "anthropic":
            values[f"server.{provider}.preset" if named else PRESET] = preset or None
        if base_url is not None:
            url = base_url.strip().rstrip("/") or None
            values[url_row] = url
            current = self._endpoint(provider).base_url
            home = None if named else self._defaults.endpoint(provider).base_url
            if not _same_url(url, current) and not _same_url(url, home):
                values[key_row] = None  # the stored key was meant for another server
                if self._endpoint(provider).api_key:
                    self._dropped[provider] = url or DEFAULT_URLS[provider]
        if api_key is not None:
            values[key_row] = self._box.seal(api_key.strip()) if api_key.strip() else None
            self._dropped.pop(provider, None)
        await self._store.put(values)
        await self.load()
        return self.provider_view(provider)

    async def remove_provider(self, provider: str) -> bool:
        """Forget a named server and its key; False if there was none of that name. Its
        models then get "removed" from `problem_with`, never another server's answer."""
        if provider not in self._config.server_names:
            return False
        key_row, url_row = _rows(provider)
        await self._store.put({key_row: None, url_row: None, f"server.{provider}.preset": None})
        base = self._config.endpoint(provider).base_url or ""
        self._windows = {k: w for k, w in self._windows.items() if k[0] != base}
        self._offered.pop(provider, None)
        await self.load()
        return True

    def _endpoint(self, provider: str) -> Endpoint:
        """`provider`'s endpoint, or an empty one for a named server not saved yet."""
        try:
            return self._config.endpoint(provider)
        except KeyError:
            return Endpoint()

    def provider(self) -> Provider:
        """The provider for the current settings, built once per distinct configuration."""
        if self._provider is None or self._provider[0] != self._config:
            self._provider = (self._config, provider_from_config(self._config))
        return self._provider[1]

    def problem_with(self, model: str) -> str | None:
        """Why a conversation cannot use `model` (`[provider:]model` or `demo`), or None."""
        provider, name = self._config.split(model)
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
        self._learn_window(model)
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
        """What the catalog knows of `model` (None: the server's), e.g. whether it sees
        images; with the window its server said, where it said one."""
        provider, name = self._config.split(model)
        info = describe(provider, name)
        window = self.window_for(model)
        return replace(info, context_window=window) if window else info

    def window_for(self, model: str | None) -> int | None:
        """The context window an OpenAI-compatible server said it serves `model` (None:
        the server's) with; None where it did not say, or was not asked yet. Learnt in
        the background when the settings load and when a conversation chooses a model."""
        key = self._window_key(model)
        return self._windows.get(key) if key else None

    def _window_key(self, model: str | None) -> tuple[str, str] | None:
        provider, name = self._config.split(model)
        if provider not in ("openai", *self._config.server_names) or not name:
            return None
        base = self._config.endpoint(provider).base_url
        if not base or _same_url(base, DEFAULT_URLS["openai"]):
            return None  # OpenAI's own API does not say; the catalog knows its models
        return base.rstrip("/"), name

    def _key_for(self, base: str) -> str | None:
        """The key of the provider whose base URL is `base`: only its own server gets it."""
        for provider in ("openai", *self._config.server_names):
            endpoint = self._config.endpoint(provider)
            if endpoint.base_url and _same_url(endpoint.base_url, base):
                return endpoint.api_key
        return None

    def _learn_window(self, model: str | None) -> None:
        key = self._window_key(model)
        if key is None or key in self._windows:
            return
        self._ask_in_background(key, self._ask_window(key, self._key_for(key[0])))

    def _learn_offered(self, slug: str) -> None:
        """List the models a named server offers, for the model menus: at the settings' load,
        and again (at most once a minute) while a model list is asked for and it has not said."""
        base = self._config.endpoint(slug).base_url or ""
        if slug not in self._offered:
            self._ask_in_background((base, ""), self._ask_offered(slug, base))

    def _ask_in_background(self, key: tuple[str, str], asking: Coroutine[Any, Any, None]) -> None:
        """Run `asking` unless `key` was asked within ASK_AGAIN_AFTER (or no loop runs)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            asking.close()
            return  # no loop (a command-line check): the catalog's window
        if time.monotonic() - self._asked.get(key, -ASK_AGAIN_AFTER) < ASK_AGAIN_AFTER:
            asking.close()
            return
        self._asked[key] = time.monotonic()
        task = loop.create_task(asking)
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)

    async def _ask_window(self, key: tuple[str, str], api_key: str | None) -> None:
        # Here, not at the top: a server with no OpenAI-compatible base URL never asks,
        # and httpx stays out of its start (tests/cli/test_serve_start.py).
        from burrow.llm.served_window import served_window

        window = await served_window(key[0], api_key, key[1])
        if window:
            self._windows[key] = window

    async def _ask_offered(self, slug: str, base: str) -> None:
        from burrow.llm.served_window import offered_models

        offered = await offered_models(base, self._key_for(base))
        if offered is not None and slug in self._config.server_names:
            self._offered[slug] = offered[:OFFERED_MAX]

    def _remember_traits(self, saved: str | None) -> None:
        try:
            seen = json.loads(saved) if saved else {}
        except ValueError:
            return  # an unreadable record is learnt again from the next tool turn
        for base, record in seen.items() if isinstance(seen, dict) else ():
            if isinstance(base, str) and isinstance(record, dict):
                remember(base, record)

    def traits_changed(self) -> None:
        """A tool turn showed something new of a server: keep it with the settings."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self._save_traits())
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)

    async def _save_traits(self) -> None:
        bases = {
            (self._config.endpoint(p).base_url or DEFAULT_URLS["openai"]).rstrip("/")
            for p in ("openai", *self._config.server_names)
        }  # only the configured servers': the record stays as small as the settings
        kept = {base: t.saved() for base, t in SEEN.items() if base in bases}
        try:
            await self._store.put({TRAITS: json.dumps(kept, sort_keys=True)})
        except Exception:  # a store closed under a finished test or a stopping server
            log.debug("the servers' traits were not saved", exc_info=True)

    def cost(self, usage: Usage) -> float:
        """Dollars for `usage` at the current model's prices (table or BURROW_PRICE_*)."""
        return self._config.pricing().cost(usage)

    def models(self) -> list[ModelInfo]:
        """The chosen model, then the known models of every provider with a key for its own
        API (another server at OPENAI_BASE_URL offers models of its own, not OpenAI's)."""
        listed: list[ModelInfo] = []
        provider, name = self._config.split()
        if provider in self.provider_ids() and name:
            listed.append(self.describe(None))
        for slug in self._config.server_names:
            self._learn_offered(slug)  # a server that did not answer yet: asked again
            for offered in self._offered.get(slug, []):
                if f"{slug}:{offered}" not in {i.id for i in listed}:
                    listed.append(self.describe(f"{slug}:{offered}"))
        for candidate in PROVIDERS:
            endpoint = self._config.endpoint(candidate)
            if endpoint.api_key and (candidate == "anthropic" or not endpoint.base_url):
                listed += [m for m in known_models(candidate) if m.id not in {i.id for i in listed}]
        return listed

    async def probe(
        self, provider: str, *, api_key: str | None = None, base_url: str | None = None
    ) -> ProbeResult:
        """Whether the key and base URL of `provider` work: its model list, or why not.

        `api_key` and `base_url` are values not saved yet (the form's): a test never saves.
        The stored key goes only to the URL it was stored for, as a saved change would."""
        endpoint = self._unsaved(provider, api_key=api_key, base_url=base_url)
        unsaved = api_key is not None or base_url is not None
        named = provider not in PROVIDERS
        listed: Callable[[str, str | None], Awaitable[list[str]]]
        if provider == "anthropic":
            from burrow.llm.anthropic_messages import list_models as anthropic_models

            # A key typed into the form, or saved from it, is checked there: say that field.
            in_settings = api_key is not None or provider in self._keys_saved_here
            listed = functools.partial(anthropic_models, key_in_settings=in_settings)
        else:
            from burrow.llm.openai_compat import list_models
            from burrow.llm.openai_errors import IN_ENVIRONMENT, ON_SETTINGS_PAGE

            # An error names the form's fields for what the form gave, else where it was set.
            saved_here = (
                unsaved or named or bool(self._config.on_settings_page & {"api_key", "base_url"})
            )
            listed = functools.partial(
                list_models, names=ON_SETTINGS_PAGE if saved_here else IN_ENVIRONMENT
            )

        why = None if unsaved else self._why_no_key(provider)
        if named and not endpoint.base_url:
            return ProbeResult(False, f"The server {provider} needs a base URL (http://…/v1).")
        if not endpoint.api_key and (provider == "anthropic" or not endpoint.base_url):
            # Nothing to ask without a key (a keyless server is an OpenAI-compatible one).
            variable = KEY_VARIABLES[provider]
            return ProbeResult(
                False, why or f"No API key for {provider}: set one here or {variable}."
            )
        try:
            names = await listed(endpoint.api_key or "", endpoint.base_url)
        except ModelError as exc:
            detail = self._redactor.apply(exc.message)
            if endpoint.api_key and api_key:  # a key not saved is not known to the redactor
                detail = detail.replace(endpoint.api_key, mask(endpoint.api_key))
            return ProbeResult(False, f"{why} Without a key: {detail}" if why else detail)
        offered = f"{len(names)} model{'' if len(names) == 1 else 's'} offered"
        if why is not None:
            return ProbeResult(True, f"{why} Without a key: {offered}.", names)
        return ProbeResult(True, f"{provider}: the key works; {offered}.", names)

    def _unsaved(self, provider: str, *, api_key: str | None, base_url: str | None) -> Endpoint:
        """The endpoint to test with these unsaved values. A URL other than the current one
        gets only the key given with it: no stored or environment key goes to a new server."""
        endpoint = self._endpoint(provider)
        if base_url is not None and not _same_url(base_url.strip() or None, endpoint.base_url):
            endpoint = Endpoint(None, base_url.strip() or None)
        if api_key is not None and api_key.strip():
            endpoint = replace(endpoint, api_key=api_key.strip())
        return endpoint

    def _why_no_key(self, provider: str) -> str | None:
        """Why `provider` has no key although one was set before or in the environment."""
        endpoint = self._endpoint(provider)
        changed_to = self._no_key_for.get(provider)
        if endpoint.api_key or changed_to is None:
            return None
        if provider not in PROVIDERS:
            return f"No API key was used: the base URL changed: enter the key for {changed_to}."
        variable = KEY_VARIABLES[provider]
        home = self._defaults.endpoint(provider).base_url or DEFAULT_URLS[provider]
        env = (
            f" ({variable} is sent only to {home}; {ANY_URL}=true lets the operator send it "
            "to any URL)"
            if self._defaults.endpoint(provider).api_key
            else ""
        )
        return (
            f"No API key was used: the base URL changed: enter the key for {changed_to} here{env}."
        )


def _same_url(a: str | None, b: str | None) -> bool:
    """Whether two base URLs name the same server (a trailing slash aside)."""
    return (a or "").rstrip("/") == (b or "").rstrip("/")


def _with_endpoint(config: ModelConfig, provider: str, endpoint: Endpoint) -> ModelConfig:
    if provider == "anthropic":
        return replace(config, anthropic=endpoint)
    return replace(config, api_key=endpoint.api_key, base_url=endpoint.base_url)
