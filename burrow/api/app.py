"""The ASGI application: routes over the services, opened and closed with the app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from burrow.api import web
from burrow.api.csrf import CSRFGuard
from burrow.api.errors import install_error_handlers
from burrow.api.routes import (
    auth,
    conversations,
    events,
    files,
    health,
    previews,
    sandbox,
    secrets,
    settings,
    terminals,
    users,
)
from burrow.api.throttle import LoginThrottle
from burrow.services import Services


def create_app(open_services: Callable[[], Awaitable[Services]]) -> FastAPI:
    """`open_services` runs at start-up, so the app owns the services' lifetime."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.services = await open_services()
        try:
            yield
        finally:
            await app.state.services.close()

    app = FastAPI(title="Burrow", version="0.1.0", lifespan=lifespan)
    app.state.login_throttle = LoginThrottle()
    app.add_middleware(CSRFGuard)
    install_error_handlers(app)
    for module in (
        health,
        auth,
        users,
        conversations,
        events,
        files,
        sandbox,
        secrets,
        settings,
        terminals,
        previews,
    ):
        app.include_router(module.router)
    web.mount(app)  # last: the UI's catch-all never shadows /api/*
    return app
