"""An MCP tool's annotations decide its risk; unknown means ask."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from burrow.runs.loop.hooks.approvals import policy
from burrow.runs.loop.hooks.risk import assess
from burrow.tools.mcp.tool import kind_of, tool_name


@pytest.mark.parametrize(
    ("hints", "risk", "action"),
    [
        (None, "dangerous", "ask"),  # says nothing: the spec's defaults, may destroy
        (types.ToolAnnotations(read_only_hint=True), "safe", "allow"),
        (types.ToolAnnotations(read_only_hint=True, open_world_hint=True), "dangerous", "ask"),
        (types.ToolAnnotations(destructive_hint=True), "dangerous", "ask"),
        (types.ToolAnnotations(read_only_hint=False, destructive_hint=False), "mutating", "allow"),
        (
            types.ToolAnnotations(destructive_hint=False, open_world_hint=True),
            "dangerous",
            "ask",
        ),
    ],
)
def test_annotations_set_the_risk(
    hints: types.ToolAnnotations | None, risk: str, action: str
) -> None:
    assessment = assess("mcp__s__t", {}, kind_of(hints))
    assert assessment.risk == risk
    assert policy("ask", assessment).action == action
    read_only = policy("read_only", assessment).action
    assert read_only == ("allow" if risk == "safe" else "deny")


def test_names_are_prefixed_and_fit_the_model_apis() -> None:
    assert tool_name("files", "read") == "mcp__files__read"
    assert tool_name("s", "dotted.name with space") == "mcp__s__dotted_name_with_space"
    assert len(tool_name("s", "x" * 200)) == 64


def test_a_server_cannot_flood_the_model_with_tools() -> None:
    from burrow.tools.mcp.session import McpSession
    from burrow.tools.mcp.tool import MAX_TOOLS, offered

    def tool(name: str, schema: dict[str, Any] | None = None) -> types.Tool:
        return types.Tool(name=name, input_schema=schema or {"type": "object"})

    session = McpSession("s", transport=lambda: None)  # type: ignore[arg-type,return-value]
    huge = {"type": "object", "description": "x" * 40_000}
    session.tools = [
        tool("big", huge),
        tool("a.b"),
        tool("a_b"),  # the same model-facing name as a.b
        *(tool(f"t{n}") for n in range(MAX_TOOLS + 5)),
    ]
    tools, left_out = offered("s", session)
    assert len(tools) == MAX_TOOLS
    assert "mcp__s__big" not in tools and "mcp__s__a_b" in tools
    assert any("big" in why and "schema" in why for why in left_out)
    assert any("clashes" in why for why in left_out)
    assert sum("more than" in why for why in left_out) == 6


def test_a_server_cannot_flood_the_model_with_resources() -> None:
    """Thousands of resources with long descriptions: the reader's description stays within
    a tool description's bound and says how many it left out."""
    from burrow.tools.mcp.session import McpSession
    from burrow.tools.mcp.tool import MAX_DESCRIPTION, offered

    session = McpSession("s", transport=lambda: None)  # type: ignore[arg-type,return-value]
    session.reads_resources = True
    session.resources = [
        types.Resource(uri=f"note://{n}", name=f"n{n}", description="y" * 5_000)
        for n in range(10_000)
    ]
    tools, left_out = offered("s", session)
    reader = tools["mcp__s__read_resource"]
    assert len(reader.spec.description) <= MAX_DESCRIPTION + len("[MCP server s] ")
    assert "note://0 (n0): " in reader.spec.description
    assert reader.spec.description.rstrip().endswith("more")
    assert reader.kind.reads and not reader.kind.writes and not left_out
