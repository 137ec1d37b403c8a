"""ci/test_report.py, the end of `make test`: the slowest tests from the JUnit files, each step's time, and the
elapsed time against the budget, printed (an over-budget run says so and still exits 0)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "ci" / "test_report.py"

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a.TestGroup" name="test_fast" time="0.5"/>
<testcase classname="tests.test_a" name="test_slow" time="42.0"/>
<testcase classname="tests.e2e.test_b" name="test_mid" time="7.25"><failure message="x"/></testcase>
<testcase classname="tests.e2e.test_b" name="test_skip" time="0.01"><skipped message="y"/></testcase>
</testsuite></testsuites>"""


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "unit.xml").write_text(JUNIT)
    (tmp_path / "steps.tsv").write_text("setup\t35\t0\ntoolchain\t900\t0\nunit\t300\t1\n")
    argv = [sys.executable, str(REPORT), "--junit", str(tmp_path / "unit.xml"), "--steps", str(tmp_path / "steps.tsv")]
    return subprocess.run(argv + list(args), capture_output=True, text=True, timeout=60)


def test_the_slowest_tests_first_with_outcomes_and_each_step_s_time(tmp_path):
    p = run(tmp_path, "--slowest", "2", "--start", str(time.time() - 100))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    first = lines.index("[make test] the 2 slowest tests (of 4):")
    assert "tests/test_a.py::test_slow" in lines[first + 1]
    assert "tests/e2e/test_b.py::test_mid  (failed)" in lines[first + 2]
    assert not any("test_fast" in line for line in lines)
    assert any(line.split() == ["toolchain", "15m00s"] for line in lines), p.stdout
    assert any(line.split() == ["unit", "5m00s", "FAILED", "(1)"] for line in lines), p.stdout


def test_elapsed_against_the_warm_or_the_fresh_budget(tmp_path):
    warm = run(tmp_path, "--start", str(time.time() - 20 * 60), "--fresh", "0")
    assert warm.returncode == 0
    assert "of the 15-minute budget (warm: toolchain cached): OVER BUDGET by 5m" in warm.stdout, warm.stdout
    fresh = run(tmp_path, "--start", str(time.time() - 20 * 60), "--fresh", "1")
    assert "of the 60-minute budget (fresh machine: toolchain built in this run): within budget" in fresh.stdout


def test_the_suite_by_module(tmp_path):
    p = run(tmp_path, "--modules")
    assert p.returncode == 0, p.stderr
    rows = [line for line in p.stdout.splitlines() if line.startswith("| tests/")]
    assert rows == ["| tests/test_a.py | 2 | 0m42s |", "| tests/e2e/test_b.py | 2 | 0m07s |"], p.stdout


def test_the_cpu_shares_of_the_run_and_a_note_when_the_host_took_much_of_it(tmp_path):
    """The figures of the 0c6e3e8 fault-module run in docs/contributing/testing.md: 22 % steal."""
    start = tmp_path / "cpu.start"
    now = tmp_path / "stat"
    start.write_text("cpu  745845 606 108849 205874 5001 0 4273 33270 0 0\n")
    # + user 41,300, system 9,100, idle 26,300, iowait 500, softirq 600, steal 22,200 ticks (100,000 in all)
    now.write_text("cpu  787145 606 117949 232174 5501 0 4873 55470 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    p = run(tmp_path, "--start", str(time.time() - 60), "--cpu-start", str(start), "--cpu-now", str(now))
    line = next(x for x in p.stdout.splitlines() if "CPU over the run" in x)
    assert "user 41%, system 9%, idle 26%, iowait 0%, steal 22%" in line, line
    assert "CPU time the host gave to other machines" in line
    now.write_text("cpu  787145 606 117949 232174 5501 0 4873 33270 0 0\n")  # the same without steal
    quiet = run(tmp_path, "--start", str(time.time() - 60), "--cpu-start", str(start), "--cpu-now", str(now))
    line = next(x for x in quiet.stdout.splitlines() if "CPU over the run" in x)
    assert "steal 0%" in line and "other machines" not in line, line
