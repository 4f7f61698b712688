"""Every command finds the hive the current folder is in, as git finds a repository;
the "not a hive" line never suggests making a hive inside another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from hivemind.cli.app import app
from hivemind.hive.locate import enclosing_hive, find_hive


def run(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def status_root() -> Path:
    return Path(json.loads(run("status", "--json").output)["root"])


def one_line_error(result: Result) -> str:
    text = result.output.strip()
    assert text.startswith("error: ") and "\n" not in text, text
    return text


@pytest.fixture
def myhive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("HIVEMIND_HIVE", raising=False)
    root = tmp_path / "myhive"
    run("init", str(root))
    return root


@pytest.mark.parametrize("below", ["", "workspace", "workspace/drafts/2026", "tasks/done"])
def test_a_command_run_below_the_hive_finds_it(
    myhive: Path, monkeypatch: pytest.MonkeyPatch, below: str
) -> None:
    here = myhive / below
    here.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(here)
    result = run("task", "add", "Found from below")
    assert (myhive / "tasks" / "found-from-below.md").is_file()
    assert "found-from-below.md" in result.output
    assert not (here / "tasks" / "found-from-below.md").exists() or here == myhive


def test_a_tasks_folder_inside_the_workspace_is_no_hive(
    myhive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's workspace/report/tasks/ is its output; the hive above is the hive."""
    here = myhive / "workspace" / "report"
    (here / "tasks").mkdir(parents=True)
    monkeypatch.chdir(here)
    assert status_root() == myhive


def test_the_nearest_hive_wins(myhive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inner = myhive / "workspace" / "inner"
    run("init", str(inner))
    monkeypatch.chdir(inner / "workspace")
    assert find_hive(Path.cwd()) == inner
    assert status_root() == inner


def test_hivemind_hive_wins_over_the_folder(
    myhive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    run("init", str(other))
    monkeypatch.chdir(myhive / "workspace")
    monkeypatch.setenv("HIVEMIND_HIVE", str(other))
    assert status_root() == other


def test_outside_any_hive_the_error_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HIVEMIND_HIVE", raising=False)
    here = tmp_path / "documents"
    here.mkdir()
    monkeypatch.chdir(here)
    text = one_line_error(run("status", code=1))
    assert f"{here}: not in a hive" in text and "hivemind init ." in text
    assert list(here.iterdir()) == []


@pytest.mark.parametrize("given", ["workspace", "workspace/missing", "workspace/x/tasks"])
def test_a_folder_inside_a_hive_is_refused_pointing_at_the_hive_not_at_init(
    myhive: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    if given.endswith("tasks"):
        (myhive / given).mkdir(parents=True)
    monkeypatch.chdir(myhive.parent)
    text = one_line_error(run("status", "--hive", str(myhive / given), code=1))
    assert "init" not in text
    assert "it is inside the hive myhive: give --hive myhive" in text, text


def test_enclosing_hive_is_a_folder_above_never_the_folder_itself(myhive: Path) -> None:
    assert enclosing_hive(myhive) is None
    assert enclosing_hive(myhive / "workspace" / "a" / "b") == myhive


def test_init_inside_a_hive_says_so(myhive: Path) -> None:
    result = run("init", str(myhive / "workspace" / "sub"))
    assert "is inside the hive" in result.output and "commands run below it now find this one" \
        in " ".join(result.output.split())
    assert "inside the hive" not in run("init", str(myhive.parent / "elsewhere")).output
