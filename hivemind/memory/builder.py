"""The ContextBuilder: turns a Selection into the JSON context the model reads.

Only the kept blocks are loaded (concurrently, through the loader's cache).
Entries are ordered stable-first (ROM, knowledge, files) then volatile, and by
id within a type (mail: oldest first), so unchanged inputs give byte-identical JSON
and the stable prefix can carry the provider's prompt-cache mark. An entry leaves
out what it would say twice (see `_tail` and the blocks' `said_already`). After
loading, real token counts replace the estimates and the hard budget is enforced.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from json.encoder import encode_basestring
from operator import attrgetter
from typing import Any, get_args

from hivemind.errors import CriticalOverBudgetError
from hivemind.memory.blocks import AnyBlock, BlockType, FileRef, Priority
from hivemind.memory.budget import block_cap
from hivemind.memory.compressor import MemoryCompressor
from hivemind.memory.loader import ContentLoader, LoadedContent
from hivemind.memory.repeats import without_repeated_fields
from hivemind.memory.restamp import same_but_timestamp
from hivemind.memory.selector import Dropped, Selection
from hivemind.memory.tokens import TokenCounter

_TYPE_NAMES = {t: t.value for t in BlockType}  # an enum's .value is a property call
_PRIORITY_NAMES = {p: p.name.lower() for p in Priority}
_ESCAPED_CACHE_BYTES = 64 * 1024 * 1024


# One encoder for the whole context: compact, UTF-8, deterministic. A shared instance
# avoids json.dumps building a new encoder per call (a third of the warm build time).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_dumps = _ENCODER.encode
_dumps_str: Callable[[str], str] = encode_basestring  # same bytes as _dumps for a str


def _stamp(block: AnyBlock) -> str:
    """A block's timestamp as its entry shows it: ISO 8601 to the second, UTC as `Z`
    (three tokens fewer than `+00:00`, in every timed entry). UTC ones come from a
    memo: every block perceived is stamped anew, and most within the same few seconds."""
    ts = block.timestamp
    if ts.tzinfo is not UTC or type(ts) is not datetime:
        return ts.isoformat(timespec="seconds")
    key = (ts.second, ts.minute, ts.hour, ts.day, ts.month, ts.year)
    shown = _STAMPS.get(key)
    if shown is None:
        if len(_STAMPS) > 4096:
            _STAMPS.clear()
        shown = _STAMPS[key] = ts.isoformat(timespec="seconds").removesuffix("+00:00") + "Z"
    return shown


_STAMPS: dict[tuple[int, ...], str] = {}


@dataclass
class BuiltContext:
    """The context: `entries[:stable_count]` are the stable prefix; `tokens` is the real total.

    `dropped` lists the blocks the builder left out after loading (the selector's own
    drops stay in the Selection); `token_counts` are real tokens per entry id.
    """

    entries: list[dict[str, Any]]
    stable_count: int
    tokens: int
    dropped: list[Dropped]
    notes: dict[str, str]
    token_counts: dict[str, int] = field(default_factory=dict)
    _encoded: list[str] | None = field(default=None, repr=False, compare=False)

    def json_parts(self) -> tuple[str, str]:
        """(stable, volatile): the provider marks the end of `stable` for its prompt cache."""
        encoded = self._encoded
        if encoded is None:
            encoded = self._encoded = [_dumps(e) for e in self.entries]
        stable = "[" + ",".join(encoded[: self.stable_count])
        rest = ",".join(encoded[self.stable_count :])
        # The comma goes with the volatile part, so the stable text does not change
        # when the volatile part comes and goes.
        if rest and self.stable_count:
            rest = "," + rest
        return stable, rest + "]"

    def to_json(self) -> str:
        """The whole context as one JSON array (equal to `"".join(json_parts())`)."""
        stable, volatile = self.json_parts()
        return stable + volatile

    def without_types(self, types: Iterable[str]) -> BuiltContext:
        """A copy without the entries of `types` (e.g. the ROM, sent as the system prompt)."""
        skip = {str(t) for t in types}
        keep = [i for i, e in enumerate(self.entries) if e["metadata"]["type"] not in skip]
        gone = [e["id"] for e in self.entries if e["metadata"]["type"] in skip]
        encoded = self._encoded
        return BuiltContext(
            entries=[self.entries[i] for i in keep],
            stable_count=sum(1 for i in keep if i < self.stable_count),
            tokens=self.tokens - sum(self.token_counts.get(bid, 0) for bid in gone),
            dropped=list(self.dropped),
            notes={k: v for k, v in self.notes.items() if k not in gone},
            token_counts={k: v for k, v in self.token_counts.items() if k not in gone},
            _encoded=None if encoded is None else [encoded[i] for i in keep],
        )


def _tail(block: AnyBlock, meta: dict[str, Any]) -> dict[str, Any]:
    """An entry's fields after its content, without those at their defaults (each
    costs tokens in every request): confidence 1, the priority its type (or its state:
    a read mail's) always has, metadata that is empty or false, a source that is the
    entry's id."""
    tail: dict[str, Any] = {}
    if block.confidence != 1.0:
        tail["confidence"] = block.confidence
    if block.priority is not (block.usual_priority() or _DEFAULT_PRIORITY[block.type]):
        tail["priority"] = _PRIORITY_NAMES[block.priority]
    tail["metadata"] = {
        k: v for k, v in meta.items()
        if not (v is None or v is False or v in ("", [], {}))
        and not (k == "source" and v == block.id)
    }
    return tail


_DEFAULT_PRIORITY = {
    get_args(cls.model_fields["type"].annotation)[0]: cls.model_fields["priority"].default
    for cls in get_args(AnyBlock)
}


@dataclass(slots=True)
class _Part:
    """One rendered entry, kept while its block version and its content are unchanged."""

    block: AnyBlock
    source: LoadedContent | str  # the loader's object (identity) or the inline text
    tokens: int  # content + envelope, as counted in the JSON
    note: str | None
    entry: dict[str, Any]
    encoded: str
    order: tuple[int, str, str]  # (type rank, sort key, id)
    dict: dict[str, Any] = field(default_factory=dict)
    stamp: str | None = None  # the rendered timestamp (None: none shown, or the metadata's)
    cap: int | None = None  # the compression cap it was rendered under (`block_cap`)

    def restamped(self, block: AnyBlock) -> _Part:
        """This rendering for `block`, whose fields and content are this one's and whose
        timestamp renders the same."""
        return _Part(block, self.source, self.tokens, self.note, self.entry, self.encoded,
                     self.order, block.__dict__, self.stamp, self.cap)


_order_of, _tokens_of, _entry_of, _encoded_of = (
    attrgetter(a) for a in ("order", "tokens", "entry", "encoded")
)


class ContextBuilder:
    """Loads the kept blocks and renders them as the JSON context, within the hard budget."""

    def __init__(
        self,
        loader: ContentLoader,
        counter: TokenCounter,
        compressor: MemoryCompressor | None = None,
    ) -> None:
        self.loader = loader
        self.counter = counter
        self.compressor = compressor
        # Escaping a 300 KB file as JSON takes ~2 ms; unchanged content is escaped once.
        self._escaped: OrderedDict[str, str] = OrderedDict()
        self._escaped_bytes = 0
        self._compressed: dict[tuple[str, str, int], tuple[str, str, int]] = {}
        self._small: dict[str, int] = {}  # inline texts, counted as JSON strings
        self._small_raw: dict[str, int] = {}  # envelopes, counted as they are
        self._parts: dict[int, _Part] = {}
        self._latest: dict[str, _Part] = {}  # the last rendering per block id

    async def build(
        self, selection: Selection, budget: int | None = None, *, cap_budget: int | None = None
    ) -> BuiltContext:
        """Load, compress, count, enforce `budget` (default: the selection's), render.
        `cap_budget`: the budget long blocks are compressed for (default: `budget`)."""
        budget = selection.budget if budget is None else budget
        blocks: list[AnyBlock] = []
        seen: set[str] = set()
        for b in selection.kept:
            if b.id not in seen:
                seen.add(b.id)
                blocks.append(b)
        contents = await self._load(blocks)
        # Blocks over a share of the budget are compressed, as the selector counted them.
        cap = block_cap(budget if cap_budget is None else cap_budget,
                        None if self.compressor is None else self.compressor.max_block_tokens)
        parts = [self._part(b, contents.get(b.id), cap) for b in blocks]
        if len(self._parts) > 2 * len(parts) + 1024:  # forget blocks no longer kept
            self._parts = {id(p.block): p for p in parts}
        if len(self._latest) > 2 * len(parts) + 1024:
            self._latest = {p.block.id: p for p in parts}
        parts, late = self._enforce(parts, selection, budget)
        parts.sort(key=_order_of)
        ids = [p.block.id for p in parts]
        tokens = list(map(_tokens_of, parts))
        return BuiltContext(
            entries=list(map(_entry_of, parts)),
            stable_count=sum(1 for p in parts if p.block.stable),
            tokens=sum(tokens) + 2,  # the array's brackets
            dropped=late,
            notes={p.block.id: p.note for p in parts if p.note is not None},
            token_counts=dict(zip(ids, tokens, strict=True)),
            _encoded=list(map(_encoded_of, parts)),
        )

    async def _load(self, blocks: list[AnyBlock]) -> dict[str, LoadedContent]:
        out: dict[str, LoadedContent] = {}
        misses: list[tuple[str, FileRef]] = []
        loader = self.loader
        for b in blocks:
            loc = b.span()
            if loc is None:
                continue
            # Warm files answer from the cache after one stat, small ones are read right
            # here: no task, no thread hop. Only big or missing files are awaited.
            hit = loader.peek_location(*loc) or loader.load_small(*loc)
            if hit is not None:
                out[b.id] = hit
            else:
                misses.append((b.id, FileRef(path=loc[0], start_line=loc[1], end_line=loc[2])))
        if misses:
            loaded = await asyncio.gather(*(self.loader.load(ref) for _, ref in misses))
            out.update(zip((bid for bid, _ in misses), loaded, strict=True))
        return out

    def _part(self, block: AnyBlock, loaded: LoadedContent | None, cap: int | None) -> _Part:
        """The entry of `block`; reused while the block, its content and the cap are
        unchanged."""
        part = self._parts.get(id(block))
        # Pydantic gives a block a new __dict__ on every assignment; the loader returns
        # the same LoadedContent object while the file is unchanged.
        if part is not None and (part.dict is not block.__dict__ or part.cap != cap):
            part = None  # made for other field values, or another budget
        if part is not None:
            if loaded is not None and part.source is loaded:
                return part
            # Its text is made of str fields: unchanged with the fields (a STATUS block's
            # value may be a dict changed in place: its text is compared).
            if loaded is None and block.text_of_fields:
                return part
        source: LoadedContent | str = block.inline_content() if loaded is None else loaded
        if part is not None and loaded is None and part.source == source:
            return part
        part = self._restamped(block, source, cap) or self._render(block, source, cap)
        self._parts[id(block)] = self._latest[block.id] = part
        return part

    def _restamped(
        self, block: AnyBlock, source: LoadedContent | str, cap: int | None
    ) -> _Part | None:
        """The last rendering of this block id, if `block` differs from the block it was
        made for at most in a timestamp that renders the same (perception makes its
        blocks anew every cycle, stamped to the microsecond; the entry shows seconds)."""
        prev = self._latest.get(block.id)
        if (
            prev is None
            or not (prev.source is source or (isinstance(source, str) and prev.source == source))
            or prev.cap != cap
            or type(prev.block) is not type(block)
            or not same_but_timestamp(prev.dict, block.__dict__)
        ):
            return None
        if prev.stamp is not None and prev.stamp != _stamp(block):
            return None
        return prev.restamped(block)

    def _render(self, block: AnyBlock, source: LoadedContent | str, cap: int | None) -> _Part:
        if isinstance(source, str):
            text, tokens, digest, note = source, self._small_count(source), None, None
            decoded = None
        else:
            text, tokens, digest, note = source.text, source.tokens, source.digest, source.note
            decoded = source.encoding
        stamp, meta = self._meta(block)
        aliases = block.front_matter_aliases
        if aliases is not None:  # its front matter: only what the metadata does not say
            shown = without_repeated_fields(text, meta, aliases)
            if shown is not text:  # counted and escaped anew (not the file's)
                text, tokens, digest = shown, self.counter.count_json(shown), None
        escaped: str | None = None
        compressor = self.compressor
        if compressor is not None and cap is not None and tokens > cap and note is None:
            key = (digest or self.counter.digest(text), block.id, cap)
            done = self._compressed.get(key)
            if done is None:
                shorter = compressor.compress(block, text, tokens=tokens, cap=cap)
                if shorter is not None:
                    done = (shorter, _dumps_str(shorter), self.counter.count_json(shorter))
                    if len(self._compressed) > 4096:
                        self._compressed.clear()
                    self._compressed[key] = done
            if done is not None:
                text, escaped, tokens = done
                note = "compressed"
        if escaped is None:
            escaped = self._escape(text, digest)
        for said in block.said_already(meta, text):
            del meta[said]
        if decoded is not None:  # the model should not take its odd characters as data
            meta["encoding"] = f"{decoded} (not UTF-8)"
        if note is not None:
            meta["note"] = note
        tail = _tail(block, meta)
        head = '{"id":' + _dumps_str(block.id) + ',"content":'
        tail_json = _dumps(tail)
        envelope = head + '"",' + tail_json[1:]
        return _Part(
            block=block,
            source=source,
            tokens=tokens + self._small_count(envelope, raw=True),
            note=note,
            entry={"id": block.id, "content": text, **tail},
            encoded=head + escaped + "," + tail_json[1:],
            order=(block.rank, block.sort_key(), block.id),
            dict=block.__dict__,
            stamp=stamp,
            cap=cap,
        )

    @staticmethod
    def _meta(block: AnyBlock) -> tuple[str | None, dict[str, Any]]:
        """(the timestamp shown, None if none or the metadata's own; the entry's metadata
        before what its text says is taken out)."""
        stamp: str | None = _stamp(block) if block.timed else None
        meta: dict[str, Any] = {"type": _TYPE_NAMES[block.type]}
        if stamp is not None:
            meta["timestamp"] = stamp
        private = block.private_metadata
        if private:
            meta.update((k, v) for k, v in block.metadata.items() if k not in private)
        else:
            meta.update(block.metadata)
        meta.update(block.type_metadata())
        if meta.get("timestamp") is not stamp:  # the metadata has a timestamp of its own
            stamp = None
        return stamp, meta

    def _small_count(self, text: str, raw: bool = False) -> int:
        """Tokens of a short text (raw: as is, else as a JSON string), memoised by text."""
        memo = self._small_raw if raw else self._small
        n = memo.get(text)
        if n is None:
            if len(memo) > 100_000:
                memo.clear()
            # An envelope names its block and time: the counter's own cache would only churn.
            counter = self.counter
            n = memo[text] = counter.count_once(text) if raw else counter.count_json(text)
        return n

    def _escape(self, text: str, digest: str | None) -> str:
        if digest is None or len(text) < 4096:
            return _dumps_str(text)
        hit = self._escaped.get(digest)
        if hit is not None:
            self._escaped.move_to_end(digest)
            return hit
        escaped = self._escaped[digest] = _dumps_str(text)
        self._escaped_bytes += len(escaped)
        while self._escaped_bytes > _ESCAPED_CACHE_BYTES and len(self._escaped) > 1:
            _, gone = self._escaped.popitem(last=False)
            self._escaped_bytes -= len(gone)
        return escaped

    def _enforce(
        self, parts: list[_Part], selection: Selection, budget: int
    ) -> tuple[list[_Part], list[Dropped]]:
        """Drop the lowest-scored non-critical blocks until the real total fits `budget`."""
        total = sum(p.tokens for p in parts) + 2
        if total <= budget:
            return parts, []
        scores = selection.scores
        victims = sorted(
            (p for p in parts if p.block.priority is not Priority.CRITICAL),
            key=lambda p: (
                -p.block.priority,
                scores.get(p.block.id, 0.0),
                p.block.timestamp.timestamp(),
            ),
        )
        gone: set[str] = set()
        late: list[Dropped] = []
        for p in victims:
            if total <= budget:
                break
            estimated = selection.tokens.get(p.block.id, 0)
            late.append(
                Dropped(
                    p.block,
                    f"over budget after loading: {p.tokens} tokens (estimated {estimated});"
                    f" the context came to {total} of {budget}",
                    p.tokens,
                )
            )
            total -= p.tokens
            gone.add(p.block.id)
        if total > budget:
            sizes = {p.block.id: p.tokens for p in parts if p.block.priority is Priority.CRITICAL}
            raise CriticalOverBudgetError(sizes, budget)
        return [p for p in parts if p.block.id not in gone], late
