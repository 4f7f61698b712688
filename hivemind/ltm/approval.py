"""Global memories that wait for a person (seed 002: global writes need confirmation).

A global memory is *proposed* (stored, never retrieved) until a person runs
`hivemind memory approve ID`, when

- an agent proposes a global preference (it would steer every agent and project), or
- it comes from work of no project: a task without `project:` (its history and task
  memories at its end, what its agent remembers) or an agent holding no task. Work
  of no project has no tier of its own below the global one, so without this every
  such task would write straight into what every agent of every project sees.

A person's own act needs no approval: `hivemind memory add --scope global` is active
at once, preference or not. Proposals are told to the person in the `human` mailbox,
one message per write (or per task end, however many it proposes).
"""

from __future__ import annotations

from collections.abc import Sequence

from hivemind.hive.layout import HUMAN, Hive
from hivemind.ltm.records import MemoryRecord, MemoryStatus, Tier


def initial_status(tier: Tier, preference: bool, needs_approval: bool | None) -> MemoryStatus:
    """The status of a new memory: proposed if it is global and needs a person's OK.

    `needs_approval`: True (work of no project), False (a person's own act), None (the
    rule for agents in a project: a global preference waits, other global memories not)."""
    if tier is not Tier.GLOBAL:
        return MemoryStatus.ACTIVE
    waits = preference if needs_approval is None else needs_approval
    return MemoryStatus.PROPOSED if waits else MemoryStatus.ACTIVE


def _what(record: MemoryRecord) -> str:
    return "global preference" if record.preference else "global memory"


def tell_person(hive: Hive | None, records: Sequence[MemoryRecord], task_id: str | None = None
                ) -> None:
    """One message in the `human` mailbox naming the approve and forget commands for
    each proposal of `records` (nothing without a hive, or without proposals)."""
    proposed = [r for r in records if r.status is MemoryStatus.PROPOSED]
    if hive is None or not proposed:
        return
    from hivemind.hive.mailbox import PostOffice

    author = proposed[0].agent or HUMAN
    ids = " ".join(r.id for r in proposed)
    if len(proposed) == 1 and task_id is None:
        [record] = proposed
        subject = f"memory proposal {record.id}"
        body = (
            f"{author} proposes a {_what(record)}, shared by every agent and project:\n\n"
            f"> {record.content}\n\n"
        )
    else:
        subject = f"memory proposals of task {task_id}" if task_id else "memory proposals"
        where = f"Task {task_id}, of no project," if task_id else f"{author}"
        body = (
            f"{where} left {len(proposed)} memories for the global tier, shared by every "
            "agent and project:\n\n"
            + "".join(f"- {r.id}: {r.content}\n" for r in proposed) + "\n"
        )
    body += (
        f"To accept: hivemind memory approve {ids}\n"
        f"To decline: hivemind memory forget {ids}\n"
        "Until then they are stored as proposed and never retrieved."
    )
    PostOffice(hive).send(author, HUMAN, subject, body, memory_id=proposed[0].id)
