"""The sandbox host's one ASGI app: each request goes to the control API, to a sandbox's
envd, or to another port of a sandbox.

A request is for a sandbox when it names one, as the SDK does: the `E2b-Sandbox-Id` and
`E2b-Sandbox-Port` headers (with `E2B_SANDBOX_URL` pointing at this host), or a Host of
`{port}-{sandbox_id}.{domain}` when the host was started with `--domain`. Sandbox traffic
proves itself with the sandbox's own access token (`X-Access-Token`, compared in constant
time), never with the API key: that is what the SDK sends, and a token opens one sandbox.
Ports other than envd's also take the sandbox's traffic token (`e2b-traffic-access-token`),
which opens those ports and not envd. A signed file URL (signed_urls.py) opens its one path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectrpc.code import Code
from connectrpc.codec import Codec, proto_binary_codec, proto_json_codec
from connectrpc.errors import ConnectError
from e2b.envd.filesystem.filesystem_connect import FilesystemASGIApplication
from e2b.envd.process.process_connect import ProcessASGIApplication
from starlette.applications import Starlette
from starlette.types import Message, Receive, Scope, Send

from burrow.sandbox.backend import Backend
from burrow.sandbox_host import signed_urls
from burrow.sandbox_host.control_api import ControlApi
from burrow.sandbox_host.envd_http import EnvdHttp
from burrow.sandbox_host.filesystem_service import FilesystemService
from burrow.sandbox_host.keys import ApiKeys
from burrow.sandbox_host.port_proxy import PortProxy
from burrow.sandbox_host.process_service import ProcessService
from burrow.sandbox_host.refusals import refuse
from burrow.sandbox_host.registry import HostedSandbox, HostLimits, Registry, current_sandbox
from burrow.sandbox_host.templates import Templates
from burrow.sandbox_host.users import BadUser, current_user, from_authorization

ENVD_PORT = 49983
MAX_RPC_MESSAGE_BYTES = 4 * 1024 * 1024  # one Connect message (a frame of stdin, a request)
HOST_PATTERN = re.compile(r"^(\d{1,5})-([A-Za-z0-9-]{1,64})\.")


@dataclass(frozen=True)
class HostConfig:
    limits: HostLimits = field(default_factory=HostLimits)
    domain: str | None = None  # for `{port}-{id}.{domain}` routing and the SDK's URLs
    max_upload_bytes: int = 64 * 1024 * 1024
    ledger_path: Path | None = None  # where the sandboxes are recorded across restarts
    name: str | None = None  # starts this host's sandbox ids (`<name>-i…`), for a fleet
    templates_dir: Path | None = None  # built templates and their uploads (None: base only)


class _RefusingCodec:
    """A Connect codec whose undecodable input is the client's error (INVALID_ARGUMENT),
    not the server's: connectrpc's own codecs let a JSON or protobuf parse error escape
    as a 500."""

    def __init__(self, inner: Codec[Any, Any]) -> None:
        self.inner = inner

    def name(self) -> str:
        return self.inner.name()

    def encode(self, message: Any) -> bytes:
        return self.inner.encode(message)

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        try:
            return self.inner.decode(data, message_class)
        except ConnectError:
            raise
        except Exception as exc:
            raise ConnectError(
                Code.INVALID_ARGUMENT,
                f"The request is not a valid {message_class.__name__} ({self.inner.name()}): {exc}",
            ) from None


CODECS = [_RefusingCodec(proto_binary_codec()), _RefusingCodec(proto_json_codec())]


class SandboxHostApp:
    def __init__(self, backend: Backend, keys: ApiKeys, config: HostConfig) -> None:
        self.backend = backend
        self.config = config
        self.registry = Registry(backend, config.limits, config.ledger_path, config.name)
        self.templates = (
            None
            if config.templates_dir is None
            else Templates(backend, config.templates_dir, max_upload_bytes=config.max_upload_bytes)
        )
        control = ControlApi(self.registry, keys, config.domain, self.templates)
        self.control = Starlette(routes=control.routes())
        self.envd = Starlette(routes=EnvdHttp(config.max_upload_bytes).routes())
        self.process_rpc = ProcessASGIApplication(
            ProcessService(), read_max_bytes=MAX_RPC_MESSAGE_BYTES, codecs=CODECS
        )
        self.filesystem_rpc = FilesystemASGIApplication(
            FilesystemService(), read_max_bytes=MAX_RPC_MESSAGE_BYTES, codecs=CODECS
        )
        self.ports = PortProxy(self.registry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        target = self._target(scope)
        if target is None and signed_urls.signed(scope):
            # A signed file URL on the host's own address names no sandbox: its signer does.
            found = signed_urls.signer(scope, self.registry.running())
            target = None if found is None else (found.sandbox_id, ENVD_PORT)
        if target is None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4404})
                return
            await self.control(scope, receive, send)
            return
        sandbox_id, port = target
        hosted = self.registry.find(sandbox_id)
        if hosted is None:
            await _refuse(scope, send, 502, f"The sandbox {sandbox_id[:64]} was not found")
            return
        signature = signed_urls.verdict(scope, hosted) if port == ENVD_PORT else None
        if signature == signed_urls.Verdict.EXPIRED:
            await _refuse(scope, send, 401, signed_urls.EXPIRED)
            return
        if signature != signed_urls.Verdict.VALID and not _admitted(
            hosted, dict(scope["headers"]), port
        ):
            await _refuse(
                scope,
                send,
                401,
                "Missing or wrong access token: send X-Access-Token (envd and ports) or "
                "e2b-traffic-access-token (ports only).",
            )
            return
        current_sandbox.set(hosted)
        if port == ENVD_PORT:
            try:  # who the call acts as (envd's Basic "<user>:"; the file routes' ?username=)
                current_user.set(from_authorization(dict(scope["headers"]).get(b"authorization")))
            except BadUser as exc:
                await _refuse(scope, send, 400, str(exc))
                return
        if port != ENVD_PORT:
            await self.ports(hosted, port, scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4404})
        elif scope["path"].startswith("/process.Process/"):
            await _cut_when_gone(hosted, self.process_rpc, scope, receive, send)
        elif scope["path"].startswith("/filesystem.Filesystem/"):
            await _cut_when_gone(hosted, self.filesystem_rpc, scope, receive, send)
        else:
            await self.envd(scope, receive, send)

    def _target(self, scope: Scope) -> tuple[str, int] | None:
        headers = dict(scope["headers"])
        sandbox_id = headers.get(b"e2b-sandbox-id")
        if sandbox_id is not None:
            port = headers.get(b"e2b-sandbox-port")
            if port is None:
                return sandbox_id.decode("latin-1"), ENVD_PORT
            # Not a port number (or absurdly long): 0, which the port proxy refuses.
            number = int(port) if port.isdigit() and len(port) <= 5 else 0
            return sandbox_id.decode("latin-1"), number
        host = headers.get(b"host", b"").decode("latin-1").split(":")[0].lower()
        if self.config.domain and host.endswith("." + self.config.domain.lower()):
            match = HOST_PATTERN.match(host)
            if match:
                return match.group(2), int(match.group(1))
        return None

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.backend.recover()
                if self.templates is not None:
                    await self.templates.load()
                self.registry.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.registry.close()
                if self.templates is not None:
                    await self.templates.close()
                await self.ports.aclose()
                await self.backend.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


class _Cut(Exception):
    pass


async def _cut_when_gone(
    hosted: HostedSandbox, app: Any, scope: Scope, receive: Receive, send: Send
) -> None:
    """An envd call whose sandbox is killed or paused meanwhile sends nothing more, not even
    the end of its stream: the server drops the connection, as a VM's would be dropped. The
    SDK then asks whether the sandbox runs and says that it was killed (where an end event
    would have read as the command exiting -1)."""

    async def guarded(message: Message) -> None:
        if hosted.cut:
            raise _Cut
        await send(message)

    try:
        await app(scope, receive, guarded)
    except Exception:
        if not hosted.cut:
            raise
        # Returning with the body unfinished: the server closes the connection.


def _admitted(hosted: HostedSandbox, headers: dict[bytes, bytes], port: int) -> bool:
    """envd takes the sandbox's access token; another port also its traffic token (what
    the SDK returns as `traffic_access_token`, for clients that only proxy ports), or none
    when the sandbox was made with E2B's `allowPublicTraffic`."""
    if port != ENVD_PORT and hosted.public_traffic:
        return True
    access = headers.get(b"x-access-token")
    if access is not None and hosted.token_matches(access.decode("latin-1")):
        return True
    traffic = headers.get(b"e2b-traffic-access-token")
    return (
        port != ENVD_PORT
        and traffic is not None
        and hosted.traffic_token_matches(traffic.decode("latin-1"))
    )


async def _refuse(scope: Scope, send: Send, status: int, message: str) -> None:
    await refuse(scope, send, status, message, close_code=4000 + status)
