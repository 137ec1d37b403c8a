"""The end-to-end benchmarks at their smallest size, so they keep working (tests/test_bench_smallest.py has the
pure-Python ones): each runs as a user runs it, `python bench/<script> ...` from the checkout, against control
planes of its own. Checked: the figures come out, each printed ratio is the quotient of the figures it is
printed from, and the recipe's onboarding ran the new tenant's shard alone (what issue 40 measures); no
speed is asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_bench_smallest import _is_quotient

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SECONDS = r"([0-9]+\.[0-9]+)s"


def _bench(toolchain_bin: Path, *argv: str) -> str:
    env = {**os.environ, "GPUPOOL_TOOLCHAIN_BIN": str(toolchain_bin)}
    p = subprocess.run([sys.executable, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p.stdout


def test_bench_e2e_recipe_mode_at_two_tenants(toolchain_bin):
    """bench_e2e.py's recipe=S mode (gpupool stacks as CI runs it) against kubectl, without the scheduled runs:
    up from empty, the unchanged preview (every stack skipped: asserted by the bench), the onboarding."""
    argv = ("--tenants", "2", "--pools", "2", "--modes", "recipe=1", "--no-nightly")
    out = _bench(toolchain_bin, "bench/bench_e2e.py", *argv)
    rows = {
        m["op"]: m
        for m in re.finditer(
            rf"^\s+2\s+\d+\s+\d+\s+(?P<op>up|preview|onboard)\s+recipe=1\s+{SECONDS}\s+{SECONDS}\s+([0-9.]+)x",
            out,
            re.M,
        )
    }
    assert set(rows) == {"up", "preview", "onboard"}, out
    assert all(_is_quotient(m.group(4), m.group(2), m.group(3)) for m in rows.values()), out
    ran = re.search(r"the onboarding ran (\S+)$", out, re.M)
    assert ran and re.fullmatch(r"dev\.tenants-\d+", ran.group(1)), out  # one shard, not the platform stack
    assert "nightly" not in out.split("tenants objects")[-1], out  # --no-nightly: no scheduled run timed


def test_bench_refresh_at_two_tenants(toolchain_bin):
    """bench_refresh.py (what `up`'s refresh costs): the four commands, each timed, each with its outcome."""
    out = _bench(toolchain_bin, "bench/bench_refresh.py", "--tenants", "2", "--pools", "2")
    commands = re.findall(r"^\[2 tenants\] (gpupool stacks [^\n]*?)\s+([0-9.]+) s\s+load", out, re.M)
    assert [c for c, _ in commands] == [
        "gpupool stacks preview dev",
        "gpupool stacks preview dev --refresh",
        "gpupool stacks up dev --no-refresh",
        "gpupool stacks up dev",
    ], out
    assert all(float(t) > 0 for _, t in commands), out
    assert "dev: up succeeded (no changes; converged)" in out, out
