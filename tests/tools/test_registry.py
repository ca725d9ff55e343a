from __future__ import annotations

from burrow.tools.registry import default_tools, tool_specs


def test_default_tools_use_the_contract_names_and_parameters() -> None:
    tools = default_tools()
    assert list(tools) == ["bash", "read_file", "write_file", "edit_file", "preview"]
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
