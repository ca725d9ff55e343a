"""`GET /metrics`: the Prometheus series (burrow/telemetry/metrics.py), for an admin or a
scraper holding `BURROW_METRICS_TOKEN`. Figures across all users' conversations say how
busy the server is, so nobody else may read them."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from burrow.api.deps import ServicesDep, bearer_token, optional_user
from burrow.api.errors import ApiError

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=Response)
async def metrics(request: Request, svc: ServicesDep) -> Response:
    expected = svc.settings.metrics_token
    token = bearer_token(request)
    # Bytes, not text: compare_digest raises on non-ASCII text (a 500), and any header
    # value a client sends is text here.
    scraper = bool(expected and token and hmac.compare_digest(token.encode(), expected.encode()))
    if not scraper:
        user = await optional_user(request, svc)
        if user is None:
            raise ApiError(
                401,
                "unauthorized",
                "Sign in as an admin, or send Authorization: Bearer $BURROW_METRICS_TOKEN.",
            )
        if not user.is_admin:
            raise ApiError(403, "forbidden", "Only an administrator can read the server's metrics.")
    return Response(svc.telemetry.metrics.scrape(), media_type=CONTENT_TYPE_LATEST)
