"""The tool definitions the model is sent: compact, and still what the tools accept."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hivemind.hive.layout import Hive
from hivemind.hive.tasks.board import TaskBoard
from hivemind.tools import default_registry
from hivemind.tools.schema import compact_schema
from tests.helpers import write_task
from tests.test_tools import call, make_ctx


def _keys(node: Any, found: set[str]) -> set[str]:
    """Every schema keyword used anywhere in `node` (property names excluded)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    _keys(sub, found)
                continue
            found.add(key)
            _keys(value, found)
    elif isinstance(node, list):
        for item in node:
            _keys(item, found)
    return found


SPECS = default_registry().specs(None)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_a_tool_schema_carries_no_titles_refs_or_null_branches(spec: Any) -> None:
    schema = spec.input_schema
    assert not {"title", "$defs", "$ref"} & _keys(schema, set())
    assert '{"type": "null"}' not in json.dumps(schema)
    assert schema["type"] == "object"


def test_a_property_named_title_is_kept_and_required_fields_stay_required() -> None:
    create = next(s for s in SPECS if s.name == "create_task").input_schema
    assert "title" in create["properties"] and create["required"] == ["title"]
    assert create["properties"]["priority"]["enum"] == ["critical", "high", "medium", "low"]
    assert create["properties"]["priority"]["default"] == "medium"


def test_optional_fields_lose_their_null_branch_but_keep_their_constraints() -> None:
    schema = compact_schema({
        "properties": {
            "n": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}],
                  "default": None, "title": "N"},
            "k": {"type": "integer", "default": 0, "title": "K"},
            "body": {"type": "string", "minLength": 1, "maxLength": 100_000},
            "reason": {"type": "string", "maxLength": 2000},
            "waiting_for": {"type": "string", "maxLength": 500},
            "tag": {"type": "string", "maxLength": 40},
            "to": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        },
        "required": ["body"], "title": "X", "type": "object",
    })
    props = schema["properties"]
    assert props["n"] == {"type": "integer", "minimum": 1}
    assert props["k"] == {"type": "integer", "default": 0}  # a number is said
    assert props["body"] == {"type": "string"}  # non-empty and a safety cap: the tool checks
    assert props["reason"] == {"type": "string"}  # no reason comes near it: a safety cap
    assert props["waiting_for"] == {"type": "string"}  # a safety cap too
    assert props["tag"]["maxLength"] == 40  # a limit the model should know
    assert props["to"] == {"type": ["string", "array"], "items": {"type": "string"}}


@pytest.mark.parametrize(
    "branches",
    [
        [{"type": "string", "maxLength": 5}, {"type": "integer"}],  # a constraint
        [{"type": "string"}, {"type": "string", "format": "date"}],  # the same type twice
        [{"type": "object", "properties": {}}, {"type": "string"}],  # an object's shape
    ],
    ids=["constraint", "same-type", "object"],
)
def test_a_choice_that_says_more_than_its_types_stays_a_choice(
    branches: list[dict[str, Any]]
) -> None:
    schema = compact_schema({"properties": {"x": {"anyOf": branches}}, "type": "object"})
    assert schema["properties"]["x"] == {"anyOf": branches}


async def test_a_text_past_a_cap_left_unsaid_is_refused_saying_so(hive: Hive) -> None:
    write_task(hive, "t1")
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.scan_pending()
    board.claim(ref, "worker")
    ctx = make_ctx(hive)
    content, is_error = await call(ctx, "fail_task", task_id="t1", reason="x" * 2001)
    assert is_error and "reason" in content and "2000" in content
    assert (hive.tasks_dir / "active" / "worker" / "t1.md").is_file()  # nothing failed



def test_an_enum_of_strings_says_its_type_by_its_values_and_bounds_are_plain() -> None:
    schema = compact_schema({"properties": {
        "level": {"enum": ["low", "high"], "type": "string", "default": "low"},
        "mixed": {"enum": ["a", 1], "type": "string"},  # not all strings: the type stays
        "share": {"type": "number", "minimum": 0.0, "maximum": 1.0},
        "half": {"type": "number", "maximum": 0.5},
    }, "type": "object"})
    props = schema["properties"]
    assert props["level"] == {"enum": ["low", "high"], "default": "low"}
    assert props["mixed"]["type"] == "string"
    assert json.dumps(props["share"]) == '{"type": "number", "minimum": 0, "maximum": 1}'
    assert props["half"]["maximum"] == 0.5


def test_the_compact_specs_still_accept_and_refuse_what_the_tools_do() -> None:
    """A value the sent schema allows is one the input model takes, for the enums and
    bounds the compaction rewrote."""
    create = next(t for t in default_registry().allowed(None) if t.name == "create_task")
    spec = create.spec().input_schema["properties"]["priority"]
    for value in spec["enum"]:
        create.input_model.model_validate({"title": "x", "priority": value})
    remember = next(t for t in default_registry().allowed(None) if t.name == "remember")
    bounds = remember.spec().input_schema["properties"]["importance"]
    remember.input_model.model_validate({"content": "x", "importance": bounds["maximum"]})
    remember.input_model.model_validate({"content": "x", "importance": bounds["minimum"]})


async def test_a_title_past_its_unsaid_cap_is_refused_naming_it(hive: Hive) -> None:
    ctx = make_ctx(hive)
    content, is_error = await call(ctx, "create_task", title="t" * 201)
    assert is_error and "title" in content and "200" in content
    assert not list(hive.tasks_dir.glob("*.md"))  # nothing was created


def test_a_recursive_definition_stays_a_reference_to_it() -> None:
    # A tree, as an MCP server's pydantic model may have: expanding it never ends.
    node = {"type": "object", "title": "Node",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
    schema = compact_schema({"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
                             "$defs": {"Node": node}})
    children = schema["properties"]["root"]["properties"]["children"]
    assert children["items"] == {"$ref": "#/$defs/Node"}
    assert schema["$defs"] == {"Node": node}


def test_a_malformed_branch_or_property_is_passed_on_not_a_crash() -> None:
    # A server's schema the vetting would refuse must not break compaction first.
    schema = compact_schema({"type": "object", "properties": {
        "a": {"anyOf": [5, {"type": "string"}]}, "b": 7}})
    assert schema["properties"] == {"a": {"anyOf": [5, {"type": "string"}]}, "b": 7}
