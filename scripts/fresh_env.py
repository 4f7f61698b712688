"""Run the checks in a fresh virtual environment, as a new user's machine would.

    python scripts/fresh_env.py                      newest releases (no constraints)
    python scripts/fresh_env.py --write-constraints  same, then pin what passed
    python scripts/fresh_env.py --oldest             the oldest versions pyproject allows
    python scripts/fresh_env.py --constraints        the pinned versions (as CI installs)

Each run makes a new venv in a temporary folder, installs `.[dev]` with pip, runs
ruff, mypy --strict and the README's test command there, and prints a table of what
it installed against constraints.txt. `--write-constraints` rewrites constraints.txt
(`pip freeze` of the venv) only when every check passed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"
HEADER = (
    "# The versions the suite last passed with (Python {python}).\n"
    "# Regenerate: python scripts/fresh_env.py --write-constraints\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write-constraints", action="store_true",
                      help="pin the newest releases in constraints.txt if every check passes")
    mode.add_argument("--oldest", action="store_true",
                      help="install the lowest version each runtime dependency allows")
    mode.add_argument("--constraints", action="store_true",
                      help="install with constraints.txt, as README's first command does")
    parser.add_argument("--keep", action="store_true", help="keep the venv (its path is printed)")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (default: -q)")
    args = parser.parse_args()

    venv = Path(tempfile.mkdtemp(prefix="hivemind-fresh-"))
    try:
        return _run(venv, args)
    finally:
        if args.keep:
            print(f"venv kept: {venv}")
        else:
            shutil.rmtree(venv, ignore_errors=True)


def _run(venv: Path, args: argparse.Namespace) -> int:
    _step(f"creating a venv in {venv}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if args.constraints:
        install += ["-c", str(CONSTRAINTS)]
    elif args.oldest:
        _step("looking up the oldest releases pyproject allows")
        lowest = venv / "lowest.txt"
        lowest.write_text("".join(f"{line}\n" for line in _lowest_pins()))
        install += ["-c", str(lowest)]
    what = ("pinned" if args.constraints else "oldest allowed" if args.oldest
            else "newest")
    _step(f"installing .[dev] with the {what} releases")
    if subprocess.run([*install, "-e", ".[dev]"], check=False, cwd=ROOT).returncode != 0:
        print("install failed", file=sys.stderr)
        return 2
    installed = _freeze(python)
    _print_versions(installed, _read_pins(CONSTRAINTS))

    env_bin = venv / "bin"
    checks = [
        ("ruff", [str(env_bin / "ruff"), "check", "hivemind", "tests", "bench", "scripts"]),
        ("mypy", [str(env_bin / "mypy"), "--strict", "hivemind"]),
        ("pytest", [python, "-m", "pytest", *(args.pytest_args or ["-q"])]),
    ]
    results: list[tuple[str, int, float]] = []
    for name, command in checks:
        _step(" ".join([Path(command[0]).name, *command[1:]]))
        started = time.monotonic()
        code = subprocess.run(command, check=False, cwd=ROOT, env=_clean_env()).returncode
        results.append((name, code, time.monotonic() - started))

    print("\n| check | result | seconds |\n|---|---|---|")
    for name, code, seconds in results:
        print(f"| {name} | {'passed' if code == 0 else f'FAILED (exit {code})'} | {seconds:.0f} |")
    failed = any(code != 0 for _, code, _ in results)
    if args.write_constraints and not failed:
        CONSTRAINTS.write_text(
            HEADER.format(python=".".join(map(str, sys.version_info[:3])))
            + "".join(f"{name}=={version}\n" for name, version in sorted(installed.items()))
        )
        print(f"\nwrote {CONSTRAINTS.relative_to(ROOT)} ({len(installed)} packages)")
    return 1 if failed else 0


def _lowest_pins() -> list[str]:
    """`name==V` for each runtime dependency declared `name>=X`: V is the oldest release
    at or above X (`aiofiles>=23` is 23.1.0: there was no 23.0)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = []
    for spec in project["dependencies"]:
        found = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([0-9.]+)", spec)
        if found:
            name, bound = found[1], _release(found[2])
            allowed = [v for v in _releases(name) if _release(v) >= bound]
            pins.append(f"{name}=={min(allowed, key=_release)}")  # 2.7.0 < 2.10.0
    return pins


def _releases(name: str) -> list[str]:
    """The final releases of `name` on the package index (`pip index versions`)."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name,
                          "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    listed = next(line for line in out.splitlines() if line.startswith("Available versions:"))
    versions = listed.partition(":")[2].split(",")
    return [v.strip() for v in versions if re.fullmatch(r"[0-9.]+", v.strip())]


def _release(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 23 == 23.0 == 23.0.0
        parts.pop()
    return tuple(parts)


def _freeze(python: str) -> dict[str, str]:
    out = subprocess.run([python, "-m", "pip", "freeze", "--exclude-editable",
                          "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    return _parse_pins(out)


def _read_pins(path: Path) -> dict[str, str]:
    return _parse_pins(path.read_text()) if path.exists() else {}


def _parse_pins(text: str) -> dict[str, str]:
    pins = {}
    for line in text.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not name.startswith("#"):
            pins[_canonical(name)] = version
    return pins


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _print_versions(installed: dict[str, str], pinned: dict[str, str]) -> None:
    changed = [(n, pinned.get(n, "-"), v) for n, v in sorted(installed.items())
               if pinned.get(n) != v]
    if not changed:
        print(f"the {len(installed)} installed packages are the pinned versions")
        return
    print(f"{len(changed)} of {len(installed)} installed packages differ from constraints.txt:")
    print("| package | pinned | installed |\n|---|---|---|")
    for name, old, new in changed:
        print(f"| {name} | {old} | {new} |")


def _clean_env() -> dict[str, str]:
    """The environment CI gives the checks: no key, no endpoint, no tiktoken cache."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
                        "PYTHONPATH", "VIRTUAL_ENV"}}
    env["TIKTOKEN_CACHE_DIR"] = ""
    return env


def _step(text: str) -> None:
    print(f"== {text}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
