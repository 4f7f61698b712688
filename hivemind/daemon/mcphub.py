"""The daemon's MCP servers: one pool in the lead process, fed the servers each agent's
ROM names and the user trusts.

Before each of an agent's cycles in the lead, `sync` attaches its trusted servers when
they changed (its start, a ROM edit, a `hivemind trust` since): the pool starts,
restarts or stops what changed, and the agent's tools follow. An agent that goes is
detached; the pool is closed at the daemon's end. Agents that name servers run in
the lead (see `WorkerLead._spread`): a worker process has no pool.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from hivemind.agent.services import HiveServices
from hivemind.hive.layout import Hive
from hivemind.hive.mcptrust import trusted_servers
from hivemind.hive.trust import record_path
from hivemind.mcp.api import ServerState, ServerStatus
from hivemind.mcp.pool import McpPool
from hivemind.mcpfiles import look_unchanged
from hivemind.settings import AgentConfig
from hivemind.tools.base import MAX_RESULT_CHARS
from hivemind.tools.mcp import McpToolbox

logger = logging.getLogger("hivemind.daemon.daemon")  # the daemon speaks, whichever part


class McpHub:
    """The MCP pool of one daemon, and which servers each agent has attached."""

    def __init__(self, services: HiveServices, trusted_as: Hive,
                 environ: Mapping[str, str] = os.environ) -> None:
        self.services = services
        self.trusted_as = trusted_as
        self.environ = environ
        self.pool: McpPool | None = None  # made when the first agent names a server
        self._attached: dict[str, dict[str, Any]] = {}  # agent → server → what was trusted
        self._files: dict[str, list[dict[str, str]]] = {}  # agent → its servers' files
        self._away: set[str] = set()  # agents told they run in a worker (once)
        self._releasing: dict[str, asyncio.Task[None]] = {}  # paused agents being detached
        self._told: dict[str, tuple[ServerStatus, int]] = {}  # server → (status, restarts)
        self._telling: asyncio.Task[None] | None = None
        self._record = record_path(trusted_as)
        self._record_sig = self._sig()

    def _sig(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._record) if self._record is not None else None
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns) if st is not None else None

    def trust_changed(self) -> bool:
        """True once after the user's trust record changed (`hivemind trust`, `--revoke`):
        the agents naming servers should sync again (see `Daemon._each_rescan`)."""
        sig = self._sig()
        if sig == self._record_sig:
            return False
        self._record_sig = sig
        return True

    def _pool(self) -> McpPool:
        if self.pool is None:
            hive = self.services.hive
            self.pool = McpPool(hive.root, self.environ, log_dir=hive.state_dir / "mcp")
            self.services.tools.mcp = McpToolbox(self.pool, MAX_RESULT_CHARS)
            self._telling = asyncio.ensure_future(self._tell_changes())
        return self.pool

    async def _tell_changes(self, every: float = 1.0) -> None:
        """Say on the console when a server crashed, failed for good, or is back."""
        while True:
            await asyncio.sleep(every)
            self.tell()

    def tell(self) -> None:
        """One line for each server whose state changed since the last look that a
        person should know of: a crash (restarting), a failure, ready again."""
        for s in self.states():
            before = self._told.get(s.name)
            self._told[s.name] = (s.status, s.restarts)
            if before == (s.status, s.restarts):
                continue
            why = f": {s.error}" if s.error else ""
            if s.status is ServerStatus.FAILED:
                logger.warning("MCP server `%s` failed%s; its agents (%s) go on without its "
                               "tools (see `hivemind status`; a restart of the daemon tries "
                               "it again)",
                               s.name, why, ", ".join(s.agents))
            elif s.status is ServerStatus.RESTARTING:
                logger.warning("MCP server `%s` stopped%s; it is started again after a "
                               "back-off", s.name, why)
            elif s.status is ServerStatus.READY and before is not None and s.restarts:
                logger.warning("MCP server `%s` is back (%d tools)", s.name, s.tools)

    async def sync(self, agent: str, cfg: AgentConfig | None, *, here: bool = True) -> None:
        """Attach the agent's trusted servers if they changed since (`cfg` None: it has
        no valid ROM, keep what it had); `here`: it runs in this process."""
        if cfg is None:
            return
        if not here:
            if cfg.mcp and agent not in self._away:
                self._away.add(agent)
                logger.warning("%s: its MCP servers do not start while it runs in a worker "
                               "process; restart the daemon to run it in the lead",
                               self.services.hive.relative(self.services.hive.rom_path(agent)))
            return
        trusted = await asyncio.to_thread(  # hashes the scripts they run, when changed
            trusted_servers, self.trusted_as, agent, cfg.mcp, self.services.hive.root
        ) if cfg.mcp else {}
        servers = {name: spec for name, (spec, _) in trusted.items()}
        files = {name: digests for name, (_, digests) in trusted.items()}
        prints = {name: (spec.fingerprint(), sorted(files[name].items()))
                  for name, spec in servers.items()}
        if prints == self._attached.get(agent, {}):
            return
        if cfg.mcp:
            # The trust or the servers changed: the ROM's warnings follow.
            self.services.roms.check_again()
        if prints:
            self._attached[agent] = prints
            self._files[agent] = [d for d in files.values() if d]
            await self._pool().attach(agent, servers, files=files)
        else:
            await self.detach(agent)

    def release(self, paused: Iterable[str]) -> None:
        """Detach the agents of `paused` (paused by a person, no cycle in flight): their
        servers stop unless another agent names them; a resumed agent's next cycle
        attaches them again."""
        for agent in paused:
            if agent in self._attached and agent not in self._releasing:
                self._releasing[agent] = asyncio.ensure_future(self._release(agent))

    async def _release(self, agent: str) -> None:
        try:
            await self.detach(agent)
        finally:
            self._releasing.pop(agent, None)

    def files_changed(self) -> list[str]:
        """The agents one of whose servers runs a hive file that looks changed since it
        was attached (a `git pull`, say): their next cycle's `sync` hashes it again and
        stops the server until the user trusts the file. A `stat` per file."""
        root = self.services.hive.root
        return [agent for agent, files in self._files.items()
                if not all(look_unchanged(root, digests) for digests in files)]

    async def detach(self, agent: str) -> None:
        """The agent is gone: what no other agent names stops."""
        self._files.pop(agent, None)
        if self._attached.pop(agent, None) is not None and self.pool is not None:
            await self.pool.detach(agent)

    def states(self) -> list[ServerState]:
        return self.pool.states() if self.pool is not None else []

    async def aclose(self, grace: float) -> None:
        """Stop every server (killed after `grace` seconds)."""
        if self._telling is not None:
            self._telling.cancel()
        if self._releasing:
            await asyncio.gather(*self._releasing.values(), return_exceptions=True)
        if self.pool is not None:
            await self.pool.aclose(grace)
