"""Which provider a model setting means: `demo`, `scripted:<file>` or an OpenAI-compatible model."""

from __future__ import annotations

from dataclasses import dataclass

from burrow.llm.base import ModelError, Provider
from burrow.llm.demo import DemoProvider
from burrow.llm.retry import RetryingProvider
from burrow.llm.scripted import ScriptedProvider, load_script

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"  # only when talking to api.openai.com itself
# Local servers (Ollama, LM Studio) ignore the key, but the client must send one.
PLACEHOLDER_KEY = "not-needed"


@dataclass
class ModelConfig:
    model: str | None = None
    """`demo`, `scripted:<file.json>`, or a model name on the OpenAI-compatible server."""
    api_key: str | None = None
    base_url: str | None = None
    """An OpenAI-compatible server; None means api.openai.com."""
    price_prompt: float = 0.0
    """Dollars per million prompt tokens."""
    price_completion: float = 0.0
    on_settings_page: frozenset[str] = frozenset()
    """Which of model, api_key, base_url were saved on the settings page (errors name them)."""


class ModelNotConfigured(ModelError):
    """No usable model setting; the message says which variables to set."""


NOT_CONFIGURED = (
    "No model configured: set OPENAI_API_KEY (and BURROW_MODEL, OPENAI_BASE_URL for other "
    "servers) or start with --model demo."
)


def provider_from_config(cfg: ModelConfig) -> Provider:
    model = (cfg.model or "").strip()
    if model == "demo":
        return DemoProvider()
    if model.startswith("scripted:"):
        # Chosen from the conversation, so each run and a restarted server continue the script.
        return ScriptedProvider(
            load_script(model.removeprefix("scripted:")), turn_from_context=True
        )
    api_key = cfg.api_key or ""
    if not api_key and not cfg.base_url:
        raise ModelNotConfigured(NOT_CONFIGURED)
    if not model:
        if cfg.base_url:
            raise ModelNotConfigured(
                f"No model name: set BURROW_MODEL to a model the server at {cfg.base_url} "
                "offers, or start with --model demo."
            )
        model = DEFAULT_OPENAI_MODEL
    # Imported here: the SDK costs more start-up time than the rest of the server.
    from burrow.llm.openai_compat import OpenAICompatProvider
    from burrow.llm.openai_errors import ON_SETTINGS_PAGE, SettingNames

    names = SettingNames(
        **{field: getattr(ON_SETTINGS_PAGE, field) for field in cfg.on_settings_page}
    )
    return RetryingProvider(
        OpenAICompatProvider(model, api_key or PLACEHOLDER_KEY, cfg.base_url, names=names)
    )
