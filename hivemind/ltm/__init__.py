"""Long-term memory (DESIGN §5): a shared store in `.hivemind/memory.db`.

    from hivemind.ltm import LongTermMemory
    with LongTermMemory(hive, settings.memory, agent.retrieval) as ltm:
        ltm.remember("the staging DB is Postgres 16", agent="ann", scope="project", project="p")
        for m in ltm.recall("which database", agent="ann", project="p"):
            print(m.id, m.score, m.content)
"""

from hivemind.ltm.records import MemoryRecord, ScoredMemory, TaskEndReport, recall_audit
from hivemind.ltm.store import LongTermMemory, scope_filter

__all__ = [
    "LongTermMemory",
    "MemoryRecord",
    "ScoredMemory",
    "TaskEndReport",
    "recall_audit",
    "scope_filter",
]
