"""One pooled HTTP client per event loop, shared by every model call of every provider.

A client per call cost ~30 ms each on this machine (httpx builds an SSL context, loading
the CA bundle, for every client) and a new connection per model call (a TLS handshake to a
remote API): together most of the gap between a tool's exit and the next model request
(bench/real_model_turn.py). Providers are built per run and never closed, so the pool
belongs to the event loop, not to them; httpx closes connections idle past keep-alive.
The limits are the SDKs' own defaults; each request still carries its provider's timeout.
The client is httpx2's, the HTTP library the OpenAI and Anthropic SDKs are built on.
"""

from __future__ import annotations

import asyncio
import weakref

import httpx2

LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx2.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def shared_http() -> httpx2.AsyncClient:
    """The running loop's client (made at its first model call)."""
    loop = asyncio.get_running_loop()
    client = _POOLS.get(loop)
    if client is None or client.is_closed:
        client = _POOLS[loop] = httpx2.AsyncClient(limits=LIMITS, follow_redirects=True)
    return client
