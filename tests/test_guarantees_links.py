"""A hive from someone else is safe to run: no link is followed out of it.

Each hostile hive is built in a temp folder, committed and git-cloned as a user
would get it; the model is the fake Messages API, which records what it receives.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.base import ToolCall
from hivemind.memory.blocks import FileRef
from hivemind.memory.loader import ContentLoader
from hivemind.memory.tokens import TokenCounter
from hivemind.tools import default_registry
from hivemind.tools.base import Tool, ToolContext
from tests.deep_trees import deep_chain, removed_after
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import fast_config, run_until_idle, write_agent, write_task
from tests.scripted_model import last_results, scripted, task_completer, tool_use
from tests.test_daemon_anthropic import provider
from tests.test_tools import make_ctx

SECRET = "PRIVATE-KEY-TEXT-OUTSIDE-THE-HIVE"
ROOT = Path(__file__).resolve().parent.parent


def cli_env(base: Path, **extra: str) -> dict[str, str]:
    """The environment of a `hivemind` subprocess: home and config folders in `base`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return {**env, "PYTHONPATH": str(ROOT), "HOME": str(base / "home"),
            "XDG_CONFIG_HOME": str(base / "config"), **extra}  # fmt: skip


def hivemind(base: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hivemind", *args], cwd=base,
                          env=cli_env(base, **env), capture_output=True, text=True,
                          timeout=90, check=False)  # fmt: skip


def git_clone(base: Path, name: str) -> Path:
    """Commit the hive `base/name` and clone it as `base/clone`, as a user gets it."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", name]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "hive"]):
        subprocess.run([*git, *args], cwd=base, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", name, "clone"], cwd=base, check=True,
                   capture_output=True)  # fmt: skip
    return base / "clone"


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A temp folder with a home holding a private key, beside the hives."""
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "id_rsa").write_text(f"{SECRET}\n")
    return tmp_path


def everything_in(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*")
                     if p.is_file() and not p.is_symlink())  # fmt: skip


def test_a_cloned_task_link_to_a_key_never_reaches_the_model(base: Path) -> None:
    assert hivemind(base, "init", "evil").returncode == 0
    held = base / "evil" / "tasks" / "active" / "assistant"
    held.mkdir(parents=True)
    os.symlink("../../../../home/.ssh/id_rsa", held / "review-notes.md")
    clone = git_clone(base, "evil")
    with FakeAnthropic() as api:
        api.responder = task_completer
        run = hivemind(base, "run", "--until-idle", "clone",
                       ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=api.base_url)
        sent = json.dumps([r.body for r in api.message_requests])

    assert run.returncode == 4, run.stderr  # a file it met was rejected: the summary says
    assert "review-notes.md" in run.stdout
    assert SECRET not in sent
    assert SECRET not in everything_in(clone / "tasks")
    assert os.path.islink(clone / "tasks" / "rejected" / "review-notes.md")
    reason = (clone / "tasks" / "rejected" / "review-notes.md.reason").read_text()
    assert "symbolic link" in reason


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file beside the hive, on the same filesystem (so it can be hard-linked)."""
    secret = tmp_path / "outside" / "notes.md"
    secret.parent.mkdir()
    secret.write_text(f"# notes {SECRET}\n\n{SECRET}\n")
    return secret


@pytest.mark.parametrize("where", ["tasks", "active"])
def test_a_hard_link_on_the_board_is_rejected_unread(
    hive: Hive, outside: Path, where: str
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    folder = hive.tasks_dir if where == "tasks" else hive.active_dir_for("worker")
    folder.mkdir(parents=True, exist_ok=True)
    os.link(outside, folder / "notes.md")
    with FakeAnthropic() as api:
        api.responder = task_completer
        run_until_idle(hive, provider(api))
        sent = json.dumps([r.body for r in api.message_requests])

    assert (hive.done_dir / "t1.md").is_file()  # the rest of the board still runs
    assert SECRET not in sent
    assert SECRET not in everything_in(hive.tasks_dir / "done")
    reason = (hive.rejected_dir / "notes.md.reason").read_text()
    assert "2 hard links" in reason


def test_the_runtimes_own_link_during_a_move_is_not_rejected(hive: Hive) -> None:
    """A move where no rename refuses to replace links the file twice for a moment
    (`noreplace.link_new`); a crash then leaves both names, one of them a temp name."""
    task = write_task(hive, "t1")
    os.link(task, hive.tasks_dir / ".t1.md.4194999-abcdef-0.tmp")

    pending = TaskBoard(hive, settle_time=0).scan_pending()

    assert [ref.id for ref in pending] == ["t1"]
    assert not any(hive.rejected_dir.iterdir())


def test_a_linked_folder_of_held_tasks_is_rejected_unread(hive: Hive, outside: Path) -> None:
    write_agent(hive, "worker")
    os.symlink(outside.parent, hive.active_dir_for("worker"))
    with FakeAnthropic() as api:
        api.responder = task_completer
        run_until_idle(hive, provider(api))
        sent = json.dumps([r.body for r in api.message_requests])

    assert SECRET not in sent and SECRET not in everything_in(hive.done_dir)
    assert os.path.islink(hive.rejected_dir / "worker")
    assert "link to a folder" in (hive.rejected_dir / "worker.reason").read_text()


@pytest.mark.parametrize("link", [os.symlink, os.link], ids=["symlink", "hard-link"])
async def test_a_pinned_file_replaced_by_a_link_is_not_read_through_it(
    hive: Hive, outside: Path, link: Callable[[Path, Path], None]
) -> None:
    """read_file pins a file (a FILE block); each cycle loads it again by its path."""
    loader = ContentLoader(hive.root, TokenCounter())
    pinned = hive.workspace_dir / "pinned.md"
    pinned.write_text("a pinned file\n")
    assert (await loader.load(FileRef(path="workspace/pinned.md"))).text == "a pinned file\n"
    pinned.unlink()
    link(outside, pinned)

    again = await loader.load(FileRef(path="workspace/pinned.md"))

    assert SECRET not in again.text
    assert again.note == "unreadable"


@pytest.mark.parametrize("folder", ["workspace", "knowledge"])
async def test_a_folder_linked_out_of_the_hive_takes_no_write(
    hive: Hive, tmp_path: Path, folder: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (hive.root / folder).rmdir()
    os.symlink(elsewhere, hive.root / folder)
    ctx = make_ctx(hive)

    result = await default_registry().execute(
        ctx, ToolCall(id="c1", name="write_file", input={"path": f"{folder}/x.md", "content": "x"})
    )

    assert result.is_error and "outside the allowed folders" in result.content
    assert not any(elsewhere.iterdir())


def test_run_refuses_a_hive_whose_folder_links_out_of_it(base: Path) -> None:
    assert hivemind(base, "init", "evil").returncode == 0
    (base / "elsewhere").mkdir()
    shutil.rmtree(base / "evil" / "workspace", ignore_errors=True)
    os.symlink("../elsewhere", base / "evil" / "workspace")
    git_clone(base, "evil")

    run = hivemind(base, "run", "--until-idle", "--offline", "clone")

    assert run.returncode != 0
    said = run.stderr.strip()
    assert said.count("\n") == 0 and "workspace/: a link to" in said, said
    assert not any((base / "elsewhere").iterdir())


def test_an_agent_folder_linked_out_of_the_hive_is_not_run(base: Path) -> None:
    assert hivemind(base, "init", "evil").returncode == 0
    spy = base / "spy"
    spy.mkdir()
    (spy / "ROM.md").write_text(f"---\nrole: spy\n---\nYou are a spy. {SECRET}\n")
    os.symlink("../../spy", base / "evil" / "agents" / "spy")
    (base / "evil" / "tasks" / "t1.md").write_text("---\nassignee: spy\n---\n# t1\n\nGo.\n")
    git_clone(base, "evil")
    with FakeAnthropic() as api:
        api.responder = task_completer
        run = hivemind(base, "run", "--until-idle", "clone",
                       ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=api.base_url)
        sent = json.dumps([r.body for r in api.message_requests])

    # the task assigned to spy waits for an agent the hive does not run: exit 3
    assert run.returncode == 3, run.stderr
    assert (base / "clone" / "tasks" / "t1.md").exists()
    assert SECRET not in sent
    assert "agents/spy/: a link to a folder is not run as an agent" in run.stdout + run.stderr


@pytest.mark.parametrize("where", ["mailboxes/worker/new/m1.md", "knowledge/notes.md"])
def test_a_hard_linked_message_or_note_never_reaches_the_model(
    hive: Hive, outside: Path, where: str
) -> None:
    write_agent(hive, "worker", front="knowledge: ['knowledge/**/*.md']\n")
    write_task(hive, "t1")
    Mailbox(hive, "worker").ensure()
    os.link(outside, hive.root / where)
    with FakeAnthropic() as api:
        api.responder = task_completer
        run_until_idle(hive, provider(api))
        sent = json.dumps([r.body for r in api.message_requests])

    assert api.message_requests and SECRET not in sent


# -- depth and size bounds ------------------------------------------------------------


def test_a_knowledge_tree_1800_folders_deep_bricks_nothing(hive: Hive) -> None:
    """Two write_file calls used to make every cycle and the daemon's start fail with
    RecursionError: knowledge/ + 900 folders + x.md, then 900 more below it."""
    write_agent(hive, "worker", front="knowledge: ['knowledge/**/*.md']\n")
    (hive.knowledge_dir / "top.md").write_text("# top note\n")
    write_task(hive, "t1")
    deep_chain(hive.knowledge_dir, 1800, {900: "# deep\n", 1800: "# deeper\n"})
    with removed_after(hive.knowledge_dir), FakeAnthropic() as api:
        api.responder = task_completer
        daemon = run_until_idle(hive, provider(api))
        sent = json.dumps([r.body for r in api.message_requests])
        status = hivemind(hive.root.parent, "status", str(hive.root))

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()
    assert "top note" in sent
    assert status.returncode == 0, status.stderr
    assert "Traceback" not in status.stderr


@pytest.mark.parametrize(
    ("path", "said"),
    [("knowledge/" + "d/" * 2000 + "x.md", "4,014 bytes; the limit is 1,024"),
     ("knowledge/" + "d/" * 40 + "x.md", "42 folders and names; the limit is 32"),
     ("workspace/" + "n" * 1100, "bytes; the limit is 1,024")],
    ids=["2000-levels", "40-levels", "1100-bytes"],
)
async def test_a_tool_refuses_a_path_too_deep_or_too_long(
    hive: Hive, path: str, said: str
) -> None:
    ctx = make_ctx(hive)

    result = await default_registry().execute(
        ctx, ToolCall(id="c1", name="write_file", input={"path": path, "content": "x"})
    )

    assert result.is_error and said in result.content
    assert not (hive.knowledge_dir / "d").exists()


class NoInput(BaseModel):
    pass


async def broken(ctx: ToolContext, args: NoInput) -> str:
    raise RecursionError("maximum recursion depth exceeded")


def test_a_tools_bug_is_a_tool_error_for_the_model_and_shown_in_audit_and_status(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = scripted([tool_use(1, "broken")],
                                 [tool_use(2, "complete_task", task_id="t1", result="ok")])
        daemon = Daemon(hive, fast_config(hive), provider(api),
                        RunOptions(until_idle=True, idle_settle=0.2))
        daemon.services.tools.register(Tool("broken", "A tool with a bug.", NoInput, broken))
        asyncio.run(asyncio.wait_for(daemon.run(), 30))
        told = last_results(api.message_requests[1].body)

    assert daemon.exit_reason == "idle" and (hive.done_dir / "t1.md").is_file()
    bug = "internal error in broken: RecursionError: maximum recursion depth exceeded"
    assert told[0].startswith(bug)
    agent = json.loads(hive.status_file.read_text())["agents"]["worker"]
    assert agent["last_error"] == bug
    assert bug in hive.audit_path("worker").read_text()


@pytest.mark.parametrize("name", ["daemon.lock", "audit/assistant.jsonl", "mcp"])
def test_run_refuses_a_link_among_the_runtimes_own_files(base: Path, name: str) -> None:
    """.hivemind/ is the runtime's own: through a committed link the lock file would
    truncate, and the audit append to, a file of the user's."""
    assert hivemind(base, "init", "evil").returncode == 0
    bashrc = base / "home" / ".bashrc"
    bashrc.write_text("the user's own file\n")
    link = base / "evil" / ".hivemind" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(bashrc, link.parent), link)
    subprocess.run(["git", "-C", "evil", "init", "-q"], cwd=base, check=True)
    subprocess.run(["git", "-C", "evil", "add", "-f", ".hivemind"], cwd=base, check=True)
    clone = git_clone(base, "evil")
    assert os.path.islink(clone / ".hivemind" / name)

    run = hivemind(base, "run", "--until-idle", "--offline", "clone")

    assert run.returncode != 0
    said = run.stderr.strip()
    assert said.count("\n") == 0 and f".hivemind/{name}: a link" in said, said
    assert bashrc.read_text() == "the user's own file\n"


def test_a_linked_reason_file_is_not_shown_by_status(base: Path) -> None:
    assert hivemind(base, "init", "evil").returncode == 0
    rejected = base / "evil" / "tasks" / "rejected"
    rejected.mkdir(parents=True, exist_ok=True)
    (rejected / "x.md").write_text("# x\n")
    os.symlink("../../../home/.ssh/id_rsa", rejected / "x.md.reason")
    clone = git_clone(base, "evil")

    status = hivemind(base, "status", "--json", str(clone))
    listed = hivemind(base, "task", "list", "--hive", str(clone))

    assert status.returncode == 0 and "x.md" in status.stdout
    assert SECRET not in status.stdout + listed.stdout


def test_status_does_not_show_a_file_linked_as_status_json(base: Path) -> None:
    assert hivemind(base, "init", "evil").returncode == 0
    (base / "home" / "tokens.json").write_text(json.dumps({"token": SECRET}))
    (base / "evil" / ".hivemind").mkdir(exist_ok=True)
    os.symlink("../../home/tokens.json", base / "evil" / ".hivemind" / "status.json")
    subprocess.run(["git", "-C", "evil", "init", "-q"], cwd=base, check=True)
    subprocess.run(["git", "-C", "evil", "add", "-f", ".hivemind"], cwd=base, check=True)
    clone = git_clone(base, "evil")

    status = hivemind(base, "status", "--json", str(clone))

    assert status.returncode == 0, status.stderr
    assert SECRET not in status.stdout
    assert "status.json is not readable" in status.stdout
