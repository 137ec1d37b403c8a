"""gpupool diff: tenant onboarding/offboarding/removal, quota, MIG and time-slicing changes, exit codes, --base."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gpupool.analysis import diff as diffmod
from gpupool.cli.main import main
from gpupool.rules.engine import validate_file

POOLS = [
    {
        "name": "l4-shared",
        "gpu": "L4",
        "gpusPerNode": 4,
        "nodes": ["gpu-l4-1"],
        "pricePerGpuHour": 0.8,
        "sharing": {"timeSlicing": {"replicas": 4}},
    },
    {
        "name": "a100-mig",
        "gpu": "A100-80GB",
        "gpusPerNode": 4,
        "nodes": ["gpu-a100-1", "gpu-a100-2"],
        "sharing": {"mig": {"preset": "all-balanced"}},
    },
    {
        "name": "h100-sel",
        "gpu": "H100-80GB",
        "gpusPerNode": 8,
        "nodeSelector": {"pool": "h100"},
        "nodeCount": 2,
        "sharing": {"mig": {"preset": "all-1g.10gb"}},
    },
]
TENANTS = {
    "inference": {
        "name": "inference",
        "tier": "production",
        "owners": ["oncall"],
        "costCenter": "cc-1",
        "gpus": {"nvidia.com/mig-3g.40gb": 4, "nvidia.com/mig-1g.10gb": 20},
    },
    "notebooks": {
        "name": "notebooks",
        "tier": "standard",
        "owners": ["ds"],
        "gpus": {"nvidia.com/gpu.shared": 8, "nvidia.com/mig-1g.10gb": 8},
    },
}


TIERS = [
    {"name": "production", "priority": 1000, "isolation": "dedicated"},
    {"name": "standard", "priority": 100},
]


def stack(root: Path, *, pools=None, tenants=None, tiers=None) -> Path:
    """A spec with one tenant file per tenant under tenants/."""
    root.mkdir(parents=True, exist_ok=True)
    spec = {
        "apiVersion": "gpupool.dev/v1alpha1",
        "kind": "GpuPlatform",
        "cluster": {"name": "t"},
        "nodePools": pools if pools is not None else POOLS,
        "tiers": tiers if tiers is not None else TIERS,
        "tenantFiles": ["tenants/"],
    }
    (root / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    tdir = root / "tenants"
    if tdir.exists():
        for f in tdir.iterdir():
            f.unlink()
    tdir.mkdir(exist_ok=True)
    for name, t in (tenants if tenants is not None else TENANTS).items():
        (tdir / f"{name}.yaml").write_text(yaml.safe_dump(t, sort_keys=False))
    return root / "spec.yaml"


def run(capsys, *argv):
    code = main(["diff", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def base(tmp_path):
    path = stack(tmp_path / "base")
    assert validate_file(path).ok
    return path


def with_tenants(**changes):
    out = {k: dict(v) for k, v in TENANTS.items()}
    for name, t in changes.items():
        if t is None:
            out.pop(name)
        else:
            out[name] = t
    return out


def test_no_changes(base, tmp_path, capsys):
    head = stack(tmp_path / "head")
    code, out, _ = run(capsys, base, head)
    assert code == 0 and "no changes" in out


def test_onboarding_new_tenant_file(base, tmp_path, capsys):
    new = {
        "name": "vision",
        "tier": "standard",
        "owners": ["cv"],
        "costCenter": "cc-7",
        "gpus": {"nvidia.com/gpu.shared": 4},
    }
    head = stack(tmp_path / "head", tenants=with_tenants(vision=new))
    code, out, _ = run(capsys, base, head)
    assert code == 0
    assert "+ vision onboarded (tier standard, cost centre cc-7): nvidia.com/gpu.shared 4" in out
    assert "+ tenant-vision-ns.yaml (Namespace vision)" in out
    assert "+ tenant-vision-gpu-quota.yaml" in out
    # headroom of gpu.shared: 16 - 8 = 8 before, 16 - 12 = 4 after
    assert "nvidia.com/gpu.shared" in out and "8 → 4" in out


def test_offboarding_then_removal(base, tmp_path, capsys):
    off = dict(TENANTS["notebooks"], offboarded=True)
    mid = stack(tmp_path / "mid", tenants=with_tenants(notebooks=off))
    code, out, _ = run(capsys, base, mid)
    assert code == 0
    assert "⚠ notebooks: nvidia.com/gpu.shared 8 → 0 (-8), nvidia.com/mig-1g.10gb 8 → 0 (-8); offboarded" in out
    assert 'spec.hard["requests.nvidia.com/gpu.shared"]: "8" → "0"' in out
    # then the offboarded tenant is removed: its namespace is deleted, not retained
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    code, out, _ = run(capsys, mid, head)
    assert code == 0
    assert "⚠ notebooks removed (was offboarded): namespace notebooks and everything in it is DELETED" in out
    assert "RETAINED" not in out
    assert "- tenant-notebooks-ns.yaml (Namespace notebooks)\n" in out


def test_removal_without_offboarding_is_retained(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    code, out, _ = run(capsys, base, head)
    assert code == 0
    assert "⚠ notebooks removed without being offboarded: namespace notebooks is RETAINED (not deleted)" in out
    assert "no longer managed" in out
    assert "tenant-notebooks-ns.yaml (Namespace notebooks) — retained in the cluster" in out
    code, md, _ = run(capsys, base, head, "--format", "markdown")
    assert "> [!WARNING]" in md and "RETAINED" in md


def test_quota_change(base, tmp_path, capsys):
    t = dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 12, "nvidia.com/mig-1g.10gb": 8})
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=t))
    code, out, _ = run(capsys, base, head)
    assert code == 0
    assert "~ notebooks: nvidia.com/gpu.shared 8 → 12 (+4)" in out
    d = diffmod.compute(validate_file(base).spec, validate_file(head).spec)
    h = next(h for h in d.headroom if h.resource == "nvidia.com/gpu.shared")
    assert (h.capacity_before, h.capacity_after, h.granted_before, h.granted_after) == (16, 16, 8, 12)
    assert (h.headroom_before, h.headroom_after) == (8, 4)
    assert 'spec.hard["requests.nvidia.com/gpu.shared"]: "8" → "12"' in out


def test_a_tier_priority_edit_replaces_its_priority_class_and_says_what_that_means(base, tmp_path, capsys):
    tiers = [TIERS[0], dict(TIERS[1], priority=200, description="now described")]
    head = stack(tmp_path / "head", tiers=tiers)
    code, out, _ = run(capsys, base, head)
    assert code == 0
    line = next(x for x in out.splitlines() if "tier-standard.yaml" in x)
    assert "value: 100 → 200" in line and "REPLACED (the field is immutable" in line, line
    assert "running pods keep their old priority until they are re-created" in line
    assert "kubectl replace --force -f" in line and "`pulumi up` deletes and creates it" in line
    code, text, _ = run(capsys, base, head, "-o", "json")
    (obj,) = [o for o in json.loads(text)["objects"] if o["file"] == "tier-standard.yaml"]
    assert obj["replaced"] is True
    # A description alone is updated in place.
    only_text = stack(tmp_path / "desc", tiers=[TIERS[0], dict(TIERS[1], description="now described")])
    code, out, _ = run(capsys, base, only_text)
    assert "tier-standard.yaml" in out and "REPLACED" not in out


def test_mig_layout_change_names_evicted_nodes(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(pools[1], sharing={"mig": {"layout": {"3g.40gb": 2}}})
    tenants = with_tenants(
        notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 8}),
        inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 16, "nvidia.com/mig-1g.10gb": 20}),
    )
    head = stack(tmp_path / "head", pools=pools, tenants=tenants)
    code, out, _ = run(capsys, base, head)
    assert code == 0, out
    line = next(l for l in out.splitlines() if "EVICTS" in l)
    assert "⚠ EVICTS GPU WORKLOADS on nodes gpu-a100-1, gpu-a100-2 (pool a100-mig)" in line
    assert "all-balanced → 3g.40gb×2" in line
    assert "h100-sel" not in line
    assert 'metadata.labels["nvidia.com/mig.config"]: "a100-80gb-all-balanced" → "a100-80gb-3g.40gbx2"' in out
    code, md, _ = run(capsys, base, head, "--format", "markdown")
    assert "> - **⚠ EVICTS GPU WORKLOADS on nodes gpu-a100-1, gpu-a100-2" in md


def test_mig_layout_change_on_selector_pool(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[2] = dict(pools[2], sharing={"mig": {"preset": "all-balanced"}})
    # all-balanced on H100: 1g.10gb x2 per GPU -> 32; keep inference's 20 + notebooks' 8 = 28 within it
    head = stack(tmp_path / "head", pools=pools)
    code, out, _ = run(capsys, base, head)
    assert code == 0, out
    assert "⚠ EVICTS GPU WORKLOADS on every node matching pool=h100 (2 expected) (pool h100-sel)" in out


def test_time_slicing_replicas_change(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[0] = dict(pools[0], sharing={"timeSlicing": {"replicas": 8}})
    head = stack(tmp_path / "head", pools=pools)
    code, out, _ = run(capsys, base, head)
    assert code == 0
    assert "~ key l4-shared: time-slicing replicas 4 → 8 (pools: l4-shared)" in out
    assert "device-plugin-config.yaml" in out
    assert "EVICTS" not in out
    d = diffmod.compute(validate_file(base).spec, validate_file(head).spec)
    assert [(c.key, c.replicas_before, c.replicas_after) for c in d.plugin] == [("l4-shared", 4, 8)]


def test_negative_headroom_exits_1(base, tmp_path, capsys):
    t = dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 20, "nvidia.com/mig-1g.10gb": 8})
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=t))
    code, out, err = run(capsys, base, head)
    assert code == 1
    assert "INVALID" in out
    assert "8 → -4 ⚠" in out  # headroom 16 - 20
    assert "notebooks.yaml:" in err and "error:" in err  # FILE:LINE:COL diagnostics, as gpupool validate


def test_invalid_head_exits_1_with_diagnostics(base, tmp_path, capsys):
    t = dict(TENANTS["notebooks"], tier="standrd")
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=t))
    code, out, err = run(capsys, base, head)
    assert code == 1
    diag = next(l for l in err.splitlines() if "unknown tier" in l)
    assert "standrd" not in err  # refused input is located, never quoted back
    file, line, col, rest = diag.split(":", 3)
    assert file.endswith("notebooks.yaml") and line.isdigit() and col.isdigit() and "error" in rest


def test_invalid_base_still_diffs(base, tmp_path, capsys):
    bad = stack(tmp_path / "bad", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], tier="nope")))
    head = stack(tmp_path / "head")
    code, out, err = run(capsys, bad, head)
    assert code == 0  # HEAD alone gates
    assert "BASE" in out and "is invalid" in out
    assert "tenants[notebooks].tier: unknown tier" in err and "nope" not in err


def test_usage_errors_exit_2(base, tmp_path, capsys):
    assert run(capsys, base, tmp_path / "missing.yaml")[0] == 2
    assert run(capsys, base)[0] == 2
    assert run(capsys, "--base", "HEAD", base, base)[0] == 2
    code, _, err = run(capsys, "--base", "HEAD", base)  # tmp_path is not a git repository
    assert code == 2 and "git" in err


def test_json_format(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    code, out, _ = run(capsys, base, head, "--format", "json")
    doc = json.loads(out)
    assert doc["schemaVersion"] == 3 and doc["ok"] is True
    removed = next(t for t in doc["tenants"] if t["name"] == "notebooks")
    assert removed["kind"] == "removed" and removed["namespace"] == "retained"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def test_base_git_ref(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "repo"
    stack(repo / "stacks" / "dev")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    # working tree: one tenant file changed, one added, one removed
    t = dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 10, "nvidia.com/mig-1g.10gb": 8})
    new = {"name": "vision", "tier": "standard", "owners": ["cv"], "gpus": {"nvidia.com/gpu.shared": 2}}
    stack(repo / "stacks" / "dev", tenants={"notebooks": t, "vision": new})
    monkeypatch.chdir(repo)
    code, out, err = run(capsys, "--base", "HEAD", "stacks/dev/spec.yaml")
    assert code == 0, err
    assert "HEAD:stacks/dev/spec.yaml → stacks/dev/spec.yaml" in out
    assert "~ notebooks: nvidia.com/gpu.shared 8 → 10 (+2)" in out
    assert "+ vision onboarded" in out
    assert "⚠ inference removed without being offboarded" in out
    # the working tree is untouched, and a bad ref is a usage error
    assert _git(repo, "status", "--porcelain").count("tenants/") >= 2
    assert run(capsys, "--base", "no-such-branch", "stacks/dev/spec.yaml")[0] == 2
    # the default HEAD spec comes from GPUPOOL_SPEC
    monkeypatch.setenv("GPUPOOL_SPEC", "stacks/dev/spec.yaml")
    assert run(capsys, "--base", "HEAD")[0] == 0


def test_base_git_ref_new_stack(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("x")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "empty")
    stack(repo / "stacks" / "new")
    monkeypatch.chdir(repo)
    code, out, _ = run(capsys, "--base", "HEAD", "stacks/new/spec.yaml")
    assert code == 0
    assert "everything in HEAD is new" in out and "+ inference onboarded" in out


def _cost_centre_tenants(n: int, quota: int, cc: str) -> dict:
    return {
        f"team-{i:04d}": {
            "name": f"team-{i:04d}",
            "tier": "standard",
            "owners": [f"g{i}"],
            "costCenter": f"{cc}-{i}",
            "gpus": {"nvidia.com/gpu.shared": quota},
        }
        for i in range(n)
    }


def _oversubscribed(path: Path) -> Path:
    """l4-shared supplies 16 gpu.shared: allow what a thousand tenants hold."""
    spec = yaml.safe_load(path.read_text())
    spec["oversubscription"] = {"perResource": {"nvidia.com/gpu.shared": 400}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_cost_centre_only_changes_collapse_to_one_row(tmp_path, capsys):
    """1,000 tenants whose cost centre (and nothing else) changes: one comment row counts them; a quota bump
    that comes with each tenant's own new cost centre groups the same way (what changed, not to what)."""
    base = _oversubscribed(stack(tmp_path / "b", tenants=_cost_centre_tenants(1000, 2, "cc")))
    head = _oversubscribed(stack(tmp_path / "h", tenants=_cost_centre_tenants(1000, 2, "cd")))
    code, md, err = run(capsys, base, head, "-o", "markdown")
    assert code == 0, err
    rows = [line for line in md.splitlines() if line.startswith("| ~ |")]
    assert rows == [
        "| ~ | cost centre changed: 1,000 tenants (team-0000, team-0001, team-0002, team-0003, team-0004, "
        "team-0005, team-0006, team-0007, team-0008, team-0009 … and 990 more) |"
    ]
    bumped = _oversubscribed(stack(tmp_path / "q", tenants=_cost_centre_tenants(1000, 3, "cd")))
    code, md, err = run(capsys, base, bumped, "-o", "markdown")
    assert code == 0, err
    rows = [line for line in md.splitlines() if line.startswith("| ~ |")]
    assert len(rows) == 1, rows[:3]
    assert rows[0].startswith("| ~ | nvidia.com/gpu.shared 2 → 3 (+1); cost centre changed: 1,000 tenants (team-0000")
    # the per-tenant values stay in the full text output
    code, text, _ = run(capsys, base, bumped)
    assert "~ team-0007: nvidia.com/gpu.shared 2 → 3 (+1); cost centre cc-7 → cd-7" in text
