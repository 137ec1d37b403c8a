"""Every pure-Python benchmark in bench/ at its smallest size, so none rots unnoticed (four of them had: a
generator that named resources no pool of a small spec advertises, a timer patched onto a name the program
no longer calls, a stale class table, a missing import path). Each runs as a user runs it, `python
bench/<script> ...` from the checkout; what is checked is that it prints its figures and that each ratio it
prints is the quotient of the two figures it prints beside it (not a speed: these are timings of one run).
The end-to-end benchmarks have theirs in tests/e2e/test_bench_smallest.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NUMBER = r"([0-9][0-9,]*\.?[0-9]*)"


def _bench(*argv: str, over_target_ok: bool = False) -> str:
    p = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    # A benchmark with a target exits 1 when a ratio is over it (at the smallest size fixed costs dominate).
    over = over_target_ok and p.returncode == 1 and ("OVER" in p.stdout or "ABOVE TARGET" in p.stdout)
    assert p.returncode == 0 or over, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _half_unit(printed: str) -> float:
    """Half the last printed digit's unit: how far the rounded figure may be from the measured one."""
    decimals = len(printed.partition(".")[2])
    return 0.5 * 10**-decimals


def _is_quotient(ratio: str, top: str, bottom: str) -> bool:
    """RATIO as printed is TOP / BOTTOM, within what rounding each printed figure allows."""
    t, b = _num(top), _num(bottom)
    lo = (t - _half_unit(top)) / (b + _half_unit(bottom))
    hi = (t + _half_unit(top)) / (b - _half_unit(bottom))
    return lo - _half_unit(ratio) <= _num(ratio) <= hi + _half_unit(ratio)


def test_bench_validate():
    out = _bench("bench/bench_validate.py", "--tenants", "3", "--pools", "2", "--repeats", "1", over_target_ok=True)
    rows = re.findall(
        rf"yaml\.load \(CSafeLoader\)\s+{NUMBER} ms, gpupool validate\s+{NUMBER} ms, ratio {NUMBER}x", out
    )
    assert len(rows) == 2, out  # one file; the spec and a file per tenant
    assert all(_is_quotient(r, v, load) for load, v, r in rows), out
    assert "pulumi imported by validate: no" in out


def test_bench_render():
    out = _bench("bench/bench_render.py", "--tenants", "3", "--pools", "2", "--runs", "3")
    for where in ("in-process", "subprocess"):
        render = re.search(rf"render, {where}\s+{NUMBER} ms", out)
        dumper = re.search(rf"C dumper, {where}\s+{NUMBER} ms\s+\(all[^)]*\)\n\s+ratio {NUMBER}x", out)
        assert render and dumper, out
        assert _is_quotient(dumper.group(2), render.group(1), dumper.group(1)), out
    assert re.search(r"render breakdown .*load\+validate .* build .* dump YAML .* write files", out), out


def test_bench_diff_base():
    out = _bench("bench/bench_diff_base.py", "--tenants", "3", "--pools", "2", "--repeats", "1")
    base = re.search(rf"gpupool validate HEAD\s+{NUMBER} s\s+1\.00x", out)
    diff = re.search(rf"gpupool diff --base HEAD -o markdown\s+{NUMBER} s\s+{NUMBER}x\s+\(comment ", out)
    assert base and diff, out
    assert _is_quotient(diff.group(2), diff.group(1), base.group(1)), out


def test_bench_plan_diff():
    # Four pools: the generator's fourth kind is the time-sliced pool the diff edits.
    out = _bench("bench/bench_plan_diff.py", "--tenants", "3", "--pools", "4", "--repeats", "1", "--gpus", "4")
    base = re.search(rf"baseline yaml\.load\(CSafeLoader\)\s+{NUMBER} ms\s+1\.00x", out)
    rows = re.findall(rf"^\s+(plan|diff|mig suggest)[^\n]*?\s{NUMBER} ms\s+{NUMBER}x", out, re.M)
    assert base and len(rows) == 4, out
    assert all(_is_quotient(r, t, base.group(1)) for _, t, r in rows), out


def test_bench_mig_suggest():
    out = _bench("bench/bench_mig_suggest.py", "--gpus", "4", "--runs", "1")
    cold = re.search(r"-> (\d+) GPUs, lower bound (\d+), proven bound (\d+)", out)
    assert cold and re.search(rf"warm: median {NUMBER}s, max {NUMBER}s", out), out
    gpus, lower, proven = (int(x) for x in cold.groups())
    assert lower <= proven <= gpus, out


def test_bench_program():
    out = _bench("bench/bench_program.py", "--tenants", "3", "--pools", "2", "--runs", "3", over_target_ok=True)
    program = re.search(rf"\(a\) program\s+{NUMBER} ms", out)
    bare = re.search(rf"\(b\) bare\s+{NUMBER} ms", out)
    ratio = re.search(rf"ratio a/b = {NUMBER}x", out)
    assert program and bare and ratio, out
    assert _is_quotient(ratio.group(1), program.group(1), bare.group(1)), out
    registered = re.search(r"registered\s+program: (\d+) = (\d+) kubernetes", out)
    assert registered and int(registered.group(2)) > 0, out


@pytest.mark.parametrize("command", ["validate", "plan", "render"])
def test_bench_input_limits(command):
    out = _bench("bench/bench_input_limits.py", "--mib", "0.05", "--commands", command, "--seconds", "60")
    row = re.search(rf"^{command}\s+0\.05\s+0\s+{NUMBER}\s+{NUMBER}\s+(\d+)", out, re.M)
    largest = re.search(rf"^{command}\s+largest within 4 GB and 60 s: ~{NUMBER} MiB", out, re.M)
    assert row and largest, out
