"""Tenant shards: the assignment (jump consistent hash), the stacks of a sharded platform, the two-pass
order a move needs, and what the program registers per stack (under Pulumi's mocks)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from components.program import PLATFORM_NAME
from gpupool.analysis import shard_moves
from gpupool.model import sharding
from tests.pulumi_mocks import run_program

ROOT = Path(__file__).resolve().parent.parent
NAMES = [f"team-{i:04d}" for i in range(2000)]
TENANT_NAMES = ["inference", "notebooks", "research"]  # the dev stack's


def test_jump_hash_matches_the_papers_reference_loop():
    """An independent transcription of the paper's C code (64-bit wrap, double division) agrees."""

    def reference(key: int, n: int) -> int:
        b, j = -1, 0
        while j < n:
            b = j
            key = (key * 2862933555777941757 + 1) % 2**64
            j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
        return b

    for key in (0, 1, 2**63 + 5, 123456789123456789, 2**64 - 1):
        for n in (1, 2, 3, 10, 97, 1000):
            assert sharding.jump_hash(key, n) == reference(key, n)


def test_every_tenant_lands_in_range_and_the_shards_are_balanced():
    for n in (1, 3, 10):
        counts = Counter(sharding.shard_of(t, n) for t in NAMES)
        assert set(counts) == set(range(n))
        mean = len(NAMES) / n
        assert max(counts.values()) < mean * 1.25 and min(counts.values()) > mean * 0.75, counts


def test_raising_the_count_by_one_moves_only_what_the_new_shard_takes():
    for n in (1, 2, 5, 10):
        before = {t: sharding.shard_of(t, n) for t in NAMES}
        after = {t: sharding.shard_of(t, n + 1) for t in NAMES}
        moved = [t for t in NAMES if before[t] != after[t]]
        assert all(after[t] == n for t in moved), "a tenant moved between two old shards"
        assert abs(len(moved) / len(NAMES) - 1 / (n + 1)) < 0.05


def test_the_assignment_depends_on_the_name_alone():
    assert sharding.shard_of("alpha", 7) == sharding.shard_of("alpha", 7)
    alone = sharding.held_by(sharding.Role(False, 3), ["alpha"], 7)
    among = sharding.held_by(sharding.Role(False, 3), NAMES + ["alpha"], 7)
    assert ("alpha" in alone) == ("alpha" in among)


@pytest.mark.parametrize(
    "value", ["tenants-", "tenants-x", "tenants-01", "platform", "tenants--1", "t-1", "tenants-99999"]
)
def test_bad_shard_values_are_refused(value):
    with pytest.raises(ValueError):
        sharding.parse_role(value)


def test_roles():
    assert sharding.parse_role("") == sharding.Role(True, None)
    assert sharding.parse_role("tenants-12") == sharding.Role(False, 12)
    tenants = ["a", "b", "c"]
    assert sharding.held_by(sharding.Role(True, None), tenants, 0) == tenants
    assert sharding.held_by(sharding.Role(True, None), tenants, 4) == []
    assert sharding.held_by(sharding.Role(False, 1), tenants, 0) == []  # a left-over shard releases
    assert sharding.held_by(sharding.Role(False, 9), tenants, 4) == []  # beyond the count: releases
    assert sorted(sum((sharding.held_by(sharding.Role(False, k), tenants, 4) for k in range(4)), [])) == tenants


# -- the stacks and the passes ----------------------------------------------------------------------


def _export(stack: str, tenants, pending=()) -> dict:
    def res(t):
        return {
            "urn": f"urn:pulumi:{stack}::gpupool::gpupool:tenancy:Tenant::tenant-{t}",
            "type": "gpupool:tenancy:Tenant",
        }

    child = {
        "urn": f"urn:pulumi:{stack}::gpupool::gpupool:tenancy:Tenant$kubernetes:core/v1:Namespace::x",
        "type": "kubernetes:core/v1:Namespace",
    }
    return {
        "deployment": {
            "resources": [res(t) for t in tenants] + [child],
            "pending_operations": [{"resource": res(t), "type": "creating"} for t in pending],
        }
    }


def test_held_tenants_come_from_the_state_pending_creates_included():
    assert shard_moves.held_in_state(_export("s", ["a", "b"], pending=["c"])) == {"a", "b", "c"}
    assert shard_moves.held_in_state({}) == set()


def test_held_tenants_under_a_gpu_platform_are_named_after_it():
    """GpuPlatform NAME holds Tenant components NAME-tenant-<t> (a tenant may itself be named like a
    platform's prefix: only the parent's name decides what is stripped)."""
    platform = "urn:pulumi:s::gpupool::gpupool:index:GpuPlatform::gpu-tenant"
    resources = [
        {"urn": platform, "type": "gpupool:index:GpuPlatform"},
        {
            "urn": "urn:pulumi:s::gpupool::gpupool:index:GpuPlatform$gpupool:tenancy:Tenant::gpu-tenant-tenant-a",
            "type": "gpupool:tenancy:Tenant",
            "parent": platform,
        },
        {  # 0.1's layout, at the stack's root
            "urn": "urn:pulumi:s::gpupool::gpupool:tenancy:Tenant::tenant-b",
            "type": "gpupool:tenancy:Tenant",
            "parent": "urn:pulumi:s::gpupool::pulumi:pulumi:Stack::gpupool-s",
        },
    ]
    assert shard_moves.held_in_state({"deployment": {"resources": resources}}) == {"a", "b"}


def test_switching_sharding_on_releases_from_the_platform_stack_first():
    tenants = [f"t{i}" for i in range(20)]
    runs = shard_moves.stack_runs("dev", tenants, 3, {"dev": _export("dev", tenants)})
    by = {r.stack: r for r in runs}
    assert [r.stack for r in runs] == ["dev", "dev.tenants-0", "dev.tenants-1", "dev.tenants-2"]
    assert by["dev"].release_first and by["dev"].keep == () and set(by["dev"].leaving) == set(tenants)
    assert not any(by[f"dev.tenants-{k}"].release_first for k in range(3))
    assert sorted(sum((list(by[f"dev.tenants-{k}"].arriving) for k in range(3)), [])) == sorted(tenants)


def test_a_count_change_releases_only_the_movers_and_keeps_the_rest():
    tenants = [f"t{i}" for i in range(60)]
    states = {
        sharding.shard_stack("dev", k): _export(sharding.shard_stack("dev", k), names)
        for k, names in sharding.assignment(tenants, 3).items()
    }
    states["dev"] = _export("dev", [])
    runs = shard_moves.stack_runs("dev", tenants, 4, states)
    movers = {t for t in tenants if sharding.shard_of(t, 3) != sharding.shard_of(t, 4)}
    assert movers and all(sharding.shard_of(t, 4) == 3 for t in movers)
    leaving = {t for r in runs for t in r.leaving}
    assert leaving == movers
    new = next(r for r in runs if r.stack == "dev.tenants-3")
    assert not new.exists and set(new.arriving) == movers and not new.release_first
    for r in runs:
        assert set(r.keep) == set(r.assigned) & set(r.held)


def test_a_removed_tenant_is_no_move_and_a_left_over_shard_releases():
    runs = shard_moves.stack_runs(
        "dev", ["a"], 1, {"dev.tenants-0": _export("x", ["a", "gone"]), "dev.tenants-5": _export("y", ["a"])}
    )
    by = {r.stack: r for r in runs}
    assert by["dev.tenants-0"].leaving == ()  # "gone" left the spec: the ordinary run deletes it
    assert by["dev.tenants-5"].assigned == () and by["dev.tenants-5"].leaving == ("a",)
    assert shard_moves.shard_number("dev", "dev.tenants-5") == 5
    assert shard_moves.shard_number("dev", "dev.tenants-05") is None
    assert shard_moves.shard_number("dev", "devx.tenants-5") is None


# -- the CLI -----------------------------------------------------------------------------------------


def _sharded_spec(tmp_path: Path, shards: int) -> Path:
    stack = tmp_path / "stack"
    subprocess.run(["cp", "-r", str(ROOT / "stacks" / "dev"), str(stack)], check=True)
    spec = stack / "spec.yaml"
    spec.write_text(spec.read_text().replace("tenantFiles:", f"sharding:\n  tenantShards: {shards}\n\ntenantFiles:"))
    return spec


def _gpupool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpupool", *args], capture_output=True, text=True)


def test_shards_json_lists_every_stack_and_the_passes(tmp_path):
    spec = _sharded_spec(tmp_path, 3)
    states = tmp_path / "states"
    states.mkdir()
    (states / "dev.json").write_text(json.dumps(_export("dev", ["inference", "notebooks", "research"])))
    out = _gpupool("shards", str(spec), "--platform-stack", "dev", "--states", str(states), "-o", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tenantShards"] == 3 and doc["moves"] is True
    assert [s["stack"] for s in doc["stacks"]] == ["dev"] + [f"dev.tenants-{k}" for k in range(3)]
    assert doc["stacks"][0]["releaseFirst"] and doc["stacks"][0]["keep"] == []
    shard_tenants = sorted(t for s in doc["stacks"][1:] for t in s["tenants"])
    assert shard_tenants == ["inference", "notebooks", "research"]
    text = _gpupool("shards", str(spec), "--platform-stack", "dev", "--states", str(states))
    assert text.returncode == 0 and "release theirs first" in text.stdout and "dev: releases" in text.stdout


def test_shards_of_an_unsharded_spec():
    out = _gpupool("shards", str(ROOT / "stacks" / "dev" / "spec.yaml"), "--platform-stack", "dev")
    assert out.returncode == 0 and "Not sharded" in out.stdout


def test_a_bad_shard_count_is_a_spec_error(tmp_path):
    spec = _sharded_spec(tmp_path, 0)
    out = _gpupool("validate", str(spec))
    assert out.returncode == 1 and "sharding.tenantShards" in out.stdout + out.stderr


# -- the program -------------------------------------------------------------------------------------


def _registered_tenants(mocks) -> list[str]:
    prefix = f"{PLATFORM_NAME}-tenant-"
    return sorted(a.name.removeprefix(prefix) for a in mocks.created if a.typ == "gpupool:tenancy:Tenant")


def test_each_stack_registers_its_part(tmp_path, monkeypatch):
    spec = _sharded_spec(tmp_path, 3)
    monkeypatch.chdir(tmp_path)
    platform, _, error = run_program({"spec": str(spec)}, stack="dev")
    assert error is None, error
    assert _registered_tenants(platform) == []
    assert {"gpupool:gpu:GpuOperator", "gpupool:tenancy:PriorityTiers"} <= {a.typ for a in platform.created}
    seen: list[str] = []
    for k in range(3):
        mocks, _, error = run_program({"spec": str(spec), "shard": f"tenants-{k}"}, stack=f"dev.tenants-{k}")
        assert error is None, error
        components = {a.typ for a in mocks.created if a.typ.startswith("gpupool:")}
        # no operator, pools, tiers, ConfigMaps: the platform component and its tenants
        assert components <= {"gpupool:index:GpuPlatform", "gpupool:tenancy:Tenant"}, components
        assert _registered_tenants(mocks) == sorted(
            sharding.held_by(sharding.Role(False, k), ["inference", "notebooks", "research"], 3)
        )
        seen += _registered_tenants(mocks)
    assert sorted(seen) == ["inference", "notebooks", "research"]


def test_the_release_pass_keeps_only_the_named_tenants(tmp_path, monkeypatch):
    spec = _sharded_spec(tmp_path, 1)
    monkeypatch.chdir(tmp_path)
    # What gpupool stacks sets for a release pass (shard_moves.keep_config, the writer beside its reader).
    ((key, value),) = shard_moves.keep_config(("research",)).items()
    setting = key.split(":", 1)[1]
    mocks, _, error = run_program({"spec": str(spec), "shard": "tenants-0", setting: value}, stack="dev.tenants-0")
    assert error is None, error
    assert _registered_tenants(mocks) == ["research"]
    mocks, _, error = run_program(
        {"spec": str(spec), "shard": "tenants-0", setting: "{not json"}, stack="dev.tenants-0"
    )
    assert error is not None and shard_moves.KEEP_KEY in str(error) and _registered_tenants(mocks) == []


def test_a_bad_shard_value_registers_nothing(tmp_path, monkeypatch):
    spec = _sharded_spec(tmp_path, 2)
    monkeypatch.chdir(tmp_path)
    mocks, _, error = run_program({"spec": str(spec), "shard": "tenants-x"}, stack="dev.x")
    assert error is not None and "gpupool:shard" in str(error)
    assert [a for a in mocks.created if a.custom] == []


# -- gpupool diff ------------------------------------------------------------------------------------


def _two_sides(tmp_path: Path, before: int | None, after: int | None) -> tuple[Path, Path]:
    sides = []
    for name, shards in (("base", before), ("head", after)):
        stack = tmp_path / name
        shutil.copytree(ROOT / "stacks" / "dev", stack)
        if shards is not None:
            spec = stack / "spec.yaml"
            spec.write_text(
                spec.read_text().replace("tenantFiles:", f"sharding:\n  tenantShards: {shards}\n\ntenantFiles:")
            )
        sides.append(stack / "spec.yaml")
    return sides[0], sides[1]


def _diff_json(base: Path, head: Path) -> dict:
    out = _gpupool("diff", str(base), str(head), "-o", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_diff_names_every_tenant_a_count_change_moves(tmp_path):
    base, head = _two_sides(tmp_path, 1, 4)
    doc = _diff_json(base, head)
    expected = {t: (f"tenants-{sharding.shard_of(t, 1)}", f"tenants-{sharding.shard_of(t, 4)}") for t in TENANT_NAMES}
    moved = {t: ab for t, ab in expected.items() if ab[0] != ab[1]}
    assert {mv["tenant"]: (mv["before"], mv["after"]) for mv in doc["stackMoves"]} == moved
    assert doc["tenantShards"] == {"before": 1, "after": 4}
    assert doc["summary"]["tenantsMovingStack"] == len(moved) and not doc["empty"]
    text = _gpupool("diff", str(base), str(head))
    assert moved and "Pulumi stacks (sharding)" in text.stdout and "two passes" in text.stdout


def test_diff_of_switching_sharding_on_moves_every_tenant_off_the_platform_stack(tmp_path):
    doc = _diff_json(*_two_sides(tmp_path, None, 3))
    assert sorted(mv["tenant"] for mv in doc["stackMoves"]) == sorted(TENANT_NAMES)
    assert {mv["before"] for mv in doc["stackMoves"]} == {"platform"}
    exit_code = _gpupool("diff", *map(str, _two_sides(tmp_path / "x", None, 3)), "--exit-code").returncode
    assert exit_code == 3  # a change, though no object changes


def test_diff_of_an_onboarding_names_the_stack_that_creates_it(tmp_path):
    base, head = _two_sides(tmp_path, 3, 3)
    new = head.parent / "tenants" / "vision.yaml"
    research = (head.parent / "tenants" / "research.yaml").read_text()
    new.write_text(
        research.replace("research", "vision").replace("nvidia.com/gpu.shared: 8", "nvidia.com/gpu.shared: 1")
    )
    doc = _diff_json(base, head)
    added = [t for t in doc["tenants"] if t["kind"] == "added"]
    assert [t["name"] for t in added] == ["vision"]
    assert added[0]["stack"] == f"tenants-{sharding.shard_of('vision', 3)}"
    assert doc["stackMoves"] == []
    unsharded = _diff_json(*_two_sides(tmp_path / "y", None, None))
    assert unsharded["stackMoves"] == [] and unsharded["empty"]


def test_which_stacks_a_run_takes_and_in_which_pass():
    tenants = [f"t{i}" for i in range(12)]
    states = {"dev": _export("dev", tenants), "dev.tenants-6": _export("dev.tenants-6", [])}
    runs = {r.stack: r for r in shard_moves.stack_runs("dev", tenants, 2, states)}
    platform = runs["dev"]
    assert platform.needed and platform.release_first and not platform.apply_pass  # release did all of it
    for k in (0, 1):
        shard = runs[f"dev.tenants-{k}"]
        assert shard.needed == bool(shard.assigned) and shard.apply_pass == shard.needed
    leftover = runs["dev.tenants-6"]
    assert leftover.needed and leftover.apply_pass and not leftover.assigned  # exists: it runs and holds none
    empty = shard_moves.stack_runs("dev", ["only"], 3, {})
    assert [r.stack for r in empty if not r.needed] == [
        f"dev.tenants-{k}" for k in range(3) if k != sharding.shard_of("only", 3)
    ]
    doc = shard_moves.as_json("dev", 2, list(runs.values()))
    assert doc["sharded"] and all({"run", "applyPass"} <= set(s) for s in doc["stacks"])
    assert not shard_moves.as_json("dev", 0, shard_moves.stack_runs("dev", tenants, 0, {}))["sharded"]


def test_holder_is_the_one_rule_for_where_a_tenant_lives():
    for shards in (0, 1, 4):
        for t in NAMES[:200]:
            role = sharding.holder(t, shards)
            assert t in sharding.held_by(role, [t], shards)
            others = [sharding.PLATFORM_ROLE] + [sharding.Role(False, k) for k in range(shards + 2)]
            assert [r for r in others if sharding.held_by(r, [t], shards)] == [role]


def test_role_of_names_the_platform_stack_its_shards_and_nothing_else():
    assert shard_moves.role_of("dev", "dev") == sharding.PLATFORM_ROLE
    assert shard_moves.role_of("dev", "dev.tenants-12") == sharding.Role(platform=False, shard=12)
    for other in ("prod", "dev.tenants-x", "dev.tenants-012", "dev.tenants-", "devtenants-1"):
        assert shard_moves.role_of("dev", other) is None, other
