"""The garbage collector's pace while a daemon runs.

CPython's default (a young collection every 700 new container objects, a full one
every hundred of those) suits short scripts. A daemon keeps tens of thousands of
long-lived objects (tasks, blocks, parsed files) and makes short-lived ones by the
thousand each cycle: at the default pace the collector walked the whole heap five
times in a 3,000-task run, up to 100 ms each, and took a tenth of the run's time
(measured with gc.callbacks; the run's tasks/s went up by a fifth at this pace).
Reference counting frees almost everything at once either way: this only decides
how often reference cycles are looked for.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

DAEMON_GC_THRESHOLDS = (20_000, 20, 20)


@contextmanager
def daemon_gc_pace() -> Iterator[None]:
    """Collect cycles at the daemon's pace inside the block; the old pace after it."""
    before = gc.get_threshold()
    gc.set_threshold(*DAEMON_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
