"""The event vocabulary: one frozen payload class per type, the journal's JSON as they say,
and the schema the browser's types are generated from."""

from __future__ import annotations

import pydantic
import pytest

from burrow.runs.journal import events as ev
from burrow.runs.journal.events import PAYLOADS, EventType


def test_every_event_type_has_exactly_one_payload_class() -> None:
    assert set(PAYLOADS) == set(EventType)
    assert all(cls.type is kind for kind, cls in PAYLOADS.items())
    assert len(set(PAYLOADS.values())) == len(PAYLOADS)


def test_payloads_are_frozen_and_refuse_unknown_or_mistyped_fields() -> None:
    finished = ev.ToolFinished(call_id="c1", is_error=False, output="ok")
    with pytest.raises(pydantic.ValidationError):
        finished.output = "changed"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match="exitcode"):
        ev.ToolFinished(call_id="c1", is_error=False, output="ok", exitcode=0)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError, match="stream"):
        ev.ToolOutput(call_id="c1", stream="stdin", text="x")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError, match="status"):
        ev.RunFinished(status="done", error=None, usage=ev.Usage())  # type: ignore[arg-type]


def test_additive_fields_are_absent_when_unset_and_nullable_ones_stay_null() -> None:
    finished = ev.make(ev.RunFinished(status="completed", error=None, usage=ev.Usage()), "r1")
    assert finished.data == {
        "status": "completed",
        "error": None,  # §4 field: present, null
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0},  # always whole
    }
    hit = ev.BudgetHit(kind="steps", limit=1, used=1)
    over = ev.RunFinished(status="budget_exceeded", error="x", usage=ev.Usage(), budget=hit)
    assert ev.make(over).data["budget"] == {"kind": "steps", "limit": 1.0, "used": 1.0}
    message = ev.make(ev.UserMessage(content="hi", steering=False))
    assert message.data == {"content": "hi", "steering": False}
    attached = ev.make(ev.UserMessage(content="hi", steering=False, attachments=["a.png"]))
    assert attached.data["attachments"] == ["a.png"]
    started = ev.make(ev.ToolStarted(call_id="c", name="bash", arguments="{not json"))
    assert started.data == {"call_id": "c", "name": "bash", "arguments": "{not json"}


def test_check_accepts_what_make_wrote_and_names_a_drifted_field() -> None:
    kind = ev.ToolKind(reads=True, writes=False, destructive=False, network=False, shell=True)
    started = ev.ToolStarted(call_id="c", name="bash", arguments={"command": "ls"}, kind=kind)
    written = ev.make(started, "r1")
    assert ev.check(written.type, written.data) == started
    drifted = {**written.data, "callid": written.data["call_id"]}
    del drifted["call_id"]
    with pytest.raises(pydantic.ValidationError) as caught:
        ev.check("tool.started", drifted)
    assert {e["loc"][0] for e in caught.value.errors()} == {"call_id", "callid"}
    with pytest.raises(ev.UnknownEventType, match="add it to EventType"):
        ev.check("tool.exploded", {})


def test_the_schema_maps_every_type_and_marks_only_additive_fields_optional() -> None:
    schemas = ev.schema()["components"]["schemas"]
    mapping = schemas["EventData"]["properties"]
    assert set(mapping) == {t.value for t in EventType}
    assert set(schemas["EventData"]["required"]) == set(mapping)
    assert mapping["usage"] == {"$ref": "#/components/schemas/UsageReported"}
    finished = schemas["ToolFinished"]
    # DESIGN §4's six, always sent; the approval wait only when the call was asked;
    # `parent_call_id` only on a subagent's events, on every type
    assert set(finished["required"]) == set(finished["properties"]) - {
        "approval_wait_ms",
        "parent_call_id",
    }
    assert finished["properties"]["approval_wait_ms"]["type"] == "integer"  # not nullable
    for kind in mapping.values():
        payload = schemas[kind["$ref"].rsplit("/", 1)[1]]
        assert payload["properties"]["parent_call_id"]["type"] == "string"
        assert "parent_call_id" not in payload.get("required", [])
    assert finished["properties"]["exit_code"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    started = schemas["ToolStarted"]
    assert "kind" not in started["required"]
    assert started["properties"]["kind"] == {"$ref": "#/components/schemas/ToolKind"}
    usage = schemas["Usage"]
    assert set(usage["required"]) == {"prompt_tokens", "completion_tokens", "cost"}
    assert usage["properties"]["cache_read_tokens"]["type"] == "integer"  # not nullable


def test_arguments_pass_through_unwalked_however_deep_or_big() -> None:
    deep: list[object] = []
    for _ in range(50_000):  # far past Python's recursion limit
        deep = [deep]
    started = ev.make(ev.ToolStarted(call_id="c", name="bash", arguments=deep))
    assert started.data["arguments"] is deep
    big = "x" * 20_000_000
    assert ev.make(ev.ToolFinished(call_id="c", is_error=False, output=big)).data["output"] is big
