"""Memory keys `{domain}:{task_type}:{hash}` and blocks made from actions."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hivemind.memory.blocks import FileBlock, HistoryBlock, MessageBlock, Priority
from hivemind.memory.keys import (
    MemoryKey,
    create_memory_from_action,
    generate_memory_key,
    normalise_key_part,
    parse_memory_key,
)


def md5_16(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()[:16]


def test_key_is_domain_task_type_and_16_hex_of_md5() -> None:
    key = generate_memory_key("SELECT * FROM t WHERE d > now()", "sql", "date_filter")
    assert key == f"sql:date_filter:{md5_16('SELECT * FROM t WHERE d > now()')}"


def test_missing_parts_fall_back_to_general() -> None:
    assert generate_memory_key("x").startswith("general:general:")
    assert generate_memory_key("x", domain="", task_type=None).startswith("general:general:")


def test_parts_are_lower_case_without_colons() -> None:
    key = generate_memory_key("x", domain="SQL:Server", task_type="Date Filter")
    assert key.split(":")[:2] == ["sql_server", "date_filter"]


def test_same_content_same_key_different_domain_different_key() -> None:
    assert generate_memory_key("fact", "a", "t") == generate_memory_key("fact", "A", "t")
    assert generate_memory_key("fact", "a", "t") != generate_memory_key("fact", "b", "t")


@given(content=st.text(), domain=st.one_of(st.none(), st.text()),
       task_type=st.one_of(st.none(), st.text()))
def test_keys_round_trip(content: str, domain: str | None, task_type: str | None) -> None:
    key = generate_memory_key(content, domain, task_type)
    parsed = parse_memory_key(key)
    digest = hashlib.md5(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    assert parsed == MemoryKey(normalise_key_part(domain), normalise_key_part(task_type), digest)
    assert str(parsed) == key
    assert generate_memory_key(content, parsed.domain, parsed.task_type) == key


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        pytest.param("sql:abc", "3 parts", id="two-parts"),
        pytest.param("a:b:c:0123456789abcdef", "3 parts", id="four-parts"),
        pytest.param(":t:0123456789abcdef", "must not be empty", id="empty-domain"),
        pytest.param("sql:t:XYZ", "16 lower-case hex", id="bad-hash"),
        pytest.param("sql:t:0123456789ABCDEF", "16 lower-case hex", id="upper-hash"),
    ],
)
def test_malformed_keys_are_refused_with_the_reason(key: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_memory_key(key)


def test_read_file_leaves_a_high_file_block() -> None:
    block = create_memory_from_action(
        "read_file", {"path": "workspace/a.py", "start_line": 3, "end_line": 9, "digest": "d1"}
    )
    assert isinstance(block, FileBlock)
    assert (block.id, block.priority, block.digest) == ("workspace/a.py:3-9", Priority.HIGH, "d1")


def test_check_mailbox_leaves_one_unread_message_per_mail() -> None:
    result = {"messages": [
        {"from": "human", "to": "lead", "subject": "hi", "content": "x" * 300,
         "path": "mailboxes/lead/new/1.md"},
        {"from": "dev", "to": "lead", "subject": "done", "content": "ok",
         "path": "mailboxes/lead/new/2.md"},
    ]}
    blocks = create_memory_from_action("check_mailbox", result)
    assert isinstance(blocks, list) and len(blocks) == 2
    first = blocks[0]
    assert isinstance(first, MessageBlock)
    assert (first.from_agent, first.read, first.priority) == ("human", False, Priority.HIGH)
    assert len(first.preview) == 100


def test_any_other_action_leaves_a_history_block() -> None:
    block = create_memory_from_action("send_message", {"to": "dev", "detail": "asked for tests"})
    assert isinstance(block, HistoryBlock)
    assert block.action == "send_message"
    assert block.detail == "asked for tests"
    assert block.result is not None and '"to": "dev"' in block.result


def test_a_long_result_is_shortened_in_history() -> None:
    block = create_memory_from_action("search_files", "hit\n" * 1000)
    assert isinstance(block, HistoryBlock)
    assert block.result is not None and len(block.result) == 500
