"""A run seen by an operator: its OpenTelemetry spans (exported to an in-process collector)
and the Prometheus series `/metrics` serves, after real runs on a real server."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import log_in, running_server

BASH = ("bash", {"command": "echo hi"})


def series(text: str, name: str) -> dict[str, float]:
    """{labels: value} of one series in the exposition format."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(\{{[^}}]*\}})? (\S+)", line)
        if match:
            found[match.group(1) or ""] = float(match.group(2))
    return found


async def test_a_run_is_traced_as_run_model_and_tool_spans(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    turns = [
        ScriptedTurn(text="Let me look.", tool_calls=[BASH]),
        ScriptedTurn(text="It printed hi."),
    ]
    provider = ScriptedProvider(turns, turn_from_context=True)
    async with running_server(
        tmp_path, lambda: provider, span_processor=SimpleSpanProcessor(exporter)
    ) as srv:
        cid = await srv.create_conversation()
        run_id = (await srv.send(cid, "say hi"))["run_id"]
        await srv.run_finished(cid, run_id)
        spans = exporter.get_finished_spans()
    by_name: dict[str, list] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    [run] = by_name["burrow.run"]
    assert run.attributes is not None
    assert run.attributes["burrow.conversation_id"] == cid
    assert run.attributes["burrow.run_id"] == run_id
    assert run.attributes["burrow.status"] == "completed"
    assert run.attributes["burrow.prompt_tokens"] > 0
    models, [tool] = by_name["burrow.model"], by_name["burrow.tool"]
    assert len(models) == 2
    for child in [*models, tool]:
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
        assert child.attributes is not None and child.attributes["burrow.run_id"] == run_id
        assert run.start_time <= child.start_time <= child.end_time <= run.end_time
    assert tool.attributes is not None and tool.attributes["burrow.tool"] == "bash"
    assert tool.attributes["burrow.is_error"] is False
    for model in models:
        assert model.attributes is not None
        assert model.attributes["burrow.completion_tokens"] > 0
        assert 0 <= model.attributes["burrow.time_to_first_token_s"] <= model_seconds(model)
    # The first model call ends before the tool starts; the second after it ended.
    first, second = sorted(models, key=lambda s: s.start_time)
    assert first.end_time <= tool.start_time and tool.end_time <= second.start_time
    [sandbox] = by_name["burrow.sandbox.start"]
    assert sandbox.attributes is not None and sandbox.attributes["burrow.status"] == "ready"


def model_seconds(span: object) -> float:
    return (span.end_time - span.start_time) / 1e9  # type: ignore[attr-defined]


async def test_metrics_after_runs_for_an_admin_or_the_scrape_token(tmp_path: Path) -> None:
    turns = [ScriptedTurn(text="Running it.", tool_calls=[BASH]), ScriptedTurn(text="done")] * 3
    provider = ScriptedProvider(turns, turn_from_context=True)
    async with running_server(tmp_path, lambda: provider, metrics_token="scrape-me") as srv:
        cid = await srv.create_conversation()
        await srv.run_finished(cid, (await srv.send(cid, "one"))["run_id"])
        # A run that stops at its budget.
        patched = await srv.client.patch(f"/api/conversations/{cid}", json={"budget": {"steps": 1}})
        assert patched.status_code == 200, patched.text
        run_id = (await srv.send(cid, "two"))["run_id"]
        assert (await srv.run_finished(cid, run_id))["data"]["status"] == "budget_exceeded"

        async with srv.client.stream("GET", f"/api/conversations/{cid}/events") as sse:
            assert sse.status_code == 200
            scraped = await srv.client.get("/metrics")
        assert scraped.status_code == 200, scraped.text
        assert scraped.headers["content-type"].startswith("text/plain")
        text = scraped.text
        runs = series(text, "burrow_runs_total")
        assert runs == {'{status="completed"}': 1.0, '{status="budget_exceeded"}': 1.0}
        assert series(text, "burrow_budget_stops_total") == {'{kind="steps"}': 1.0}
        assert series(text, "burrow_tool_seconds_count") == {'{tool="bash"}': 2.0}
        assert series(text, "burrow_model_seconds_count")[""] >= 3
        assert series(text, "burrow_model_first_token_seconds_count")[""] >= 3
        assert series(text, "burrow_model_tokens_total")['{direction="prompt"}'] > 0
        assert series(text, "burrow_sandboxes") == {'{status="ready"}': 1.0}
        assert series(text, "burrow_streams")['{kind="sse"}'] == 1.0
        assert series(text, "burrow_journal_events_total")[""] > 10
        assert series(text, "burrow_journal_commit_lag_seconds_count")[""] > 0
        assert "burrow_model_retries_total 0.0" in text

        # Who may read it: the scrape token, an admin; not a user, not anyone.
        async with httpx.AsyncClient(base_url=srv.base_url) as anonymous:
            assert (await anonymous.get("/metrics")).status_code == 401
            token = {"Authorization": "Bearer scrape-me"}
            assert (await anonymous.get("/metrics", headers=token)).status_code == 200
            wrong = {"Authorization": "Bearer scrape-you"}
            assert (await anonymous.get("/metrics", headers=wrong)).status_code == 401
        made = await srv.client.post(
            "/api/users", json={"username": "bob", "password": "bob-pw-123"}
        )
        assert made.status_code == 201
        async with httpx.AsyncClient(base_url=srv.base_url) as bob:
            await log_in(bob, "bob", "bob-pw-123")
            refused = await bob.get("/metrics")
            assert refused.status_code == 403
            assert refused.json()["error"]["code"] == "forbidden"
            assert (await bob.get("/api/admin/usage")).status_code == 403

        # The admin page's figures: per account from the database, time split since start.
        usage = await srv.client.get("/api/admin/usage")
        assert usage.status_code == 200, usage.text
        body = usage.json()
        accounts = {a["username"]: a for a in body["accounts"]}
        assert accounts["admin"]["conversations"] == 1 and accounts["admin"]["prompt_tokens"] > 0
        assert accounts["bob"] == {**accounts["bob"], "conversations": 0, "cost": 0.0}
        since = body["since_start"]
        assert since["runs"] == {"completed": 1, "budget_exceeded": 1}
        assert 0 < since["tool_seconds"] < since["run_seconds"]
        assert 0 < since["model_seconds"] < since["run_seconds"]


async def test_a_non_ascii_bearer_on_metrics_is_refused_not_a_server_error(
    tmp_path: Path,
) -> None:
    async with (
        running_server(tmp_path, lambda: ScriptedProvider([]), metrics_token="scrape-me") as srv,
        httpx.AsyncClient(base_url=srv.base_url) as anonymous,
    ):
        for raw in ("Bearer scrape-mé".encode(), b"Bearer \xe9\xe9", "Bearer 密".encode()):
            response = await anonymous.get("/metrics", headers={"Authorization": raw})
            assert response.status_code == 401, (raw, response.text)
            assert response.json()["error"]["code"] == "unauthorized"
        token = {"Authorization": "Bearer scrape-me"}
        assert (await anonymous.get("/metrics", headers=token)).status_code == 200
