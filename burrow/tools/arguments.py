"""Validating a model's tool arguments, with errors the model can act on."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from burrow.tools.base import ToolError

ArgumentsT = TypeVar("ArgumentsT", bound=BaseModel)

_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
}


def parse_arguments(model: type[ArgumentsT], arguments: Any, tool: str) -> ArgumentsT:
    """`arguments` as `model`, or a ToolError naming every bad or missing parameter."""
    if not isinstance(arguments, dict):
        raise ToolError(
            f"Invalid arguments for {tool}: expected a JSON object of parameters, "
            f"got {type(arguments).__name__}."
        )
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = [_describe(error) for error in exc.errors()]
        raise ToolError(f"Invalid arguments for {tool}: {'; '.join(problems)}.") from None


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema without pydantic's generated titles (noise for a model)."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        prop.pop("default", None)
        # `x: int | None` renders as anyOf[int, null]; the model only needs the real type.
        variants = [v for v in prop.pop("anyOf", []) if v.get("type") != "null"]
        if len(variants) == 1:
            prop.update(variants[0])
    return schema


def _shown(value: Any) -> str:
    """The offending value as the error quotes it, cut short: a hostile model's megabyte
    argument must not come back to it (and into the journal) whole."""
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:200]}… ({len(text):,} characters)"


def _describe(error: Any) -> str:
    name = ".".join(str(part) for part in error["loc"]) or "arguments"
    kind = error["type"]
    if kind == "missing":
        return f"'{name}' is required"
    if kind in _TYPE_NAMES:
        return f"'{name}' must be {_TYPE_NAMES[kind]} (got {_shown(error['input'])})"
    return f"'{name}': {error['msg']} (got {_shown(error['input'])})"
