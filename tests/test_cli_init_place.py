"""`hivemind init` never makes a hive inside another hive's own folders (agents/,
tasks/, ...), whose files that hive would read as its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive


def init(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["init", *args], terminal_width=300)
    return result.exit_code, result.output


@pytest.fixture
def myhive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("HIVEMIND_HIVE", raising=False)
    root = tmp_path / "myhive"
    assert init(str(root))[0] == 0
    return root


@pytest.mark.parametrize("inside", ["agents", "tasks/done", "mailboxes/human", "knowledge",
                                    ".hivemind"])
def test_init_inside_a_hives_own_folder_is_refused_and_creates_nothing(
    myhive: Path, monkeypatch: pytest.MonkeyPatch, inside: str
) -> None:
    folder = myhive / inside
    folder.mkdir(parents=True, exist_ok=True)
    before = sorted(p.name for p in folder.iterdir())
    monkeypatch.chdir(folder)

    code, said = init(".")

    assert code == 1
    first = inside.split("/", maxsplit=1)[0]
    assert said.startswith(f"error: .: inside {first}/ of the hive "), said
    assert "create it elsewhere" in said and "\n" not in said.strip()
    assert sorted(p.name for p in folder.iterdir()) == before  # no hive.toml, no agents/
    assert Hive(myhive).agent_names() == ["assistant"]


def test_init_in_a_hives_workspace_is_still_made_with_a_note(myhive: Path) -> None:
    code, said = init(str(myhive / "workspace" / "sub"))
    assert code == 0
    assert "is inside the hive" in said
    assert (myhive / "workspace" / "sub" / "hive.toml").is_file()


def test_init_of_the_current_folder_calls_it_this_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HIVEMIND_HIVE", raising=False)
    monkeypatch.chdir(tmp_path)
    code, said = init()
    assert code == 0
    assert "Hive ready in this folder. Next:" in said  # not "Hive ready in .. Next:"
