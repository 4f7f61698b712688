"""An entry's text without the front matter lines its metadata says already.

A task file opens with front matter (`id`, `title`, `project`, `reply_to`, …) and
its entry's metadata carries the same fields, typed: every such line was said twice,
in every request the task is in view. The lines whose value the metadata carries
unchanged are left out of the text; the others (a priority, who made it, when) stay,
and the front matter goes whole when none is left. The file itself is untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_FENCE = "---\n"


def without_repeated_fields(text: str, meta: Mapping[str, Any],
                            aliases: Mapping[str, str]) -> str:
    """`text` less the front matter lines (`key: value`, one line each) whose value is
    `meta[key]` (under its alias: `id` → `task_id`); `text` itself when none is."""
    if not text.startswith(_FENCE):
        return text
    end = text.find("\n" + _FENCE, len(_FENCE) - 1)
    if end < 0:
        return text
    lines = text[len(_FENCE):end].split("\n")
    kept = [line for line in lines if not _repeated(line, meta, aliases)]
    if len(kept) == len(lines):
        return text
    rest = text[end + 1 + len(_FENCE):]
    if not any(line.strip() for line in kept):
        return rest
    return _FENCE + "\n".join(kept) + "\n" + _FENCE + rest


def _repeated(line: str, meta: Mapping[str, Any], aliases: Mapping[str, str]) -> bool:
    key, sep, value = line.partition(":")
    if not sep or not key or key[0].isspace() or key.startswith("#"):
        return False  # not a `key: value` line of its own (a list item, a comment)
    name = key.strip()
    said = meta.get(aliases.get(name, name))
    if not isinstance(said, str | int) or isinstance(said, bool):
        return False
    written = value.strip()
    if len(written) >= 2 and written[0] == written[-1] and written[0] in "'\"":
        written = written[1:-1]
    return written == str(said) and written != ""
