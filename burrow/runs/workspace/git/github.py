"""Opening a pull request through GitHub's REST API, from the server.

The token goes only to the configured API (`BURROW_GITHUB_API_URL`), never to an address
taken from the repository: owner and name are read from the remote's URL, the host is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from burrow.sandbox.masking import SecretMask

if TYPE_CHECKING:
    import httpx

TIMEOUT = 30.0
MAX_MESSAGE = 1000


class GitHubError(Exception):
    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str


@dataclass(frozen=True)
class PullRequestAsk:
    owner: str
    repo: str
    title: str
    head: str
    base: str
    body: str


async def open_pull_request(api_url: str, token: str, ask: PullRequestAsk) -> PullRequest:
    import httpx  # with its CLI's rich and pygments, a tenth of a second: not at start

    mask = SecretMask([token])
    url = (
        f"{api_url.rstrip('/')}/repos/{quote(ask.owner, safe='')}/{quote(ask.repo, safe='')}/pulls"
    )
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "Burrow",
    }
    payload = {"title": ask.title, "head": ask.head, "base": ask.base, "body": ask.body}
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as client:
            response = await client.post(url, json=payload, headers=headers)
    except httpx.HTTPError as exc:
        raise GitHubError(None, mask.text(f"GitHub's API did not answer: {exc}")) from exc
    body = _json(response)
    if response.status_code != 201:
        raise GitHubError(response.status_code, mask.text(_message(response.status_code, body)))
    number, html_url = body.get("number"), body.get("html_url")
    if not isinstance(number, int) or not isinstance(html_url, str):
        raise GitHubError(response.status_code, "GitHub's answer held no pull request number.")
    return PullRequest(number, html_url)


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _message(status: int, body: dict[str, Any]) -> str:
    """GitHub's own words: `message`, and each `errors[].message` (e.g. "A pull request
    already exists for owner:branch.")."""
    parts = [str(body.get("message") or f"HTTP {status}")]
    for error in body.get("errors") or []:
        if isinstance(error, dict) and error.get("message"):
            parts.append(str(error["message"]))
    return f"GitHub answered {status}: " + "; ".join(parts)[:MAX_MESSAGE]
