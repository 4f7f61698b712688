"""The README's quick start, `hivemind run --until-idle --scratch --offline`, on the
repository's own example hive (three agents, three tasks): run as a user runs it, in a
copy of the hive's files, twice; the copy's own files are never touched."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from hivemind.cli.scratch import SCRATCH_PARTS
from hivemind.hive.frontmatter import read_message, read_task
from hivemind.hive.layout import Hive

REPO = Path(__file__).resolve().parent.parent
RUN_TIMEOUT = 120.0  # s: generous; a run takes a few seconds

# Who takes each task of the example hive: lead by assignee, the others by skills.
TAKEN_BY = {
    "release-notes-0-2": "lead",
    "compare-retry-policies": "researcher",
    "knowledge-index": "writer",
}


def example_copy(dest: Path) -> Path:
    """The example hive's own files (what --scratch copies), copied out of the checkout."""
    dest.mkdir()
    for part in SCRATCH_PARTS:
        src = REPO / part
        if src.is_dir():
            shutil.copytree(src, dest / part, symlinks=True)
        elif src.is_file():
            shutil.copy2(src, dest / part)
    return dest


def listing(root: Path) -> dict[str, str]:
    """Every folder, file and link under `root` but `.hivemind/`, with a hash of each file."""
    out: dict[str, str] = {}
    for dirpath, dirs, files in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirs[:] = [d for d in dirs if d != ".hivemind"]
        for name in [*dirs, *files]:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = "link " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def quick_start(hive_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`hivemind run --until-idle --scratch FLAGS` in the hive's folder, with no API key."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ANTHROPIC_") and k != "HIVEMIND_HIVE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "hivemind", "run", "--until-idle", "--scratch", *flags],
        cwd=hive_dir, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
        check=False,  # the exit code is asserted, with the output
    )


def summary_row(output: str, label: str) -> str:
    """The value of a row of the run's summary table."""
    match = re.search(rf"{re.escape(label)}\W+([^│|\n]*?)\s*[│|]", output)
    assert match, f"no {label!r} row in:\n{output}"
    return match.group(1)


def mail(scratch: Hive) -> list[tuple[str, str, str, str]]:
    """Every message in the scratch hive's mailboxes: (box/folder, from, to, subject)."""
    out = []
    for path in scratch.mailboxes_dir.glob("*/*/*"):
        if path.name.startswith(".") or path.parent.name not in ("new", "cur"):
            continue
        msg = read_message(path)
        out.append((f"{path.parent.parent.name}/{path.parent.name}", msg.from_, msg.to,
                    msg.subject))
    return sorted(out)


def expected_mail() -> list[tuple[str, str, str, str]]:
    """What the offline agents write: an ack of each task to its reply_to (else human), the
    board's [done] notice to reply_to, and lead's answer to each [done] notice (offline
    agents never answer an [offline] message). Everything to an agent has been read."""
    titles = {t.id: t.title for t in map(read_task, (REPO / "tasks").glob("*.md"))}
    ack, done = "[offline] Ack: ", "[done] "
    return sorted([
        ("human/new", "lead", "human", ack + titles["release-notes-0-2"]),
        ("lead/cur", "researcher", "lead", ack + titles["compare-retry-policies"]),
        ("lead/cur", "researcher", "lead", done + titles["compare-retry-policies"]),
        ("lead/cur", "writer", "lead", ack + titles["knowledge-index"]),
        ("lead/cur", "writer", "lead", done + titles["knowledge-index"]),
        ("researcher/cur", "lead", "researcher",
         "[offline] Re: " + done + titles["compare-retry-policies"]),
        ("writer/cur", "lead", "writer", "[offline] Re: " + done + titles["knowledge-index"]),
    ])


def check_run(hive_dir: Path, run: subprocess.CompletedProcess[str]) -> None:
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "Traceback" not in out
    assert "OFFLINE PROVIDER" in out
    assert "stopped: idle" in out
    assert summary_row(out, "tasks done / failed") == "3 / 0"  # lead does not delegate offline

    scratch = Hive(hive_dir / ".hivemind" / "scratch")
    done = {p.stem: read_task(p) for p in scratch.done_dir.glob("*.md")}
    assert {tid: t.agent for tid, t in done.items()} == TAKEN_BY
    for path in scratch.done_dir.glob("*.md"):
        assert path.read_text().count("## Result") == 1, path
    for tid in TAKEN_BY:
        assert (scratch.workspace_dir / f"{tid}.md").is_file()
    left = [*scratch.tasks_dir.glob("*.md"), *scratch.active_dir.rglob("*.md"),
            *scratch.failed_dir.glob("*"), *scratch.rejected_dir.glob("*")]
    assert not left
    assert mail(scratch) == expected_mail()


def test_the_quick_start_runs_the_example_hive_again_and_again(tmp_path: Path) -> None:
    hive_dir = example_copy(tmp_path / "example")
    assert len(list((hive_dir / "tasks").glob("*.md"))) == 3
    before = listing(hive_dir)

    check_run(hive_dir, quick_start(hive_dir, "--offline"))
    # A fresh scratch copy: the same outcome.
    check_run(hive_dir, quick_start(hive_dir, "--offline"))

    assert listing(hive_dir) == before  # only .hivemind/ changed
    assert sorted(p.name for p in (hive_dir / ".hivemind").iterdir()) == ["scratch"]


def test_without_a_key_or_offline_the_run_is_refused_in_one_line(tmp_path: Path) -> None:
    """No key used to mean the offline provider, unasked: real tasks ended in done/ with
    mechanical results."""
    hive_dir = example_copy(tmp_path / "example")
    before = listing(hive_dir)

    run = quick_start(hive_dir)

    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout == ""
    err = run.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("error: no model credentials")
    for named in ("$ANTHROPIC_API_KEY", "$ANTHROPIC_AUTH_TOKEN", "--offline"):
        assert named in err
    assert listing(hive_dir) == before  # nothing copied, nothing run


def test_untrusted_the_example_mcp_server_is_a_short_notice(tmp_path: Path) -> None:
    hive_dir = example_copy(tmp_path / "example")
    run = quick_start(hive_dir, "--offline")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert ("agents/researcher/ROM.md: MCP server `notes` not trusted" in out
            and "run `hivemind trust`" in out)
    assert not (hive_dir / ".hivemind" / "scratch" / ".hivemind" / "mcp").exists()


def test_trusted_the_example_mcp_task_is_done_with_the_servers_answer(tmp_path: Path) -> None:
    """The README's steps: `hivemind trust`, copy the task in, run."""
    hive_dir = example_copy(tmp_path / "example")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "hivemind", "trust"], cwd=hive_dir, env=env,
                   check=True, capture_output=True, timeout=RUN_TIMEOUT)
    shutil.copy2(REPO / "examples" / "mcp-task.md", hive_dir / "tasks")
    run = quick_start(hive_dir, "--offline")
    assert run.returncode == 0, run.stdout + run.stderr
    done = hive_dir / ".hivemind" / "scratch" / "tasks" / "done" / "mcp-task.md"
    result = done.read_text().split("## Result", 1)[1]
    assert "knowledge/delegation.md:" in result
    assert "Choosing the assignee" in result
