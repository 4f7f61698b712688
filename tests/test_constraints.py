"""The quick start installs the versions the suite was tested with (constraints.txt)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["dev"]
    return [Requirement(r) for r in declared]


def _quick_start() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"^```bash\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    assert block is not None
    return [line for line in block[1].splitlines() if line.strip()]


def test_the_quick_start_and_ci_install_with_the_constraints() -> None:
    install, tests = _quick_start()
    assert install.startswith('pip install -c constraints.txt -e ".[dev]" && ')
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install in ci and tests in ci


@pytest.mark.parametrize("requirement", _declared(), ids=str)
def test_every_dependency_is_pinned_within_what_pyproject_allows(
    requirement: Requirement,
) -> None:
    version = _pins().get(canonicalize_name(requirement.name))
    assert version is not None, f"{requirement.name} is not in constraints.txt: regenerate it"
    assert requirement.specifier.contains(version, prereleases=True)
