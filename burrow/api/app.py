"""The ASGI application: routes over the services, opened and closed with the app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from burrow.api import web
from burrow.api.csp import ContentSecurityPolicy
from burrow.api.csrf import CSRFGuard
from burrow.api.direct_write import SERVER_SEND
from burrow.api.errors import install_error_handlers
from burrow.api.forwarded import ForwardedHeaders, TrustedProxies
from burrow.api.routes import (
    a2a,
    admin,
    archive,
    auth,
    automations,
    checkpoints,
    conversations,
    environments,
    events,
    files,
    fire,
    git,
    health,
    mcp,
    me,
    metrics,
    previews,
    profiles,
    sandbox,
    search,
    secrets,
    settings,
    terminals,
    uploads,
    users,
    webhooks,
)
from burrow.api.sse import quiet_stalled_clients
from burrow.api.streams import StreamCap, stream_limits
from burrow.api.throttle import LoginThrottle
from burrow.descriptors import open_file_limit
from burrow.services import Services


class BurrowApp(FastAPI):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # The server's own `send`, before the middlewares wrap it: the event stream's
            # fan-out writes past them (burrow/api/direct_write.py).
            scope.setdefault("extensions", {})[SERVER_SEND] = send
        await super().__call__(scope, receive, send)


def create_app(
    open_services: Callable[[], Awaitable[Services]],
    trusted_proxies: TrustedProxies | None = None,
) -> FastAPI:
    """`open_services` runs at start-up, so the app owns the services' lifetime.
    Forwarding headers are believed only from `trusted_proxies` (default: nobody)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.services = await open_services()
        # One of several replicas: failed logins count on all of them.
        app.state.login_throttle.shared = app.state.services.login_failures
        per_user, total = stream_limits(
            app.state.services.settings.max_streams_per_user, open_file_limit()
        )
        app.state.stream_cap = cap = StreamCap(per_user, total)
        if app.state.services.scheduler is not None:
            app.state.services.scheduler.start()  # serving: schedules fire from now on
        app.state.services.telemetry.metrics.add_gauge(
            "burrow_streams", "Open SSE streams and terminal sockets", "kind", lambda: cap.by_kind
        )
        try:
            yield
        finally:
            await app.state.services.close()

    app = BurrowApp(title="Burrow", version="0.1.0", lifespan=lifespan)
    quiet_stalled_clients()
    app.state.login_throttle = LoginThrottle()
    app.add_middleware(CSRFGuard)
    # Added last, so it runs first: the guard then sees only believable scheme and host.
    app.add_middleware(ForwardedHeaders, proxies=trusted_proxies or TrustedProxies())
    app.add_middleware(ContentSecurityPolicy)  # outermost: refusals carry it too
    install_error_handlers(app)
    for module in (
        health,
        auth,
        me,
        users,
        conversations,
        events,
        files,
        archive,
        checkpoints,
        sandbox,
        secrets,
        profiles,
        settings,
        terminals,
        previews,
        uploads,
        metrics,
        admin,
        git,
        mcp,
        search,
        a2a,
        environments,
        automations,
        fire,
        webhooks,
    ):
        app.include_router(module.router)
    web.mount(app)  # last: the UI's catch-all never shadows /api/*
    return app
