"""Front matter files: tasks, messages and ROM.md read strictly, written back faithfully."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivemind.errors import FileFormatError
from hivemind.hive.document import MAX_FILE_BYTES, parse, render
from hivemind.hive.frontmatter import read_message, read_rom, read_task, render_task
from hivemind.hive.models import Task, TaskPriority
from hivemind.settings import AgentSettings


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_plain_markdown_is_a_task_with_id_from_stem_and_title_from_heading(tmp_path: Path) -> None:
    task = read_task(write(tmp_path, "fix-login.md", "Intro\n\n# Fix the login\n\nIt times out.\n"))
    assert task.id == "fix-login"
    assert task.title == "Fix the login"
    assert task.priority is TaskPriority.MEDIUM
    # The newline that ends the file's last line is not part of the body.
    assert task.body == "Intro\n\n# Fix the login\n\nIt times out."


def test_task_without_heading_is_titled_by_its_stem(tmp_path: Path) -> None:
    assert read_task(write(tmp_path, "tidy.md", "just do it\n")).title == "tidy"


def test_front_matter_fields_are_read(tmp_path: Path) -> None:
    text = (
        "---\nid: t-42\ntitle: Ship it\nassignee: bob\npriority: high\n"
        "depends_on: [a, 7]\nmax_attempts: 5\n---\nBody\n"
    )
    task = read_task(write(tmp_path, "x.md", text))
    assert (task.id, task.title, task.assignee) == ("t-42", "Ship it", "bob")
    assert task.priority is TaskPriority.HIGH
    assert task.depends_on == ["a", "7"]
    assert task.max_attempts == 5
    assert task.body == "Body"


def test_unknown_keys_are_kept_in_extra_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, "x.md", "---\ntitle: T\ncolour: blue\n---\nbody\n")
    with caplog.at_level(logging.WARNING):
        task = read_task(path)
    assert task.extra == {"colour": "blue"}
    assert "line 3: unknown field 'colour'" in caplog.text


BAD_TASKS = [
    pytest.param(
        "---\ntitle: T\npriority: urgent\n---\nx\n",
        "line 3: priority must be one of critical, high, medium, low (got 'urgent')",
        id="priority-urgent",
    ),
    pytest.param(
        "---\nmax_attempts: -1\n---\nx\n",
        "line 2: max_attempts must be ≥ 1 (got -1)",
        id="max-attempts-negative",
    ),
    pytest.param(
        "---\ntitle: T\nmax_attempts: lots\n---\nx\n",
        "line 3: max_attempts must be a whole number (got 'lots')",
        id="max-attempts-text",
    ),
    pytest.param(
        "---\ntitle: [unclosed\n---\nx\n",
        "line 3: invalid YAML in front matter: ",  # then PyYAML's words
        id="bad-yaml",
    ),
    pytest.param(
        "---\n- a\n- b\n---\nx\n",
        "line 2: front matter must be `key: value` lines, not a list",
        id="front-matter-a-list",
    ),
    pytest.param(
        "---\njust words\n---\nx\n",
        "line 2: front matter must be `key: value` lines, not a single value ('just words')",
        id="front-matter-a-scalar",
    ),
    pytest.param(
        "---\na: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n---\nx\n",
        "line 3: YAML aliases (*name) are not allowed in front matter; write the value out",
        id="alias-bomb",
    ),
    pytest.param(
        "---\na: " + "[" * 200_000 + "]" * 200_000 + "\n---\nx\n",
        # Ours ("nested more than 50 levels") or libyaml's own limit (0.2.6+), whichever
        # refuses first: the line is what the person acts on.
        "line 2: ",
        id="nesting-bomb",
    ),
    pytest.param(
        "---\nmax_attempts: " + "9" * 10_000 + "\n---\nx\n",
        "line 2: max_attempts: invalid value (",  # then Python's int limit, in its words
        id="huge-number",
    ),
    pytest.param(
        "---\ntitle: !!python/object:os.system echo\n---\nx\n",
        "line 2: invalid YAML in front matter: ",
        id="python-tag",
    ),
    pytest.param(
        "---\ntitle: T\n",
        "line 1: front matter opened with --- on line 1 is never closed",
        id="never-closed",
    ),
    pytest.param(
        "---\ndepends_on: [a, {b: c}]\n---\nx\n",
        "line 2: depends_on[1] must be text (got {'b': 'c'})",
        id="depends-on-wrong-item",
    ),
    pytest.param(
        "---\nid: ../../etc/passwd\n---\nx\n",
        "line 2: id must be a plain file name without '/'",
        id="id-with-slash",
    ),
    pytest.param(
        "---\ntitle: T\ncreated_at: 2026-13-45\n---\nx\n",
        "line 3: created_at: invalid value (month must be in 1..12)",
        id="impossible-date",
    ),
    pytest.param("", "file is empty", id="empty"),
    pytest.param("  \n\n", "file has no text (only spaces and blank lines)",
                 id="whitespace-only"),
    pytest.param(
        b"---\ntitle: T\n---\nline\n\xff\xfe oops\n",
        "line 5: not UTF-8 text (byte 0xff at offset 22); save the file as UTF-8",
        id="not-utf8",
    ),
    pytest.param(
        b"x" * (MAX_FILE_BYTES + 1),
        "file is 1,000,001 bytes; the limit is 1,000,000 (1 MB)",
        id="over-1mb",
    ),
]


@pytest.mark.parametrize(("content", "reason"), BAD_TASKS)
def test_bad_task_file_gives_a_precise_one_line_reason(
    tmp_path: Path, content: str | bytes, reason: str
) -> None:
    path = write(tmp_path, "bad.md", content)
    with pytest.raises(FileFormatError) as caught:
        read_task(path)
    assert caught.value.reason.startswith(reason)
    assert "\n" not in caught.value.reason
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("levels", [51, 500])
def test_front_matter_nested_past_our_limit_is_refused_on_its_line(
    tmp_path: Path, levels: int
) -> None:
    # Below any YAML library's own limit, so the refusal is ours whatever the version.
    path = write(tmp_path, "deep.md", "---\ntitle: T\na: " + "[" * levels + "]" * levels
                 + "\n---\nx\n")
    with pytest.raises(FileFormatError) as caught:
        read_task(path)
    assert caught.value.reason == "line 3: front matter is nested more than 50 levels deep"


def test_front_matter_nested_50_levels_is_read(tmp_path: Path) -> None:
    path = write(tmp_path, "deep.md", "---\na: " + "[" * 49 + "]" * 49 + "\n---\nx\n")
    value, depth = read_task(path).extra["a"], 0
    while isinstance(value, list):
        value, depth = value[0] if value else None, depth + 1
    assert depth == 49  # with the mapping around it: 50 levels, the most allowed


def test_yaml_document_with_an_anchor_but_no_alias_is_fine(tmp_path: Path) -> None:
    assert (
        read_task(write(tmp_path, "a.md", "---\ntitle: &t Anchored\n---\nx\n")).title == "Anchored"
    )


def test_message_without_front_matter_is_a_raw_message(tmp_path: Path) -> None:
    new = tmp_path / "mailboxes" / "bob" / "new"
    new.mkdir(parents=True)
    message = read_message(write(new, "note1.md", "hello bob\n"))
    assert (message.id, message.from_, message.to, message.body) == (
        "note1", "unknown", "bob", "hello bob"
    )  # fmt: skip


def test_message_front_matter_uses_from_alias(tmp_path: Path) -> None:
    path = write(tmp_path, "m.md", "---\nfrom: alice\nto: bob\nsubject: Hi\n---\nText\n")
    message = read_message(path)
    assert (message.from_, message.to, message.subject, message.body) == (
        "alice", "bob", "Hi", "Text"
    )  # fmt: skip


def test_rom_fields_override_hive_defaults_and_body_is_instructions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "ROM.md",
        "---\nrole: Reviewer\nskills: python\nbudget: {per_day: 5000}\nheartbeat: 30\n---\n"
        "Review code.\n",
    )
    defaults = AgentSettings(max_output_tokens=999, budget={"per_task": 300})
    config = read_rom(path, "rev", defaults)
    assert config.name == "rev"
    assert config.role == "Reviewer"
    assert config.skills == ["python"]
    assert config.instructions == "Review code."
    assert config.max_output_tokens == 999  # from the hive
    assert config.heartbeat == 30  # from the ROM
    assert (config.budget.per_day, config.budget.per_task) == (5000, 300)  # merged


def test_rom_error_names_the_line_and_the_bound(tmp_path: Path) -> None:
    path = write(tmp_path, "ROM.md", "---\nrole: x\nskills: []\nmax_context_tokens: 500\n---\nhi\n")
    with pytest.raises(FileFormatError) as caught:
        read_rom(path, "x", AgentSettings())
    assert caught.value.reason == "line 4: max_context_tokens must be ≥ 1000 (got 500)"


def test_nested_rom_error_points_at_the_nested_key(tmp_path: Path) -> None:
    path = write(tmp_path, "ROM.md", "---\nbudget:\n  per_day: 0\n---\nhi\n")
    with pytest.raises(FileFormatError) as caught:
        read_rom(path, "x", AgentSettings())
    assert caught.value.reason == "line 3: budget.per_day must be ≥ 1 (got 0)"


@pytest.mark.parametrize(("front", "reason"), [
    pytest.param('watch: ["/etc/passwd"]', "line 2: watch: '/etc/passwd' must be relative to "
                 "the hive, like notes/*.md", id="absolute-watch"),
    pytest.param('watch: [""]', "line 2: watch: '' is empty: a pattern names files, like "
                 "notes/*.md", id="empty-watch"),
    pytest.param('knowledge: ["../secrets/*"]', "line 2: knowledge: '../secrets/*' must name "
                 "files inside the hive, without . or .. or empty parts", id="dotdot"),
    pytest.param('watch: "notes/a**"', "line 2: watch: 'notes/a**' uses ** inside a name: ** "
                 "must be a whole part, like notes/**/*.md", id="bad-doublestar"),
    pytest.param("tools: [send_message, teleport]", "line 2: tools: no tool named teleport "
                 "(the tools are send_message, read_file, write_file, edit_file, list_files, "
                 "search_files, create_task, complete_task, fail_task, wait_for, remember, "
                 "recall)",
                 id="unknown-tool"),
    pytest.param('model: " "', "line 2: model must not be empty", id="empty-model"),
])
def test_rom_values_an_agent_cannot_work_with_are_errors(
    tmp_path: Path, front: str, reason: str
) -> None:
    """Before, these passed as valid: an absolute or empty `watch` glob then stopped the
    daemon at the agent's next cycle, an unknown tool or an empty model was "ok"."""
    path = write(tmp_path, "ROM.md", f"---\n{front}\n---\nhi\n")
    with pytest.raises(FileFormatError) as caught:
        read_rom(path, "x", AgentSettings())
    assert caught.value.reason == reason


def test_good_globs_and_a_single_tool_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, "ROM.md",
                 "---\nwatch: [workspace/**/*.md, notes.txt]\ntools: complete_task\n---\nhi\n")
    config = read_rom(path, "x", AgentSettings())
    assert config.watch == ["workspace/**/*.md", "notes.txt"]
    assert config.tools == ["complete_task"]


def test_every_problem_of_a_file_is_named_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.md",
                 "---\npriority: urgent\nmax_attempts: -3\nassignee: [a, b]\n---\n# x\n")
    with pytest.raises(FileFormatError) as caught:
        read_task(path)
    assert caught.value.line == 4
    assert caught.value.reason == (
        "line 4: assignee must be text (got ['a', 'b']); "
        "line 2: priority must be one of critical, high, medium, low (got 'urgent'); "
        "line 3: max_attempts must be ≥ 1 (got -3)"
    )


def test_task_round_trips_through_render(tmp_path: Path) -> None:
    task = Task(
        id="t1",
        title="Ship: v2 # now",
        assignee="bob",
        priority=TaskPriority.CRITICAL,
        depends_on=["a", "b"],
        created_at=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        body="# Ship\n\n---\nnot front matter\n",
        extra={"colour": "blue", "nested": {"k": [1, 2]}},
    )
    again = read_task(write(tmp_path, "t1.md", render_task(task)))
    assert again == task


text_values = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(
    front=st.dictionaries(
        st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True),
        st.one_of(
            text_values,
            st.integers(-(10**9), 10**9),
            st.booleans(),
            st.none(),
            st.lists(text_values, max_size=3),
        ),
        max_size=6,
    ),
    body=st.text(max_size=80),
)
def test_any_front_matter_round_trips(front: dict[str, object], body: str) -> None:
    text = render(front, body)
    doc = parse(text, Path("x.md"))
    assert doc.front == front
    assert doc.body == body
    assert text == "" or text.endswith("\n")  # a text file's last line is ended


@pytest.mark.parametrize("key", ["on", "off", "yes", "no", "y", "true", "null"])
def test_a_key_yaml_reads_as_a_boolean_is_quoted_when_rendered(key: str) -> None:
    import yaml

    from hivemind.hive.document import dump_front

    assert yaml.safe_load(dump_front({key: "x"})) == {key: "x"}
