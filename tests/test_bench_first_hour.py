"""bench/first_hour.py's own logic, without a cluster: its arguments and the transcript it prints from a list of
step results (the replay itself runs only by hand: over 2 minutes, too long for `make test`)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "bench" / "first_hour.py"
_spec = importlib.util.spec_from_file_location("_first_hour", _PATH)
first_hour = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = first_hour  # dataclasses look the module up while the file runs
_spec.loader.exec_module(first_hour)
Step = first_hour.Step


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells (a `\\|` is inside a cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def _fake() -> list:
    return [
        Step("gpupool init", ".venv/bin/gpupool init team-gpu", 0, 1.2, ["wrote 11 files to team-gpu/", "next: cd"]),
        Step(
            "first deploy",
            "gpupool stacks up dev -c gpupool:skipAwait=true",
            0,
            2.5,
            ["Resources:", "    + 28 created", "", "dev: up succeeded (28 create; converged)", ""],
            check="ok",
        ),
        Step(
            "deploy the typo",
            "gpupool stacks up dev",
            1,
            10.0,
            ["error: node dev-gpu1 (pool l4-shared) does not exist", "more", "dev: up failed | see above"],
            expected_exit=1,
        ),
    ]


def test_arguments_default_and_given():
    args = first_hour.parse_args([])
    assert (args.json, args.offline, args.tail, args.keep) == (None, False, 5, None)
    args = first_hour.parse_args(["--json", "out.json", "--offline", "--tail", "3", "--keep", "kept"])
    assert (args.json, args.offline, args.tail, args.keep) == ("out.json", True, 3, "kept")


@pytest.mark.parametrize("bad", [["--tail", "0"], ["--tail", "x"], ["--no-such-option"]])
def test_bad_arguments_are_usage_errors(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        first_hour.parse_args(bad)
    assert exc.value.code == 2


def test_the_table_has_one_row_per_step_with_its_exit_time_and_line():
    steps = _fake()
    text = first_hour.format_markdown(steps, 3.42)
    lines = text.splitlines()
    header = lines.index("| step | command | exit | seconds | what the user saw (one line) |")
    rows = [ln for ln in lines[header + 2 :] if ln.startswith("|")]
    assert len(rows) == len(steps)
    cells = [_cells(r) for r in rows]
    assert all(len(c) == 5 for c in cells), cells  # the `|` in an output line is escaped
    assert [c[0] for c in cells] == ["1. gpupool init", "2. first deploy", "3. deploy the typo"]
    assert [c[1] for c in cells] == [f"`{s.command}`" for s in steps]
    assert [c[2] for c in cells] == ["0", "0", "1"]
    assert [c[3] for c in cells] == ["1.2", "2.5", "10.0"]
    assert cells[0][4] == "next: cd"  # the last non-empty line
    assert cells[1][4] == "dev: up succeeded (28 create; converged)"
    assert cells[2][4] == "error: node dev-gpu1 (pool l4-shared) does not exist"  # a failure: its error line
    assert "Total: 13.7 s (0.2 min) over 3 steps; 1-minute load average 3.42." in lines
    assert "Every step exited as the docs say and every check held." in lines


def test_what_did_not_go_as_the_docs_say_is_listed():
    steps = _fake()
    steps[0].exit = 2
    steps[1].check = "team-a: no gpu-quota"
    text = first_hour.format_markdown(steps, 0.5)
    assert "| 2 (expected 0) |" in text
    assert "- step 1 (gpupool init): exit 2, expected 0" in text
    assert "- step 2 (first deploy): check failed: team-a: no gpu-quota" in text
    assert "step 3" not in text  # exit 1 was expected
    assert "Every step exited" not in text
    doc = first_hour.to_json(steps, 0.5)
    assert doc["ok"] is False and doc["total_seconds"] == pytest.approx(13.7)
    assert [s["unexpected"] for s in doc["steps"]] == [True, False, False]
    assert first_hour.to_json(_fake(), 0.5)["ok"] is True


def test_a_long_or_multiline_line_stays_one_cell():
    step = Step("x", "echo", 0, 0.0, ["a" * 500])
    assert len(first_hour._cell(first_hour.seen(step))) == 160
    assert first_hour._cell("one\ntwo | three") == "one two \\| three"
    assert first_hour.seen(Step("x", "true", 0, 0.0, [])) == ""
