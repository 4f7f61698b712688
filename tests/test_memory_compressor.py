"""MemoryCompressor: signatures for Python, outlines for other code, one line per action."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from hivemind.memory.blocks import ContextBlock, FileBlock, HistoryBlock, MessageBlock, RomBlock
from hivemind.memory.compressor import MemoryCompressor, python_signatures
from hivemind.memory.tokens import TokenCounter

REPO = Path(__file__).resolve().parents[1]

SERVICE = textwrap.dedent('''
    """A service with every kind of definition."""
    from __future__ import annotations

    import asyncio
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Config:
        """Settings of the service."""
        name: str
        retries: int = 3
        tags: list[str] = field(default_factory=list)

    class Service(Base, metaclass=Meta):
        """Runs jobs.

        More detail that is not kept.
        """

        @property
        def name(self) -> str:
            return self._name

        @staticmethod
        def parse(raw: bytes, *, strict: bool = True) -> dict[str, int]:
            def helper(x):
                return x
            return {}

        async def run(self, jobs: list[str], /, limit: int | None = None, **extra) -> None:
            """Run every job."""
            class Inner:
                def deep(self): ...
            async with asyncio.timeout(1):
                await asyncio.sleep(0)

    if TYPE_CHECKING:
        def typed_only(x: int) -> int: ...

    try:
        import fast as impl
    except ImportError:
        def impl(*args, **kwargs):
            return None
''')


def defined_names(source: str) -> list[tuple[str, str]]:
    """(kind, name) of every def and class in `source`, however nested."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AsyncFunctionDef):
            out.append(("async def", node.name))
        elif isinstance(node, ast.FunctionDef):
            out.append(("def", node.name))
        elif isinstance(node, ast.ClassDef):
            out.append(("class", node.name))
    return out


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(SERVICE, id="service"),
        pytest.param((REPO / "hivemind/memory/loader.py").read_text(), id="loader.py"),
        pytest.param((REPO / "hivemind/memory/compressor.py").read_text(), id="compressor.py"),
        pytest.param(ast.__file__ and Path(ast.__file__).read_text(), id="stdlib-ast"),
    ],
)
def test_python_signatures_keep_every_def_and_class(source: str) -> None:
    sigs = python_signatures(source)
    assert sigs is not None
    lines = [ln.strip() for ln in sigs.splitlines()]
    for kind, name in defined_names(source):
        prefix = f"{kind} {name}(" if kind != "class" else f"class {name}"
        assert any(ln.startswith(prefix) for ln in lines), f"{kind} {name} is missing"
    assert len(sigs) < len(source)


def test_signatures_keep_decorators_imports_fields_and_first_docstring_lines() -> None:
    sigs = python_signatures(SERVICE)
    assert sigs is not None
    assert sigs.splitlines()[0] == '"""A service with every kind of definition."""'
    for line in (
        "import asyncio",
        "from dataclasses import dataclass, field",
        "@dataclass(frozen=True)",
        "class Config:",
        "    name: str",
        "    retries: int = 3",
        "class Service(Base, metaclass=Meta):",
        '    """Runs jobs."""',
        "    @staticmethod",
        "    def parse(raw: bytes, *, strict: bool=True) -> dict[str, int]:",
        "    async def run(self, jobs: list[str], /, limit: int | None=None, **extra) -> None:",
        "        class Inner:",
        "            def deep(self):",
    ):
        assert line in sigs.splitlines(), line
    assert "More detail" not in sigs
    assert "asyncio.sleep" not in sigs


def test_small_text_is_not_compressed() -> None:
    compressor = MemoryCompressor(max_block_tokens=8000)
    assert compressor.compress(FileBlock(location="a.py"), "x = 1\n") is None


def test_the_output_is_labelled_and_fits_the_cap() -> None:
    source = (REPO / "hivemind/memory/selector.py").read_text() * 3
    counter = TokenCounter()
    compressor = MemoryCompressor(max_block_tokens=1200, counter=counter)
    out = compressor.compress(FileBlock(location="workspace/x.py"), source)
    assert out is not None
    first = out.splitlines()[0]
    assert first.startswith("[compressed: signatures of workspace/x.py, ")
    assert f"{counter.count_json(source)} → " in first
    assert counter.count_json(out) <= 1200


def test_unparsable_python_falls_back_to_an_outline() -> None:
    source = "import os\n" + "def broken(:\n    pass\n" + "x = 1\n" * 3000 + "class Fine:\n"
    out = MemoryCompressor(max_block_tokens=200).compress(FileBlock(location="bad.py"), source)
    assert out is not None
    assert out.splitlines()[0].startswith("[compressed: outline (unparsable Python) of bad.py")
    assert out.splitlines()[1:] == ["import os", "def broken(:", "class Fine:"]


def test_other_code_keeps_definitions_and_imports() -> None:
    source = textwrap.dedent("""
        import { api } from "./api";
        export async function load(id) {
          const x = 1;
        }
        const handler = async (req) => {
          return 2;
        };
        class Store extends Base {
          get(key) { return this.m[key]; }
        }
    """) + "// filler line\n" * 3000
    out = MemoryCompressor(max_block_tokens=200).compress(FileBlock(location="web/app.js"), source)
    assert out is not None
    assert out.splitlines()[1:] == [
        'import { api } from "./api";',
        "export async function load(id) {",
        "const handler = async (req) => {",
        "class Store extends Base {",
    ]


def test_long_history_becomes_one_line_per_action() -> None:
    result = "found three matches in the workspace folder; " * 8
    log = "\n".join(
        f"read_file: workspace/f{i}.py -> {result}\n  detail line\n  another" for i in range(400)
    )
    block = ContextBlock(context_type="history", summary=log)
    out = MemoryCompressor(max_block_tokens=20_000).compress(block, log)
    assert out is not None
    lines = out.splitlines()
    assert lines[0].startswith("[compressed: one line per action of context:history")
    actions = [ln for ln in lines[1:] if ln.startswith("read_file:")]
    assert len(actions) == 400
    assert all(len(ln) <= 160 for ln in actions)


def test_one_huge_history_entry_keeps_its_action_line() -> None:
    block = HistoryBlock(action="search_files", detail="TODO", result="hit\n" * 20_000)
    out = MemoryCompressor(max_block_tokens=500).compress(block, block.inline_content())
    assert out is not None
    assert out.splitlines()[1] == "search_files: TODO -> hit"


def test_the_rom_is_never_compressed() -> None:
    rom = RomBlock(agent="lead", location="agents/lead/ROM.md")
    assert MemoryCompressor(max_block_tokens=200).compress(rom, "word " * 5000) is None


def test_a_long_message_is_cut_without_pointing_at_a_file_no_tool_reads() -> None:
    message = MessageBlock(from_agent="ann", to_agent="bob", subject="s",
                           full_path="mailboxes/bob/new/m.md")
    out = MemoryCompressor(max_block_tokens=200).compress(message, "word " * 5000)
    assert out is not None and out.startswith("[compressed: head of mailboxes/bob/new/m.md")
    assert "read_file" not in out.splitlines()[0] and "ask its sender" in out.splitlines()[0]
