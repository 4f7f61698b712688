"""Importance rated by the agent's model: tokens spent against the budget, memories rated.

    python bench/bench_rating.py            # 40 tasks, rating_share 0.02 / 0.05 / 0.10
    python bench/bench_rating.py --quick    # 12 tasks, 0.05 only

One agent on the real SDK against the fake Messages API works through tasks, each
remembering 2-4 chat turns of bench/ltm_conversations.py without an importance. Every
request is charged what its body weighs (4 characters a token), so the rating
requests cost what their prompts do. The rater answers one line per memory, and
badly one time in five (plain prose, or numbers of memories it was not shown).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ltm_conversations import generate
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.ltm.importance import heuristic_importance
from hivemind.ltm.rating import RATING_PROMPT, RatingBudget
from hivemind.ltm.records import ImportanceSource
from hivemind.ltm.store import LongTermMemory
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.scripted_model import context_entries, is_first_round, tool_use


def held(body: dict[str, Any]) -> list[str]:
    """The active tasks a request shows (entries without metadata are other things)."""
    meta = [e.get("metadata") or {} for e in context_entries(body)]
    return [m["task_id"] for m in meta if m.get("type") == "task" and m.get("status") == "active"]


class Model:
    """Remembers its task's notes, completes it; rates by its own taste, or badly."""

    def __init__(self, notes: dict[str, list[str]]) -> None:
        self.notes = notes
        self.ratings = 0
        self.tokens = {"agent": 0, "rating": 0}

    def _reply(self, body: dict[str, Any], content: list[dict[str, Any]], kind: str,
               stop: str = "end_turn") -> Reply:
        said = len(json.dumps(content)) // 4
        used = {"input_tokens": len(json.dumps(body)) // 4,
                "output_tokens": min(body["max_tokens"], said)}
        self.tokens[kind] += used["input_tokens"] + used["output_tokens"]
        return Reply(body=message_body(content, stop_reason=stop, usage=used))

    def __call__(self, body: dict[str, Any]) -> Reply:
        system = body.get("system") or ""
        text = system if isinstance(system, str) else "".join(b["text"] for b in system)
        if text.startswith(RATING_PROMPT[:40]):
            self.ratings += 1
            lines = body["messages"][0]["content"][0]["text"].splitlines()
            if self.ratings % 5 == 0:
                answer = "These all look fairly important to me."
            else:
                answer = "\n".join(
                    f"{n + (90 if self.ratings % 5 == 3 else 1)}: "
                    f"{1 + round(9 * heuristic_importance(line))}"
                    for n, line in enumerate(lines)
                )
            return self._reply(body, [{"type": "text", "text": answer}], "rating")
        if not is_first_round(body):
            return self._reply(body, [{"type": "text", "text": "noted"}], "agent")
        calls = []
        for task in held(body):
            calls += [tool_use(len(calls), "remember", content=n) for n in self.notes[task]]
            calls.append(tool_use(len(calls), "complete_task", task_id=task, result="noted"))
        return self._reply(body, calls, "agent", stop="tool_use")


def run(tasks: int, share: float, workdir: Path) -> dict[str, Any]:
    hive = Hive(workdir / f"hive-{share}").ensure()
    rom = hive.rom_path("worker")
    rom.parent.mkdir(parents=True, exist_ok=True)
    rom.write_text("---\nrole: note taker\n---\nYou note what matters.\n")
    turns = [t.content for t in generate(4, seed=3).turns]
    notes = {f"t{i:03d}": turns[i * 4 : i * 4 + 2 + i % 3] for i in range(tasks)}
    for task in notes:
        (hive.tasks_dir / f"{task}.md").write_text(f"---\nproject: notes\n---\n# {task}\n\n"
                                                   "Note the chat.\n")
    config = load_hive_config(hive)
    config.daemon.settle_time = 0.0
    config.memory.rating_share = share
    model = Model(notes)
    with FakeAnthropic() as api:
        api.responder = model
        provider = AnthropicProvider(api_key="k", base_url=api.base_url, timeout=10)
        daemon = Daemon(hive, config, provider, RunOptions(until_idle=True, idle_settle=0.3))
        asyncio.run(asyncio.wait_for(daemon.run(), 600))
    with LongTermMemory(hive) as ltm:
        records = ltm.backend.list_all()
        budget = RatingBudget.load(ltm.backend, "worker")
    by = [r.importance_by for r in records]
    return {
        "share": share, "memories": len(records), "requests": model.ratings,
        "rated": by.count(ImportanceSource.MODEL), "waiting": by.count(ImportanceSource.HEURISTIC),
        "agent_tokens": model.tokens["agent"], "rating_tokens": model.tokens["rating"],
        "counted": (budget.agent_tokens, budget.rating_tokens),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    tasks, shares = (12, [0.05]) if args.quick else (40, [0.02, 0.05, 0.10])
    print(f"{tasks} tasks, one agent; tokens as the fake API charged them")
    print(f"{'share':>6} {'memories':>8} {'requests':>8} {'rated':>6} {'waiting':>7} "
          f"{'agent tok':>10} {'rating tok':>10} {'spent':>7}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="rating-bench-") as tmp:
        for share in shares:
            r = run(tasks, share, Path(tmp))
            spent = r["rating_tokens"] / max(1, r["agent_tokens"])
            ok &= spent <= share * 1.1  # one request may overrun its estimate a little
            print(f"{share:6.2f} {r['memories']:8d} {r['requests']:8d} {r['rated']:6d} "
                  f"{r['waiting']:7d} {r['agent_tokens']:10,d} {r['rating_tokens']:10,d} "
                  f"{spent:7.2%}")
    print(f"\nrating spent within its share (10 % slack for one estimate): {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
