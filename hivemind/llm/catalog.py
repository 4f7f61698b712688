"""Which model ids exist: the provider's own list where it has one, else the ids the
hive knows (its `[pricing]` and `[models]` tables).

An unknown `model:` is said at the daemon's start and in `hivemind status`, not at
the first call's 404. Asking the provider is bounded by a short timeout and never
fails anything: a list that cannot be had leaves the models unchecked.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections.abc import Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from hivemind.clock import utcnow
from hivemind.errors import FileFormatError, ModelError
from hivemind.fs.atomic import atomic_write
from hivemind.fs.regular import read_regular

LIST_TIMEOUT = 3.0
"""Seconds the provider's model list may take; past that the models go unchecked."""
LISTED_MOST = 5_000
"""Ids read from a model list at most (an endpoint whose pages never end, say)."""
CATALOG_BYTES = 1024 * 1024
CATALOG_FILE = "models.json"
"""Under the hive's `.hivemind/`: the provider's list as the daemon last got it."""

_DATED = re.compile(r"-(\d{8}|latest)$")


@runtime_checkable
class ModelLister(Protocol):
    """A provider that can list the model ids its endpoint serves."""

    async def model_ids(self) -> list[str]:
        """Every id listed; a `ModelError` when the list cannot be had."""
        ...


class ModelCatalog(BaseModel):
    """The ids a provider listed when the daemon last started (`.hivemind/models.json`),
    so that `hivemind status` checks against them without asking the provider itself."""

    provider: str
    checked_at: datetime
    ids: list[str]

    def write(self, path: Path) -> None:
        """Save it (not flushed to disk: it is asked for again at the next start)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, self.model_dump_json(indent=1) + "\n", fsync=False)

    @classmethod
    def read(cls, path: Path, root: Path) -> ModelCatalog | None:
        """The saved catalog; None if there is none or it is not one (hand-edited, say)."""
        try:
            catalog = cls.model_validate_json(read_regular(path, root, CATALOG_BYTES))
        except (OSError, FileFormatError, ValidationError):
            return None
        del catalog.ids[LISTED_MOST:]  # as many as the daemon reads, in a cloned hive too
        return catalog


async def fetch_catalog(
    provider: object, name: str, within: float = LIST_TIMEOUT
) -> ModelCatalog | str | None:
    """The provider's model list; None if it has none (the offline provider), or why it
    could not be had (an error, no answer `within` seconds)."""
    if not isinstance(provider, ModelLister):
        return None
    try:
        async with asyncio.timeout(within):
            ids = await provider.model_ids()
    except TimeoutError:
        return f"no answer within {within:g} s"
    except ModelError as exc:
        return str(exc)
    return ModelCatalog(provider=name, checked_at=utcnow(), ids=ids)


def known_ids(pricing: Collection[str], aliases: Mapping[str, str]) -> set[str]:
    """The ids the hive knows without asking: priced ones and those aliases stand for."""
    return {*pricing, *aliases.values()}


def _covered(model: str, ids: Collection[str]) -> bool:
    """`model` is one of `ids`, one of them with a date (`claude-x-20260101` for
    `claude-x`), or the undated name of one of them."""
    if model in ids:
        return True
    undated = _DATED.sub("", model)
    return undated in ids or any(_DATED.sub("", i) == model for i in ids)


def model_problem(
    model: str,
    catalog: ModelCatalog | None,
    known: Collection[str],
    aliases: Collection[str] = (),
) -> str | None:
    """One line if `model` is not a model id: not in the provider's `catalog` (when
    there is one), else not among the `known` ids; None if it is one."""
    ids = catalog.ids if catalog is not None else known
    if _covered(model, ids):
        return None
    close = difflib.get_close_matches(model, [*ids, *aliases], n=1, cutoff=0.8)
    hint = f" (did you mean {close[0]}?)" if close else ""
    if catalog is not None:
        return (f"model {model!r} is not one {catalog.provider} lists{hint}: its calls "
                "would fail; fix `model:`")
    return (f"model {model!r} is not a known model id{hint}: check its spelling, or name "
            "it in hive.toml's [models] if your endpoint serves it")
