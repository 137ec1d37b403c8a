"""ci/pulumi-stack.sh on a sharded platform, against a fake `pulumi` (no toolchain): which stacks it runs,
in which order, with which config, and that a failed release pass stops the run before any stack adopts.
The real engine runs the same script on a sharded spec in tests/e2e/test_sharding.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gpupool.model import sharding
from tests.fake_pulumi import fake_project

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "ci" / "pulumi-stack.sh"
TENANTS = ["inference", "notebooks", "research"]

FAKE_PULUMI = r"""#!/usr/bin/env bash
stack=""; prev=""
for a in "$@"; do [ "$prev" = --stack ] && stack="$a"; prev="$a"; done
keep=""; [ -n "${GPUPOOL_KEEP_TENANTS:-}" ] && keep=" keep=$(cat "$GPUPOOL_KEEP_TENANTS")"
echo "$1 $2 stack=$stack$keep" >> "$FAKE_LOG"
case "$1 $2" in
  "config get") [ "$stack" = dev ] && echo "$FAKE_SPEC" ;;
  "stack ls") cat "$FAKE_STACKS" ;;
  "stack export") cat "$FAKE_STATES/$stack.json" 2>/dev/null || echo '{"deployment": {}}' ;;
esac
case "$1" in
  up) [ "$stack" = "${FAKE_FAIL:-}" ] && { echo "error: update failed" >&2; exit 1; }
      echo "Resources: 3 unchanged" ;;
esac
exit 0
"""


def _state(stack: str, tenants: list[str]) -> dict:
    urn = f"urn:pulumi:{stack}::gpupool::gpupool:tenancy:Tenant::tenant-"
    return {"deployment": {"resources": [{"urn": urn + t, "type": "gpupool:tenancy:Tenant"} for t in tenants]}}


@pytest.fixture
def env(tmp_path):
    if not shutil.which("bash"):
        pytest.skip("bash not available")
    bin_dir, project = fake_project(tmp_path, FAKE_PULUMI)
    shutil.copytree(REPO / "stacks" / "dev", project / "dev")
    (tmp_path / "states").mkdir()
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GPUPOOL_PROJECT_DIR": str(project),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}?metadata=skip",
        "FAKE_LOG": str(tmp_path / "calls.log"),
        "FAKE_SPEC": str(project / "dev" / "spec.yaml"),
        "FAKE_STACKS": str(tmp_path / "stacks.json"),
        "FAKE_STATES": str(tmp_path / "states"),
    }


def _shard(env, shards: int) -> None:
    spec = Path(env["FAKE_SPEC"])
    text = spec.read_text()
    text = text.split("\nsharding:")[0] if "\nsharding:" in text else text
    spec.write_text(text.replace("tenantFiles:", f"sharding:\n  tenantShards: {shards}\n\ntenantFiles:"))


def _stacks(env, holdings: dict[str, list[str]]) -> None:
    Path(env["FAKE_STACKS"]).write_text(json.dumps([{"name": s} for s in holdings]))
    for stack, tenants in holdings.items():
        (Path(env["FAKE_STATES"]) / f"{stack}.json").write_text(json.dumps(_state(stack, tenants)))


def _run(env, op="up", **extra) -> tuple[subprocess.CompletedProcess, list[str]]:
    p = subprocess.run(
        ["bash", str(SCRIPT), "dev", op], env={**env, **extra}, text=True, capture_output=True, timeout=120
    )
    log = Path(env["FAKE_LOG"])
    return p, (log.read_text().splitlines() if log.exists() else [])


def _ops(calls: list[str], op: str) -> list[str]:
    return [c.split(" ", 2)[2] for c in calls if c.startswith(op + " ")]


def test_switching_sharding_on_releases_everything_from_the_platform_stack_first(env):
    _shard(env, 2)
    _stacks(env, {"dev": TENANTS})
    p, calls = _run(env)
    assert p.returncode == 0, p.stderr
    ups = _ops(calls, "up")
    assert ups[0] == "stack=dev keep=[]", ups  # the release pass: dev keeps no tenant
    holders = {sharding.shard_stack("dev", sharding.shard_of(t, 2)) for t in TENANTS}
    assert sorted(ups[1:]) == sorted(f"stack={s}" for s in holders)  # then each shard with tenants, once
    assert "stack=dev" not in ups[1:]  # dev had nothing to add: its release pass was all of it
    # every shard stack got the platform stack's config, then its own gpupool:shard
    assert sum(c.startswith("config cp stack=dev") for c in calls) == len(holders)
    assert sorted(c for c in calls if c.startswith("config set stack=dev.")) == sorted(
        f"config set stack={s}" for s in holders
    )


def test_no_move_is_one_pass_without_a_keep_list(env):
    _shard(env, 2)
    holdings = {"dev": []}
    for k, names in sharding.assignment(TENANTS, 2).items():
        if names:
            holdings[sharding.shard_stack("dev", k)] = names
    _stacks(env, holdings)
    p, calls = _run(env)
    assert p.returncode == 0, p.stderr
    ups = _ops(calls, "up")
    assert ups[0] == "stack=dev" and all("keep=" not in u for u in ups)
    assert sorted(ups) == sorted(f"stack={s}" for s in holdings)


def test_a_failed_release_pass_stops_the_run_before_any_shard_adopts(env):
    _shard(env, 2)
    _stacks(env, {"dev": TENANTS})
    p, calls = _run(env, FAKE_FAIL="dev")
    assert p.returncode != 0
    assert _ops(calls, "up") == ["stack=dev keep=[]"], calls


def test_a_failed_shard_stops_the_later_ones(env):
    _shard(env, 3)
    _stacks(env, {"dev": []})
    first = next(sharding.shard_stack("dev", k) for k, n in sharding.assignment(TENANTS, 3).items() if n)
    p, calls = _run(env, FAKE_FAIL=first)
    assert p.returncode != 0
    assert _ops(calls, "up")[-1] == f"stack={first}"


def test_destroy_takes_the_shards_first_and_the_platform_last(env):
    _shard(env, 2)
    _stacks(env, {"dev": [], "dev.tenants-0": [], "dev.tenants-1": [], "dev.tenants-4": []})
    p, calls = _run(env, "destroy")
    assert p.returncode == 0, p.stderr
    destroys = _ops(calls, "destroy")
    assert destroys[-1] == "stack=dev" and set(destroys[:-1]) == {
        "stack=dev.tenants-0",
        "stack=dev.tenants-1",
        "stack=dev.tenants-4",
    }


def test_preview_covers_every_stack_and_collects_one_comment(env, tmp_path):
    _shard(env, 2)
    _stacks(env, {"dev": TENANTS, "dev.tenants-7": []})
    out = tmp_path / "preview.txt"
    p, calls = _run(env, "preview", GPUPOOL_PREVIEW_OUT=str(out))
    assert p.returncode == 0, p.stderr
    previews = _ops(calls, "preview")
    assert previews[0] == "stack=dev" and "stack=dev.tenants-7" in previews  # a left-over shard releases
    assert out.exists()


def test_preview_out_never_writes_through_a_planted_link(env, tmp_path):
    """`: >` and `tee -a` follow a link planted at GPUPOOL_PREVIEW_OUT; the script removes the name first."""
    _shard(env, 2)
    _stacks(env, {"dev": TENANTS})
    victim = tmp_path / "victim"
    victim.write_text("keep")
    out = tmp_path / "preview.txt"
    out.symlink_to(victim)
    p, _ = _run(env, "preview", GPUPOOL_PREVIEW_OUT=str(out))
    assert p.returncode == 0, p.stderr
    assert victim.read_text() == "keep" and out.exists() and not out.is_symlink()
