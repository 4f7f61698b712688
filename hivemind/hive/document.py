"""A Markdown document with an optional YAML front matter block: read, parse, render.

Reading is defensive (files come from people and agents): a file over 1 MB, not
UTF-8, empty, with bad YAML, YAML aliases (alias bombs) or a front matter that is
not a mapping raises `FileFormatError` whose reason names the line.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from hivemind.errors import FileFormatError
from hivemind.problems import Loc, show

MAX_FILE_BYTES = 1_000_000
"""Files larger than this are refused before parsing (1 MB)."""

# libyaml when present: the pure-Python parser is ~8x slower.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_FENCE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FRONT_FIRST_LINE = 2  # the front matter text starts on line 2 of the file


@dataclass(frozen=True)
class Document:
    """A parsed file: front matter mapping, body, and the YAML nodes for line numbers."""

    path: Path
    front: dict[str, Any]
    body: str
    node: yaml.Node | None = None

    def line_of(self, loc: Loc) -> int | None:
        """The file line of the field at `loc` (`('budget', 'per_day')`), if present."""
        node, line = self.node, None
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                pair = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
                if pair is None:
                    break
                line, node = pair[0].start_mark.line + _FRONT_FIRST_LINE, pair[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                if part >= len(node.value):
                    break
                node = node.value[part]
                line = node.start_mark.line + _FRONT_FIRST_LINE
            else:
                break
        return line


# -- reading -------------------------------------------------------------------



_OPENED = {
    "while parsing a flow sequence": "for the `[` opened",
    "while parsing a flow mapping": "for the `{` opened",
    "while scanning a quoted scalar": "for the quote opened",
}
"""YAML's words for where an unclosed bracket or quote began, as a person says it."""

def read_text(path: Path) -> str:
    """The file as text; refuses non-regular, > 1 MB, empty and non-UTF-8 files."""
    # O_NONBLOCK: a FIFO dropped under a .md name must not hang the reader. O_NOFOLLOW:
    # a link put in a file's place is never read through (ELOOP, an OSError).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise FileFormatError(path, "a symbolic link is not read; copy the file instead") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileFormatError(path, "not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise FileFormatError(path, _too_big(st.st_size))
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise FileFormatError(path, _too_big(len(data)))
    return decode_text(path, data)


def decode_text(path: Path, data: bytes) -> str:
    """The bytes of `path` as text; refuses empty and non-UTF-8 files."""
    if not data:
        raise FileFormatError(path, "file is empty")
    if not data.strip():
        raise FileFormatError(path, "file has no text (only spaces and blank lines)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileFormatError(
            path,
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8",
            line,
        ) from None
    return text.removeprefix("\ufeff")


def _too_big(size: int) -> str:
    return f"file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,} (1 MB)"


def split(text: str) -> tuple[str | None, str]:
    """(front matter text or None, body). Raises ValueError if `---` is never closed.

    The newline that ends the file's last line is not part of the body (`render` adds
    it back)."""
    first, _, rest = text.partition("\n")
    if first.rstrip() != "---":
        return None, text.removesuffix("\n")
    end = _FENCE.search(rest)
    if end is None:
        raise ValueError("front matter opened with --- on line 1 is never closed")
    body = rest[end.end() :]
    return rest[: end.start()], body.removeprefix("\n").removesuffix("\n")


def parse(text: str, path: Path) -> Document:
    """Split and parse `text` (the content of `path`) into a Document."""
    try:
        front_text, body = split(text)
    except ValueError as exc:
        raise FileFormatError(path, f"{exc} (add a --- line after the fields)", 1) from None
    if front_text is None:
        return Document(path, {}, body)
    node, data = _load_yaml(front_text, path)
    if data is None:
        return Document(path, {}, body)
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value ({show(data)})"
        raise FileFormatError(
            path, f"front matter must be `key: value` lines, not {kind}", _FRONT_FIRST_LINE
        )
    front = {k if isinstance(k, str) else str(k): v for k, v in data.items()}
    return Document(path, front, body, node)


def load(path: Path) -> Document:
    """Read and parse one file."""
    return parse(read_text(path), path)


MAX_DEPTH = 50
"""Deeper YAML nesting is refused before composing (libyaml's composer recurses in C)."""


def _refuse_deep_nesting(text: str, path: Path) -> None:
    # Each level needs one of these characters (or a new line), so most texts skip the pass.
    bound = sum(text.count(c) for c in "[{-?\n") + 1
    if bound <= MAX_DEPTH:
        return
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    mark = event.start_mark
                    line = mark.line + _FRONT_FIRST_LINE if mark is not None else None
                    problem = f"front matter is nested more than {MAX_DEPTH} levels deep"
                    raise FileFormatError(path, problem, line)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return  # not YAML at all: the real parse says what is wrong


def _load_yaml(front_text: str, path: Path) -> tuple[yaml.Node | None, Any]:
    _refuse_deep_nesting(front_text, path)
    loader = _Loader(front_text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        if "*" in front_text:  # no `*`, no alias: most files skip the walk
            _refuse_aliases(node, path)
        if not isinstance(node, yaml.MappingNode):
            return node, loader.construct_document(node)
        return node, _construct_mapping(loader, node, path)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + _FRONT_FIRST_LINE if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        start = exc.context_mark
        if exc.problem and exc.context and start is not None and start.line != (
                mark.line if mark is not None else None):
            # An unclosed `[` is found at the end: where it opened is the line to fix.
            what = _OPENED.get(exc.context, exc.context)
            problem += f" ({what} on line {start.line + _FRONT_FIRST_LINE})"
        raise FileFormatError(path, f"invalid YAML in front matter: {problem}", line) from None
    except yaml.reader.ReaderError as exc:  # a character YAML refuses (NUL, other controls)
        line = front_text.count("\n", 0, exc.position) + _FRONT_FIRST_LINE
        raise FileFormatError(path, f"invalid YAML in front matter: {exc.reason}", line) from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())  # one line, for status and `.reason` files
        raise FileFormatError(path, f"invalid YAML in front matter: {problem}") from None
    except RecursionError:
        raise FileFormatError(path, "front matter is nested too deeply") from None
    finally:
        loader.dispose()


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, path: Path) -> Any:
    """Construct key by key, so a bad value (`due: 2026-13-45`) is reported on its line."""
    data: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        line = key_node.start_mark.line + _FRONT_FIRST_LINE
        try:
            key = loader.construct_object(key_node, deep=True)
            data[key] = loader.construct_object(value_node, deep=True)
        except TypeError:
            raise FileFormatError(path, "field names must be plain text", line) from None
        except ValueError as exc:
            raise FileFormatError(path, f"{key_node.value}: invalid value ({exc})", line) from None
    return data


def _refuse_aliases(root: yaml.Node, path: Path) -> None:
    """A node reached twice is an alias (`*name`): refused, so no alias bomb can expand."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, root.start_mark.line)]
    while stack:
        node, line = stack.pop()
        if id(node) in seen:
            raise FileFormatError(
                path,
                "YAML aliases (*name) are not allowed in front matter; write the value out",
                line + _FRONT_FIRST_LINE,
            )
        seen.add(id(node))
        children: list[tuple[yaml.Node, int]] = []
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                children += [(key, key.start_mark.line), (value, key.start_mark.line)]
        elif isinstance(node, yaml.SequenceNode):
            children = [(item, node.start_mark.line) for item in node.value]
        stack.extend(reversed(children))  # document order: the anchor is met first


def first_heading(body: str) -> str | None:
    """The text of the first `# heading` of a Markdown body."""
    match = _HEADING.search(body)
    return match.group(1).strip() if match else None


# -- writing -------------------------------------------------------------------

# Characters PyYAML refuses or folds inside a quoted scalar: such strings take the slow path.
_UNSAFE_TEXT = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_PLAIN_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+\Z")
# Text written unquoted (`id: fix-login`) when YAML reads it back as the same string.
_PLAIN_TEXT = re.compile(r"[A-Za-z_][A-Za-z0-9_ .,/()+@'-]*(?<! )\Z")

# Words YAML 1.1 reads as booleans or null; every other _PLAIN_TEXT reads back as text.
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})


def _resolves_to_str(text: str) -> bool:
    return text.lower() not in _YAML_WORDS


def _plain(value: Any) -> Any:
    """Enums, paths, tuples, models -> YAML-safe builtins."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, BaseModel):
        return _plain(value.model_dump())
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def _scalar(value: Any) -> str | None:
    """One value as a YAML flow scalar, or None if it needs the full dumper."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if _PLAIN_FLOAT.match(text) else None
    if isinstance(value, date):  # datetime too: ISO 8601 is a YAML timestamp
        return value.isoformat()
    if isinstance(value, str):
        if _PLAIN_TEXT.match(value) and _resolves_to_str(value):
            return value
        # A JSON string is a valid YAML double-quoted scalar for these characters.
        return None if _UNSAFE_TEXT.search(value) else json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        items = [_scalar(v) if not isinstance(v, list | dict) else None for v in value]
        if any(item is None for item in items):
            return None
        return "[" + ", ".join(item for item in items if item is not None) + "]"
    return None


def dump_front(front: Mapping[str, Any]) -> str:
    """The YAML of a front matter mapping (ends with a newline)."""
    plain = _plain(front)
    lines = []
    for key, value in plain.items():
        # A key is written bare only if YAML reads it back as that string (`on:` is True).
        bare = _PLAIN_KEY.match(key) is not None and _resolves_to_str(key)
        scalar = _scalar(value) if bare else None
        if scalar is None:
            return yaml.dump(plain, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
        lines.append(f"{key}: {scalar}\n")
    return "".join(lines)


def render(front: Mapping[str, Any], body: str) -> str:
    """A Markdown file: `---` front matter `---` then the body, ending with a newline
    (a text file's last line is ended, as editors, `cat` and diff expect)."""
    if body:
        body += "\n"  # `split` takes it off again: a body reads back as it was given
    if not front and _FENCE.match(body.partition("\n")[0]) is None:
        return body
    return f"---\n{dump_front(front)}---\n{body}"
