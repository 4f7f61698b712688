"""Which knowledge notes an agent's context may hold.

All the notes it may see, while together they take at most a quarter of its
context budget: a small knowledge base is always in view, and the same notes
cycle after cycle keep the cached prefix. Past that share, only the notes whose
topic or path shares a word with what the agent works on come in, most words
shared first, until the share is full; one line tells the model how many others
there are and how to find them. 3,000 notes no longer fill a 100k context
whatever the task. What it works on: the tasks it holds (not the subjects of its
mail, which come and go: notes are the stable part of the context, which the
prompt cache serves); holding none, its unread mail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hivemind.memory.blocks import AnyBlock, ContextBlock, KnowledgeBlock, Priority
from hivemind.memory.budget import DEFAULT_MAX_BLOCK_TOKENS, ENVELOPE_TOKENS, block_cap
from hivemind.memory.relevance import RelevanceScorer, keywords

KNOWLEDGE_SHARE = 4  # notes take at most 1/4 of the budget
_CHARS_PER_TOKEN = 4  # a note's size in tokens, before it is read: its bytes / 4
LEFT_OUT_ID = "context:knowledge"


@dataclass
class _Memo:
    key: tuple[object, ...]
    blocks: list[AnyBlock]  # the knowledge blocks in view, input order
    left_out: int
    # For `left_out`, formatted only when asked: (note, words shared, tokens) each, and
    # the notes' share of the budget.
    out: list[tuple[KnowledgeBlock, int, int]] = field(default_factory=list)
    share: int = 0


class KnowledgeShelf:
    """Chooses the knowledge blocks in view for one agent; remembers its last choice."""

    def __init__(self) -> None:
        self._memo: _Memo | None = None
        self._line: ContextBlock | None = None  # kept while its text is the same

    def choose(
        self, blocks: list[AnyBlock], work: str, scorer: RelevanceScorer, budget: int,
        most: int | None = DEFAULT_MAX_BLOCK_TOKENS, tools: list[str] | None = None,
    ) -> list[AnyBlock]:
        """`blocks` with the knowledge notes that are not in view left out (the same
        list when all are), and a line saying how many were. `work`: the text of what
        the agent works on; `scorer` gives each note's words; `most`: the compressor's
        cap on one block; `tools`: the ROM's allow-list (None: every tool)."""
        notes = [b for b in blocks if isinstance(b, KnowledgeBlock)]
        if not notes:
            return blocks
        key = (budget, most, work, *map(id, notes))
        memo = self._memo
        if memo is None or memo.key != key:
            memo = self._memo = self._choose(notes, keywords(work), scorer, budget, most, key)
        if not memo.left_out:
            return blocks
        inside = set(map(id, memo.blocks))
        chosen = [b for b in blocks if not isinstance(b, KnowledgeBlock) or id(b) in inside]
        chosen.append(self._left_out_line(memo.left_out, len(notes), tools))
        return chosen

    def _choose(
        self, notes: list[KnowledgeBlock], task: frozenset[str], scorer: RelevanceScorer,
        budget: int, most: int | None, key: tuple[object, ...],
    ) -> _Memo:
        share = budget // KNOWLEDGE_SHARE
        cap = block_cap(budget, most)
        sizes = [_size(note, cap) for note in notes]
        if sum(sizes) <= share:
            return _Memo(key, list(notes), 0)
        shared = [len(task & scorer.words(note)) for note in notes]
        # Most words shared first; then the smaller note; then by location (stable).
        order = sorted(
            (i for i, n in enumerate(shared) if n),
            key=lambda i: (-shared[i], sizes[i], notes[i].location),
        )
        room, inside = share, set()
        for i in order:
            if sizes[i] <= room:
                inside.add(i)
                room -= sizes[i]
        kept: list[AnyBlock] = [note for i, note in enumerate(notes) if i in inside]
        out = [(note, shared[i], sizes[i]) for i, note in enumerate(notes) if i not in inside]
        return _Memo(key, kept, len(notes) - len(kept), out, share)

    def left_out(self) -> list[tuple[AnyBlock, str]]:
        """The notes the last choice left out, each with why (`hivemind inspect`)."""
        memo = self._memo
        if memo is None:
            return []
        return [(note, f"shares {n} word(s) with the work at hand, but the notes' quarter of "
                       f"the context ({memo.share:,} tokens) had no room for its ~{size:,}"
                 if n else "shares no word with the work at hand (its tasks; holding none, "
                           "its unread mail)")
                for note, n, size in memo.out]

    def _left_out_line(self, left_out: int, total: int, tools: list[str] | None) -> ContextBlock:
        finders = [t for t in ("search_files", "list_files") if tools is None or t in tools]
        reads = tools is None or "read_file" in tools
        if finders:
            how = (f"{' or '.join(finders)} on knowledge/ finds the others"
                   + ("; read_file shows one." if reads else "."))
        else:
            how = "read_file shows one whose path you know." if reads else (
                "you have no tool to read them.")
        text = (
            f"{left_out} of the {total} notes under knowledge/ are not shown: together "
            "they are more than a quarter of your context, so only notes whose topic or "
            "path shares a word with your tasks (holding none: your unread mail) are. " + how
        )
        line = self._line
        if line is None or line.summary != text:
            line = self._line = ContextBlock(
                id=LEFT_OUT_ID, context_type="knowledge_left_out", summary=text,
                priority=Priority.MEDIUM,
            )
        return line


def _size(note: KnowledgeBlock, cap: int | None) -> int:
    """The note's tokens in the context, guessed from its size (it is not read yet)."""
    size = note.metadata.get("bytes")
    n = size // _CHARS_PER_TOKEN if isinstance(size, int) else 0
    if cap is not None:
        n = min(n, cap)
    return n + ENVELOPE_TOKENS
