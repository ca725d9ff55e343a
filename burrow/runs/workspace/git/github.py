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
MAX_COMMENT = 60_000  # GitHub takes 65,536 characters
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
    payload = {"title": ask.title, "head": ask.head, "base": ask.base, "body": ask.body}
    url = f"{_repo_url(api_url, ask.owner, ask.repo)}/pulls"
    status, body = await _call("POST", url, token, json=payload)
    number = body.get("number") if isinstance(body, dict) else None
    html_url = body.get("html_url") if isinstance(body, dict) else None
    if status != 201 or not isinstance(number, int) or not isinstance(html_url, str):
        raise GitHubError(status, "GitHub's answer held no pull request number.")
    return PullRequest(number, html_url)


async def open_pull_of(
    api_url: str, token: str, owner: str, repo: str, branch: str
) -> PullRequest | None:
    """The open pull request whose head is `owner:branch`, if there is one (the
    automations' pull-request loop updates it rather than opening another)."""
    url = f"{_repo_url(api_url, owner, repo)}/pulls"
    _, found = await _call("GET", url, token, params={"head": f"{owner}:{branch}", "state": "open"})
    for pull in found if isinstance(found, list) else []:
        if isinstance(pull, dict) and isinstance(pull.get("number"), int):
            return PullRequest(pull["number"], str(pull.get("html_url") or ""))
    return None


async def comment(api_url: str, token: str, owner: str, repo: str, number: int, body: str) -> str:
    """A comment on issue or pull request `number`; its URL."""
    url = f"{_repo_url(api_url, owner, repo)}/issues/{number}/comments"
    _, made = await _call("POST", url, token, json={"body": body[:MAX_COMMENT]})
    return str(made.get("html_url") or "") if isinstance(made, dict) else ""


def _repo_url(api_url: str, owner: str, repo: str) -> str:
    return f"{api_url.rstrip('/')}/repos/{quote(owner, safe='')}/{quote(repo, safe='')}"


async def _call(method: str, url: str, token: str, **kw: Any) -> tuple[int, Any]:
    """One call to GitHub's API with `token`: its status and JSON body (None when it has
    none); a status of 300 or more is a GitHubError in GitHub's own words, masked."""
    import httpx  # with its CLI's rich and pygments, a tenth of a second: not at start

    mask = SecretMask([token])
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "Burrow",
    }
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as client:
            response = await client.request(method, url, headers=headers, **kw)
    except httpx.HTTPError as exc:
        raise GitHubError(None, mask.text(f"GitHub's API did not answer: {exc}")) from exc
    if response.status_code >= 300:
        raise GitHubError(
            response.status_code, mask.text(_message(response.status_code, _json(response)))
        )
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None


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
