"""`hivemind trust`: accept (see, or revoke) this hive's provider settings and the MCP
servers its ROMs name."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer
from rich.text import Text

from hivemind.cli.common import (
    HiveArgument,
    HiveOption,
    JsonOption,
    console,
    fail,
    folder_given,
    resolve_hive,
    shown_path,
)
from hivemind.errors import ConfigError, UserError
from hivemind.hive import mcptrust
from hivemind.hive.config import parse_hive_config, read_config_bytes
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.hive.trust import (
    NEEDS_TRUST,
    TrustState,
    digest,
    grant,
    read_record,
    record_path,
    revoke,
    set_keys,
    trust_parts,
    trust_state,
)
from hivemind.llm.select import AUTH_TOKEN_ENV, BASE_URL_ENV
from hivemind.settings import AgentConfig, HiveConfig, ProviderSettings

_STATE_TEXT = {
    TrustState.TRUSTED: "trusted",
    TrustState.UNTRUSTED: "not trusted",
    TrustState.CHANGED: "not trusted: it changed since you trusted it",
    TrustState.NO_FILE: "no hive.toml: nothing to trust",
}


def register(app: typer.Typer) -> None:
    """Add `trust` to the `hivemind` app."""
    app.command("trust", short_help="Accept this hive's provider settings and MCP servers.")(
        trust_command
    )


def trust_command(
    directory: HiveArgument = None,
    hive: HiveOption = None,
    show: Annotated[
        bool, typer.Option("--show", help="Only show what is trusted (hive.toml's provider "
                           "settings, each MCP server) and what trusting would change; "
                           "trust nothing.")
    ] = False,
    revoke_it: Annotated[
        bool, typer.Option("--revoke", help="Stop trusting this hive: its hive.toml and "
                           "its MCP servers.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Trust this hive's hive.toml, so its [provider] base_url and api_key_env apply,
    and the MCP servers its agents' ROMs name, so they may start.

    A hive you cloned is someone else's folder: its hive.toml could send your
    requests, and your key, to another server (base_url), or send another of your
    secrets as the key (api_key_env = "GITHUB_TOKEN"); a ROM's `mcp:` block names
    programs to run and addresses to contact. So hivemind ignores those settings,
    starts no MCP server, and says so, until you have read them and trusted them here
    (this command lists each server: its command or url, its environment, and the
    hive's own files it runs, such as tools/server.py, whose bytes are recorded).

    The trust is recorded in your config folder ($XDG_CONFIG_HOME/hivemind, else
    ~/.config/hivemind), never in the hive, for exactly what it is now: any change to
    hive.toml, or to a server (a new one too, or a script it runs), must be trusted
    again. Whatever the file
    says, $ANTHROPIC_BASE_URL, when set, wins.
    """
    if show and revoke_it:
        fail("--show and --revoke: give one")
    where = resolve_hive(folder_given(directory, hive))
    try:
        raw = read_config_bytes(where)
        config = parse_hive_config(where, raw) if raw is not None else None
    except ConfigError as exc:
        if not revoke_it:  # a broken file can still be distrusted
            fail(f"{exc} (fix it, then trust it)" if not show else str(exc))
        raw, config = None, None
    if revoke_it:
        _revoke(where, as_json)
    elif show:
        _show(where, raw, config, as_json)
    else:
        _trust(where, raw, config, as_json)


def _roms(hive: Hive, config: HiveConfig | None) -> dict[str, AgentConfig]:
    """Every agent's config as the daemon would run it (the last good one of a ROM now
    invalid), read quietly: their servers are what the trust is about."""
    settings = config or HiveConfig()
    roms = RomRegistry(hive, settings.agents, models=settings.models)
    roms.tells_problems = False
    return roms.configs()


def _trust(hive: Hive, raw: bytes | None, config: HiveConfig | None, as_json: bool) -> None:
    configs = _roms(hive, config)
    servers = mcptrust.fingerprints(configs)
    if (raw is None or config is None) and not servers:
        fail(f"{shown_path(hive.root)} has no hive.toml and its ROMs name no MCP server: "
             "nothing to trust")
    try:
        grant(hive, raw, servers, mcptrust.file_digests(configs, hive.root))
    except UserError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(_facts(hive, raw, config, configs)))
        return
    if raw is not None and config is not None:
        shown = shown_path(hive.config_file)
        console.print(Text(f"trusted {shown} (sha256 {digest(trust_parts(raw))[:16]}…)"),
                      soft_wrap=True)
        _print_settings(config, applies=True)
    _print_servers(hive, configs, config, trusting=True)
    console.print(Text("Any change to hive.toml or to a server needs `hivemind trust` again; "
                       "`hivemind trust --revoke` undoes this."), style="dim", soft_wrap=True)


def _show(hive: Hive, raw: bytes | None, config: HiveConfig | None, as_json: bool) -> None:
    configs = _roms(hive, config)
    facts = _facts(hive, raw, config, configs)
    if as_json:
        typer.echo(json.dumps(facts))
        return
    state = TrustState(facts["state"])
    console.print(Text(f"{shown_path(hive.config_file)}: {_STATE_TEXT[state]}"), soft_wrap=True)
    if config is not None:
        _print_settings(config, applies=state is TrustState.TRUSTED)
    _print_servers(hive, configs, config, trusting=False)


def _print_servers(hive: Hive, configs: dict[str, AgentConfig], config: HiveConfig | None,
                   *, trusting: bool) -> None:
    """Each MCP server the ROMs name: what runs or is contacted, with what environment,
    and whether it is trusted (`trusting`: it just was); loudly, what it would be given
    of your provider's key, or what makes it load more than its command shows."""
    key_vars = _key_vars(config)
    if any(cfg.mcp for cfg in configs.values()):
        console.print(Text("trusted the MCP servers the ROMs name (they may start):" if trusting
                           else "MCP servers the ROMs name (none starts until trusted):"),
                      soft_wrap=True)
    for agent, cfg in sorted(configs.items()):
        verdicts = mcptrust.verdicts(hive, agent, cfg.mcp)
        for name, spec in cfg.mcp.items():
            verdict = verdicts[name]
            refused = verdict.state is mcptrust.ServerTrust.REFUSED
            state = ("refused" if refused else "trusted") if trusting else verdict.state.value
            rom = hive.relative(hive.rom_path(agent))
            files = sorted(verdict.files.digests)
            console.print(Text(f"  {rom}: MCP server `{name}` ({spec.transport}, {state}): "
                               f"{mcptrust.describe(spec)}"
                               + (f"; runs the hive's {', '.join(files)} (its bytes now)"
                                  if files else "")
                               + (f" — {verdict.why}" if verdict.why else "")),
                          soft_wrap=True)
            for alarm in mcptrust.alarms(spec, key_vars):
                console.print(Text(f"    WARNING: MCP server `{name}`: {alarm}"),
                              style="bold red", soft_wrap=True)


def _key_vars(config: HiveConfig | None) -> list[str]:
    """The variables that hold the user's model provider key (hive.toml's too)."""
    names = [ProviderSettings().api_key_env, AUTH_TOKEN_ENV]
    if config is not None:
        names.append(config.provider.api_key_env)
    return names


def _revoke(hive: Hive, as_json: bool) -> None:
    try:
        removed = revoke(hive)
    except UserError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps({"hive": str(hive.root), "revoked": removed}))
        return
    # One record holds both hive.toml's trust and the MCP servers': both go.
    console.print(Text(
        "this hive is no longer trusted: its hive.toml's provider settings are ignored and "
        "its MCP servers do not start until you run `hivemind trust` again" if removed
        else "this hive was not trusted: nothing to revoke"), soft_wrap=True)


def _print_settings(config: HiveConfig, *, applies: bool) -> None:
    """The settings the trust is about, as the file has them, and whether they apply."""
    given = set_keys(config.provider)
    if not given:
        console.print(Text(f"  its [provider] sets neither {' nor '.join(NEEDS_TRUST)}"),
                      style="dim", soft_wrap=True)
    for key in given:
        value = getattr(config.provider, key)
        if not applies:
            note = "ignored until you run `hivemind trust`"
        elif key == "base_url" and os.environ.get(BASE_URL_ENV):
            note = f"not used while ${BASE_URL_ENV} is set (the environment wins)"
        elif key == "base_url":
            note = "requests and your key go there"
        else:
            note = f"the key sent is ${value}"
        console.print(Text(f"  [provider] {key} = {value!r}: {note}"), soft_wrap=True)


def _facts(hive: Hive, raw: bytes | None, config: HiveConfig | None,
           configs: dict[str, AgentConfig]) -> dict[str, Any]:
    """The trust of `hive` for scripts."""
    record = read_record(hive)
    where = record_path(hive)
    return {
        "hive": str(hive.root),
        "state": trust_state(hive, raw).value,
        "sha256": digest(trust_parts(raw)) if raw is not None else None,
        "trusted_sha256": record.sha256 if record else None,
        "trusted_at": record.trusted_at.isoformat() if record else None,
        "record": str(where) if where else None,
        "provider": {k: getattr(config.provider, k) for k in set_keys(config.provider)}
        if config is not None else {},
        "mcp": [
            {"agent": agent, "server": name, "state": v.state.name.lower(),
             "transport": spec.transport, "fingerprint": spec.fingerprint(),
             "runs": mcptrust.describe(spec), "files": v.files.digests,
             "problem": v.why or None,
             "warnings": mcptrust.alarms(spec, _key_vars(config))}
            for agent, cfg in sorted(configs.items())
            for name, v in mcptrust.verdicts(hive, agent, cfg.mcp).items()
            if (spec := cfg.mcp[name]) is not None
        ],
    }
