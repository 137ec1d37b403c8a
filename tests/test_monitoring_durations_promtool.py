"""The durations GP163 accepts are what Prometheus accepts: `promtool check rules` (the toolchain's Prometheus
v3.16.0) on gpupool's rendered rules with the edge cases as every alert's `for:`; and it refuses the ones GP163
refuses. `make test` builds promtool (toolchain/build.sh prometheus); elsewhere this skips without it, or fails
when GPUPOOL_REQUIRE_TOOLS is set."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from gpupool.monitoring import rules as monitoring_rules
from gpupool.rules.engine import load_valid_spec
from tests.test_monitoring_durations import ACCEPTED, REFUSED
from tests.test_validate_rules import BASE

# Needs a binary make test builds: run after the build, with the e2e tests (ci/test.sh).
pytestmark = pytest.mark.needs_tools

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def promtool() -> Path:
    bin_dir = subprocess.run(
        ["bash", str(ROOT / "toolchain" / "build.sh"), "--print-bin-dir"], capture_output=True, text=True, timeout=60
    ).stdout.strip()
    path = Path(bin_dir) / "promtool" if bin_dir else None
    if path is None or not path.is_file():
        if os.environ.get("GPUPOOL_REQUIRE_TOOLS"):
            pytest.fail(f"GPUPOOL_REQUIRE_TOOLS is set but promtool is missing ({path}; toolchain/build.sh)")
        pytest.skip("promtool not built (toolchain/build.sh prometheus)")
    return path


def _rules_file(tmp_path: Path, text: str) -> Path:
    spec = copy.deepcopy(BASE)
    spec["monitoring"] = {"enabled": True, "alerts": {"idleFor": "2h"}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    groups = monitoring_rules.groups(load_valid_spec(path))
    for g in groups:
        for r in g["rules"]:
            if "alert" in r:
                r["for"] = text
    out = tmp_path / "rules.yaml"
    out.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return out


def _check(promtool: Path, rules: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(promtool), "check", "rules", str(rules)], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("text", ACCEPTED)
def test_promtool_accepts_what_gp163_accepts(promtool, tmp_path, text):
    p = _check(promtool, _rules_file(tmp_path, text))
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("text", REFUSED)
def test_promtool_refuses_what_gp163_refuses(promtool, tmp_path, text):
    p = _check(promtool, _rules_file(tmp_path, text))
    assert p.returncode != 0, p.stdout + p.stderr
