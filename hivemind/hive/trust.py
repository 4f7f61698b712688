"""The user's trust in a hive's settings, recorded outside the hive (as direnv does).

A hive is someone else's folder: settings in it that decide where requests and the
user's key go (`[provider] base_url`, `api_key_env`) apply only once the user has
trusted the file, and the MCP servers its ROMs name start only once trusted (see
`mcptrust`). `hivemind trust` keeps a digest of what is trusted in the user's config
folder, keyed by the hive's real path: any change needs trusting again.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from hivemind.errors import UserError
from hivemind.fs.atomic import atomic_write
from hivemind.hive.layout import Hive
from hivemind.settings import HiveConfig, ProviderSettings

NEEDS_TRUST = ("base_url", "api_key_env")
"""`[provider]` keys of hive.toml that apply only once the user trusts the file."""

TrustPart = tuple[str, bytes]
"""One thing the trust covers: its name and its bytes."""


class TrustState(StrEnum):
    """Whether what the hive has now is what the user trusted."""

    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"  # never trusted (or revoked)
    CHANGED = "changed"  # trusted once, changed since
    NO_FILE = "no hive.toml"


class TrustRecord(BaseModel):
    """What `hivemind trust` writes for one hive, in the user's config folder."""

    hive: str
    sha256: str | None = None
    """hive.toml's digest (None: the hive had none)."""
    trusted_at: datetime
    mcp: dict[str, str] = Field(default_factory=dict)
    """Each MCP server of its ROMs, `<agent>/<server>` → its spec's fingerprint."""
    mcp_files: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Each server's hive files (see `mcpfiles`): `<agent>/<server>` → path → sha256."""


class ProviderTrust(BaseModel):
    """The trust of a hive's hive.toml, and the `[provider]` keys it leaves out."""

    state: TrustState
    ignored: list[str] = Field(default_factory=list)


def config_home(env: Mapping[str, str] = os.environ) -> Path | None:
    """`$XDG_CONFIG_HOME/hivemind` (`~/.config/hivemind` by default); None without a home."""
    given = env.get("XDG_CONFIG_HOME", "")
    if os.path.isabs(given):  # the XDG spec: a relative one is ignored
        return Path(given) / "hivemind"
    home = env.get("HOME", "")
    if not os.path.isabs(home):
        try:
            home = str(Path.home())
        except RuntimeError:
            return None
    return Path(home) / ".config" / "hivemind"


def record_path(hive: Hive, env: Mapping[str, str] = os.environ) -> Path | None:
    """Where the trust record of `hive` is (one file per hive, named for its real path)."""
    home = config_home(env)
    if home is None:
        return None
    key = hashlib.sha256(os.fsencode(hive.root)).hexdigest()[:32]
    return home / "trusted" / f"{key}.json"


def trust_parts(hive_toml: bytes) -> list[TrustPart]:
    """Everything of a hive that needs the user's trust; today hive.toml's bytes."""
    return [("hive.toml", hive_toml)]


def digest(parts: Sequence[TrustPart]) -> str:
    """One sha256 over `parts`: a change to any of them is a new digest."""
    h = hashlib.sha256()
    for name, data in parts:
        encoded = name.encode("utf-8")
        h.update(len(encoded).to_bytes(8, "big") + encoded + len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def read_record(hive: Hive) -> TrustRecord | None:
    """The user's trust record for `hive`, if any (an unreadable one is none)."""
    path = record_path(hive)
    if path is None:
        return None
    try:
        record = TrustRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None
    return record if record.hive == str(hive.root) else None


def trust_state(hive: Hive, hive_toml: bytes | None) -> TrustState:
    """Whether `hive_toml` (the file's bytes; None: there is none) is what the user trusted."""
    if hive_toml is None:
        return TrustState.NO_FILE
    record = read_record(hive)
    if record is None or record.sha256 is None:
        return TrustState.UNTRUSTED
    if record.sha256 == digest(trust_parts(hive_toml)):
        return TrustState.TRUSTED
    return TrustState.CHANGED


def grant(hive: Hive, hive_toml: bytes | None, mcp: Mapping[str, str] | None = None,
          mcp_files: Mapping[str, Mapping[str, str]] | None = None) -> TrustRecord:
    """Record that the user trusts `hive_toml` (None: there is none) and the MCP servers
    `mcp` and the files they run, `mcp_files` (see `mcptrust.fingerprints`), for `hive`,
    replacing an older record."""
    path = record_path(hive)
    if path is None:
        raise UserError("cannot find your config folder to record the trust in: set "
                        "XDG_CONFIG_HOME or HOME")
    record = TrustRecord(
        hive=str(hive.root), trusted_at=datetime.now(UTC), mcp=dict(mcp or {}),
        mcp_files={k: dict(v) for k, v in (mcp_files or {}).items()},
        sha256=digest(trust_parts(hive_toml)) if hive_toml is not None else None)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, record.model_dump_json(indent=2) + "\n")
    except OSError as exc:
        raise UserError(f"{path}: cannot record the trust: {exc.strerror}") from None
    return record


def revoke(hive: Hive) -> bool:
    """Forget the user's trust in `hive`; False if there was none."""
    path = record_path(hive)
    if path is None:
        return False
    had = read_record(hive) is not None
    try:
        path.unlink()  # an unreadable record goes too
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise UserError(f"{path}: cannot remove the trust: {exc.strerror}") from None
    return had


def set_keys(settings: ProviderSettings) -> list[str]:
    """The keys of NEEDS_TRUST that `settings` (as read from hive.toml) sets to a value of
    its own: the ones an untrusted file loses."""
    default = ProviderSettings()
    return [k for k in NEEDS_TRUST
            if k in settings.model_fields_set and getattr(settings, k) != getattr(default, k)]


def apply_trust(
    hive: Hive, config: HiveConfig, hive_toml: bytes | None
) -> tuple[HiveConfig, ProviderTrust]:
    """`config` as the runtime may use it: untrusted, its `[provider]` keys of NEEDS_TRUST
    are back at their defaults (the environment decides)."""
    state = trust_state(hive, hive_toml)
    ignored = [] if state is TrustState.TRUSTED else set_keys(config.provider)
    if not ignored:
        return config, ProviderTrust(state=state)
    default = ProviderSettings()
    provider = config.provider.model_copy(update={k: getattr(default, k) for k in ignored})
    return config.model_copy(update={"provider": provider}), ProviderTrust(
        state=state, ignored=ignored)


def ignored_line(trust: ProviderTrust, shown_file: str, folder: str = "") -> str | None:
    """One line saying which settings of hive.toml are left out and how to apply them
    (`folder`: the hive as the person types it, for the command to paste)."""
    if not trust.ignored:
        return None
    keys = " and ".join(f"[provider] {k}" for k in trust.ignored)
    why = ("it changed since you trusted it" if trust.state is TrustState.CHANGED
           else "you have not trusted this file")
    which = "where requests go and which key" if len(trust.ignored) > 1 else (
        "where requests go" if trust.ignored == ["base_url"] else "which key is sent")
    command = f"hivemind trust {shlex.quote(folder)}" if folder else "hivemind trust"
    return (f"{shown_file}: {keys} ignored, as {why}; the environment decides {which}. "
            f"Read the file, then run `{command}` to apply "
            f"{'them' if len(trust.ignored) > 1 else 'it'}.")
