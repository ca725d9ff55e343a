"""The preview proxy: its own listener, one origin per preview, for the owner only.

A request for `{port}-{cid}.<preview domain>` that another page made is refused first
(`origins.py`). Then it is admitted with a signed link token (`?burrow_token=`, good once,
exchanged for a cookie scoped to that host and a redirect to the clean URL) or that
cookie, checked against the conversation's owner and the Burrow sign-in the link was asked
for under (once that has ended, refused); then it is forwarded, HTTP streamed both ways or
WebSocket relayed, through the sandbox's tunnel to the port. Burrow's own credentials (its
session cookie, Authorization) never reach the sandbox, nor can a service set them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

from burrow.config import Settings
from burrow.preview import headers, origins, pages
from burrow.preview.asgi import Message, Receive, Scope, Send
from burrow.preview.links import PreviewLinks
from burrow.preview.spent import SpentLinks, TooManyLinks
from burrow.preview.tokens import PreviewGrant, PreviewSigner, TokenExpired, TokenInvalid
from burrow.preview.upstream import UpstreamError, UpstreamPool, routed
from burrow.preview.websocket import UpstreamRefused, relay_websocket
from burrow.preview_hosts import PreviewAddress, PreviewHosts
from burrow.sandbox.backend import ErrorCode, HttpUpstream, Sandbox, SandboxError
from burrow.services import Services

COOKIE_TTL_SECONDS = 12 * 3600
OWNER_CACHE_SECONDS = 5.0  # a revoked owner loses access within this


class PreviewAccess(Protocol):
    """What the proxy needs from the rest of Burrow."""

    async def owns(self, user_id: str, cid: str) -> bool: ...

    async def signed_in(self, user_id: str, session: str) -> bool:
        """Whether the sign-in a grant was given under (`PreviewGrant.session`) is still
        live and the user's. Called on every request: must answer from memory when it can."""
        ...

    async def sandbox(self, cid: str) -> Sandbox:
        """The conversation's running sandbox, woken up when it hibernates."""
        ...


class ServicesAccess:
    """`PreviewAccess` over the server's services (available once the app has started)."""

    def __init__(self, services: Callable[[], Services | None]) -> None:
        self._services = services

    def _get(self) -> Services:
        svc = self._services()
        if svc is None:
            raise SandboxError(ErrorCode.UNAVAILABLE, "Burrow is still starting.")
        return svc

    async def owns(self, user_id: str, cid: str) -> bool:
        return await self._get().conversations.get(cid, owner_id=user_id) is not None

    async def signed_in(self, user_id: str, session: str) -> bool:
        # The accounts' own cache: a logout or a disable on this replica is seen at once.
        user = await self._get().accounts.holder(session)
        return user is not None and user.id == user_id

    async def sandbox(self, cid: str) -> Sandbox:
        return await self._get().runtime.sandboxes.get(cid)


@dataclass(frozen=True)
class _Admitted:
    grant: PreviewGrant


@dataclass(frozen=True)
class _Exchange:
    cookie: str
    location: bytes


_Refused = tuple[int, pages.Headers, bytes]


@dataclass
class _Progress:
    complete: bool = False  # the last body message has been sent
    browser_gone: bool = False


class PreviewProxy:
    def __init__(
        self,
        access: PreviewAccess,
        hosts: PreviewHosts,
        signer: PreviewSigner,
        *,
        cookie_ttl: float = COOKIE_TTL_SECONDS,
    ) -> None:
        self.access = access
        self.hosts = hosts
        self.signer = signer
        self.cookie_ttl = cookie_ttl
        self._pool = UpstreamPool(self._open_upstream)
        # The preview is shown in an iframe of the app, another site (`localhost` and
        # `*.preview.localhost` are different sites), where a Lax cookie is never sent.
        # A partitioned cookie (CHIPS) is sent there, and only under the site that
        # embedded it; it must be Secure, which https and *.localhost (a secure context)
        # allow. A plain-http custom domain can only use Lax: there the app must be on
        # the same site as the previews (burrow.lan and *.preview.lan).
        secure_context = hosts.scheme == "https" or hosts.domain.endswith("localhost")
        self._same_site = "SameSite=None; Secure; Partitioned" if secure_context else "SameSite=Lax"
        self._owners: dict[tuple[str, str], float] = {}
        # Cookies already verified: the same one comes with every request of a page, and
        # an HMAC and a JSON decode each time were a tenth of the proxy's CPU. Expiry is
        # still checked on each use.
        self._cookie_grants: dict[str, PreviewGrant] = {}
        self._spent = SpentLinks()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] not in ("http", "websocket"):
            return
        host = headers.header(scope, b"host").decode("latin-1")
        address = self.hosts.parse(host)
        if address is None:
            await _refuse(scope, send, pages.unknown_host())
            return
        own = (f"{self.hosts.scheme}://{host}", self.hosts.origin(address.cid, address.port))
        reason = origins.foreign_request(scope, own)
        if reason is not None:
            await _refuse(scope, send, pages.foreign(reason))
            return
        admission = await self._admit(scope, address)
        if isinstance(admission, tuple):
            await _refuse(scope, send, admission)
        elif isinstance(admission, _Exchange):
            await self._exchange(send, admission)
        elif scope["type"] == "http":
            await self._forward_http(scope, receive, send, address, host)
        else:
            await self._forward_websocket(scope, receive, send, address, host)

    async def aclose(self) -> None:
        await self._pool.aclose()

    # Admission

    async def _admit(
        self, scope: Scope, address: PreviewAddress
    ) -> _Admitted | _Exchange | _Refused:
        token = headers.query_param(scope.get("query_string", b""), headers.TOKEN_PARAM)
        if token is not None:
            try:
                grant = self.signer.verify("link", token)
            except TokenExpired:
                return pages.sign_in_needed("expired")
            except TokenInvalid:
                return pages.sign_in_needed("private")
            if not await self._grants(grant, address):
                return pages.not_found()
            if not await self.access.signed_in(grant.user_id, grant.session):
                return pages.sign_in_needed("signed_out")
            try:
                if not self._spent.spend(grant.nonce, grant.expires, user=grant.user_id):
                    return pages.sign_in_needed("used")
            except TooManyLinks as full:
                return pages.too_many_links(everyone=full.everyone)
            if scope["type"] == "websocket":
                return _Admitted(grant)
            cookie = self.signer.mint(
                "cookie",
                grant.user_id,
                grant.cid,
                grant.port,
                self.cookie_ttl,
                session=grant.session,
            )
            return _Exchange(cookie, headers.without_token(scope))
        why: pages.SignInReason = "private"
        for value in headers.cookies(scope, headers.COOKIE.encode()):
            try:
                grant = self._verify_cookie(value.decode("latin-1"))
            except TokenExpired:
                why = "expired"
                continue
            except TokenInvalid:
                continue  # e.g. a cookie another preview host tossed onto the parent domain
            if not await self._grants(grant, address):
                continue
            if await self.access.signed_in(grant.user_id, grant.session):
                return _Admitted(grant)
            why = "signed_out"
        return pages.sign_in_needed(why)

    def _verify_cookie(self, cookie: str) -> PreviewGrant:
        grant = self._cookie_grants.get(cookie)
        if grant is None:
            grant = self.signer.verify("cookie", cookie)
            if len(self._cookie_grants) > 10_000:
                self._cookie_grants.clear()
            self._cookie_grants[cookie] = grant
        elif grant.expires <= time.time():
            del self._cookie_grants[cookie]
            raise TokenExpired
        return grant

    async def _grants(self, grant: PreviewGrant, address: PreviewAddress) -> bool:
        if (grant.cid, grant.port) != (address.cid, address.port):
            return False
        key = (grant.user_id, grant.cid)
        now = time.monotonic()
        if self._owners.get(key, 0.0) > now:
            return True
        if not await self.access.owns(grant.user_id, grant.cid):
            return False
        if len(self._owners) > 10_000:
            self._owners.clear()
        self._owners[key] = now + OWNER_CACHE_SECONDS
        return True

    async def _exchange(self, send: Send, exchange: _Exchange) -> None:
        cookie = (
            f"{headers.COOKIE}={exchange.cookie}; Max-Age={int(self.cookie_ttl)}; Path=/; "
            f"HttpOnly; {self._same_site}"
        )
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", exchange.location),
                    (b"set-cookie", cookie.encode()),
                    (b"cache-control", b"no-store"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    # Forwarding

    async def _open_upstream(self, cid: str, port: int) -> HttpUpstream:
        sandbox = await self.access.sandbox(cid)
        return await sandbox.open_http(port)

    async def _forward_http(
        self, scope: Scope, receive: Receive, send: Send, address: PreviewAddress, host: str
    ) -> None:
        forwarded, body_framed = headers.upstream_headers(scope, host, self.hosts.scheme)
        body_done = asyncio.Event()
        body = _request_body(receive, body_done) if body_framed else None
        if body is None:
            body_done.set()
        # The ASGI server keeps accepting sends after the browser has gone; a watcher
        # stops the copy then, so an abandoned download does not run to its end. It
        # never fires once the response is complete (receive() then says "disconnect").
        task = asyncio.current_task()
        assert task is not None
        progress = _Progress()

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                progress.complete = True
            await send(message)

        watcher = asyncio.ensure_future(_watch_disconnect(receive, body_done, progress, task))
        try:
            await self._stream_response(scope, tracked_send, address, forwarded, body)
        except asyncio.CancelledError:
            if not progress.browser_gone:
                raise
            task.uncancel()
        finally:
            watcher.cancel()

    async def _stream_response(
        self,
        scope: Scope,
        send: Send,
        address: PreviewAddress,
        forwarded: list[tuple[bytes, bytes]],
        body: AsyncIterator[bytes] | None,
    ) -> None:
        try:
            response = await self._pool.request(
                (address.cid, address.port),
                scope["method"].encode(),
                headers.target(scope),
                forwarded,
                body,
            )
        except SandboxError as exc:
            await _refuse(scope, send, _unavailable(address, exc))
            return
        except (UpstreamError, _BrowserGone, TimeoutError) as exc:
            await _refuse(scope, send, _upstream_broke(address, exc))
            return
        await response.relay(send)

    async def _forward_websocket(
        self, scope: Scope, receive: Receive, send: Send, address: PreviewAddress, host: str
    ) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        try:
            upstream = await self._open_upstream(address.cid, address.port)
        except SandboxError:
            await send({"type": "websocket.close", "code": 1011})
            return
        forwarded = [
            (name, value)
            for name, value in headers.upstream_headers(scope, host, self.hosts.scheme)[0]
            if name not in headers.WEBSOCKET_OWN
        ]
        url = f"ws://{host}{headers.target(scope).decode('latin-1')}"
        stream = (upstream.reader, upstream.writer)
        try:
            await relay_websocket(scope, receive, send, stream, url, routed(forwarded, upstream))
        except (UpstreamRefused, OSError):
            await send({"type": "websocket.close", "code": 1011})
        finally:
            upstream.writer.close()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


class _BrowserGone(Exception):
    pass


async def _request_body(receive: Receive, done: asyncio.Event) -> AsyncIterator[bytes]:
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _BrowserGone("the browser went away while sending the body")
            body = message.get("body", b"")
            if body:
                yield body
            if not message.get("more_body", False):
                return
    finally:
        done.set()


async def _watch_disconnect(
    receive: Receive, body_done: asyncio.Event, progress: _Progress, task: asyncio.Task[None]
) -> None:
    await body_done.wait()
    while (await receive())["type"] != "http.disconnect":
        pass
    if not progress.complete:
        progress.browser_gone = True
        task.cancel()


def _unavailable(address: PreviewAddress, exc: SandboxError) -> _Refused:
    if exc.code == ErrorCode.CONNECTION_REFUSED:
        detail = f"Nothing is listening on port {address.port} in the sandbox yet."
    else:
        detail = f"The sandbox is not available: {exc.message}"
    return pages.starting(address.port, detail)


def _upstream_broke(address: PreviewAddress, exc: Exception) -> _Refused:
    return pages.page(
        502,
        "The service did not answer",
        f"The service on port {address.port} broke off the connection ({type(exc).__name__}).",
    )


async def _refuse(scope: Scope, send: Send, refused: _Refused) -> None:
    status, headers, body = refused
    if scope["type"] == "websocket":
        with contextlib.suppress(OSError):
            await send({"type": "websocket.close", "code": 1008 if status < 500 else 1011})
        return
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_proxy(settings: Settings, services: Callable[[], Services | None]) -> PreviewProxy:
    """The proxy `burrow serve` runs on the preview port, over the app's services."""
    links = PreviewLinks.from_settings(settings)
    return PreviewProxy(ServicesAccess(services), links.hosts, links.signer)
