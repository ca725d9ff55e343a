"""Bad input gets a precise error and loses nothing."""

from __future__ import annotations

from pathlib import Path

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import running_server


async def test_malformed_requests_get_precise_json_errors(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        cid = await srv.create_conversation()
        url = f"/api/conversations/{cid}/messages"

        bad_json = await srv.client.post(
            url, content=b'{"content": "hi"', headers={"content-type": "application/json"}
        )
        assert bad_json.status_code == 400
        assert bad_json.json()["error"]["code"] == "invalid_json"

        empty = await srv.client.post(url, json={"content": "   "})
        assert empty.status_code == 422
        assert "content is empty" in empty.json()["error"]["message"]

        missing = await srv.client.post(url, json={})
        assert missing.status_code == 422
        assert "content" in missing.json()["error"]["message"]

        unknown = await srv.client.post("/api/conversations/c_nope/messages", json={"content": "x"})
        assert unknown.status_code == 404
        assert unknown.json() == {
            "error": {"code": "not_found", "message": "Conversation c_nope was not found."}
        }

        escape = await srv.client.get(
            f"/api/conversations/{cid}/files/content", params={"path": "../../etc/passwd"}
        )
        assert escape.status_code == 400
        assert escape.json()["error"]["code"] == "path_escape"

        no_route = await srv.client.get("/api/nothing-here")
        assert no_route.status_code == 404 and "error" in no_route.json()

        # The rejected requests journaled nothing (the file reads started the sandbox).
        assert {e["type"] for e in await srv.events(cid)} == {"sandbox.status"}


async def test_a_nul_in_a_file_path_is_a_400_not_a_sandbox_failure(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        cid = await srv.create_conversation()
        for route in ("files", "files/content"):
            for path in ("a\0b", "\0", "dir/\0/../x"):
                response = await srv.client.get(
                    f"/api/conversations/{cid}/{route}", params={"path": path}
                )
                assert response.status_code == 400, (route, path, response.text)
                error = response.json()["error"]
                assert error["code"] == "invalid_path"
                assert "NUL" in error["message"]
        # Refused at the edge: the sandbox was not even started for them.
        assert await srv.events(cid) == []
        listing = await srv.client.get(f"/api/conversations/{cid}/files")
        assert listing.status_code == 200, listing.text


async def test_model_and_tool_errors_become_tool_results_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[
                    ("read_file", {"path": "../../etc/passwd"}),
                    ("write_file", '{"path": "x.txt", "content": "unterminated'),
                    ("launch_rockets", {}),
                ]
            ),
            ScriptedTurn(text="I will stay inside the workspace."),
        ]
    )
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "try things")
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "completed"
        events = await srv.events(cid)
        results = [e["data"] for e in events if e["type"] == "tool.finished"]
        assert [r["is_error"] for r in results] == [True, True, True]
        assert "outside the workspace" in results[0]["output"]
        assert "not valid JSON" in results[1]["output"]
        assert "Unknown tool 'launch_rockets'" in results[2]["output"]
        # The invalid arguments are kept verbatim for the user to see.
        started = [e["data"] for e in events if e["type"] == "tool.started"]
        assert started[1]["arguments"] == '{"path": "x.txt", "content": "unterminated'
        # The model saw each error as the result of its call.
        tool_messages = [m for m in provider.requests[1] if m.role == "tool"]
        assert [m.content for m in tool_messages] == [r["output"] for r in results]


async def test_a_model_that_fails_ends_the_run_with_its_message(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Half an ans", error="connection reset")])
    async with running_server(tmp_path, lambda: provider) as srv:
        cid = await srv.create_conversation()
        run = await srv.send(cid, "go")
        finished = await srv.run_finished(cid, run["run_id"])
        assert finished["data"]["status"] == "failed"
        assert "connection reset" in finished["data"]["error"]
        events = await srv.events(cid)
        # The streamed part is kept.
        [message] = [e for e in events if e["type"] == "assistant.message"]
        assert message["data"]["content"] == "Half an ans"
