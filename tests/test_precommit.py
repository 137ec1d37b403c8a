"""The pre-commit hooks and `make lint` run the same checks (issue 38 item 5): every lint command of the Makefile
is a hook (the hook's entry, plus the files pre-commit passes), and every hook is a lint command; and shellcheck
covers every shell script of the repository."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def _lint_commands() -> list[str]:
    text = (REPO / "Makefile").read_text()
    recipe = re.search(r"^lint:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M)
    assert recipe, "no lint target in the Makefile"
    return [line.strip().replace("$(VENV)", ".venv") for line in recipe.group(1).splitlines()]


def _hooks() -> list[dict]:
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    return [hook for repo in config["repos"] for hook in repo["hooks"]]


def test_every_lint_command_is_a_hook_and_every_hook_a_lint_command():
    commands, entries = _lint_commands(), [h["entry"] for h in _hooks()]
    assert all(h["language"] == "system" for h in _hooks())  # the venv's own tools: nothing downloaded
    for command in commands:
        assert any(command == e or command.startswith(e + " ") for e in entries), f"no hook runs: {command}"
    for entry in entries:
        assert any(c == entry or c.startswith(entry + " ") for c in commands), f"make lint does not run: {entry}"


def test_shellcheck_covers_every_shell_script():
    listed = re.search(r"^SHELL_SCRIPTS = (.*)$", (REPO / "Makefile").read_text(), re.M)
    assert listed
    skip = {".git", ".venv", "node_modules", "out", "rendered", ".pulumi", ".hypothesis"}
    scripts = set()
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in skip]  # (pruned: not walked at all)
        for name in files:
            path = Path(root) / name
            if path.is_symlink():
                continue
            with path.open("rb") as f:
                first = f.readline(200)
            if path.suffix == ".sh" or re.match(rb"#!\S*(/|env )(ba)?sh\b", first):
                scripts.add(path.relative_to(REPO).as_posix())
    assert scripts == set(listed.group(1).split()), sorted(scripts)
