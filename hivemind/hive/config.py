"""hive.toml: hive-wide settings; a missing file means every default.

Read as the hostile input it may be (a regular file of at most 256 KB inside the hive,
nesting bounded), and with the user's trust applied: see `hivemind.hive.trust`.
"""

from __future__ import annotations

import re
import tomllib
from typing import NamedTuple

from pydantic import ValidationError

from hivemind.errors import ConfigError, FileFormatError
from hivemind.fs.regular import read_regular
from hivemind.hive.layout import Hive
from hivemind.hive.trust import ProviderTrust, apply_trust
from hivemind.problems import Loc, every_problem
from hivemind.settings import HiveConfig

_TABLE = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+\s*(?:#.*)?$")


class LoadedConfig(NamedTuple):
    """hive.toml as the runtime uses it, how far the user trusts it, and its bytes."""

    config: HiveConfig  # untrusted `[provider]` keys left out
    trust: ProviderTrust
    raw: bytes | None  # None: there is no hive.toml


def load_hive_config(hive: Hive) -> HiveConfig:
    """Read `hive.toml`, with the user's trust applied; ConfigError names the file, the
    line, the key and the problem."""
    return load_config(hive).config


def load_config(hive: Hive, trusted_as: Hive | None = None) -> LoadedConfig:
    """hive.toml read, checked and with the trust in `trusted_as` (default: `hive`; a
    scratch copy is trusted as the hive it copies) applied."""
    raw = read_config_bytes(hive)
    config = HiveConfig() if raw is None else parse_hive_config(hive, raw)
    config, trust = apply_trust(trusted_as or hive, config, raw)
    return LoadedConfig(config, trust, raw)


def read_config_bytes(hive: Hive) -> bytes | None:
    """hive.toml's bytes (None if there is none): a regular file of at most 256 KB, never
    through a link out of the hive."""
    path = hive.config_file
    try:
        return read_regular(path, hive.root)
    except FileNotFoundError:
        return None
    except FileFormatError as exc:
        raise ConfigError(f"{path}: {exc.reason}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def parse_hive_config(hive: Hive, raw: bytes) -> HiveConfig:
    """The settings of hive.toml's bytes `raw`, as the file says (no trust applied)."""
    path = hive.config_file
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; save the file as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of `[[[...` or `{a={...`
        raise ConfigError(f"{path}: invalid TOML: arrays or tables nested too deeply") from None
    try:
        return HiveConfig.model_validate(data)
    except ValidationError as exc:
        line, problem = every_problem(exc, lambda loc: _line_of(text, loc), HiveConfig)
        where = f"line {line}: " if line else ""
        raise ConfigError(f"{path}: {where}{problem}") from None
    except RecursionError:
        raise ConfigError(f"{path}: values nested too deeply") from None


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
