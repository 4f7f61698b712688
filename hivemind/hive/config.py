"""hive.toml: hive-wide settings; a missing file means every default."""

from __future__ import annotations

import re
import tomllib

from pydantic import ValidationError

from hivemind.errors import ConfigError
from hivemind.hive.layout import Hive
from hivemind.hive.models import HiveConfig
from hivemind.hive.problems import Loc, every_problem

_TABLE = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+\s*(?:#.*)?$")


def load_hive_config(hive: Hive) -> HiveConfig:
    """Read `hive.toml`; ConfigError names the file, the line, the key and the problem."""
    path = hive.config_file
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return HiveConfig()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; save the file as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    try:
        return HiveConfig.model_validate(data)
    except ValidationError as exc:
        line, problem = every_problem(exc, lambda loc: _line_of(text, loc))
        where = f"line {line}: " if line else ""
        raise ConfigError(f"{path}: {where}{problem}") from None


def _line_of(text: str, loc: Loc) -> int | None:
    """The line of `key = ...` for `loc` (`('daemon', 'rescan_interval')`); a best guess."""
    keys = [str(p) for p in loc if isinstance(p, str)]
    if not keys:
        return None
    *tables, key = keys
    want_table = ".".join(tables)
    table = ""
    table_line: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE.match(line)
        if header:
            table = ".".join(part.strip().strip("\"'") for part in header.group(1).split("."))
            if table == ".".join(keys):
                table_line = number
            continue
        if table == want_table and re.match(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
            return number
    return table_line
