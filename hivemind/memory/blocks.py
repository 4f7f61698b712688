"""Symbolic memory blocks: references to content, never the content of files itself.

A block that points at a file (ROM, FILE, TASK, MESSAGE, KNOWLEDGE) names it in
`span()`; its text is read by the ContentLoader only if the selector keeps it.
STATUS, HISTORY and CONTEXT blocks are small and carry their text inline. Each
block type says what the selector and the builder need to know of it: where its
text lives, its place in the context, its envelope, whether it may be compressed.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from enum import IntEnum, StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from hivemind.clock import utcnow
from hivemind.memory.mailids import mail_entry_id

# Compact `json.dumps(value, sort_keys=True, default=str)`, without a new encoder per call.
_VALUE_JSON = json.JSONEncoder(sort_keys=True, default=str, separators=(",", ":")).encode

# History ids must be unique within a process even for identical actions.
_history_seq = itertools.count(1)


class Priority(IntEnum):
    """Selection tier; lower value = kept first."""

    CRITICAL = 1
    HIGH = 2
    MEDIUM = 3
    LOW = 4


class BlockType(StrEnum):
    ROM = "rom"
    FILE = "file"
    STATUS = "status"
    TASK = "task"
    MESSAGE = "message"
    KNOWLEDGE = "knowledge"
    HISTORY = "history"
    CONTEXT = "context"


# (path, start_line, end_line): a FileRef's fields, without building one (hot path).
Span = tuple[str, int | None, int | None]


class FileRef(BaseModel):
    """Where a block's text lives: a path (relative to the hive root, or absolute)
    and an optional 1-based inclusive line range."""

    model_config = ConfigDict(frozen=True)

    path: str
    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _range_is_ordered(self) -> FileRef:
        if (self.start_line is None) != (self.end_line is None):
            raise ValueError("start_line and end_line go together")
        if self.start_line is not None and self.end_line is not None and (
            self.end_line < self.start_line
        ):
            raise ValueError(f"end_line {self.end_line} is before start_line {self.start_line}")
        return self

    @property
    def label(self) -> str:
        """`path` or `path:start-end`, as editors show a range."""
        if self.start_line is None:
            return self.path
        return f"{self.path}:{self.start_line}-{self.end_line}"


def _set_default_id(block: BaseModel, value: str) -> None:
    """Give a block made without an id its default one, from a model validator.

    `block.id = value` there would validate the whole block a second time (assignment
    is validated, and that runs the model validators again): a third of the cost of
    every block. The value is a str made of validated fields, so setting it directly
    leaves the block exactly as the assignment would (the field counts as set).
    """
    block.__dict__["id"] = value
    block.__pydantic_fields_set__.add("id")


class MemoryBlockBase(BaseModel):
    """Fields every block has (DESIGN §4), and what each type says of itself."""

    model_config = ConfigDict(validate_assignment=True)

    # Place in the context. Stable blocks first (ROM 0, knowledge 1, files 2), volatile
    # last, so the stable prefix can be cached. Among the volatile ones, history (3,
    # oldest first, a cycle only appends to it) comes before the blocks that change
    # wholesale each cycle (summaries 4, tasks 5, mail 6, status 7): the previous
    # request then survives up to its last history entry, for the prompt cache.
    rank: ClassVar[int] = 8
    stable: ClassVar[bool] = False  # in the cached prefix (the lowest ranks only)
    compressible: ClassVar[bool] = True  # False: sent whole or not at all
    # Its inline text is made of str fields only: the same fields, the same text.
    text_of_fields: ClassVar[bool] = False
    # Keys of `metadata` the runtime keeps for itself: the model is never sent them.
    private_metadata: ClassVar[frozenset[str]] = frozenset()
    # False: its entry shows no time (one that tells the model nothing it acts on).
    timed: ClassVar[bool] = True
    # Its text opens with front matter whose fields its metadata says (key → alias).
    front_matter_aliases: ClassVar[dict[str, str] | None] = None

    id: str = ""
    priority: Priority = Priority.MEDIUM
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    timestamp: datetime = Field(default_factory=utcnow)
    expiry: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def span(self) -> Span | None:
        """(path, start_line, end_line) of the file this block's text is loaded from;
        None if it carries its text inline."""
        return None

    def file_path(self) -> str | None:
        """The file this block stands for, as recent files are named (None: no file)."""
        span = self.span()
        return (span[0] or None) if span is not None else None

    def inline_content(self) -> str:
        """The text of a block that carries it inline ('' for file-backed blocks)."""
        return ""

    def keywords_text(self) -> str:
        """Words used to score the block's relevance to the current task."""
        return self.id

    def type_metadata(self) -> dict[str, Any]:
        """Type-specific metadata for the JSON context."""
        return {}

    def envelope_extra(self) -> int:
        """Estimated tokens that `type_metadata` adds to the block's JSON envelope."""
        return 0

    def said_already(self, meta: dict[str, Any], text: str) -> list[str]:
        """Keys of the entry's metadata said by its `text` or another key (left out)."""
        return []

    def usual_priority(self) -> Priority | None:
        """The priority its entry need not say (None: its type's default)."""
        return None

    def sort_key(self) -> str:
        """Its place among the entries of its type (by id, unless said otherwise)."""
        return self.id

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expiry is not None and (now or utcnow()) >= self.expiry


class RomBlock(MemoryBlockBase):
    """An agent's ROM.md: identity and instructions. Always CRITICAL."""

    type: Literal[BlockType.ROM] = BlockType.ROM
    agent: str
    location: str
    priority: Priority = Priority.CRITICAL

    rank: ClassVar[int] = 0
    stable: ClassVar[bool] = True
    compressible: ClassVar[bool] = False  # the agent's identity

    @model_validator(mode="after")
    def _default_id(self) -> RomBlock:
        if not self.id:
            _set_default_id(self, f"rom:{self.agent}")
        return self

    def span(self) -> Span:
        return (self.location, None, None)

    def type_metadata(self) -> dict[str, Any]:
        return {"source": self.location, "agent": self.agent}

    def envelope_extra(self) -> int:
        return 8


class FileBlock(MemoryBlockBase):
    """A file, or a line range of it. id = `path` or `path:start-end`.

    `gone`: the file was missing or unreadable when last perceived; the context shows
    that once, then the janitor drops the block (never rendered itself)."""

    type: Literal[BlockType.FILE] = BlockType.FILE
    location: str
    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)
    digest: str | None = None
    gone: bool = False

    rank: ClassVar[int] = 2
    stable: ClassVar[bool] = True

    @model_validator(mode="after")
    def _default_id(self) -> FileBlock:
        # FileRef validates the range.
        ref = FileRef(path=self.location, start_line=self.start_line, end_line=self.end_line)
        if not self.id:
            _set_default_id(self, ref.label)
        return self

    def span(self) -> Span:
        return (self.location, self.start_line, self.end_line)

    def keywords_text(self) -> str:
        return self.location

    def type_metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"source": self.location}
        if self.start_line is not None:
            meta["lines"] = f"{self.start_line}-{self.end_line}"
        return meta

    def envelope_extra(self) -> int:
        return 2 if self.start_line is None else 10


class StatusBlock(MemoryBlockBase):
    """Hive figures (mail waiting, tasks per state, budget left); inline JSON."""

    type: Literal[BlockType.STATUS] = BlockType.STATUS
    status_type: str
    value: Any = None
    priority: Priority = Priority.HIGH

    rank: ClassVar[int] = 7

    @model_validator(mode="after")
    def _default_id(self) -> StatusBlock:
        if not self.id:
            _set_default_id(self, f"status:{self.status_type}")
        return self

    def inline_content(self) -> str:
        if isinstance(self.value, str):
            return self.value
        return _VALUE_JSON(self.value)

    def type_metadata(self) -> dict[str, Any]:
        # `status:<type>` already says it
        return {} if self.id == f"status:{self.status_type}" else {"status_type": self.status_type}


class TaskBlock(MemoryBlockBase):
    """A task; its text is the task file (if `location`) or `description`."""

    type: Literal[BlockType.TASK] = BlockType.TASK
    task_id: str
    title: str = ""
    description: str = ""
    location: str | None = None
    project: str | None = None
    dependencies: list[str] = Field(default_factory=list)
    status: str = "pending"
    priority: Priority = Priority.HIGH

    rank: ClassVar[int] = 5
    text_of_fields: ClassVar[bool] = True
    front_matter_aliases: ClassVar[dict[str, str] | None] = {"id": "task_id"}

    @model_validator(mode="after")
    def _default_id(self) -> TaskBlock:
        if not self.id:
            _set_default_id(self, f"task:{self.task_id}")
        return self

    def span(self) -> Span | None:
        return (self.location, None, None) if self.location else None

    def inline_content(self) -> str:
        return self.description

    def keywords_text(self) -> str:
        return f"{self.title} {self.description}"

    def type_metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"task_id": self.task_id, "status": self.status}
        if self.title:
            meta["title"] = self.title
        if self.project:
            meta["project"] = self.project
        if self.location:
            meta["source"] = self.location
        if self.dependencies:
            meta["depends_on"] = list(self.dependencies)
        return meta

    def envelope_extra(self) -> int:
        return (20 + (len(self.title) + len(self.project or "")) // 3
                + 4 * len(self.dependencies))


class MessageBlock(MemoryBlockBase):
    """A message in a mailbox; unread mail is HIGH, read mail MEDIUM with expiry.

    Its text is `body` when given (the message without its front matter, whose fields
    are the block's metadata), else the whole file at `full_path`."""

    type: Literal[BlockType.MESSAGE] = BlockType.MESSAGE
    from_agent: str
    to_agent: str
    subject: str = ""
    preview: str = ""
    full_path: str
    read: bool = False
    body: str | None = None
    priority: Priority = Priority.HIGH

    rank: ClassVar[int] = 6
    text_of_fields: ClassVar[bool] = True
    # The entry's id names the mail; send_message's `in_reply_to` takes it.
    private_metadata: ClassVar[frozenset[str]] = frozenset({"message_id"})

    @model_validator(mode="after")
    def _default_id(self) -> MessageBlock:
        if not self.id:
            _set_default_id(self, mail_entry_id(self.full_path.rsplit("/", 1)[-1]))
        return self

    def sort_key(self) -> str:
        # Oldest first: a mail's file is named by its id, which opens with its time.
        return self.full_path.rsplit("/", 1)[-1]

    def usual_priority(self) -> Priority:
        return Priority.MEDIUM if self.read else Priority.HIGH  # `read` says it

    def said_already(self, meta: dict[str, Any], text: str) -> list[str]:
        # A first reply's thread is the mail it answers.
        thread = meta.get("thread")
        return ["thread"] if thread and thread == meta.get("in_reply_to") else []

    def span(self) -> Span | None:
        return (self.full_path, None, None) if self.body is None else None

    def file_path(self) -> str | None:
        return self.full_path or None  # even when its body is given

    def inline_content(self) -> str:
        return self.body or ""

    def keywords_text(self) -> str:
        return f"{self.subject} {self.preview}"

    def type_metadata(self) -> dict[str, Any]:
        # Not `to`: the mail is in the agent's own mailbox.
        meta: dict[str, Any] = {
            "from": self.from_agent,
            "subject": self.subject,
            "read": self.read,
        }
        if self.body is None:  # the entry is the file: say which
            meta["source"] = self.full_path
        return meta

    def envelope_extra(self) -> int:
        return 24 + (len(self.subject) + len(self.from_agent)) // 3


class KnowledgeBlock(MemoryBlockBase):
    """A note of the shared knowledge base."""

    type: Literal[BlockType.KNOWLEDGE] = BlockType.KNOWLEDGE
    topic: str
    subtopic: str | None = None
    location: str
    relevance: float = Field(default=0.5, ge=0.0, le=1.0)

    rank: ClassVar[int] = 1
    stable: ClassVar[bool] = True
    # Its size guesses its tokens before it is read; its text is what the model gets.
    private_metadata: ClassVar[frozenset[str]] = frozenset({"bytes"})
    # A note is shown as it is now: when it was last edited changes nothing the model
    # does, and an edit that leaves the text as it was keeps the cached prefix.
    timed: ClassVar[bool] = False

    @model_validator(mode="after")
    def _default_id(self) -> KnowledgeBlock:
        if not self.id:
            _set_default_id(self, self.location)
        return self

    def span(self) -> Span:
        return (self.location, None, None)

    def keywords_text(self) -> str:
        return f"{self.topic} {self.subtopic or ''} {self.location}"

    def type_metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"topic": self.topic, "source": self.location}
        if self.subtopic:
            meta["subtopic"] = self.subtopic
        return meta

    def envelope_extra(self) -> int:
        return 4 + len(self.topic) // 3

    def said_already(self, meta: dict[str, Any], text: str) -> list[str]:
        # The topic is the note's first heading: said again when the text opens with it.
        topic = meta.get("topic")
        return ["topic"] if topic and text.startswith(f"# {topic}\n") else []


class HistoryBlock(MemoryBlockBase):
    """Something the agent did and what came of it; inline."""

    type: Literal[BlockType.HISTORY] = BlockType.HISTORY
    action: str
    detail: str = ""
    result: str | None = None

    rank: ClassVar[int] = 3
    text_of_fields: ClassVar[bool] = True

    @model_validator(mode="after")
    def _default_id(self) -> HistoryBlock:
        if not self.id:
            # Zero-padded so ids sort in the order the actions happened.
            _set_default_id(self, f"history:{next(_history_seq):09d}:{self.action}")
        return self

    def inline_content(self) -> str:
        text = f"{self.action}: {self.detail}" if self.detail else self.action
        return f"{text} -> {self.result}" if self.result is not None else text

    def keywords_text(self) -> str:
        return f"{self.action} {self.detail}"

    # No `action` in its metadata: its text opens with it (and its id ends with it).


class ContextBlock(MemoryBlockBase):
    """A derived summary (of older history, a conversation, a project); inline."""

    type: Literal[BlockType.CONTEXT] = BlockType.CONTEXT
    context_type: str
    summary: str
    related_ids: list[str] = Field(default_factory=list)

    rank: ClassVar[int] = 4
    text_of_fields: ClassVar[bool] = True

    @model_validator(mode="after")
    def _default_id(self) -> ContextBlock:
        if not self.id:
            _set_default_id(self, f"context:{self.context_type}")
        return self

    def inline_content(self) -> str:
        return self.summary

    def keywords_text(self) -> str:
        return self.summary

    def type_metadata(self) -> dict[str, Any]:
        # Neither a type its id says (`context:<type>`) nor ids its summary names.
        meta: dict[str, Any] = ({} if self.id == f"context:{self.context_type}"
                                else {"context_type": self.context_type})
        if any(r not in self.summary for r in self.related_ids):
            meta["related_ids"] = list(self.related_ids)
        return meta

    def envelope_extra(self) -> int:
        return 8 + 4 * len(self.related_ids)


AnyBlock = (
    RomBlock
    | FileBlock
    | StatusBlock
    | TaskBlock
    | MessageBlock
    | KnowledgeBlock
    | HistoryBlock
    | ContextBlock
)

MemoryBlock = Annotated[AnyBlock, Field(discriminator="type")]
"""Any block, as read from JSON; `type` is the discriminator."""

MEMORY_BLOCK_ADAPTER: TypeAdapter[MemoryBlock] = TypeAdapter(MemoryBlock)
