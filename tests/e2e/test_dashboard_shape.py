"""The dashboard gpupool ships has the shape Grafana's own dashboard types describe: decoded strictly (no
unknown field, no wrong type, no missing required field) and validated by the Grafana Foundation SDK's Go
types (github.com/grafana/grafana-foundation-sdk/go, Apache-2.0; Grafana itself is AGPL and not used), with
every panel's options and queries decoded as their plugin's types. The checker is dashboard_shape/main.go,
built from the module proxy into a temp dir (about a minute of CPU on a cold build cache)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpupool.monitoring import dashboard

pytestmark = pytest.mark.e2e

SDK = "github.com/grafana/grafana-foundation-sdk/go@v0.0.22"
HERE = Path(__file__).resolve().parent


def _require() -> bool:
    return os.environ.get("GPUPOOL_REQUIRE_E2E", "") not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def checker(tmp_path_factory) -> Path:
    if not shutil.which("go"):
        (pytest.fail if _require() else pytest.skip)("go is needed to build the dashboard checker")
    d = tmp_path_factory.mktemp("dashboard-shape")
    shutil.copy(HERE / "dashboard_shape" / "main.go", d / "main.go")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOWORK": "off", "CGO_ENABLED": "0"}
    for cmd in (["go", "mod", "init", "gpupool.local/dashboard-shape"], ["go", "get", SDK],
                ["go", "build", "-trimpath", "-o", "check", "."]):  # fmt: skip
        p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=900, check=False)
        assert p.returncode == 0, f"{' '.join(cmd)}: {p.stderr}"
    return d / "check"


def test_the_dashboard_decodes_strictly_as_a_grafana_dashboard(checker, tmp_path):
    path = tmp_path / "dashboard.json"
    path.write_text(json.dumps(dashboard.dashboard()))
    p = subprocess.run([str(checker), str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"ok: {len(dashboard.panel_queries())} panels"


def test_the_checker_refuses_a_wrong_shape(checker, tmp_path):
    """The check can fail: an unknown key and a wrong type are refused."""
    bad = dashboard.dashboard()
    bad["panels"][0]["gridPos"]["h"] = "eight"
    bad["refreshh"] = "1m"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    p = subprocess.run([str(checker), str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
