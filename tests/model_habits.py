"""A scripted model with a real model's habits, for the fake Messages API.

Each task's habit is the first part of its id (`text-3` answers in text):

- `plain`: completes the task at once.
- `text`: answers in plain text first; completes it when the follow-up note names it.
- `mute`: answers in plain text, always (never calls a tool for it).
- `read`: needs `reads_needed` distinct reads (`reads_per_round` a round) first.
- `pingpong`: hands the same work to its partner with create_task, for ever; only a
  refusal makes it do the work itself. A sub-task's end notice ends its parent.
- `ask`: asks its partner a question about the task, and completes it on the answer.

Mail: a question is answered; with `chatty`, every mail is answered (two chatty agents
talk for ever). The habits act on every task held at once, as Claude does with
parallel tool calls. Usage is estimated from the sizes of the request and the reply
(4 characters a token), so token figures follow the real requests' sizes.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.fake_anthropic import Reply, message_body
from tests.scripted_model import context_entries, is_first_round

_AGENT = re.compile(r"You are ([^\s,(]+)")  # "You are NAME (role), an agent of a hive"
_CREATED = re.compile(r"created task (\S+)")


def agent_of(body: dict[str, Any]) -> str:
    """The agent a request is for (from the system prompt)."""
    system = body.get("system")
    text = system if isinstance(system, str) else "".join(b["text"] for b in system or ())
    found = _AGENT.search(text)
    return found.group(1) if found else "?"


def habit_of(task_id: str) -> str:
    return task_id.split("-", 1)[0]


@dataclass
class _Mind:
    """What one agent's model remembers between its calls (a conversation's state)."""

    ended: set[str] = field(default_factory=set)
    said: set[str] = field(default_factory=set)
    reads: Counter[str] = field(default_factory=Counter)
    delegating: dict[str, str] = field(default_factory=dict)  # tool_use id → parent task
    children: dict[str, str] = field(default_factory=dict)  # child task → parent task
    child_ended: set[str] = field(default_factory=set)  # parents whose sub-task ended
    refused: set[str] = field(default_factory=set)
    asked: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    replied: set[str] = field(default_factory=set)
    thread_cut: bool = False  # its last reply was refused: it stops talking


@dataclass
class HabitModel:
    """The model function for `FakeAnthropic.responder`."""

    partners: dict[str, str]  # agent → the agent it delegates to and asks
    reads_needed: int = 12
    reads_per_round: int = 1
    chatty: bool = False
    calls: Counter[str] = field(default_factory=Counter)  # model calls per agent
    held: list[list[str]] = field(default_factory=list)  # the active tasks of each call
    minds: dict[str, _Mind] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _n: int = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            agent = agent_of(body)
            self.calls[agent] += 1
            mind = self.minds.setdefault(agent, _Mind())
            content = self._answer(agent, mind, body)
            tool = any(b["type"] == "tool_use" for b in content)
            usage = {"input_tokens": len(json.dumps(body)) // 4,
                     "output_tokens": len(json.dumps(content)) // 4 + 10}
            return Reply(body=message_body(content, stop_reason="tool_use" if tool else "end_turn",
                                           usage=usage))

    def _call(self, name: str, **args: Any) -> dict[str, Any]:
        self._n += 1
        return {"type": "tool_use", "id": f"toolu_h{self._n}", "name": name, "input": args}

    def _answer(self, agent: str, mind: _Mind, body: dict[str, Any]) -> list[dict[str, Any]]:
        if not is_first_round(body):
            self._take_results(mind, body)
        entries = context_entries(body)
        tasks = [(e["metadata"]["task_id"], e["metadata"].get("title") or "") for e in entries
                 if e["metadata"].get("type") == "task"
                 and e["metadata"].get("status") == "active"]
        self.held.append([tid for tid, _ in tasks])
        note = " ".join(e["content"] for e in entries if e["id"] == "context:followup")
        partner = self.partners.get(agent, agent)
        calls: list[dict[str, Any]] = []
        text: list[str] = []
        for e in entries:
            meta = e["metadata"]
            if meta.get("type") != "message" or meta.get("read") or meta["from"] == "human":
                continue
            calls.extend(self._on_mail(mind, e["id"], meta, first=is_first_round(body)))
        for tid, title in tasks:
            if tid in mind.ended:
                continue
            made = self._on_task(mind, tid, title, partner, named=tid in note)
            if isinstance(made, str):
                text.append(made)
            else:
                calls.extend(made)
        if calls:
            return calls
        return [{"type": "text", "text": " ".join(text) or "Nothing more to do for now."}]

    def _take_results(self, mind: _Mind, body: dict[str, Any]) -> None:
        for block in body["messages"][-1]["content"]:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            parent = mind.delegating.pop(block["tool_use_id"], None)
            result = block["content"] if isinstance(block["content"], str) else json.dumps(
                block["content"])
            if parent is not None:
                made = _CREATED.search(result)
                if block.get("is_error") or made is None:
                    mind.refused.add(parent)
                else:
                    mind.children[made.group(1)] = parent
            elif block.get("is_error") and "refused" in result:
                mind.thread_cut = True

    def _on_mail(self, mind: _Mind, mid: str, meta: dict[str, Any],
                 *, first: bool) -> list[dict[str, Any]]:
        task = meta.get("task")
        if mid in mind.replied or not first:
            return []
        mind.replied.add(mid)
        subject = meta.get("subject") or ""
        if subject.startswith(("[done]", "[failed]")):
            parent = mind.children.get(task or "")
            if parent is not None:
                mind.child_ended.add(parent)
            return []
        if task in mind.asked:
            mind.answered.add(task)
            if not self.chatty:
                return []
        if mind.thread_cut:
            return []
        args: dict[str, Any] = {"to": meta["from"], "subject": "Re: " + subject,
                                "body": "The figure is 42.", "in_reply_to": mid}
        if task:
            args["task"] = task
        return [self._call("send_message", **args)]

    def _on_task(self, mind: _Mind, tid: str, title: str, partner: str,
                 *, named: bool) -> list[dict[str, Any]] | str:
        habit = habit_of(tid)
        done = [self._call("complete_task", task_id=tid, result=f"{tid}: the figure is 42")]
        if habit == "text" and not named:
            mind.said.add(tid)
            return f"The answer to {tid} is 42."
        if habit == "mute":
            return f"I think {tid} comes to 42."
        if habit == "read" and mind.reads[tid] < self.reads_needed:
            first = mind.reads[tid]
            last = min(self.reads_needed, first + self.reads_per_round)
            mind.reads[tid] = last
            return [self._call("read_file", path=f"workspace/data/part-{i + 1}.md")
                    for i in range(first, last)]
        if habit == "pingpong" and tid not in mind.refused:
            if tid in mind.child_ended:
                mind.ended.add(tid)
                return done
            if tid in mind.children.values() or tid in mind.delegating.values():
                return f"{tid} is with {partner}."
            call = self._call("create_task", title=title or tid, body="Work out the figure.",
                              assignee=partner, task=tid)
            mind.delegating[call["id"]] = tid
            return [call]
        if habit == "ask" and tid not in mind.answered:
            if tid in mind.asked:
                return f"{tid} waits for {partner}'s answer."
            mind.asked.add(tid)
            return [self._call("send_message", to=partner, subject=f"question about {tid}",
                               body="What is the figure?", task=tid)]
        mind.ended.add(tid)
        return done


def data_files(root: Any, count: int = 12) -> None:
    """The files the `read` habit reads: workspace/data/part-<n>.md."""
    folder = root / "workspace" / "data"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"part-{i + 1}.md").write_text(f"# Part {i + 1}\n\nfigure {i}\n")
