"""Model settings from the browser. Keys go in; only a hint of them ever comes out."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, Field

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError
from burrow.llm.factory import PROVIDERS, SLUG, slug_problem
from burrow.runs.conversations.service import ModelView, ProviderView
from burrow.store.records import User

router = APIRouter(prefix="/api/settings", tags=["settings"])

# A key is sent as an HTTP header: a character outside printable ASCII cannot be (edges are
# trimmed when it is used).
ApiKey = Annotated[
    str | None, Field(max_length=1000, pattern=r"^\s*[!-~]*\s*$", description="'' clears it")
]


class ModelSettingsOut(BaseModel):
    model: str | None
    base_url: str | None
    api_key_set: bool
    api_key_hint: str | None
    configured: bool
    source: str | None = Field(
        description="where `model` came from: --model, BURROW_MODEL, the settings page, "
        "BURROW_DEFAULT_MODEL; the process's model wins over the saved one"
    )
    saved_model: str | None = Field(description="the model saved here, even while not used")

    @classmethod
    def of(cls, view: ModelView) -> ModelSettingsOut:
        return cls(**view.__dict__)


class ModelSettingsIn(BaseModel):
    model: str | None = Field(default=None, max_length=200)
    base_url: str | None = Field(default=None, max_length=2000)
    api_key: ApiKey = None


@router.get("/model")
async def get_model_settings(svc: ServicesDep, user: UserDep) -> ModelSettingsOut:
    return ModelSettingsOut.of(svc.models.view())


@router.put("/model")
async def put_model_settings(
    body: ModelSettingsIn, svc: ServicesDep, user: UserDep
) -> ModelSettingsOut:
    if not user.is_admin:
        raise ApiError(403, "forbidden", "Only an administrator can change the model.")
    _valid_url(body.base_url)
    return ModelSettingsOut.of(
        await svc.models.update(model=body.model, base_url=body.base_url, api_key=body.api_key)
    )


# openai, anthropic, or the slug an administrator names an OpenAI-compatible server by.
ProviderId = Annotated[str, Path(max_length=32, pattern=f"^{SLUG.pattern}$")]


Preset = Literal["ollama", "vllm", "llamacpp", "lmstudio", "openrouter", ""]


class ProviderIn(BaseModel):
    api_key: ApiKey = None
    base_url: str | None = Field(default=None, max_length=2000, description="'' clears it")
    preset: Preset | None = Field(
        default=None,
        description="the OpenAI-compatible server's kind (not anthropic); '' clears it",
    )


class CapabilitiesOut(BaseModel):
    """What was seen of the server (null: not yet): whether it streams tool turns, whether
    its calls come as `tool_calls` (native) or in the text, and the window it said."""

    stream_tools: bool | None
    tool_format: Literal["native", "text"] | None
    context_window: int | None


class ProviderOut(BaseModel):
    id: str = Field(
        description="openai, anthropic, or a named server's slug: its models are id:model"
    )
    provider: str = Field(description="the same as id (the older name)")
    kind: Literal["openai", "anthropic", "openai_compatible"]
    base_url: str | None
    preset: Preset | None
    api_key_set: bool
    api_key_hint: str | None
    capabilities: CapabilitiesOut

    @classmethod
    def of(cls, view: ProviderView) -> ProviderOut:
        fields = {k: v for k, v in view.__dict__.items() if k != "capabilities"}
        caps = CapabilitiesOut(**view.capabilities.__dict__)
        return cls(id=view.provider, capabilities=caps, **fields)


class ProviderTestOut(BaseModel):
    ok: bool
    detail: str
    models: list[str] | None = None


class ModelOut(BaseModel):
    id: str = Field(description="provider:model, as BURROW_MODEL takes it")
    provider: str = Field(description="openai, anthropic, or a named server's id")
    context_window: int = Field(
        description="tokens: its server's word where it said, else the catalog's"
    )
    vision: bool
    server_model: bool = Field(default=False, description="the server's model (listed first)")


def _valid_url(url: str | None) -> None:
    if url and not url.strip().startswith(("http://", "https://")):
        raise ApiError(422, "invalid_request", "base_url must start with http:// or https://")


def _exists_or_given(provider: str, svc: ServicesDep, given: ProviderIn) -> None:
    if provider not in svc.models.provider_ids() and not given.base_url:
        raise ApiError(
            404, "provider_not_found", f"No model server is named {provider}: give a base_url."
        )


def _admin(user: User) -> None:
    if not user.is_admin:
        raise ApiError(403, "forbidden", "Only an administrator can change model providers.")


@router.get("/providers")
async def get_providers(svc: ServicesDep, user: UserDep) -> list[ProviderOut]:
    """openai and anthropic, then each OpenAI-compatible server an administrator named."""
    return [ProviderOut.of(svc.models.provider_view(name)) for name in svc.models.provider_ids()]


@router.put("/providers/{provider}")
async def put_provider(
    provider: ProviderId, body: ProviderIn, svc: ServicesDep, user: UserDep
) -> ProviderOut:
    """Change openai's or anthropic's settings, or create or change a named
    OpenAI-compatible server (`ollama`, `gpu-box`: its models are `<id>:<model>`)."""
    _admin(user)
    _valid_url(body.base_url)
    if provider == "anthropic" and body.preset:
        raise ApiError(422, "invalid_preset", "A preset names an OpenAI-compatible server.")
    if provider not in PROVIDERS and (problem := slug_problem(provider)):
        raise ApiError(422, "invalid_provider_name", problem)
    try:
        view = await svc.models.update_provider(
            provider, api_key=body.api_key, base_url=body.base_url, preset=body.preset
        )
    except ValueError as exc:  # a new named server without its base URL
        raise ApiError(422, "base_url_required", str(exc)) from exc
    return ProviderOut.of(view)


@router.delete("/providers/{provider}", status_code=204)
async def delete_provider(provider: ProviderId, svc: ServicesDep, user: UserDep) -> Response:
    """Forget a named server and its key (openai and anthropic are cleared with PUT)."""
    _admin(user)
    if provider in PROVIDERS:
        raise ApiError(
            409, "provider_builtin", f"{provider} cannot be removed: clear its key and URL instead."
        )
    if not await svc.models.remove_provider(provider):
        raise ApiError(404, "provider_not_found", f"No model server is named {provider}.")
    return Response(status_code=204)


@router.post("/providers/{provider}/test")
async def test_provider(
    provider: ProviderId, svc: ServicesDep, user: UserDep, body: ProviderIn | None = None
) -> ProviderTestOut:
    """Ask the provider for its models: proves key and URL work. Values in the body are
    tested as they would be saved, and never saved; without them, the stored ones. A
    named server not saved yet is tested with the body's base URL."""
    _admin(user)
    given = body or ProviderIn()
    _valid_url(given.base_url)
    _exists_or_given(provider, svc, given)
    result = await svc.models.probe(provider, api_key=given.api_key, base_url=given.base_url)
    return ProviderTestOut(ok=result.ok, detail=result.detail, models=result.models)


@router.get("/models")
async def get_models(svc: ServicesDep, user: UserDep) -> list[ModelOut]:
    server = svc.models.describe(None).id
    return [
        ModelOut(
            id=m.id,
            provider=m.provider,
            context_window=m.context_window,
            vision=m.vision,
            server_model=m.id == server,
        )
        for m in svc.models.models()
    ]
