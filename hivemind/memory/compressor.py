"""The MemoryCompressor: shrinks a block whose text is over its cap, and says so.

Python becomes its signatures (via `ast`: decorators, async, nested methods,
first docstring lines, imports); other code an outline of def/class/function/
import lines; history one line per action; Markdown its headings; a task, a
message and anything else its head. The output starts with a `[compressed: ...]`
label, which says how to read the whole file when there is one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from hivemind.memory.blocks import AnyBlock, ContextBlock, HistoryBlock, MessageBlock, TaskBlock
from hivemind.memory.budget import DEFAULT_MAX_BLOCK_TOKENS
from hivemind.memory.tokens import TokenCounter

_PYTHON = (".py", ".pyi", ".pyw")
_CODE = (
    ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".scala",
    ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".lua", ".sh",
)
_MARKDOWN = (".md", ".markdown", ".rst")
_LABEL_TOKENS = 60  # room for the "[compressed: ...]" line
_LINE_CHARS = 200

_OUTLINE = re.compile(
    r"""^\s*(?:
        @[\w.]+                                                   # decorators
      | (?:export\s+)?(?:default\s+)?(?:pub(?:\([\w\s]+\))?\s+)?(?:async\s+)?
        (?:def|class|function\*?|func|fn|interface|struct|enum|trait|impl|module|namespace)\b
      | (?:export\s+)?(?:const|let|var)\s+\w+\s*=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*=>)
      | (?:import|from|package|use|require|using|\#include)\b
      | (?:public|private|protected|internal|static)\s
    )""",
    re.VERBOSE,
)
_ACTION = re.compile(r"^[\w.\-]+(?::| ->)")
_HEADING = re.compile(r"^#{1,6}\s")


def clip(line: str, limit: int = _LINE_CHARS) -> str:
    """`line` without trailing blanks, cut to `limit` characters with `…` at the cut."""
    line = line.rstrip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _first_line(doc: str | None) -> str | None:
    if not doc:
        return None
    return next((ln.strip() for ln in doc.splitlines() if ln.strip()), None)


def python_signatures(source: str) -> str | None:
    """Imports and every def/class signature with its first docstring line; None if unparsable."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # ValueError: source with NUL bytes
        return None
    out: list[str] = []
    doc = _first_line(ast.get_docstring(tree))
    if doc:
        out.append(f'"""{clip(doc)}"""')
    _walk(tree.body, 0, out, scope="module")
    return "\n".join(out)


def _walk(body: Sequence[ast.stmt], depth: int, out: list[str], scope: str) -> None:
    pad = "    " * depth
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if scope == "module":  # imports inside functions are detail, not interface
                out.append(pad + clip(ast.unparse(node)))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.extend(f"{pad}@{clip(ast.unparse(d))}" for d in node.decorator_list)
            kind = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
            returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
            out.append(f"{pad}{kind} {node.name}({ast.unparse(node.args)}){returns}:")
            _body(node, depth + 1, out, scope="function")
        elif isinstance(node, ast.ClassDef):
            out.extend(f"{pad}@{clip(ast.unparse(d))}" for d in node.decorator_list)
            bases = [ast.unparse(b) for b in node.bases]
            bases += [
                f"{k.arg}={ast.unparse(k.value)}" if k.arg else f"**{ast.unparse(k.value)}"
                for k in node.keywords
            ]
            out.append(f"{pad}class {node.name}({', '.join(bases)}):" if bases else
                       f"{pad}class {node.name}:")
            _body(node, depth + 1, out, scope="class")
        elif isinstance(node, ast.AnnAssign) and scope == "class":
            out.append(pad + clip(ast.unparse(node)))  # dataclass / pydantic fields
        else:
            # Definitions under if/try/with/for/match keep their place in the outline.
            for sub in _sub_bodies(node):
                _walk(sub, depth, out, scope)


def _body(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, depth: int,
          out: list[str], scope: str) -> None:
    before = len(out)
    doc = _first_line(ast.get_docstring(node))
    if doc:
        out.append(f'{"    " * depth}"""{clip(doc)}"""')
    _walk(node.body, depth, out, scope)
    if len(out) == before:
        out.append("    " * depth + "...")


def _sub_bodies(node: ast.stmt) -> list[list[ast.stmt]]:
    bodies: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        part = getattr(node, name, None)
        if isinstance(part, list) and part and isinstance(part[0], ast.stmt):
            bodies.append(part)
    bodies.extend(h.body for h in getattr(node, "handlers", ()))
    bodies.extend(c.body for c in getattr(node, "cases", ()))
    return bodies


def code_outline(source: str) -> str:
    """def/class/function/import lines of any language (the fallback for non-Python code)."""
    return "\n".join(clip(ln) for ln in source.splitlines() if _OUTLINE.match(ln))


def history_summary(text: str) -> str:
    """One line per action (lines like `read_file: ...`), each clipped."""
    lines = text.splitlines()
    actions = [clip(ln, 160) for ln in lines if _ACTION.match(ln)]
    if not actions and lines:
        actions = [clip(lines[0], 160)]
    omitted = len(lines) - len(actions)
    if omitted > 0:
        actions.append(f"[{omitted} more lines of detail omitted]")
    return "\n".join(actions)


def markdown_outline(text: str) -> str:
    """Headings, each followed by the first line of its section."""
    out: list[str] = []
    want_line = False
    for ln in text.splitlines():
        if _HEADING.match(ln):
            out.append(clip(ln))
            want_line = True
        elif want_line and ln.strip():
            out.append(clip(ln))
            want_line = False
    return "\n".join(out)


class MemoryCompressor:
    """Compresses block texts over `max_block_tokens` (counted as in the JSON context)."""

    def __init__(
        self, max_block_tokens: int = DEFAULT_MAX_BLOCK_TOKENS, counter: TokenCounter | None = None
    ) -> None:
        if max_block_tokens < 2 * _LABEL_TOKENS:
            raise ValueError(f"max_block_tokens must be at least {2 * _LABEL_TOKENS}")
        self.max_block_tokens = max_block_tokens
        self.counter = counter or TokenCounter()

    def compress(
        self, block: AnyBlock, text: str, *, tokens: int | None = None, cap: int | None = None
    ) -> str | None:
        """A shorter, labelled text if `text` is over the cap (`cap`, else
        `max_block_tokens`); None if it fits as it is."""
        if not block.compressible:  # sent whole or not at all (ROM)
            return None
        limit = max(2 * _LABEL_TOKENS, self.max_block_tokens if cap is None else cap)
        before = tokens if tokens is not None else self.counter.count_json(text)
        if before <= limit:
            return None
        loc = block.span()
        name = loc[0] if loc else block.id
        kind, body = self._shrink(block, name, text)
        body, cut = self._fit(body, limit - _LABEL_TOKENS)
        after = self.counter.count_json(body)
        label = f"[compressed: {kind} of {name}, {before} → {after} tokens"
        # The model can read the rest of a file (read_file takes a line range), but no
        # tool reads mailboxes/.
        if isinstance(block, MessageBlock):
            whole = "; the rest is not shown: ask its sender if it matters"
        else:
            whole = "; read_file reads the whole file in parts" if loc else ""
        return f"{label}{', truncated' if cut else ''}{whole}]\n{body}"

    def _shrink(self, block: AnyBlock, name: str, text: str) -> tuple[str, str]:
        lower = name.lower()
        is_history = isinstance(block, HistoryBlock) or (
            isinstance(block, ContextBlock) and "history" in block.context_type
        )
        if is_history:
            return "one line per action", history_summary(text)
        if isinstance(block, TaskBlock | MessageBlock):  # what is asked is in its words
            return "head", text
        if lower.endswith(_PYTHON):
            sigs = python_signatures(text)
            if sigs is not None:
                return "signatures", sigs
            return "outline (unparsable Python)", code_outline(text)
        if lower.endswith(_CODE):
            return "outline", code_outline(text)
        if lower.endswith(_MARKDOWN):
            return "headings", markdown_outline(text)
        return "head", text

    def _fit(self, body: str, limit: int) -> tuple[str, bool]:
        """Cut `body` at a line boundary until it fits `limit` tokens."""
        n = self.counter.count_json(body)
        if n <= limit:
            return body, False
        lines = body.splitlines()
        total = len(lines)
        chars = len(body)
        while n > limit and chars > 0:
            chars = int(chars * limit / n * 0.9)
            kept: list[str] = []
            size = 0
            for ln in lines:
                if size + len(ln) + 1 > chars:
                    break
                kept.append(ln)
                size += len(ln) + 1
            if not kept and lines:
                kept = [lines[0][: max(0, chars)]]
            body = "\n".join(kept) + f"\n[... {total - len(kept)} more lines not shown]"
            n = self.counter.count_json(body)
        return body, True
