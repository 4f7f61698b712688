"""At the daemon's start: say each agent whose `model:` is no model id, before its first
call fails with a 404.

The provider's own list (Anthropic: GET /v1/models) is asked once, within a few seconds,
beside the agents' start (never before it); it is kept in `.hivemind/models.json` for
`hivemind status`. A provider with no list (offline) is checked against the ids the hive
knows; one whose list cannot be had leaves the models unchecked, said in one line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from hivemind.hive.layout import Hive
from hivemind.llm.base import Provider
from hivemind.llm.catalog import CATALOG_FILE, LIST_TIMEOUT, fetch_catalog, known_ids, model_problem
from hivemind.settings import AgentConfig, HiveConfig

logger = logging.getLogger(__name__)


async def check_models(
    hive: Hive, config: HiveConfig, provider: Provider, agents: Mapping[str, AgentConfig],
    within: float = LIST_TIMEOUT,
) -> None:
    """Log one line per agent whose model the provider does not list (or, with no list,
    the hive does not know); never raises: a check that fails leaves the daemon as it is."""
    try:
        catalog = await fetch_catalog(provider, provider.name, within)
        if isinstance(catalog, str):
            logger.info("could not check the agents' models with %s: %s", provider.name, catalog)
            return
        if catalog is not None:
            try:
                await asyncio.to_thread(catalog.write, hive.state_dir / CATALOG_FILE)
            except OSError as exc:  # a full disk, a read-only hive: status checks less
                logger.debug("%s not written: %s", CATALOG_FILE, exc)
        known = known_ids(config.pricing, config.models)
        for name, agent in sorted(agents.items()):
            problem = model_problem(agent.model, catalog, known, config.models)
            if problem:
                logger.warning("%s: %s", hive.relative(hive.rom_path(name)), problem)
    except Exception as exc:  # a bug here must not stop the agents
        logger.debug("model check failed: %r", exc)
