"""A tool call's result as the model reads it, and a server's bounded stderr log."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path

import mcp_types as types
import pytest

from hivemind.mcp import serverlog
from hivemind.mcp.results import to_result
from hivemind.mcp.serverlog import ServerLog


def result(*content: types.ContentBlock, structured: dict[str, object] | None = None,
           is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured,
                                is_error=is_error)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_text_blocks_are_joined_by_lines() -> None:
    got = to_result(result(text("one"), text("two")), 100)
    assert (got.text, got.is_error, got.cut) == ("one\ntwo", False, 0)


def test_the_servers_error_flag_is_kept() -> None:
    assert to_result(result(text("no such note"), is_error=True), 100).is_error


@pytest.mark.parametrize(("block", "shown"), [
    (types.ImageContent(type="image", data=base64.b64encode(b"x" * 3000).decode(),
                        mime_type="image/png"), "[image: image/png, 3 KB, not shown]"),
    (types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
        uri="file:///notes/a.md", text="# A")), "[resource file:///notes/a.md]\n# A"),
    (types.ResourceLink(type="resource_link", uri="file:///b.md", name="b"),
     "[resource link: file:///b.md (b)]"),
], ids=["image", "embedded-text", "link"])
def test_other_content_is_described_in_a_line(block: types.ContentBlock, shown: str) -> None:
    assert to_result(result(block), 1000).text == shown


def test_structured_content_alone_is_compact_json() -> None:
    got = to_result(result(structured={"hits": [1, 2], "q": "bees"}), 100)
    assert got.text == '{"hits":[1,2],"q":"bees"}'


def test_structured_content_beside_text_is_not_repeated() -> None:
    assert to_result(result(text("2 hits"), structured={"hits": 2}), 100).text == "2 hits"


def test_a_long_result_is_cut_with_a_note_of_what_was_left_out() -> None:
    got = to_result(result(text("a" * 70), text("b" * 50)), 100)
    assert got.cut == 21  # 70 + newline + 50, less 100
    assert got.text == "a" * 70 + "\n" + "b" * 29 + "\n[... 21 more characters cut]"


def test_an_empty_result_says_so() -> None:
    assert to_result(result(), 100).text == "(the tool returned nothing)"


def test_the_stderr_log_keeps_the_last_lines_and_stays_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serverlog, "MAX_LOG_BYTES", 2_000)
    log = ServerLog("notes", tmp_path / "notes.log")
    pipe = log.open_pipe()
    for batch in range(5):  # read in several chunks, so the log is written in several
        pipe.writer.write("".join(f"line {batch}.{i} {'.' * 40}\n" for i in range(40)))
        pipe.writer.flush()
        deadline = time.monotonic() + 30
        while log.lines < 40 * (batch + 1) and time.monotonic() < deadline:
            time.sleep(0.01)
    pipe.writer.write("the last words")
    pipe.spawned()  # our write end closes: the pipe ends
    assert pipe.ended.wait(30)
    serverlog.flush()
    assert log.last_line() == "the last words"
    assert len(log.tail) == serverlog.TAIL_LINES
    sizes = [(tmp_path / name).stat().st_size for name in ("notes.log", "notes.log.1")]
    assert all(size < 2_000 + 2_500 for size in sizes)  # the cap, and a chunk past it
    assert "the last words" in (tmp_path / "notes.log").read_text()
    assert sorted(os.listdir(tmp_path)) == ["notes.log", "notes.log.1"]


def test_a_line_that_cannot_be_encoded_is_still_logged(tmp_path: Path) -> None:
    log = ServerLog("notes", tmp_path / "notes.log")
    log.note("a lone surrogate \udc80 here")
    log.note("and the next line")
    serverlog.flush()
    text = (tmp_path / "notes.log").read_text()
    assert "surrogate ? here" in text and "and the next line" in text
