"""Table-driven tests for every validation rule: a small valid spec, one mutation, the expected outcome.

Each case mutates a fresh copy of BASE (a dict), writes it as YAML and validates it. `None` expects a clean
spec (no errors, no warnings); otherwise the expected diagnostic's severity and a substring of its message.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main
from gpupool.rules.engine import validate_file
from gpupool.spec import schema
from gpupool.spec.loader import load_spec

REPO = Path(__file__).resolve().parent.parent

BASE = {
    "apiVersion": "gpupool.dev/v1alpha1",
    "kind": "GpuPlatform",
    "cluster": {"name": "dev"},
    "nodePools": [
        {
            "name": "l4-shared",
            "gpu": "L4",
            "gpusPerNode": 4,
            "nodes": ["gpu-l4-1"],
            "sharing": {"timeSlicing": {"replicas": 4}},
        },  # 16 nvidia.com/gpu.shared
        {
            "name": "a100-mig",
            "gpu": "A100-80GB",
            "gpusPerNode": 4,
            "nodes": ["gpu-a100-1"],
            "sharing": {"mig": {"preset": "all-balanced"}},
        },  # 8x 1g.10gb, 4x 2g.20gb, 4x 3g.40gb
        {"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "nodes": ["gpu-h100-1", "gpu-h100-2"]},  # 16 gpu
    ],
    "tiers": [
        {"name": "production", "priority": 1000, "isolation": "dedicated"},
        {"name": "standard", "priority": 100},
    ],
    "tenants": [
        {
            "name": "inference",
            "tier": "production",
            "owners": ["oncall"],
            "gpus": {"nvidia.com/mig-3g.40gb": 4, "nvidia.com/gpu": 8, "nvidia.com/mig-2g.20gb": 4},
        },
        {
            "name": "notebooks",
            "tier": "standard",
            "owners": ["ds"],
            "gpus": {"nvidia.com/gpu.shared": 16, "nvidia.com/mig-1g.10gb": 8, "nvidia.com/gpu": 8},
        },
    ],
}


def pool(spec, name):
    return next(p for p in spec["nodePools"] if p["name"] == name)


def tenant(spec, name):
    return next(t for t in spec["tenants"] if t["name"] == name)


def set_mig(gpu, mig, gpus_per_node=4):
    """Replace the MIG pool's model and layout; quotas for MIG resources are dropped (not under test)."""

    def mutate(s):
        p = pool(s, "a100-mig")
        p.update(gpu=gpu, gpusPerNode=gpus_per_node)
        p["sharing"] = {"mig": mig}
        for t in s["tenants"]:
            t["gpus"] = {k: v for k, v in t["gpus"].items() if not k.startswith("nvidia.com/mig-")}

    return mutate


def _validate(tmp_path: Path, spec: dict):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return validate_file(path, cwd=tmp_path)


def _run(tmp_path, mutate):
    spec = copy.deepcopy(BASE)
    mutate(spec)
    return _validate(tmp_path, spec)


def test_base_is_clean(tmp_path):
    result = _validate(tmp_path, copy.deepcopy(BASE))
    assert result.ok, [d.render() for d in result.report.diagnostics]
    assert result.report.diagnostics == []


def _do(*steps):
    def mutate(s):
        for step in steps:
            step(s)

    return mutate


# (id, mutation, expected) - expected: None (clean: no errors, no warnings), OK (no errors; warnings such as an
# idle pool allowed), or (severity, rule id, substring)
OK = "ok"
RULES = [
    # --- MIG profiles and layouts on several GPU models --------------------------------------------------
    ("mig-a100-80-layout-fits", set_mig("A100-80GB", {"layout": {"1g.10gb": 4, "3g.40gb": 1}}), OK),
    ("mig-a100-80-7-slices", set_mig("A100-80GB", {"layout": {"1g.10gb": 7}}), OK),
    (
        "mig-a100-80-too-many",
        set_mig("A100-80GB", {"layout": {"1g.10gb": 8}}),
        ("error", "GP218", "does not fit one A100-80GB"),
    ),
    (
        "mig-a100-80-two-3g-plus-1g",
        set_mig("A100-80GB", {"layout": {"3g.40gb": 2, "1g.10gb": 1}}),
        ("error", "GP218", "does not fit one A100-80GB"),
    ),
    ("mig-a100-40-profile-names", set_mig("A100-40GB", {"layout": {"3g.20gb": 2}}), OK),
    (
        "mig-a100-40-wrong-names",
        set_mig("A100-40GB", {"layout": {"3g.40gb": 2}}),
        ("error", "GP216", 'is not a MIG profile of A100-40GB (did you mean "7g.40gb"?)'),
    ),
    ("mig-h100-4g-2g-1g-fits", set_mig("H100-80GB", {"layout": {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}}), OK),
    ("mig-h100-2g-x3-1g20-fits", set_mig("H100-80GB", {"layout": {"2g.20gb": 3, "1g.20gb": 1}}), OK),
    (
        "mig-h100-4g-2g-x2-no-fit",
        set_mig("H100-80GB", {"layout": {"4g.40gb": 1, "2g.20gb": 2}}),
        ("error", "GP218", "does not fit one H100-80GB"),
    ),
    ("mig-h100-gfd-product-name", set_mig("NVIDIA-H100-80GB-HBM3", {"preset": "all-1g.10gb"}), OK),
    ("mig-h100-94-profiles", set_mig("H100-94GB", {"layout": {"3g.47gb": 2}}), OK),
    ("mig-a30-fits", set_mig("A30-24GB", {"layout": {"2g.12gb": 1, "1g.6gb": 2}}), OK),
    (
        "mig-a30-too-big",
        set_mig("A30-24GB", {"layout": {"2g.12gb": 2, "1g.6gb": 1}}),
        ("error", "GP218", "does not fit one A30-24GB"),
    ),
    (
        "mig-a30-8-slice-profile",
        set_mig("A30-24GB", {"layout": {"7g.80gb": 1}}),
        ("error", "GP216", "is not a MIG profile of A30-24GB"),
    ),
    ("mig-b200-preset", set_mig("B200-180GB", {"preset": "all-balanced"}), OK),
    (
        "whole-gpu-unknown-model",
        lambda s: pool(s, "l4-shared").update(gpu="L4X"),
        ("warning", "GP250", "not a GPU model gpupool knows (did you mean L4?)"),
    ),
    ("whole-gpu-gfd-name-ok", lambda s: pool(s, "l4-shared").update(gpu="NVIDIA-L4"), OK),
    ("whole-gpu-tesla-t4-ok", lambda s: pool(s, "l4-shared").update(gpu="Tesla-T4"), OK),
    (
        "mig-whole-gpu-model",
        set_mig("T4", {"preset": "all-balanced"}),
        ("error", "GP202", "T4 has no MIG (a whole-GPU model"),
    ),
    (
        "mig-unknown-model",
        set_mig("A100-80", {"preset": "all-balanced"}),
        ("error", "GP202", 'is not a MIG-capable GPU model gpupool knows (did you mean "A100-80GB"?)'),
    ),
    (
        "mig-ci-profile",
        set_mig("A100-80GB", {"layout": {"1c.2g.20gb": 1}}),
        ("error", "GP215", 'use the whole-instance profile "2g.20gb"'),
    ),
    ("mig-all-zero", set_mig("A100-80GB", {"layout": {"1g.10gb": 0}}), ("error", "GP217", "every count is 0")),
    ("mig-some-zero-ok", set_mig("A100-80GB", {"layout": {"1g.10gb": 0, "7g.80gb": 1}}), OK),
    (
        "mig-unknown-preset",
        set_mig("A100-80GB", {"preset": "all-3g.20gb"}),
        ("error", "GP214", "is not an NVIDIA preset for A100-80GB"),
    ),
    (
        "mig-layout-and-preset",
        set_mig("A100-80GB", {"preset": "all-balanced", "layout": {"7g.80gb": 1}}),
        ("error", "GP210", "give exactly one of `layout`"),
    ),
    (
        "mig-pergpu-ok",
        set_mig(
            "A100-80GB",
            {"perGpu": [{"gpus": [0, 1], "preset": "all-balanced"}, {"gpus": [2, 3], "layout": {"7g.80gb": 1}}]},
        ),
        OK,
    ),
    (
        "mig-pergpu-out-of-range",
        set_mig("A100-80GB", {"perGpu": [{"gpus": [4], "preset": "all-balanced"}]}),
        ("error", "GP211", "GPU index 4 does not exist on a node with 4 GPUs"),
    ),
    (
        "mig-pergpu-repeated",
        set_mig(
            "A100-80GB",
            {"perGpu": [{"gpus": [0], "preset": "all-balanced"}, {"gpus": [0, 1, 2, 3], "preset": "all-7g.80gb"}]},
        ),
        ("error", "GP212", "GPU 0 already has a layout"),
    ),
    (
        "mig-pergpu-uncovered-warns",
        set_mig("A100-80GB", {"perGpu": [{"gpus": [0, 1], "preset": "all-balanced"}]}),
        ("warning", "GP219", "have no MIG layout"),
    ),
    # --- sharing ---------------------------------------------------------------------------------------------
    (
        "replicas-1",
        lambda s: pool(s, "l4-shared")["sharing"]["timeSlicing"].update(replicas=1),
        ("error", "GP010", "must be at least 2"),
    ),
    (
        "replicas-2-ok",
        _do(
            lambda s: pool(s, "l4-shared")["sharing"]["timeSlicing"].update(replicas=2),
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu.shared": 8}),
        ),
        None,
    ),
    (
        "ts-and-mps",
        lambda s: pool(s, "l4-shared")["sharing"].update(mps={"replicas": 4}),
        ("error", "GP302", "either timeSlicing or mps, not both"),
    ),
    (
        "mps-with-mig",
        lambda s: pool(s, "a100-mig")["sharing"].update(mps={"replicas": 2}),
        ("error", "GP303", "MPS cannot share MIG instances"),
    ),
    (
        "mps-under-mixed",
        lambda s: pool(s, "l4-shared").update(sharing={"mps": {"replicas": 4}}),
        ("error", "GP304", 'MPS does not work with cluster.migStrategy "mixed"'),
    ),
    (
        "mps-under-none-ok",
        _do(
            lambda s: s["cluster"].update(migStrategy="none"),
            lambda s: s["nodePools"].pop(1),
            lambda s: pool(s, "l4-shared").update(sharing={"mps": {"replicas": 4}}),
            lambda s: [
                t["gpus"].pop(k) for t in s["tenants"] for k in list(t["gpus"]) if k.startswith("nvidia.com/mig-")
            ],
        ),
        None,
    ),
    (
        "mig-under-none",
        lambda s: s["cluster"].update(migStrategy="none"),
        ("error", "GP301", 'MIG pools need cluster.migStrategy "mixed"'),
    ),
    (
        "mig-plus-ts-renames",
        _do(lambda s: pool(s, "a100-mig")["sharing"].update(timeSlicing={"replicas": 2})),
        ("error", "GP503", 'advertised as "nvidia.com/mig-3g.40gb.shared"'),
    ),
    # --- nodes -----------------------------------------------------------------------------------------------
    ("no-nodes", lambda s: pool(s, "h100").pop("nodes"), ("error", "GP203", "the pool selects no nodes")),
    (
        "nodecount-below-nodes",
        lambda s: pool(s, "h100").update(nodeCount=1),
        ("error", "GP205", "nodeCount 1 is less than the 2 nodes"),
    ),
    ("nodecount-above-nodes-ok", lambda s: pool(s, "h100").update(nodeCount=3), None),
    (
        "selector-without-count",
        lambda s: pool(s, "h100").update(nodes=[], nodeSelector={"pool": "h100"}),
        ("error", "GP204", "`nodeCount` is required"),
    ),
    (
        "selector-with-count-ok",
        lambda s: pool(s, "h100").update(nodes=[], nodeSelector={"pool": "h100"}, nodeCount=2),
        None,
    ),
    (
        "node-twice",
        lambda s: pool(s, "h100")["nodes"].append("gpu-h100-1"),
        ("error", "GP206", "is listed twice in this pool"),
    ),
    (
        "node-in-two-pools",
        lambda s: pool(s, "h100")["nodes"].append("gpu-l4-1"),
        ("error", "GP207", 'is already in pool "l4-shared"'),
    ),
    # --- names and duplicates --------------------------------------------------------------------------------
    (
        "dup-pool",
        lambda s: s["nodePools"].append(copy.deepcopy(pool(s, "h100")) | {"nodes": ["x"]}),
        ("error", "GP201", "duplicate node pool name"),
    ),
    (
        "dup-tier",
        lambda s: s["tiers"].append({"name": "standard", "priority": 5}),
        ("error", "GP402", "duplicate tier name"),
    ),
    (
        "same-priority-warns",
        lambda s: s["tiers"].append({"name": "other", "priority": 100}),
        ("warning", "GP403", 'same priority as tier "standard"'),
    ),
    (
        "dup-tenant",
        lambda s: s["tenants"].append({"name": "notebooks", "tier": "standard", "owners": ["x"]}),
        ("error", "GP501", "duplicate tenant name"),
    ),
    (
        "system-tier",
        lambda s: s["tiers"].append({"name": "system-x", "priority": 5}),
        ("error", "GP401", 'starts with "system-"'),
    ),
    (
        "unknown-tier",
        lambda s: tenant(s, "notebooks").update(tier="gold"),
        ("error", "GP502", "unknown tier; defined tiers: production, standard"),
    ),
    (
        "tenant-name-upper",
        lambda s: tenant(s, "notebooks").update(name="Notebooks"),
        ("error", "GP010", "must be a DNS-1123 label"),
    ),
    (
        "tenant-name-64",
        lambda s: tenant(s, "notebooks").update(name="a" * 64),
        ("error", "GP010", "at most 63 characters"),
    ),
    ("tenant-name-63-ok", lambda s: tenant(s, "notebooks").update(name="a" * 63), None),
    (
        "label-value-bad",
        lambda s: tenant(s, "notebooks").update(costCenter="cc_"),
        ("error", "GP010", "valid Kubernetes label value"),
    ),
    ("label-value-ok", lambda s: tenant(s, "notebooks").update(costCenter="CC.22_00-x"), None),
    (
        "label-key-bad",
        lambda s: tenant(s, "notebooks").update(labels={"a/b/c": "x"}),
        ("error", "GP010", "valid Kubernetes label key"),
    ),
    ("label-key-prefixed-ok", lambda s: tenant(s, "notebooks").update(labels={"example.com/team": "ds"}), None),
    # --- quota names ------------------------------------------------------------------------------------------
    (
        "unadvertised",
        lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/mig-7g.80gb": 1}),
        ("error", "GP503", "no node pool advertises nvidia.com/mig-7g.80gb"),
    ),
    (
        "plus-me-hint",
        _do(
            set_mig("A100-80GB", {"layout": {"1g.10gb+me": 1, "3g.40gb": 1}}),
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/mig-1g.10gb+me": 1}),
        ),
        ("error", "GP503", 'the device plugin writes "+" as "."'),
    ),
    (
        "plus-me-dot-ok",
        _do(
            set_mig("A100-80GB", {"layout": {"1g.10gb+me": 1, "3g.40gb": 1}}),
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/mig-1g.10gb.me": 4}),
        ),
        OK,
    ),
    (
        "capacity-whole-gpus-over",
        lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu": 24}),
        ("error", "GP601", "tenants are granted 32 nvidia.com/gpu"),
    ),
    (
        "no-rename-hint",
        _do(
            lambda s: s["nodePools"].pop(2),
            lambda s: pool(s, "l4-shared")["sharing"]["timeSlicing"].update(renameToShared=False),
        ),
        ("error", "GP503", 'no pool renames it to .shared; request "nvidia.com/gpu"'),
    ),
    (
        "shared-rename-hint",
        _do(
            lambda s: s["nodePools"].pop(2),
            lambda s: [t["gpus"].pop("nvidia.com/gpu") for t in s["tenants"]],
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu": 1}),
        ),
        ("error", "GP503", 'advertised as "nvidia.com/gpu.shared"'),
    ),
    # --- tier isolation ---------------------------------------------------------------------------------------
    (
        "dedicated-time-sliced",
        _do(
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu.shared": 12}),
            lambda s: tenant(s, "inference")["gpus"].update({"nvidia.com/gpu.shared": 4}),
        ),
        ("error", "GP504", 'tier "production" requires dedicated GPUs'),
    ),
    ("dedicated-mig-ok", lambda s: None, None),
    (
        "shared-tier-time-sliced-ok",
        lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu.shared": 16}),
        None,
    ),
    # --- capacity ----------------------------------------------------------------------------------------------
    ("capacity-exact", lambda s: None, None),
    (
        "capacity-one-over",
        lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu": 9}),
        (
            "error",
            "GP601",
            "tenants are granted 17 nvidia.com/gpu in total (notebooks 9, inference 8) but the pools supply 16",
        ),
    ),
    (
        "capacity-over-mig",
        lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/mig-1g.10gb": 9}),
        ("error", "GP601", "1 too many"),
    ),
    (
        "capacity-ratio-lets-it-pass",
        _do(
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu.shared": 24}),
            lambda s: s.update(oversubscription={"perResource": {"nvidia.com/gpu.shared": 1.5}}),
        ),
        None,
    ),
    (
        "capacity-ratio-one-over",
        _do(
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu.shared": 25}),
            lambda s: s.update(oversubscription={"perResource": {"nvidia.com/gpu.shared": 1.5}}),
        ),
        ("error", "GP601", "oversubscription allows 1.5x: 1 too many"),
    ),
    (
        "capacity-max-ratio",
        _do(
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu": 24}),
            lambda s: s.update(oversubscription={"maxRatio": 2}),
        ),
        None,
    ),
    (
        "capacity-ratio-0.7-exact",
        _do(
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu.shared": 11}),
            lambda s: s.update(oversubscription={"perResource": {"nvidia.com/gpu.shared": 0.7}}),
        ),
        None,
    ),
    (
        "capacity-ratio-0.7-over",
        _do(
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu.shared": 12}),
            lambda s: s.update(oversubscription={"perResource": {"nvidia.com/gpu.shared": 0.7}}),
        ),
        ("error", "GP601", "1 too many"),
    ),
    (
        "capacity-offboarded-not-counted",
        lambda s: s["tenants"].append(
            {"name": "old", "tier": "standard", "owners": ["x"], "offboarded": True, "gpus": {"nvidia.com/gpu": 16}}
        ),
        None,
    ),
    (
        "capacity-active-counted",
        lambda s: s["tenants"].append(
            {"name": "new", "tier": "standard", "owners": ["x"], "gpus": {"nvidia.com/gpu": 1}}
        ),
        ("error", "GP601", "1 too many"),
    ),
    (
        "capacity-nodecount",
        _do(
            lambda s: pool(s, "h100").update(nodeCount=3),
            lambda s: tenant(s, "notebooks")["gpus"].update({"nvidia.com/gpu": 16}),
        ),
        None,
    ),
    (
        "oversub-unknown-resource-warns",
        lambda s: s.update(oversubscription={"perResource": {"nvidia.com/tpu": 2}}),
        ("warning", "GP602", "no pool advertises nvidia.com/tpu"),
    ),
    # --- tenants ----------------------------------------------------------------------------------------------
    (
        "request-above-limit",
        lambda s: tenant(s, "notebooks").update(
            containerDefaults={"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}
        ),
        ("error", "GP506", "default memory request 2Gi is above the default memory limit 1Gi"),
    ),
    (
        "request-equals-limit-ok",
        lambda s: tenant(s, "notebooks").update(
            containerDefaults={"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1024Mi"}}
        ),
        None,
    ),
    (
        # Only the limit named: gpupool's default request (256Mi) follows it down instead of failing GP506.
        "default-limit-below-the-default-request-ok",
        lambda s: tenant(s, "notebooks").update(containerDefaults={"limits": {"memory": "128Mi"}}),
        None,
    ),
    (
        "bad-quantity",
        lambda s: tenant(s, "notebooks").update(compute={"cpu": "1 core"}),
        ("error", "GP010", "must be a Kubernetes quantity"),
    ),
    ("no-owners-warns", lambda s: tenant(s, "notebooks").pop("owners"), ("warning", "GP507", "no owners")),
    (
        "no-quota-warns",
        lambda s: s["tenants"].append({"name": "empty", "tier": "standard", "owners": ["x"]}),
        ("warning", "GP508", "no GPU quota"),
    ),
    (
        "idle-pool-warns",
        lambda s: tenant(s, "notebooks")["gpus"].pop("nvidia.com/gpu.shared"),
        ("warning", "GP603", "would sit idle"),
    ),
    # --- cluster ------------------------------------------------------------------------------------------------
    (
        "chart-path-missing",
        lambda s: s["cluster"].update(gpuOperator={"chartPath": "charts/x"}),
        ("error", "GP101", "does not exist (relative to"),
    ),
    (
        "managed-value-refused",
        lambda s: s["cluster"].update(gpuOperator={"values": {"mig": {"strategy": "single"}}}),
        ("error", "GP808", "mig.strategy is derived by gpupool; set cluster.migStrategy instead"),
    ),
    ("apiversion", lambda s: s.update(apiVersion="v1"), ("error", "GP010", 'expected "gpupool.dev/v1alpha1"')),
    (
        "unknown-key",
        lambda s: s["cluster"].update(migstrategy="mixed"),
        (
            "error",
            "GP010",
            'unknown key (did you mean "migStrategy"?); valid keys here: draDriver, gpuOperator, migStrategy, name',
        ),
    ),
]


@pytest.mark.parametrize("mutate,expected", [pytest.param(m, e, id=i) for i, m, e in RULES])
def test_rule(tmp_path, mutate, expected):
    result = _run(tmp_path, mutate)
    rendered = [d.render() for d in result.report.sorted()]
    if expected is None:
        assert result.ok and not result.report.diagnostics, rendered
        return
    if expected == OK:
        assert result.ok, rendered
        return
    severity, rule_id, text = expected
    hits = [d for d in result.report.diagnostics if d.severity == severity and text in d.message]
    assert hits, f"expected {severity} {rule_id}: {text}\ngot: {rendered}"
    assert {d.rule for d in hits} == {rule_id}, rendered
    for d in hits:  # located in the spec, at a real position
        assert d.location.file == "spec.yaml" and d.location.line >= 1 and d.location.column >= 1
    assert result.ok == (severity == "warning" and not result.report.errors)


def test_chart_path_exists_is_relative_to_spec(tmp_path):
    (tmp_path / "charts" / "gpu-operator").mkdir(parents=True)
    spec = copy.deepcopy(BASE)
    spec["cluster"]["gpuOperator"] = {"chartPath": "charts/gpu-operator"}
    assert _validate(tmp_path, spec).ok


def test_tenant_files_and_inline_tenants_combine(tmp_path):
    spec = copy.deepcopy(BASE)
    extra = spec["tenants"].pop()
    spec["tenantFiles"] = ["tenants/*.yaml"]
    (tmp_path / "tenants").mkdir()
    (tmp_path / "tenants" / "notebooks.yaml").write_text(yaml.safe_dump(extra))
    result = _validate(tmp_path, spec)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    assert {t.name for t in result.spec.tenants} == {"inference", "notebooks"}
    assert result.spec.tenants[1].source_file == "tenants/notebooks.yaml"


def test_merge_keys_are_honoured(tmp_path):
    """`<<: *first` copies the keys a mapping does not set itself (YAML merge keys)."""
    text = yaml.safe_dump(BASE, sort_keys=False)
    text = text.replace(
        "- name: inference\n  tier: production\n  owners:\n  - oncall\n",
        "- &first\n  name: inference\n  tier: production\n  owners:\n  - oncall\n",
    )
    text = text.replace(
        "- name: notebooks\n  tier: standard\n  owners:\n  - ds\n",
        "- <<: *first\n  name: notebooks\n  tier: standard\n",
    )
    (tmp_path / "spec.yaml").write_text(text)
    result = validate_file(tmp_path / "spec.yaml", cwd=tmp_path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    assert result.spec.tenants[1].owners == ("oncall",)


@pytest.mark.parametrize("strict,status", [(False, 0), (True, 1)])
def test_warnings_exit_0_unless_strict(tmp_path, capsys, strict, status):
    spec = copy.deepcopy(BASE)
    tenant(spec, "notebooks").pop("owners")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["validate", *(["--strict"] if strict else []), str(path)]) == status
    err = capsys.readouterr().err
    assert ": warning: " in err and "no owners" in err


def test_errors_exit_1_and_all_are_reported(tmp_path, capsys):
    spec = copy.deepcopy(BASE)
    spec["cluster"]["migStrategy"] = "single"
    tenant(spec, "notebooks")["tier"] = "gold"
    pool(spec, "h100")["nodes"].append("gpu-h100-1")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "cluster.migStrategy: must be one of: mixed, none" in err and "listed twice" in err
    assert "tenants[notebooks].tier: unknown tier; defined tiers:" in err
    assert '"single"' not in err and "gold" not in err  # refused values are located, never quoted back


@pytest.mark.parametrize("spec", ["stacks/dev/spec.yaml", "stacks/prod/spec.yaml"])
def test_example_stacks_are_valid(spec):
    result = validate_file(REPO / spec, cwd=REPO)
    assert result.ok, [d.render() for d in result.report.diagnostics]


@functools.lru_cache(maxsize=1)
def _reference_validator():
    return schema._jsonschema_validator()


def _corpus():
    corpus = REPO / "tests" / "bad_specs"
    return (
        sorted(corpus.glob("*.yaml"))
        + sorted(corpus.glob("*/spec.yaml"))
        + [REPO / "stacks/dev/spec.yaml", REPO / "stacks/prod/spec.yaml"]
    )


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.parent.name if p.name == "spec.yaml" else p.stem)
def test_schema_errors_match_jsonschema(path):
    """jsonschema-rs (used for speed) yields, once humanized, exactly what the jsonschema reference yields."""
    loaded = load_spec(path, cwd=path.parent)
    if not isinstance(loaded.data, dict):
        return
    reference = _reference_validator()
    got = sorted({h for e in schema._rs_errors(loaded.data) for h in schema._humanize(e)})
    want = sorted({h for e in reference.iter_errors(loaded.data) for h in schema._humanize(e)})
    assert got == want


def test_text_that_is_not_utf8_falls_back_to_the_reference():
    """A lone surrogate cannot cross into Rust (libyaml refuses "\\ud800", PyYAML's pure-Python parser, the
    loader's fallback, does not); such data is still judged, by the reference validator."""
    data = copy.deepcopy(BASE)
    data["cluster"]["name"] = "\ud800dev"
    errors = list(schema._errors(data))
    assert errors == [
        (
            ("cluster", "name"),
            False,
            "must be a DNS-1123 label: lowercase letters, "
            "digits and '-', starting and ending with a letter or digit, at most 63 characters",
            "GP010",
        )
    ]


def test_tenant_files_named_twice_or_through_a_symlink_load_once(tmp_path):
    """The directory fast path (one resolve per directory) still sees a file named by two entries, and a
    symlink to a file already read, as one file."""
    spec = copy.deepcopy(BASE)
    notebooks = spec["tenants"].pop()
    spec["tenantFiles"] = ["tenants/", "tenants/*.yaml", "more/"]
    (tmp_path / "tenants").mkdir()
    (tmp_path / "more").mkdir()
    (tmp_path / "tenants" / "notebooks.yaml").write_text(yaml.safe_dump(notebooks))
    (tmp_path / "more" / "link.yaml").symlink_to(tmp_path / "tenants" / "notebooks.yaml")
    result = _validate(tmp_path, spec)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    assert [t.source_file for t in result.spec.tenants] == ["spec.yaml", "tenants/notebooks.yaml"]
