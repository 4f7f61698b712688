"""`hivemind run --scratch` on someone else's hive: no link is followed out of it
(DESIGN §3), by the copy or by the removal of the last copy (issue 21)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from hivemind.cli.app import app
from hivemind.fs.treewalk import MAX_DEPTH
from hivemind.hive.layout import Hive
from tests import scripted_model
from tests.deep_trees import deep_chain, removed_after
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import write_agent, write_task

MARKER = "OUTSIDE-SECRET-7f3a9c"


def a_hive(tmp_path: Path) -> Hive:
    """A hive with one agent and one task, its settings fast."""
    hive = Hive(tmp_path / "hive").ensure()
    hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
    write_agent(hive, "ann")
    write_task(hive, "t1")
    return hive


def outside_folder(tmp_path: Path) -> Path:
    """A folder of the user's, outside the hive, holding a file with MARKER."""
    out = tmp_path / "outdir"
    (out / "scratch").mkdir(parents=True)
    (out / "secret.md").write_text(f"# secret\n\n{MARKER}\n")
    (out / "scratch" / "keep.md").write_text(f"mine: {MARKER}\n")
    return out


def scratch_run(hive: Hive, *args: str) -> Result:
    return CliRunner().invoke(
        app, ["run", str(hive.root), "--until-idle", "--quiet", "--scratch", *args])


def one_line(text: str) -> str:
    return " ".join(text.split())


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under `root` (links not followed) → its bytes."""
    out = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


def links_under(root: Path) -> list[Path]:
    return [Path(f) / n for f, dirs, files in os.walk(root) for n in dirs + files
            if (Path(f) / n).is_symlink()]


def test_a_folder_linked_out_of_the_hive_is_refused_and_never_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F1: `knowledge -> /tmp/outdir` was copied into the scratch hive, for the model."""
    hive = a_hive(tmp_path)
    out = outside_folder(tmp_path)
    hive.knowledge_dir.rmdir()
    hive.knowledge_dir.symlink_to(out)
    with FakeAnthropic() as api:
        api.responder = scripted_model.task_completer
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-scratch-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        result = scratch_run(hive)
        bodies = [str(r.body) for r in api.message_requests]

    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"knowledge/: a link to {out}, outside the hive" in one_line(result.output)
    assert not any(MARKER in body for body in bodies)
    assert not any(MARKER.encode() in data for data in files_under(hive.state_dir).values())
    assert (hive.tasks_dir / "t1.md").exists()


def test_links_inside_the_tree_are_left_out_of_the_copy_and_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F1: links below a folder were copied as links, so the scratch copy read through
    them to the user's files."""
    hive = a_hive(tmp_path)
    out = outside_folder(tmp_path)
    (hive.knowledge_dir / "leak.md").symlink_to(out / "secret.md")
    (hive.workspace_dir / "notes").symlink_to(out)
    (hive.workspace_dir / "plan.md").write_text("the plan\n")
    with FakeAnthropic() as api:
        api.responder = scripted_model.task_completer
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-scratch-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        result = scratch_run(hive)
        bodies = [str(r.body) for r in api.message_requests]

    scratch = hive.state_dir / "scratch"
    assert result.exit_code == 0, result.output
    assert bodies and not any(MARKER in body for body in bodies)
    assert links_under(scratch) == []
    assert (scratch / "workspace" / "plan.md").read_text() == "the plan\n"
    assert (scratch / "tasks" / "done" / "t1.md").exists()
    assert one_line(result.output).count("link(s) left out") == 1
    assert "scratch copy: 2 link(s) left out" in one_line(result.output)


def test_a_hivemind_folder_linked_out_is_refused_and_its_files_survive(tmp_path: Path) -> None:
    """F2: with `.hivemind -> outdir`, the outside folder's scratch/ was removed."""
    hive = a_hive(tmp_path)
    out = outside_folder(tmp_path)
    before = files_under(out)
    for path in sorted(hive.state_dir.rglob("*"), reverse=True):
        path.rmdir()
    hive.state_dir.rmdir()
    hive.state_dir.symlink_to(out)

    result = scratch_run(hive, "--offline")

    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "error: .hivemind: a link; --scratch" in one_line(result.output)
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert files_under(out) == before  # nothing removed, nothing written
    assert sorted(p.name for p in out.rglob("*")) == ["keep.md", "scratch", "secret.md"]


def test_a_scratch_folder_that_is_a_link_is_refused_in_one_line(tmp_path: Path) -> None:
    """F7: `.hivemind/scratch` a link gave an OSError traceback from rmtree."""
    hive = a_hive(tmp_path)
    out = outside_folder(tmp_path)
    before = files_under(out)
    (hive.state_dir / "scratch").symlink_to(out / "scratch")

    result = scratch_run(hive, "--offline")

    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "error: .hivemind/scratch: a link; --scratch" in one_line(result.output)
    assert files_under(out) == before


def test_a_deep_tree_is_copied_to_the_walks_depth_without_a_traceback(tmp_path: Path) -> None:
    """F7: 1,500 nested folders under workspace/ gave a RecursionError from copytree."""
    hive = a_hive(tmp_path)
    top = hive.workspace_dir / "deep"
    top.mkdir()
    with removed_after(top):
        deep_chain(top, 1500, {3: "shallow note", 1400: "deep note"})

        result = scratch_run(hive, "--offline")

    copy = hive.state_dir / "scratch" / "workspace" / "deep"
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"more than {MAX_DEPTH} levels deep left out" in one_line(result.output)
    assert (copy / "d" / "d" / "d" / "x.md").read_text() == "shallow note"
    assert sum(1 for _ in copy.rglob("d")) == MAX_DEPTH - 2  # workspace/ is 0, deep/ is 1
    assert (hive.state_dir / "scratch" / "tasks" / "done" / "t1.md").exists()


def test_an_old_scratch_copy_too_deep_to_remove_is_one_line(tmp_path: Path) -> None:
    """F7: a scratch copy left by an older version, 1,500 folders deep, is refused in one
    line (rmtree recurses), not a RecursionError traceback."""
    hive = a_hive(tmp_path)
    old = hive.state_dir / "scratch"
    old.mkdir()
    with removed_after(old):
        deep_chain(old, 1500, {})

        result = scratch_run(hive, "--offline")

    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert ".hivemind/scratch: the old scratch copy cannot be removed" in one_line(result.output)
    assert (hive.tasks_dir / "t1.md").exists()


def test_a_hard_link_to_a_file_outside_is_left_out_of_the_copy(tmp_path: Path) -> None:
    """A hard link in workspace/ would become a plain file in the copy, and a run reads a
    plain file: it is left out, as a run leaves out a hard-linked note or task."""
    hive = a_hive(tmp_path)
    out = outside_folder(tmp_path)
    os.link(out / "secret.md", hive.workspace_dir / "found.md")

    result = scratch_run(hive, "--offline")

    scratch = hive.state_dir / "scratch"
    assert result.exit_code == 0, result.output
    assert "1 file(s) with more than one hard link left out" in one_line(result.output)
    assert not (scratch / "workspace" / "found.md").exists()
    assert not any(MARKER.encode() in data for data in files_under(scratch).values())
    assert (out / "secret.md").read_text() == f"# secret\n\n{MARKER}\n"
