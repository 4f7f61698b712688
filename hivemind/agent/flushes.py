"""When an agent's audit records reach the disk: waited for, or in the background.

A record whose cycle marks mail read is waited for (the mail moves only after it);
any other rides with the next flush asked for (the next cycle's tools, another
agent's) or goes on its own after `RECORD_FLUSH_DELAY`: one trip to the disk, not two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from hivemind.agent.audit import AuditLog
from hivemind.fs.flush import fsync_all

logger = logging.getLogger(__name__)

RECORD_FLUSH_DELAY = 0.05  # s a cycle record may wait to ride with another flush
SETTLE_SECONDS = 10.0  # s `settle` waits for the flushes it asked for, at most


class RecordFlushes:
    """The flushes of one audit log that nothing waits on yet, until they are done."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit
        self.pending: set[asyncio.Future[None]] = set()

    async def wait(self) -> None:
        """Until every record written so far is on disk."""
        await self.audit.flushed()

    def in_background(self) -> None:
        """Flush what is written with the next flush asked for, or after a short delay."""
        flush = self.audit.flushed(lazy=True)
        self.pending.add(flush)
        flush.add_done_callback(self._done)
        if not flush.done():  # fsync off: nothing to send later
            asyncio.get_running_loop().call_later(RECORD_FLUSH_DELAY, self.audit.kick)

    def _done(self, flush: asyncio.Future[None]) -> None:
        self.pending.discard(flush)
        if not flush.cancelled() and flush.exception() is not None:
            # The next cycle's flush covers the same file and fails visibly there.
            logger.warning("%s: audit flush failed: %s", self.audit.path, flush.exception())

    async def settle(self) -> None:
        """Wait until every audit record written so far is on disk (at shutdown).

        Bounded: should a flush it waits for never come (nothing known does that now),
        the log is flushed here instead, so a stop always ends."""
        if not self.pending:
            return
        self.audit.kick()
        _, late = await asyncio.wait(list(self.pending), timeout=SETTLE_SECONDS)
        if late:
            logger.warning("%s: its flush did not come in %g s; flushed here instead",
                           self.audit.path, SETTLE_SECONDS)
            with contextlib.suppress(OSError):
                await asyncio.to_thread(fsync_all, [self.audit.path])
            for flush in late:
                flush.cancel()
