"""Prefix reuse: the share of a request that repeats the agent's previous request."""

from __future__ import annotations

import json

from hivemind.agent.cycle import Agent
from hivemind.agent.prefix import common_prefix_length
from hivemind.agent.services import HiveServices
from hivemind.hive.layout import Hive
from hivemind.llm.base import ModelRequest, ToolSpec
from hivemind.llm.offline import OfflineProvider
from tests.helpers import write_agent


def request(tools: list[ToolSpec], volatile: str) -> ModelRequest:
    return ModelRequest(agent="worker", model="m", system="SYSTEM", tools=tools,
                        context_stable='[{"id":"k"}', context_volatile=volatile)


def sent_text(req: ModelRequest) -> str:
    return (json.dumps([t.model_dump() for t in req.tools]) + req.system
            + req.context_stable + req.context_volatile)


def test_prefix_reuse_counts_what_repeats_the_previous_request(hive: Hive) -> None:
    write_agent(hive, "worker")
    agent = Agent("worker", HiveServices.open(hive, OfflineProvider()))
    every = agent.s.tools.specs(None)
    first = request(every, ',{"id":"history:1"}]')
    assert agent.prefix_reuse(first) is None
    second = request(every, ',{"id":"history:1"},{"id":"history:2"}]')
    reuse = agent.prefix_reuse(second)
    a, b = sent_text(first), sent_text(second)
    assert reuse == common_prefix_length(a, b) / len(b)
    assert agent.prefix_reuse(second) == 1.0


def test_a_changed_tool_allow_list_is_not_served_from_the_cached_tool_json(hive: Hive) -> None:
    write_agent(hive, "worker")
    agent = Agent("worker", HiveServices.open(hive, OfflineProvider()))
    every = agent.s.tools.specs(None)
    fewer = agent.s.tools.specs(["send_message", "complete_task"])
    agent.prefix_reuse(request(every, "]"))
    reuse = agent.prefix_reuse(request(fewer, "]"))
    a, b = sent_text(request(every, "]")), sent_text(request(fewer, "]"))
    assert reuse == common_prefix_length(a, b) / len(b)
    assert reuse is not None and reuse < 1.0
