"""From the daemon's start: say each agent whose `model:` is no model id, before its
first call fails with a 404 (and one whose ROM is edited to one, as it is read).

The provider's own list (Anthropic: GET /v1/models) is asked once, within a few seconds,
beside the agents' start (never before it); it is kept in `.hivemind/models.json` for
`hivemind status`. A provider with no list (offline) is checked against the ids the hive
knows; one whose list cannot be had leaves the models unchecked, said in one line.
"""

from __future__ import annotations

import asyncio
import logging

from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.llm.base import Provider
from hivemind.llm.catalog import CATALOG_FILE, LIST_TIMEOUT, fetch_catalog, known_ids, model_problem
from hivemind.settings import HiveConfig

logger = logging.getLogger(__name__)


async def check_models(
    hive: Hive, config: HiveConfig, provider: Provider, roms: RomRegistry,
    within: float = LIST_TIMEOUT,
) -> None:
    """From now on, warn (one line each, in status too) about an agent whose model the
    provider does not list, or with no list, the hive does not know: those read already
    and those read later (a ROM edited, an agent added). Never raises."""
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
        roms.model_problem = lambda model: model_problem(model, catalog, known, config.models)
        roms.check_again()
    except Exception as exc:  # a bug here must not stop the agents
        logger.debug("model check failed: %r", exc)
