"""Model settings from the browser. The key goes in; only a hint of it ever comes out."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from burrow.api.deps import ServicesDep, UserDep
from burrow.api.errors import ApiError
from burrow.runs.models import ModelView

router = APIRouter(prefix="/api/settings", tags=["settings"])


class ModelSettingsOut(BaseModel):
    model: str | None
    base_url: str | None
    api_key_set: bool
    api_key_hint: str | None
    configured: bool

    @classmethod
    def of(cls, view: ModelView) -> ModelSettingsOut:
        return cls(**view.__dict__)


class ModelSettingsIn(BaseModel):
    model: str | None = Field(default=None, max_length=200)
    base_url: str | None = Field(default=None, max_length=2000)
    api_key: str | None = Field(default=None, max_length=1000, description="'' clears it")


@router.get("/model")
async def get_model_settings(svc: ServicesDep, user: UserDep) -> ModelSettingsOut:
    return ModelSettingsOut.of(svc.models.view())


@router.put("/model")
async def put_model_settings(
    body: ModelSettingsIn, svc: ServicesDep, user: UserDep
) -> ModelSettingsOut:
    if not user.is_admin:
        raise ApiError(403, "forbidden", "Only an administrator can change the model.")
    if body.base_url and not body.base_url.startswith(("http://", "https://")):
        raise ApiError(422, "invalid_request", "base_url must start with http:// or https://")
    return ModelSettingsOut.of(
        await svc.models.update(model=body.model, base_url=body.base_url, api_key=body.api_key)
    )
