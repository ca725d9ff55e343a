from __future__ import annotations

from burrow.tools.base import ToolKind
from burrow.tools.registry import declared_kind, default_tools, tool_specs


def test_default_tools_use_the_contract_names_and_parameters() -> None:
    tools = default_tools()
    assert list(tools) == ["bash", "read_file", "write_file", "edit_file", "preview", "todo"]
    parameters = {spec.name: spec.parameters for spec in tool_specs()}
    assert parameters["bash"]["required"] == ["command"]
    assert set(parameters["bash"]["properties"]) == {"command", "timeout"}
    assert parameters["bash"]["properties"]["timeout"]["type"] == "number"
    assert set(parameters["read_file"]["properties"]) == {"path", "offset", "limit"}
    assert parameters["read_file"]["required"] == ["path"]
    assert parameters["write_file"]["required"] == ["path", "content"]
    assert parameters["edit_file"]["required"] == ["path", "old_text", "new_text"]
    assert parameters["preview"]["required"] == ["command", "port"]
    for spec in tool_specs(tools):
        assert spec.description
        assert spec.parameters["type"] == "object"
        assert "title" not in spec.parameters


def test_default_tools_declare_what_they_do() -> None:
    kinds = {name: tool.kind for name, tool in default_tools().items()}
    assert kinds["read_file"] == ToolKind(reads=True)
    assert kinds["write_file"] == kinds["edit_file"] == ToolKind(reads=True, writes=True)
    assert kinds["bash"].shell == "command" and not kinds["bash"].writes
    assert kinds["preview"].shell == "command" and kinds["preview"].writes
    assert kinds["todo"] == ToolKind(reads=True)  # touches nothing: allowed in every mode
    for name, kind in kinds.items():
        assert declared_kind(name) == kind
        assert kind.shell is None or kind.shell in default_tools()[name].spec.parameters["required"]
    assert declared_kind("mcp__unknown__tool") == ToolKind()
    assert ToolKind(reads=True, shell="command").as_event() == {
        "reads": True,
        "writes": False,
        "destructive": False,
        "network": False,
        "shell": True,
    }
