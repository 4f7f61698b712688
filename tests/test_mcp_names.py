"""The names a model is offered for a server's tools."""

from __future__ import annotations

from hivemind.mcp.names import safe_names
from hivemind.mcpspec import tool_name


def test_valid_names_are_kept_as_the_server_gives_them() -> None:
    assert safe_names("notes", ["lookup", "list-all", "x_1"]) == {
        "lookup": "lookup", "list-all": "list-all", "x_1": "x_1"}


def test_other_characters_become_underscores_and_a_clash_gets_a_digest() -> None:
    names = safe_names("notes", ["files.read", "files_read", "a b"])
    assert names["files_read"] == "files_read"  # the valid one keeps its name
    assert names["a_b"] == "a b"
    [renamed] = [safe for safe, own in names.items() if own == "files.read"]
    assert renamed.startswith("files_read_") and len(renamed) == len("files_read_") + 8


def test_a_long_name_is_cut_to_fit_the_prefix_within_64() -> None:
    names = safe_names("a-server-with-a-long-name", ["z" * 100, "z" * 101])
    assert len(names) == 2 and set(names.values()) == {"z" * 100, "z" * 101}
    assert all(len(tool_name("a-server-with-a-long-name", safe)) <= 64 for safe in names)
