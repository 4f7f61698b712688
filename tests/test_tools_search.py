"""search_files is a bounded grep: so many hits, no binary or huge file, and a pattern
that backtracks without end is stopped, not left to hold the cycle."""

from __future__ import annotations

import pytest

from hivemind.errors import ToolError
from hivemind.hive.layout import Hive
from hivemind.tools import filesearch, searchpattern
from tests.test_tools import call, crowded_workspace, make_ctx


async def test_a_pattern_that_backtracks_without_end_is_stopped(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filesearch, "SEARCH_SECONDS", 0.3)
    (hive.workspace_dir / "a.md").write_text("a" * 60 + "!\n")
    ctx = make_ctx(hive)

    # With no stop, this match would run for longer than the universe has existed.
    content, is_error = await call(ctx, "search_files", pattern="(a|aa)+$")

    assert is_error
    assert content.startswith("search stopped after 0.3 s: the pattern is too slow")


async def test_hits_stop_at_max_results(hive: Hive) -> None:
    (hive.workspace_dir / "many.md").write_text("".join(f"hit {i}\n" for i in range(300)))
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="^hit", max_results=5)

    assert not is_error
    assert content.splitlines() == [f"workspace/many.md:{n}: hit {n - 1}" for n in range(1, 6)]


async def test_binary_and_huge_files_are_skipped(hive: Hive) -> None:
    (hive.workspace_dir / "bin.dat").write_bytes(b"needle\x00\x01\x02")
    (hive.workspace_dir / "huge.md").write_text("needle\n" + "x" * filesearch.MAX_SEARCH_FILE_BYTES)
    (hive.workspace_dir / "plain.md").write_text("a needle here\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle")

    assert not is_error
    assert content == "workspace/plain.md:1: a needle here"


@pytest.mark.parametrize(
    ("pattern", "repeat", "copies"),
    [("a{100000000}", "{100000000}", 100000000), ("a{50001}", "{50001}", 50001),
     ("a{60000,}", "{60000,}", 60000), ("a{60000,70000}?", "{60000,70000}", 60000),
     ("a{60000}+", "{60000}", 60000), ("(?x)a{1 0 0 0 0 0}", "{100000}", 100000),
     (r"\\{100000000}", "{100000000}", 100000000),
     ("(?:a{1000}){1000}", "{1000} inside {1000}", 1000000),
     ("(?:(?:a{100}){100}){100}", "{100} inside {100} inside {100}", 1000000),
     ("(?:a{1000})(?#note){1000}", "{1000} inside {1000}", 1000000),
     ("(?x)(?:a{1000}) {1000}", "{1000} inside {1000}", 1000000),
     ("(?:a{1000}|b){1000,2000}", "{1000} inside {1000,2000}", 1000000),
     ("(?<=(?:a{1000}){1000})b", "{1000} inside {1000}", 1000000),
     ("(?>a{1000}){1000}", "{1000} inside {1000}", 1000000),
     ("(?:(?:a{1000}){e<=1}){1000}", "{1000} inside {1000}", 1000000),
     (r"\w{1000}" * 60, "{1000}", 1000)],
    ids=["exact", "just-over", "open-ended", "lazy", "possessive", "verbose-spaces",
         "escaped-backslash", "nested", "three-deep", "comment-between",
         "verbose-space-between", "in-alternation", "in-lookbehind", "atomic", "fuzzy",
         "many-siblings"],
)
async def test_repeats_whose_copies_would_not_fit_are_refused(
    hive: Hive, pattern: str, repeat: str, copies: int
) -> None:
    (hive.workspace_dir / "a.md").write_text("aaa\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern=pattern)

    assert is_error
    assert content == (
        f"pattern too large: it would compile to more than {searchpattern.MAX_PATTERN_SIZE} "
        f"elements: the repeat {repeat} makes {copies} copies of what it repeats; use a "
        "smaller minimum count (only the minimum is copied: x{0,1000}, x+ and x* cost "
        "nothing) or nest fewer counted repeats"
    )


@pytest.mark.parametrize(
    "pattern",
    ["(?fi)" + r"[\wa]" * 9000, "(?fi)(?:" + "|".join([r"[\wa]"] * 7) + "){800}",
     "(?V1i)" + r"[\d\w]" * 8000],
    ids=["many-sets", "repeated-alternation", "version1-ignorecase"],
)
async def test_sets_under_full_case_folding_that_would_not_fit_are_refused(
    hive: Hive, pattern: str
) -> None:
    # Each compiles to ~80 KB: the first took 1.9 GB and 7 s to compile.
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern=pattern)

    assert is_error
    assert content == (
        f"pattern too large: it would compile to more than {searchpattern.MAX_PATTERN_SIZE} "
        f"elements, as each [set] counts for {searchpattern.FULL_FOLD_SET_SIZE} under full "
        "case folding (flag f, or V1 with i); drop the f flag or use fewer sets"
    )


async def test_a_pattern_longer_than_the_bound_is_refused(hive: Hive) -> None:
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="a" * 50_001)

    assert (content, is_error) == (
        "pattern is 50001 characters; the limit is 50000: search for a shorter part of it",
        True,
    )


@pytest.mark.parametrize(
    ("pattern", "words"),
    [("(?au)x", "incompatible"), ("(?V0)(?V1)x", None), (r"\x{10000}", "escape"),
     ("(?<=a+)b(", "missing )")],
    ids=["two-encodings", "two-versions", "braced-hex-escape", "unbalanced"],
)
async def test_an_invalid_pattern_is_refused_with_the_reason(
    hive: Hive, pattern: str, words: str | None
) -> None:
    # regex words its errors as it likes, and raises ValueError, KeyError or its own
    # error by version: what we promise is a one-line refusal that gives its reason.
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern=pattern)

    assert is_error
    assert content.startswith("invalid pattern: ")
    assert len(content) > len("invalid pattern: ") and "\n" not in content
    assert words is None or words in content


@pytest.mark.parametrize(
    "exc",
    [ValueError("VERSION0 and VERSION1 flags are mutually incompatible"), KeyError(512),
     IndexError("string index out of range"), TypeError("x")],
    ids=["value-error", "key-error", "index-error", "type-error"],
)
def test_whatever_the_parser_raises_is_a_refusal(
    monkeypatch: pytest.MonkeyPatch, exc: Exception
) -> None:
    def failing_parser(source: object, info: object) -> object:
        raise exc

    monkeypatch.setattr(searchpattern._core, "_parse_pattern", failing_parser)

    with pytest.raises(ToolError, match=r"^invalid pattern: \S"):
        searchpattern.vet_pattern("x")


@pytest.mark.parametrize(
    "pattern",
    [r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
     r"(?:\d{1,3}\.){3}\d{1,3}", "x{1000}", r"\{5000}"],
    ids=["uuid", "ipv4", "at-the-old-bound", "escaped-brace"],
)
async def test_ordinary_counted_repeats_are_searched(hive: Hive, pattern: str) -> None:
    (hive.workspace_dir / "a.md").write_text("nothing here\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern=pattern)

    assert (content, is_error) == ("no match", False)


APACHE_LINE = '1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /a/b HTTP/1.0" 200 2326 "-" "curl"'


@pytest.mark.parametrize(
    ("pattern", "line"),
    [("(a|b){100}(c|d){100}", "ab" * 50 + "cd" * 50),
     ("(?:ab){1,50}(?:cd){1,50}", "abcd"),
     (r"(\w+){2}(\s+){2}(\d+){3}(x){4}(y){5}(z){6}", "ab  123xxxxyyyyyzzzzzz"),
     (r"^(?:\d{1,3}\.){3}\d{1,3} \S+ \S+ \[\d{2}/\w{3}/\d{4}(?::\d{2}){3} [+-]\d{4}\] "
      r'"(?:GET|POST) (?:/[\w.-]+){2,20}(?:\s+\S+){5}', APACHE_LINE),
     (r"\p{Lu}{2}\p{Ll}{3,40}\p{N}{1,40}", "ABcdef123"),
     (r"^\S+ {2,40}\S+ {2,40}\S+ {2,40}\S+", "a  b   c    d"),
     ("^.{2000,}$", "x" * 2500),
     ("[A-Za-z0-9+/]{2000,}={0,2}", "QUJD" * 600 + "="),
     ("a{5,2000}", "aaaaaa"),
     (r"\{\{[^{}]{1,5000}\}\}", "{{ name }}"),
     (r"\w{1001}", "w" * 1001),
     ("(?x) \\d{3}  # an area code, not {2000} digits", "555"),
     (r"^\[(?:INFO|WARN|ERROR)\] [a-z]+: .{20,80} id=[0-9a-f]{1000}",
      "[INFO] boot: " + "s" * 30 + " id=" + "f" * 1000),
     ("(?:a{0,100000}){0,100000}!", "aaa!")],
    ids=["sibling-groups", "sibling-ranges", "many-small-groups", "access-log",
         "unicode-properties", "aligned-columns", "long-lines", "base64", "big-upper-bound",
         "template-tag", "just-over-the-old-bound", "verbose-comment-with-a-count",
         "class-after-a-long-prefix", "nested-upper-bounds"],
)
async def test_legitimate_counted_repeats_are_searched(
    hive: Hive, pattern: str, line: str
) -> None:
    # Each was refused: repeats of sibling groups multiplied, an upper bound counted as
    # copies, braces in a comment read as a count, a class measured from the first [.
    (hive.workspace_dir / "a.md").write_text(f"nothing here\n{line}\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern=pattern)

    assert (content, is_error) == (f"workspace/a.md:2: {line[:300]}", False)


async def test_a_search_past_its_time_says_where_it_stopped(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filesearch, "SEARCH_SECONDS", 0.0)
    (hive.workspace_dir / "a.md").write_text("needle\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle")

    assert not is_error
    assert content.splitlines() == [
        "no match",
        "[... search stopped after 0 s in workspace; 0 files searched, the rest not; "
        "ask for a narrower path]",
    ]


async def test_a_folder_too_big_to_read_stops_the_search_there(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    crowded_workspace(hive, monkeypatch, "a.md", "needle\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle")

    assert not is_error
    assert content.splitlines() == [
        "workspace/a.md:1: needle",
        "[... search stopped: the folder has more than 5 entries in workspace/crowd; "
        "1 files searched, the rest not; ask for a narrower path]",
    ]


async def test_lines_are_numbered_as_read_file_numbers_them(hive: Hive) -> None:
    (hive.workspace_dir / "a.md").write_text("one\x0ctwo\r\nneedle\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle$")

    assert (content, is_error) == ("workspace/a.md:2: needle", False)
