"""A2A between two real Burrow servers on 127.0.0.1: each hands the other a task with the
`delegate` tool; the inbound endpoint's refusals (token, JSON-RPC, someone else's context),
an unattended run refusing what would ask, and `delegate`'s URL policy."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from burrow.llm.base import ScriptedTurn
from burrow.llm.scripted import ScriptedProvider
from tests.api.harness import RunningServer, free_port, running_server
from tests.fakes.served import served

B_ANSWER = "B wrote proof.txt and read it back."
A_ANSWER = "A looked and all is well."


async def _api_token(srv: RunningServer) -> str:
    response = await srv.client.post("/api/auth/tokens", json={"name": "a2a"})
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


async def _trust(srv: RunningServer, token: str) -> None:
    """`srv`'s admin keeps a peer's API token as the A2A_TOKEN secret."""
    response = await srv.client.put("/api/secrets/A2A_TOKEN", json={"value": token})
    assert response.status_code in (200, 201), response.text


async def _auto_conversation(srv: RunningServer) -> str:
    response = await srv.client.post(
        "/api/conversations", json={"title": "delegating", "approval_mode": "auto"}
    )
    assert response.status_code == 201, response.text
    cid: str = response.json()["id"]
    return cid


def _tool_results(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    calls = {e["data"]["call_id"] for e in events if e["type"] == "tool.started"
             and e["data"]["name"] == name}  # fmt: skip
    return [
        e["data"] for e in events if e["type"] == "tool.finished" and e["data"]["call_id"] in calls
    ]


def _rpc(method: str, text: str, **message: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": method,
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": "m1",
                "parts": [{"kind": "text", "text": text}],
                **message,
            }
        },
    }


async def test_two_servers_delegate_to_each_other(tmp_path: Path) -> None:
    port_a, port_b = free_port(), free_port()
    url_a, url_b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
    model_a = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("delegate", {"agent_url": url_b, "message": "make proof"})]),
            ScriptedTurn(text="B says it is done."),
            ScriptedTurn(text=A_ANSWER),  # the task B hands A
        ]
    )
    model_b = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[("bash", {"command": "echo from-b > proof.txt && cat proof.txt"})]
            ),
            ScriptedTurn(text=B_ANSWER),
            ScriptedTurn(tool_calls=[("delegate", {"agent_url": url_a, "message": "check"})]),
            ScriptedTurn(text="A says all is well."),
        ]
    )
    async with (
        running_server(tmp_path / "a", lambda: model_a, port=port_a, a2a_allow_urls=url_b) as a,
        running_server(tmp_path / "b", lambda: model_b, port=port_b, a2a_allow_urls=url_a) as b,
    ):
        await _trust(a, await _api_token(b))
        await _trust(b, await _api_token(a))

        # A hands B a task; B runs a command in its sandbox and answers; A gets the answer.
        cid = await _auto_conversation(a)
        run = await a.send(cid, "ask B to make a proof file")
        finished = await a.run_finished(cid, run["run_id"], timeout=60)
        assert finished["data"]["status"] == "completed"
        [delegated] = _tool_results(await a.events(cid), "delegate")
        assert delegated["is_error"] is False and delegated["output"] == B_ANSWER

        # On B: a conversation of the token's owner, where bash really ran.
        page = (await b.client.get("/api/conversations")).json()
        conversations = page["items"] if isinstance(page, dict) else page
        [inbound] = [c for c in conversations if c["title"].startswith("A2A: ")]
        [bash] = _tool_results(await b.events(inbound["id"]), "bash")
        assert bash["output"].strip() == "from-b" and not bash["is_error"]

        # The other way round: B hands A a task.
        cid_b = await _auto_conversation(b)
        run_b = await b.send(cid_b, "ask A to check")
        finished_b = await b.run_finished(cid_b, run_b["run_id"], timeout=60)
        assert finished_b["data"]["status"] == "completed"
        [back] = _tool_results(await b.events(cid_b), "delegate")
        assert back["is_error"] is False and back["output"] == A_ANSWER


async def test_an_inbound_run_refuses_what_would_ask_and_streams(tmp_path: Path) -> None:
    model = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("bash", {"command": "mkdir -p build && rm -rf build"})]),
            ScriptedTurn(text="I could not clean up."),
        ]
    )
    # Were the call asked, the run would wait for nobody until the 20 s bound.
    async with running_server(tmp_path, lambda: model, a2a_timeout=20) as srv:
        token = await _api_token(srv)
        headers = {"Authorization": f"Bearer {token}"}
        frames: list[dict[str, Any]] = []
        async with (
            httpx.AsyncClient(base_url=srv.base_url, timeout=30) as peer,
            peer.stream(
                "POST", "/a2a", json=_rpc("message/stream", "clean up"), headers=headers
            ) as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line.removeprefix("data: ")))
        results = [f["result"] for f in frames]
        assert all(f["id"] == 7 and f["jsonrpc"] == "2.0" for f in frames)
        assert results[0]["kind"] == "task" and results[0]["status"]["state"] == "working"
        last = results[-1]
        assert last["kind"] == "status-update" and last["final"] is True
        assert last["status"]["state"] == "completed"
        artifact = next(r for r in results if r["kind"] == "artifact-update")["artifact"]
        assert artifact["parts"] == [{"kind": "text", "text": "I could not clean up."}]
        cid = last["contextId"]
        events = await srv.events(cid)
        assert not [e for e in events if e["type"] == "approval.requested"]
        [refused] = _tool_results(events, "bash")
        assert refused["is_error"] and refused["output"].startswith(
            "Refused: this run was handed in"
        )

        # A later message in the same context continues the conversation (message/send).
        model.turns.append(ScriptedTurn(text="Still here."))
        response = await srv.client.post(
            "/a2a", json=_rpc("message/send", "again", contextId=cid), headers=headers
        )
        task = response.json()["result"]
        assert task["kind"] == "task" and task["contextId"] == cid
        assert task["status"]["state"] == "completed"
        assert task["artifacts"][0]["parts"][0]["text"] == "Still here."


def _task_call(method: str, task_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "t", "method": method, "params": {"id": task_id}}


async def test_a_task_is_got_canceled_and_resubscribed_by_its_id(tmp_path: Path) -> None:
    model = ScriptedProvider(
        [ScriptedTurn(text="Done once."), ScriptedTurn(text="never sent " * 50, delay=0.5)]
    )
    async with running_server(tmp_path, lambda: model) as srv:
        token = await _api_token(srv)
        headers = {"Authorization": f"Bearer {token}"}

        async def call(body: dict[str, Any]) -> dict[str, Any]:
            response = await srv.client.post("/a2a", json=body, headers=headers)
            assert response.status_code == 200, response.text
            answered: dict[str, Any] = response.json()
            assert answered["jsonrpc"] == "2.0" and answered["id"] == body["id"]
            return answered

        done = (await call(_rpc("message/send", "once")))["result"]
        got = (await call(_task_call("tasks/get", done["id"])))["result"]
        assert (got["id"], got["contextId"]) == (done["id"], done["contextId"])
        assert got["status"]["state"] == "completed"
        assert got["artifacts"][0]["parts"][0]["text"] == "Done once."
        ended = await call(_task_call("tasks/cancel", done["id"]))
        assert ended["error"]["code"] == -32002  # TaskNotCancelable
        # An ended task takes no more messages; its context takes a new task.
        again = await call(_rpc("message/send", "more", taskId=done["id"]))
        assert again["error"]["code"] == -32602 and "terminal state" in again["error"]["message"]
        unknown = await call(_rpc("message/send", "more", taskId="r_nope"))
        assert unknown["error"]["code"] == -32001
        assert (await call(_task_call("tasks/get", "r_nope")))["error"]["code"] == -32001

        # A resubscribe to an ended task: the task, once, as it ended.
        async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as peer:
            frames = await _frames(peer, _task_call("tasks/resubscribe", done["id"]), headers)
        assert [f["result"]["status"]["state"] for f in frames] == ["completed"]

        # A slow task: streamed, resubscribed from elsewhere, canceled.
        async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as peer:
            stream = asyncio.create_task(_frames(peer, _rpc("message/stream", "slow"), headers))
            task_id = await _first_task_id(srv, headers)
            following = asyncio.create_task(
                _frames(peer, _task_call("tasks/resubscribe", task_id), headers)
            )
            working = (await call(_task_call("tasks/get", task_id)))["result"]
            assert working["status"]["state"] == "working"
            canceled = (await call(_task_call("tasks/cancel", task_id)))["result"]
            assert canceled["status"]["state"] == "canceled"
            for frames in (await stream, await following):
                last = frames[-1]["result"]
                assert last["final"] is True and last["status"]["state"] == "canceled"

        # Someone else's task is no task of theirs.
        await srv.client.post("/api/users", json={"username": "eve", "password": "e" * 12})
        eve = {"Authorization": f"Bearer {await _login_token(srv, 'eve', 'e' * 12)}"}
        for method in ("tasks/get", "tasks/cancel", "tasks/resubscribe"):
            response = await srv.client.post(
                "/a2a", json=_task_call(method, done["id"]), headers=eve
            )
            assert _answer(response)["error"]["code"] == -32001


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The one JSON-RPC answer in a response: its body, or its event stream's one event."""
    if not response.headers["content-type"].startswith("text/event-stream"):
        answered: dict[str, Any] = response.json()
        return answered
    lines = response.text.splitlines()
    [frame] = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]
    assert isinstance(frame, dict)
    return frame


async def test_a_non_blocking_send_answers_the_task_going(tmp_path: Path) -> None:
    model = ScriptedProvider([ScriptedTurn(text="never sent " * 50, delay=0.5)])
    async with running_server(tmp_path, lambda: model) as srv:
        headers = {"Authorization": f"Bearer {await _api_token(srv)}"}
        body = {**_rpc("message/send", "slow")}
        body["params"] = {**body["params"], "configuration": {"blocking": False}}
        sent = (await srv.client.post("/a2a", json=body, headers=headers)).json()["result"]
        assert sent["status"]["state"] == "working"
        assert [m["role"] for m in sent["history"]] == ["user"]
        # Going, it can be canceled (a blocking send answers it ended: TaskNotCancelable).
        canceled = await srv.client.post(
            "/a2a", json=_task_call("tasks/cancel", sent["id"]), headers=headers
        )
        assert canceled.json()["result"]["status"]["state"] == "canceled"


async def test_tasks_get_answers_the_tasks_history(tmp_path: Path) -> None:
    model = ScriptedProvider([ScriptedTurn(text="Done once.")])
    async with running_server(tmp_path, lambda: model) as srv:
        headers = {"Authorization": f"Bearer {await _api_token(srv)}"}

        async def get(**params: Any) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": params}
            response = await srv.client.post("/a2a", json=body, headers=headers)
            result: dict[str, Any] = response.json()["result"]
            return result

        sent = await srv.client.post("/a2a", json=_rpc("message/send", "once"), headers=headers)
        done = sent.json()["result"]
        full = (await get(id=done["id"]))["history"]
        assert [(m["role"], m["parts"][0]["text"]) for m in full] == [
            ("user", "once"),
            ("agent", "Done once."),
        ]
        assert all(m["taskId"] == done["id"] for m in full)
        assert all(m["contextId"] == done["contextId"] for m in full)
        assert (await get(id=done["id"]))["history"] == full  # the same ids at every read
        assert (await get(id=done["id"], historyLength=1))["history"] == full[-1:]
        assert (await get(id=done["id"], historyLength=0))["history"] == []


async def _frames(
    peer: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    async with peer.stream("POST", "/a2a", json=body, headers=headers) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line.removeprefix("data: ")))
    return frames


async def _first_task_id(srv: RunningServer, headers: dict[str, str]) -> str:
    """The run id of the newest conversation's run, once it started."""
    for _ in range(200):
        listed = (await srv.client.get("/api/conversations")).json()
        newest = max(listed, key=lambda c: c["created_at"])
        started = [e for e in await srv.events(newest["id"]) if e["type"] == "run.started"]
        if started and newest["title"].startswith("A2A: slow"):
            run_id: str = started[-1]["run_id"]
            return run_id
        await asyncio.sleep(0.05)
    raise AssertionError("the slow task did not start")


async def test_the_endpoint_refuses_strangers_and_bad_requests(tmp_path: Path) -> None:
    async with running_server(tmp_path, lambda: ScriptedProvider([])) as srv:
        card = (await srv.client.get("/.well-known/agent-card.json")).json()
        assert card["url"] == f"{srv.base_url}/a2a" and card["capabilities"]["streaming"]
        assert card["securitySchemes"]["bearer"]["scheme"] == "bearer"

        async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as stranger:
            for headers in ({}, {"Authorization": "Bearer not-a-token"}):
                refused = await stranger.post(
                    "/a2a", json=_rpc("message/send", "hi"), headers=headers
                )
                assert refused.status_code == 401
                assert refused.json()["error"]["code"] == "unauthorized"
        # A browser session is not enough: only an API token (no CSRF through a page).
        session = await srv.client.post("/a2a", json=_rpc("message/send", "hi"))
        assert session.status_code == 401

        token = await _api_token(srv)
        headers = {"Authorization": f"Bearer {token}"}

        async def error_of(body: bytes | dict[str, Any]) -> int:
            if isinstance(body, dict):
                response = await srv.client.post("/a2a", json=body, headers=headers)
            else:
                response = await srv.client.post("/a2a", content=body, headers=headers)
            assert response.status_code == 200, response.text
            code: int = response.json()["error"]["code"]
            return code

        assert await error_of(b"{not json") == -32700
        assert await error_of({"method": "message/send"}) == -32600
        assert (
            await error_of(
                {"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set"}
            )
            == -32601
        )
        assert await error_of({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel"}) == -32602
        assert await error_of({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tasks/get"}) == -32600
        assert await error_of({"jsonrpc": "2.0", "id": True, "method": "tasks/get"}) == -32600
        # A notification (no id) is not answered, and starts nothing.
        note = await srv.client.post(
            "/a2a", json={k: v for k, v in _rpc("message/send", "hi").items() if k != "id"},
            headers=headers,
        )  # fmt: skip
        assert (note.status_code, note.content) == (204, b"")
        assert (await srv.client.get("/api/conversations")).json() == []
        # ... but one that cannot be served is answered with its error, as an unknown
        # method is (A2A has no notifications: a caller would wait for nothing).
        bad = {"jsonrpc": "2.0", "method": "message/send", "params": {"": "not_a_dict"}}
        answered = (await srv.client.post("/a2a", json=bad, headers=headers)).json()
        assert (answered["id"], answered["error"]["code"]) == (None, -32602)
        assert await error_of({"jsonrpc": "2.0", "id": 1, "method": "message/send"}) == -32602
        # A streaming method's error is the one event of an event stream: its clients
        # read nothing else.
        for body in (
            _task_call("tasks/resubscribe", "r_nope"),
            {"jsonrpc": "2.0", "id": "t", "method": "message/stream", "params": {}},
        ):
            response = await srv.client.post("/a2a", json=body, headers=headers)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            frame = _answer(response)
            assert frame["id"] == "t"
            assert frame["error"]["code"] == (-32001 if body["params"] else -32602)
        # TaskNotFoundError says so in the spec's words ("Task not found").
        missing = await srv.client.post(
            "/a2a", json=_task_call("tasks/get", "r_x"), headers=headers
        )
        assert missing.json()["error"]["message"] == "Task not found: r_x."
        assert (await srv.client.get("/api/conversations")).json() == []
        assert await error_of(_rpc("message/send", "   ")) == -32602
        assert await error_of(_rpc("message/send", "x" * 100_001)) == -32602
        assert await error_of(b'{"jsonrpc": "2.0", "pad": "' + b"x" * 2_000_000 + b'"}') == -32600

        # Someone else's conversation is no context of the caller's.
        await srv.client.post("/api/users", json={"username": "mallory", "password": "m" * 12})
        others = await srv.create_conversation("the admin's")
        other_user = await _login_token(srv, "mallory", "m" * 12)
        response = await srv.client.post(
            "/a2a",
            json=_rpc("message/send", "hi", contextId=others),
            headers={"Authorization": f"Bearer {other_user}"},
        )
        assert response.json()["error"]["code"] == -32001


async def _login_token(srv: RunningServer, username: str, password: str) -> str:
    async with httpx.AsyncClient(base_url=srv.base_url, timeout=30) as other:
        response = await other.post(
            "/api/auth/login", json={"username": username, "password": password}
        )
        assert response.status_code == 200, response.text
        created = await other.post("/api/auth/tokens", json={"name": "m"})
        assert created.status_code == 201, created.text
        token: str = created.json()["token"]
        return token


async def test_delegate_reaches_only_allowed_peers(tmp_path: Path) -> None:
    port = free_port()
    own = f"http://127.0.0.1:{port}"
    targets = [own, "http://10.255.255.1:8000", "file:///etc/passwd", f"http://localhost:{port}"]
    model = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=[("delegate", {"agent_url": t, "message": "hi"})])
            for t in targets
        ]
        + [ScriptedTurn(text="none reachable")]
    )
    async with running_server(tmp_path, lambda: model, port=port) as srv:
        cid = await _auto_conversation(srv)
        run = await srv.send(cid, "delegate around")
        await srv.run_finished(cid, run["run_id"], timeout=60)
        results = _tool_results(await srv.events(cid), "delegate")
        assert len(results) == len(targets)
        assert all(r["is_error"] for r in results)
        outputs = [r["output"] for r in results]
        # Burrow's own port, by number and by name; a private address at the connect.
        assert outputs[0].startswith("Refused:") and "BURROW_A2A_ALLOW_URLS" in outputs[0]
        assert "is not a public address" in outputs[1] and "BURROW_A2A_ALLOW_URLS" in outputs[1]
        assert outputs[2].startswith("Refused:") and "not an http(s) address" in outputs[2]
        assert outputs[3].startswith("Refused:") and "own port" in outputs[3]


async def test_delegate_asks_in_ask_mode(tmp_path: Path) -> None:
    model = ScriptedProvider(
        [
            ScriptedTurn(
                tool_calls=[("delegate", {"agent_url": "http://example.com", "message": "x"})]
            )
        ]
    )
    async with running_server(tmp_path, lambda: model) as srv:
        cid = await srv.create_conversation()
        await srv.send(cid, "delegate")
        asked = await srv.wait_for(cid, lambda e: e["type"] == "approval.requested")
        assert asked["data"]["tool"] == "delegate" and asked["data"]["risk"] == "dangerous"
        await srv.client.post(f"/api/conversations/{cid}/interrupt")


@contextlib.asynccontextmanager
async def hostile_peer(burrow_port: int) -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """An A2A peer on 127.0.0.1 whose answers misbehave, by path prefix: /big answers 2 MB,
    /long a 50,000-character text, /away's card names Burrow's own endpoint. Yields its
    URL and the headers of every JSON-RPC call it got."""
    seen: list[dict[str, str]] = []
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    async def card(request: Request) -> JSONResponse:
        kind = request.path_params["kind"]
        url = f"http://127.0.0.1:{burrow_port}/a2a" if kind == "away" else f"{base}/{kind}/a2a"
        return JSONResponse({"name": "peer", "url": url})

    async def rpc(request: Request) -> Response:
        seen.append(dict(request.headers))
        if request.path_params["kind"] == "big":
            return Response(b'{"pad": "' + b"x" * 2_000_000 + b'"}', media_type="application/json")
        task = {"kind": "task", "status": {"state": "completed"}, "artifacts": [
            {"artifactId": "a", "parts": [{"kind": "text", "text": "y" * 50_000}]}
        ]}  # fmt: skip
        return JSONResponse({"jsonrpc": "2.0", "id": 1, "result": task})

    app = Starlette(
        routes=[
            Route("/{kind}/.well-known/agent-card.json", card),
            Route("/{kind}/a2a", rpc, methods=["POST"]),
        ]
    )
    async with served(app, port):
        yield base, seen


async def test_a_hostile_peer_is_bounded(tmp_path: Path) -> None:
    port = free_port()
    async with hostile_peer(port) as (peer, seen):
        kinds = ["big", "long", "away"]
        model = ScriptedProvider(
            [
                ScriptedTurn(
                    tool_calls=[("delegate", {"agent_url": f"{peer}/{k}", "message": "x"})]
                )
                for k in kinds
            ]
            + [ScriptedTurn(text="done")]
        )
        listed = ",".join(f"{peer}/{k}" for k in kinds)
        async with running_server(tmp_path, lambda: model, port=port, a2a_allow_urls=listed) as srv:
            await _trust(srv, "peer-token-" + "q" * 12)
            cid = await _auto_conversation(srv)
            run = await srv.send(cid, "delegate to a hostile peer")
            await srv.run_finished(cid, run["run_id"], timeout=60)
            big, long, away = _tool_results(await srv.events(cid), "delegate")
        assert big["is_error"] and "answered more than 1,048,576 bytes" in big["output"]
        assert not long["is_error"] and long["truncated"]
        assert len(long["output"]) < 16_100 and long["output"].endswith(
            "[... the answer was cut here]"
        )
        # The card's endpoint passes the policy on its own: Burrow's port is not listed.
        assert away["is_error"] and "own port" in away["output"]
        # Listed peers got the owner's token; nothing reached Burrow through /away.
        assert len(seen) == 2
        assert all(h["authorization"] == "Bearer peer-token-" + "q" * 12 for h in seen)


async def test_streams_count_against_the_callers_stream_cap(tmp_path: Path) -> None:
    model = ScriptedProvider([ScriptedTurn(text="slow " * 20, delay=0.1)])
    async with running_server(tmp_path, lambda: model, max_streams_per_user=1) as srv:
        headers = {"Authorization": f"Bearer {await _api_token(srv)}"}
        async with (
            httpx.AsyncClient(base_url=srv.base_url, timeout=30) as peer,
            peer.stream(
                "POST", "/a2a", json=_rpc("message/stream", "first"), headers=headers
            ) as held,
        ):
            assert held.status_code == 200
            second = await peer.post("/a2a", json=_rpc("message/stream", "second"), headers=headers)
            assert "BURROW_MAX_STREAMS_PER_USER" in _answer(second)["error"]["message"]
            async for _ in held.aiter_lines():
                pass  # the first runs to its end
        # Its slot is free again.
        again = await srv.client.post("/a2a", json=_rpc("message/stream", "third"), headers=headers)
        assert again.status_code == 200 and "error" not in again.text.split("\n")[0]


async def test_a_flood_over_the_run_cap_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    model = ScriptedProvider([ScriptedTurn(text="slow " * 20, delay=0.1)])
    async with running_server(tmp_path, lambda: model, max_runs_per_user=1) as srv:
        headers = {"Authorization": f"Bearer {await _api_token(srv)}"}
        async with (
            httpx.AsyncClient(base_url=srv.base_url, timeout=30) as peer,
            peer.stream("POST", "/a2a", json=_rpc("message/stream", "first"), headers=headers),
        ):
            before = await _conversation_ids(srv)
            assert len(before) == 1
            for _ in range(5):
                refused = await peer.post(
                    "/a2a", json=_rpc("message/send", "more"), headers=headers
                )
                error = refused.json()["error"]
                assert error["code"] == -32603 and "BURROW_MAX_RUNS_PER_USER" in error["message"]
            assert await _conversation_ids(srv) == before


async def _conversation_ids(srv: RunningServer) -> list[str]:
    page = (await srv.client.get("/api/conversations")).json()
    return [c["id"] for c in (page["items"] if isinstance(page, dict) else page)]


async def test_a_task_over_its_time_is_stopped(tmp_path: Path) -> None:
    model = ScriptedProvider([ScriptedTurn(text="slow " * 100, delay=0.1)])  # ~10 s
    async with running_server(tmp_path, lambda: model, a2a_timeout=1) as srv:
        headers = {"Authorization": f"Bearer {await _api_token(srv)}"}
        response = await srv.client.post(
            "/a2a", json=_rpc("message/send", "take your time"), headers=headers
        )
        task = response.json()["result"]
        assert task["status"]["state"] == "failed"
        assert "BURROW_A2A_TIMEOUT" in task["status"]["message"]["parts"][0]["text"]
        events = await srv.events(task["contextId"])
        [finished] = [e for e in events if e["type"] == "run.finished"]
        assert finished["data"]["status"] == "canceled"


@contextlib.asynccontextmanager
async def traversing_peer() -> AsyncIterator[tuple[str, list[tuple[str, str, str]]]]:
    """A peer on 127.0.0.1 whose card names an endpoint that climbs out of `/trusted/`
    (`/trusted/../admin/a2a`). Yields its URL and (method, raw path, Authorization) of every
    request it got."""
    seen: list[tuple[str, str, str]] = []
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    async def anything(request: Request) -> Response:
        raw = request.scope.get("raw_path", b"").decode()
        seen.append((request.method, raw, request.headers.get("authorization", "")))
        if request.method == "GET":
            return JSONResponse({"name": "peer", "url": f"{base}/trusted/../admin/a2a"})
        task = {"kind": "task", "status": {"state": "completed"}, "artifacts": [
            {"artifactId": "a", "parts": [{"kind": "text", "text": "admin reached"}]}
        ]}  # fmt: skip
        return JSONResponse({"jsonrpc": "2.0", "id": 1, "result": task})

    app = Starlette(routes=[Route("/{path:path}", anything, methods=["GET", "POST"])])
    async with served(app, port):
        yield base, seen


async def test_dot_segments_cannot_climb_out_of_a_listed_prefix(tmp_path: Path) -> None:
    """Listing `<peer>/trusted/` trusts that path only: an endpoint (from a card) or a URL
    (from the model) with `..` or `%2e%2e` after the prefix is refused, so neither the
    connection nor the owner's token reaches `/admin`."""
    token = "peer-token-" + "d" * 12
    async with traversing_peer() as (peer, seen):
        targets = [f"{peer}/trusted", f"{peer}/trusted/%2e%2e/admin", f"{peer}/trusted/./x/../.."]
        model = ScriptedProvider(
            [
                ScriptedTurn(tool_calls=[("delegate", {"agent_url": t, "message": "x"})])
                for t in targets
            ]
            + [ScriptedTurn(text="done")]
        )
        listed = f"{peer}/trusted/"
        async with running_server(tmp_path, lambda: model, a2a_allow_urls=listed) as srv:
            await _trust(srv, token)
            cid = await _auto_conversation(srv)
            run = await srv.send(cid, "delegate to the peer")
            await srv.run_finished(cid, run["run_id"], timeout=60)
            results = _tool_results(await srv.events(cid), "delegate")
    assert len(results) == len(targets)
    for result in results:
        assert result["is_error"] and result["output"].startswith("Refused:"), result
        assert "'..'" in result["output"] and "admin reached" not in result["output"]
    # Only the listed card was fetched; nothing under /admin, no token anywhere.
    assert seen == [("GET", "/trusted/.well-known/agent-card.json", "")], seen
