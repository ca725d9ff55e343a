"""`delegate {agent_url, message}`: hand a task to a peer agent over A2A and return its answer.

The peer is reached from the host, so its URLs pass the same policy as an HTTP MCP server's,
with its own list (`BURROW_A2A_ALLOW_URLS`): the agent card's address and the JSON-RPC
endpoint the card names are each checked where the connection is made. The bearer token
is the owner's secret named by `BURROW_A2A_TOKEN_SECRET`, sent only to an endpoint listed in
`BURROW_A2A_ALLOW_URLS` (a peer an administrator trusts); any other peer is called without
it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from burrow.llm.base import ToolSpec
from burrow.tools.a2a import protocol as a2a
from burrow.tools.base import ToolContext, ToolError, ToolKind, ToolResult
from burrow.tools.mcp.outbound import UrlPolicy, UrlRefused

if TYPE_CHECKING:
    import httpx2

MAX_CARD_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 1024 * 1024
MAX_ANSWER_CHARS = 16_000  # what the model sees of the peer's answer
MAX_MESSAGE_CHARS = a2a.MAX_MESSAGE_CHARS

# (conversation id) -> the owner's secret values, None when the conversation is gone.
SecretsOf = Callable[[str], Awaitable[dict[str, str] | None]]


class DelegateTool:
    def __init__(
        self, policy: UrlPolicy, secrets_of: SecretsOf, *, timeout: float, token_secret: str
    ) -> None:
        self._policy = policy
        self._secrets_of = secrets_of
        self._timeout = timeout
        self._token_secret = token_secret

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="delegate",
            description=(
                "Hand a task to another agent over A2A and wait for its answer. agent_url: "
                "the agent's base URL (its card is at /.well-known/agent-card.json) or the "
                "card's URL; message: the whole task in plain text (the agent does not see "
                "this conversation)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "agent_url": {"type": "string"},
                    "message": {"type": "string"},
                },
                "required": ["agent_url", "message"],
            },
        )

    @property
    def kind(self) -> ToolKind:
        return ToolKind(network=True)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        import httpx2  # on the first delegation, not at every start

        agent_url = arguments.get("agent_url")
        message = arguments.get("message")
        if not isinstance(agent_url, str) or not isinstance(message, str) or not message.strip():
            raise ToolError("delegate needs agent_url and message, both text.")
        if len(message) > MAX_MESSAGE_CHARS:
            raise ToolError(f"The message is over {MAX_MESSAGE_CHARS:,} characters.")
        try:
            async with asyncio.timeout(self._timeout):
                endpoint = await self._endpoint(agent_url)
                result = await self._send(endpoint, message, await self._headers(ctx, endpoint))
        except UrlRefused as exc:
            raise ToolError(f"Refused: {exc}") from None
        except TimeoutError:
            raise ToolError(
                f"{agent_url} did not answer within {self._timeout:g} s (BURROW_A2A_TIMEOUT)."
            ) from None
        except httpx2.HTTPError as exc:
            raise ToolError(f"{agent_url} could not be reached: {exc}") from None
        text, failed = a2a.answer_text(result)
        text = text or "(the agent answered with no text)"
        truncated = len(text) > MAX_ANSWER_CHARS
        if truncated:
            text = text[:MAX_ANSWER_CHARS] + "\n[... the answer was cut here]"
        return ToolResult(output=text, is_error=failed, truncated=truncated)

    async def _headers(self, ctx: ToolContext, endpoint: str) -> dict[str, str]:
        """The token, for a listed peer only: a model talked into naming some public URL
        (or a card naming one) must not hand it the owner's token."""
        if not self._policy.explicitly_allowed(endpoint):
            return {}
        token = (await self._secrets_of(ctx.conversation_id) or {}).get(self._token_secret)
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def _endpoint(self, agent_url: str) -> str:
        """The JSON-RPC URL the peer's agent card names."""
        card_url = (
            agent_url if agent_url.endswith(".json") else agent_url.rstrip("/") + a2a.CARD_PATH
        )
        card = await self._get_json(card_url, MAX_CARD_BYTES)
        endpoint = card.get("url") if isinstance(card, dict) else None
        if not isinstance(endpoint, str):
            raise ToolError(f"{card_url} is not an A2A agent card (it names no url).")
        return endpoint

    async def _send(self, endpoint: str, message: str, headers: dict[str, str]) -> dict[str, Any]:
        request = {
            "jsonrpc": "2.0",
            "id": secrets.token_hex(4),
            "method": "message/send",
            "params": {"message": a2a.text_message(message, "user")},
        }
        answer = await self._post_json(endpoint, request, headers)
        if not isinstance(answer, dict):
            raise ToolError(f"{endpoint} did not answer JSON-RPC.")
        error = answer.get("error")
        if isinstance(error, dict):
            raise ToolError(f"The agent refused the task: {str(error.get('message'))[:1000]}")
        result = answer.get("result")
        if not isinstance(result, dict):
            raise ToolError(f"{endpoint} answered without a result.")
        return result

    async def _get_json(self, url: str, limit: int) -> Any:
        from burrow.tools.mcp.outbound_client import checked_client

        self._policy.check_url(url)
        async with (
            checked_client(self._policy, url, {}) as client,
            client.stream("GET", url) as response,
        ):
            return await _json_of(url, response, limit)

    async def _post_json(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
        from burrow.tools.mcp.outbound_client import checked_client

        self._policy.check_url(url)
        async with (
            checked_client(self._policy, url, headers) as client,
            client.stream("POST", url, json=body) as response,
        ):
            return await _json_of(url, response, MAX_ANSWER_BYTES)


async def _json_of(url: str, response: httpx2.Response, limit: int) -> Any:
    if response.status_code == 401:
        raise ToolError(
            f"{url} wants a token: save the peer's API token as the secret named by "
            "BURROW_A2A_TOKEN_SECRET (A2A_TOKEN by default); it is sent only to peers "
            "listed in BURROW_A2A_ALLOW_URLS."
        )
    if response.status_code != 200:
        raise ToolError(f"{url} answered HTTP {response.status_code}.")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise ToolError(f"{url} answered more than {limit:,} bytes.")
    try:
        return json.loads(bytes(body))
    except ValueError:
        raise ToolError(f"{url} did not answer JSON.") from None
