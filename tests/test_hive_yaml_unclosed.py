"""An unclosed `[`, `{` or quote in front matter is found where the text ends: the
error also names the line where it was opened, the one to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivemind.errors import FileFormatError
from hivemind.hive.frontmatter import read_task


@pytest.mark.parametrize(
    ("front", "said"),
    [
        pytest.param("title: x\nassignee: [bob\npriority: low\n",
                     "(for the `[` opened on line 3)", id="bracket"),
        pytest.param("title: x\nmcp_args: {topic: delegation\n",
                     "(for the `{` opened on line 3)", id="brace"),
        pytest.param('title: "x\npriority: low\n', "(for the quote opened on line 2)",
                     id="quote"),
    ],
)
def test_an_unclosed_bracket_or_quote_names_the_line_it_opened_on(
    tmp_path: Path, front: str, said: str
) -> None:
    path = tmp_path / "t1.md"
    path.write_text(f"---\n{front}---\nDo it.\n")
    with pytest.raises(FileFormatError) as err:
        read_task(path)
    assert "invalid YAML in front matter" in str(err.value)
    assert str(err.value).endswith(said)


def test_a_problem_on_one_line_names_that_line_only(tmp_path: Path) -> None:
    path = tmp_path / "t1.md"
    path.write_text("---\ntitle: x\n  bad: indent\n---\nDo it.\n")
    with pytest.raises(FileFormatError) as err:
        read_task(path)
    assert "line 3: invalid YAML in front matter" in str(err.value)
    assert "opened" not in str(err.value)
