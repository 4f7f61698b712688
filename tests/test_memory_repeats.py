"""A task entry's text without the front matter lines its metadata says already."""

from __future__ import annotations

import pytest

from hivemind.memory.repeats import without_repeated_fields

META = {"task_id": "t1", "title": "Do it", "attempts": 2, "read": True, "depends_on": ["a"]}
ALIASES = {"id": "task_id"}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param("---\nid: t1\n---\nbody\n", "body\n", id="all-said"),
        pytest.param("---\nid: t1\npriority: low\n---\nbody\n", "---\npriority: low\n---\nbody\n",
                     id="the-rest-stays"),
        pytest.param('---\ntitle: "Do it"\nattempts: 2\n---\nb\n', "b\n", id="quoted-and-int"),
        pytest.param("---\ntitle: Do it\n", "---\ntitle: Do it\n", id="never-closed"),
        pytest.param("no front matter\n---\nid: t1\n", "no front matter\n---\nid: t1\n",
                     id="none"),
        pytest.param("---\ndepends_on:\n  - a\nread: true\n---\nb\n",
                     "---\ndepends_on:\n  - a\nread: true\n---\nb\n", id="lists-and-bools-stay"),
        pytest.param("---\n# id: t1\nid: t2\n---\nb\n", "---\n# id: t1\nid: t2\n---\nb\n",
                     id="comment-and-other-value"),
        pytest.param("---\ntitle:\n---\nb\n", "---\ntitle:\n---\nb\n", id="empty-value"),
    ],
)
def test_only_lines_the_metadata_says_the_same_go(text: str, shown: str) -> None:
    assert without_repeated_fields(text, META, ALIASES) == shown


def test_an_unchanged_text_is_the_same_object() -> None:
    # The builder counts and escapes the text anew only when it changed.
    text = "---\npriority: low\n---\nbody\n"
    assert without_repeated_fields(text, META, ALIASES) is text
