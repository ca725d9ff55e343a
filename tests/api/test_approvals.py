"""Approvals through the real API: ask, answer, grants and their reuse, interrupt, restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from burrow.store.approvals import ApprovalStore, arguments_digest
from tests.api.harness import RunningServer, running_server

RISKY = {"command": "mkdir -p build && rm -rf build", "timeout": 30}
RISKY_REORDERED = '{"timeout": 30,  "command": "mkdir -p build && rm -rf build"}'
RISKY_OTHER = {"command": "mkdir -p dist && rm -rf dist", "timeout": 30}


async def _answer(srv: RunningServer, cid: str, request_id: str, decision: str) -> Any:
    return await srv.client.post(
        f"/api/conversations/{cid}/approvals/{request_id}", json={"decision": decision}
    )


async def _next_request(srv: RunningServer, cid: str, after: int) -> dict[str, Any]:
    return await srv.wait_for(cid, lambda e: e["type"] == "approval.requested" and e["seq"] > after)


def _results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == "tool.finished"]


async def test_ask_then_allow_once_allow_session_and_deny(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", RISKY)]),  # asked: allow once
            ScriptedTurn(tool_calls=[("bash", RISKY)]),  # asked again: allow for the session
            ScriptedTurn(tool_calls=[("bash", RISKY_REORDERED)]),  # same call: not asked
            ScriptedTurn(tool_calls=[("bash", RISKY_OTHER)]),  # other arguments: asked, denied
            ScriptedTurn(text="Done."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "clean up")

        first = await _next_request(srv, cid, 0)
        assert first["data"]["risk"] == "dangerous"
        assert first["data"]["tool"] == "bash" and first["data"]["arguments"] == RISKY
        conversation = (await srv.client.get(f"/api/conversations/{cid}")).json()
        assert conversation["status"] == "waiting_approval"
        assert (
            await _answer(srv, cid, first["data"]["request_id"], "allow_once")
        ).status_code == 200
        again = await _answer(srv, cid, first["data"]["request_id"], "deny")
        assert again.status_code == 409 and again.json()["error"]["code"] == "not_waiting"

        second = await _next_request(srv, cid, first["seq"])
        await _answer(srv, cid, second["data"]["request_id"], "allow_session")

        third = await _next_request(srv, cid, second["seq"])
        assert third["data"]["arguments"] == RISKY_OTHER
        await _answer(srv, cid, third["data"]["request_id"], "deny")

        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "completed"
        events = await srv.events(cid)
        resolved = [e["data"]["decision"] for e in events if e["type"] == "approval.resolved"]
        assert resolved == ["allow_once", "allow_session", "deny"]
        results = _results(events)
        assert [r["is_error"] for r in results] == [False, False, False, True]
        assert results[3]["output"] == "Denied by the user."
        assert (await srv.client.get(f"/api/conversations/{cid}")).json()["status"] == "idle"

        # The grant is for this conversation only.
        other = await srv.create_conversation()
        other_provider_run = await srv.send(other, "same in another conversation")
        assert other_provider_run  # the scripted provider answers "(end of script)"
        store = ApprovalStore(srv.services.db)
        assert await store.grant_for(other, "bash", arguments_digest(RISKY)) is None

    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        grant = await ApprovalStore(srv.services.db).grant_for(cid, "bash", arguments_digest(RISKY))
        assert grant is not None
        assert grant.request_id == second["data"]["request_id"]
        assert grant.decision == "allow_session" and grant.granted_at.tzinfo is not None
        audit = await ApprovalStore(srv.services.db).get(first["data"]["request_id"])
        assert audit is not None and audit.decision == "allow_once"
        assert audit.resolved_at is not None and audit.resolved_at >= audit.requested_at


async def test_interrupt_while_waiting_denies_and_pairs_the_call(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn(tool_calls=[("bash", RISKY)])])
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "clean up")
        request = await _next_request(srv, cid, 0)
        await srv.client.post(f"/api/conversations/{cid}/interrupt", json={})
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "canceled"
        events = await srv.events(cid)
        [resolved] = [e["data"] for e in events if e["type"] == "approval.resolved"]
        assert resolved == {"request_id": request["data"]["request_id"], "decision": "deny"}
        [result] = _results(events)
        assert result["is_error"]
        late = await _answer(srv, cid, request["data"]["request_id"], "allow_once")
        assert late.status_code == 409
        audit = await ApprovalStore(srv.services.db).get(request["data"]["request_id"])
        assert audit is not None and audit.decision == "deny"


async def test_modes_auto_and_read_only(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", RISKY)]),
            ScriptedTurn(text="ok"),
            ScriptedTurn(
                tool_calls=[
                    ("write_file", {"path": "a.txt", "content": "a"}),
                    ("bash", {"command": "ls"}),
                ]
            ),
            ScriptedTurn(text="ok"),
            ScriptedTurn(tool_calls=[("bash", {"command": "rm -rf /"})]),
            ScriptedTurn(text="ok"),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        patched = await srv.client.patch(
            f"/api/conversations/{cid}", json={"approval_mode": "auto"}
        )
        assert patched.json()["approval_mode"] == "auto"
        run = await srv.send(cid, "auto")
        await srv.run_finished(cid, run["run_id"])
        events = await srv.events(cid)
        assert not any(e["type"] == "approval.requested" for e in events)
        assert _results(events)[-1]["is_error"] is False

        await srv.client.patch(f"/api/conversations/{cid}", json={"approval_mode": "read_only"})
        run = await srv.send(cid, "read only")
        await srv.run_finished(cid, run["run_id"])
        write, ls = _results(await srv.events(cid))[-2:]
        assert write["is_error"] and "read-only" in write["output"]
        assert not ls["is_error"]

        await srv.client.patch(f"/api/conversations/{cid}", json={"approval_mode": "auto"})
        run = await srv.send(cid, "destroy")
        await srv.run_finished(cid, run["run_id"])
        [forbidden] = _results(await srv.events(cid))[-1:]
        assert forbidden["is_error"] and "deletes the whole filesystem" in forbidden["output"]

        bad_mode = await srv.client.patch(
            f"/api/conversations/{cid}", json={"approval_mode": "yolo"}
        )
        assert bad_mode.status_code == 422
