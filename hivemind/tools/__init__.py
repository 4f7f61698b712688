"""The tools agents call; one module per group."""

from __future__ import annotations

from hivemind.tools.base import ToolRegistry
from hivemind.tools.files import FILE_TOOLS
from hivemind.tools.memory import MEMORY_TOOLS
from hivemind.tools.messaging import MESSAGING_TOOLS
from hivemind.tools.tasks import TASK_TOOLS


def default_registry() -> ToolRegistry:
    """Every built-in tool, in the order the model sees them."""
    return ToolRegistry([*MESSAGING_TOOLS, *FILE_TOOLS, *TASK_TOOLS, *MEMORY_TOOLS])
