"""A tool's typed signature is its input schema: `calls.signature` derives what the daemon checks
and tools/list shows from a TypedDict's annotations."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

import pytest

from memoryd.daemon.calls.signature import Rule, input_schema
from memoryd.daemon.calls.validate import check_args
from memoryd.errors import InvalidParams

Colour = Literal["red", "green"]


class Example(TypedDict):
    name: Annotated[str, Rule("Who.", maxLength=8)]
    colour: NotRequired[Annotated[Colour | Literal["blue"], Rule(default="red")]]
    count: NotRequired[Annotated[int, Rule(default=5, minimum=1, maximum=50)]]
    tags: NotRequired[list[Annotated[str, Rule(pattern="^[a-z]+$")]]]
    links: NotRequired[list[dict[str, Any]]]
    loose: NotRequired[Any]
    quiet: NotRequired[Annotated[bool, Rule(default=False)]]
    loud: NotRequired[Annotated[bool, Rule(default=True)]]


def test_a_typed_dict_becomes_the_schema_it_declares() -> None:
    assert input_schema(Example) == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who.", "maxLength": 8},
            "colour": {"type": "string", "enum": ["red", "green", "blue"], "default": "red"},
            "count": {"type": "integer", "default": 5, "minimum": 1, "maximum": 50},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
            "links": {"type": "array", "items": {"type": "object"}},
            "loose": {},
            "quiet": {"type": "boolean"},          # a false default goes unsaid
            "loud": {"type": "boolean", "default": True},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert list(input_schema(Example)["properties"]) == list(Example.__annotations__)


def test_the_derived_schema_is_what_calls_are_checked_against() -> None:
    schema = input_schema(Example)
    assert check_args(schema, {"name": "ada"})["count"] == 5
    for bad, param in (({}, "name"), ({"name": "ada", "count": 0}, "count"),
                       ({"name": "ada", "colour": "pink"}, "colour"), ({"name": "ada", "tags": ["Up"]}, "tags[0]"),
                       ({"name": "ada", "extra": 1}, "extra")):
        with pytest.raises(InvalidParams) as err:
            check_args(schema, bad)
        assert err.value.data["param"] == param


def test_an_annotation_without_a_json_schema_is_refused_at_declaration() -> None:
    class Odd(TypedDict):
        when: set[str]

    with pytest.raises(TypeError, match="no JSON Schema"):
        input_schema(Odd)


class Optional_(TypedDict, total=False):
    id: Required[str]
    limit: Annotated[int, Rule(default=50, minimum=1, maximum=500)]


def test_a_partial_typed_dict_requires_only_what_it_marks_required() -> None:
    schema = input_schema(Optional_)
    assert schema["required"] == ["id"] and check_args(schema, {"id": "x"}) == {"id": "x", "limit": 50}


def test_every_catalogued_tool_declares_its_arguments_as_a_typed_dict() -> None:
    from typing import is_typeddict

    from memoryd.daemon.catalogue import TOOLS

    for tool in TOOLS.values():
        assert is_typeddict(tool.args), tool.name
        assert tool.input_schema == input_schema(tool.args) and set(tool.required) <= set(tool.args.__annotations__)
