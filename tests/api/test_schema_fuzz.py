"""schemathesis against /openapi.json of a real `burrow serve`: no request, logged in or not,
gets a 5xx, and no route answers 2xx without a login.

Logged in, every operation gets valid examples and invalid ones against a real conversation
(deleting it gets a fresh one per example: later operations would meet only 404s). The
test counts how many examples got past validation and the conversation lookup to the
route's handler, prints that per route, and requires `MIN_REACHED` per route (or all of
them, for a route without parameters: one example is all there is). A fuzz that only ever
meets 404 or 422 tests nothing behind them.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import schemathesis

# At collection, not at the test's first from_dict: under pytest's assertion rewriting that
# lazy import compiles a dozen modules, and a finalizer that formats a traceback mid-compile
# (3.11's traceback calls ast.parse) broke CPython 3.11's AST depth count (gh-106905:
# "SystemError: AST constructor recursion depth mismatch" in CI once).
import schemathesis.specs.openapi.schemas
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.api.harness import ADMIN_PASSWORD, serve_process

# Open to strangers by design; /api/auth/session answers {signed_in: false} to them.
OPEN = {
    "/api/health",
    "/api/auth/login",
    "/api/auth/logout",
    "/api/auth/session",
    "/.well-known/agent-card.json",
    # Signed in by the automation's own token, not a login (a stranger without it gets 401).
    "/api/automations/{aid}/fire",
    # Signed by GitHub (X-Hub-Signature-256), not a login; off (404) without its secret.
    "/api/webhooks/github",
}
EXAMPLES = 10  # per route, valid and again invalid
MIN_REACHED = 5


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "ok"}]))
    # No network for its sandboxes: the fuzzer boots and hibernates them by the hundred
    # (PATCH network included), and what it checks is the API, not the egress set-up.
    env = {"BURROW_SANDBOX_NETWORK": "none"}
    with serve_process(tmp_path, f"scripted:{script}", env) as (_, base):
        yield base


def _session(base: str) -> requests.Session:
    session = requests.Session()
    response = session.post(
        f"{base}/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    assert response.status_code == 200
    return session


def _operations(base: str) -> list[schemathesis.APIOperation]:
    schema = schemathesis.openapi.from_dict(requests.get(f"{base}/openapi.json").json())
    return [result.ok() for result in schema.get_all_operations()]


def _strategy(
    operation: schemathesis.APIOperation,
    cid: str,
    mode: GenerationMode = GenerationMode.POSITIVE,
) -> object:
    overrides: dict[str, object] = {}
    if "{cid}" in operation.path:
        overrides["path_parameters"] = {"cid": cid}  # a real conversation, not only 404s
    if operation.path.endswith("/events"):
        overrides["query"] = {"format": "json"}  # the SSE stream never ends by design
    return operation.as_strategy(mode, **overrides)  # type: ignore[arg-type]


def _outcome(response: requests.Response) -> str:
    """Where a request ended: refused by validation, at the conversation lookup, or in the
    route's handler (whatever it answered)."""
    try:
        error = response.json().get("error", {})
    except (ValueError, AttributeError):
        error = {}
    if error.get("code") in ("invalid_request", "invalid_json"):
        return "validation"
    if response.status_code == 404 and str(error.get("message", "")).startswith("Conversation "):
        return "no conversation"
    return "handler"


def _fresh(session: requests.Session, base: str) -> str:
    response = session.post(f"{base}/api/conversations", json={"title": "fuzz"})
    assert response.status_code == 201, response.text
    cid: str = response.json()["id"]
    return cid


def _fuzz(
    server: str,
    session: requests.Session,
    operation: schemathesis.APIOperation,
    cid: str,
    mode: GenerationMode,
    seen: Counter[str],
) -> None:
    """EXAMPLES examples of `mode` against conversation `cid`; `seen` counts where each one
    ended (see `_outcome`)."""
    per_example = operation.method == "delete" and operation.path.endswith("{cid}")

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=_strategy(operation, cid, mode))
    def check(case: schemathesis.Case) -> None:
        if per_example:
            case.path_parameters = {**(case.path_parameters or {}), "cid": _fresh(session, server)}
        response = case.call(base_url=server, session=session, timeout=30)
        assert response.status_code < 500, (case.as_curl_command(), response.text)
        seen[f"{mode.value} {_outcome(response)}"] += 1

    check()


@pytest.mark.timeout(300)
def test_no_server_errors_when_logged_in(server: str) -> None:
    session = _session(server)
    outcomes: dict[str, Counter[str]] = {}
    took: dict[str, float] = {}
    cid = _fresh(session, server)
    for operation in _operations(server):
        if operation.path == "/api/auth/logout":
            continue  # it would end the fuzzing session itself
        route = f"{operation.method.upper()} {operation.path}"
        seen = outcomes[route] = Counter()
        began = time.monotonic()
        for mode in GenerationMode:
            try:
                _fuzz(server, session, operation, cid, mode, seen)
            except Unsatisfiable:
                # No parameters or body to get wrong: nothing invalid to send.
                assert mode is GenerationMode.NEGATIVE, operation.path
        took[route] = time.monotonic() - began

    report = [
        "route: examples that reached the handler / all (valid + invalid); refused by "
        "validation; no conversation; seconds"
    ]
    unreached = {}
    for route, seen in outcomes.items():
        examples = seen.total()
        reached = seen["positive handler"] + seen["negative handler"]
        report.append(
            f"  {route:<62} {reached:>2}/{examples:<2} ({seen['positive handler']} + "
            f"{seen['negative handler']}); "
            f"{seen['positive validation'] + seen['negative validation']}; "
            f"{seen['positive no conversation'] + seen['negative no conversation']}; "
            f"{took[route]:.1f}"
        )
        if reached < min(MIN_REACHED, examples):
            unreached[route] = dict(seen)
    print("\n".join(report))
    assert not unreached, f"routes the fuzz barely reached: {unreached}"


def test_nothing_is_usable_without_a_login(server: str) -> None:
    cid = _session(server).post(f"{server}/api/conversations", json={}).json()["id"]
    for operation in _operations(server):
        if operation.path in OPEN:
            continue

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=_strategy(operation, cid))
        def check(case: schemathesis.Case) -> None:
            response = case.call(base_url=server, session=requests.Session(), timeout=30)
            assert response.status_code in (400, 401, 415, 422), (
                case.as_curl_command(),
                response.status_code,
            )
            assert not 200 <= response.status_code < 300

        check()


def test_a_seq_past_any_database_integer_is_refused_not_a_server_error(server: str) -> None:
    """Found by the fuzz: `after=2**63` overflowed the query (500)."""
    session = _session(server)
    cid = _fresh(session, server)
    url = f"{server}/api/conversations/{cid}/events"
    too_far = session.get(url, params={"format": "json", "after": 2**63})
    assert too_far.status_code == 422 and too_far.json()["error"]["code"] == "invalid_request"
    resumed = session.get(url, params={"format": "json"}, headers={"Last-Event-ID": "9" * 30})
    assert resumed.status_code == 200 and resumed.json() == []
