"""A stack's inputs fingerprint (gpupool/deploy/stack_inputs.py): it moves exactly when what that stack
registers moves. On the dev stack's spec split into two tenant shards (inference alone in tenants-0;
notebooks and research in tenants-1): a tenant's edit moves its shard only, an input every tenant object of a
tier or of the platform reads moves every shard that holds such a tenant, and the config (-c values, a
secret) counts, without the secret in clear."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pulumi")

from gpupool.deploy import stack_inputs  # noqa: E402
from gpupool.model import sharding  # noqa: E402
from gpupool.rules.engine import load_valid_spec  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SPEC = "dev/spec.yaml"
PLATFORM, SHARD0, SHARD1 = sharding.PLATFORM_ROLE, sharding.Role(False, 0), sharding.Role(False, 1)
ROLES = {"dev": PLATFORM, "dev.tenants-0": SHARD0, "dev.tenants-1": SHARD1}
CONFIG = {"gpupool:spec": (SPEC, False), "gpupool:skipAwait": ("true", False)}


@pytest.fixture
def project(tmp_path) -> Path:
    d = tmp_path / "project"
    d.mkdir()
    (d / "Pulumi.yaml").write_text("name: p\nruntime: python\n")
    (d / "__main__.py").write_text("from gpupool.pulumi.program import main\n\nmain()\n")
    shutil.copytree(REPO / "stacks" / "dev", d / "dev")
    spec = d / SPEC
    spec.write_text(spec.read_text().replace("tenantFiles:", "sharding:\n  tenantShards: 2\n\ntenantFiles:"))
    held = sharding.assignment(["inference", "notebooks", "research"], 2)
    assert held == {0: ["inference"], 1: ["notebooks", "research"]}, held  # what the cases below rely on
    return d


def fingerprints(project: Path, config=CONFIG, version: str = "0.1.0") -> dict[str, str]:
    inputs = stack_inputs.StackInputs(load_valid_spec(project / SPEC), project, version)
    out = {}
    for stack, role in ROLES.items():
        shard = "" if role.platform else sharding.shard_role(role.shard)
        stack_config = config if role.platform else stack_inputs.shard_config(config, (shard, False))
        out[stack] = inputs.of_stack(role, stack_config)
    return out


def changed(project: Path, path: str, old: str, new: str) -> set[str]:
    """The stacks whose fingerprint moves when PATH's OLD text becomes NEW."""
    before = fingerprints(project)
    f = project / path
    text = f.read_text()
    assert old in text, (old, path)
    f.write_text(text.replace(old, new, 1))
    after = fingerprints(project)
    return {s for s in ROLES if before[s] != after[s]}


def test_the_same_inputs_give_the_same_fingerprints_and_every_stack_its_own(project):
    first = fingerprints(project)
    assert fingerprints(project) == first
    assert len(set(first.values())) == 3 and all(f.startswith("sha256:") and len(f) == 71 for f in first.values())


def test_a_tenant_s_edit_moves_its_shard_only(project):
    assert changed(project, "dev/tenants/research.yaml", "research-students", "research-interns") == {"dev.tenants-1"}
    assert changed(project, "dev/tenants/inference.yaml", "cc-4100", "cc-4101") == {"dev.tenants-0"}


def test_a_grant_moves_its_shard_only_since_a_sharded_platform_stack_exports_no_sum_of_grants(project):
    """Issue 40: a granted tenant's onboarding runs one stack. The figures that sum every tenant's grants
    (granted, headroom) are not the sharded platform stack's outputs; capacity and allowed still are."""
    assert changed(project, "dev/tenants/research.yaml", "gpu.shared: 8", "gpu.shared: 4") == {"dev.tenants-1"}
    new = "name: vision\ntier: batch\ngpus:\n  nvidia.com/gpu.shared: 1\nowners: [vision-admins]\n"
    before = fingerprints(project)
    (project / "dev" / "tenants" / "vision.yaml").write_text(new)
    after = fingerprints(project)
    holder = sharding.holder("vision", 2)
    assert {s for s in ROLES if before[s] != after[s]} == {sharding.shard_stack("dev", holder.shard)}
    inputs = stack_inputs.StackInputs(load_valid_spec(project / SPEC), project, "0.1.0")
    outputs = inputs.document(PLATFORM, CONFIG)["outputs"]
    assert {"capacity", "allowed", "poolConfigs"} <= set(outputs) and not {"granted", "headroom"} & set(outputs)


def test_a_tier_s_priority_moves_the_platform_and_every_shard_holding_a_tenant_of_that_tier(project):
    # production: inference (tenants-0); batch: research (tenants-1)
    assert changed(project, "dev/spec.yaml", "priority: 100000", "priority: 100001") == {"dev", "dev.tenants-0"}
    assert changed(project, "dev/spec.yaml", "priority: 1000\n", "priority: 1001\n") == {"dev", "dev.tenants-1"}


def test_a_tier_s_max_per_pod_moves_its_tenants_shards_only(project):
    assert changed(project, "dev/spec.yaml", "nvidia.com/mig-3g.40gb: 1", "nvidia.com/mig-3g.40gb: 2") == {
        "dev.tenants-0"
    }


def test_a_pool_advertising_new_resources_moves_every_stack(project):
    """Every tenant's ResourceQuota lists every advertised resource name: a pool of new MIG profiles
    (A100-40GB's balanced layout) reaches all of them."""
    pool = (
        "  - name: a40\n    gpu: A100-40GB\n    gpusPerNode: 8\n    nodes: [dev-gpu-a40-1]\n"
        "    pricePerGpuHour: 2\n    sharing:\n      mig:\n        preset: all-balanced\n\ntiers:"
    )
    assert changed(project, "dev/spec.yaml", "tiers:", pool) == set(ROLES)


def test_a_pool_s_nodes_move_the_platform_stack_only(project):
    new = "nodes: [dev-gpu-a100-1, dev-gpu-a100-2]"
    assert changed(project, "dev/spec.yaml", "nodes: [dev-gpu-a100-1]", new) == {"dev"}


def test_under_queueing_a_pool_s_nodes_still_move_the_platform_stack_only(project):
    """With queueing, a tenant's Kueue objects wait for every node patch (issue 35 item 5); a shard stack does not
    register those patches, so its fingerprint counts only the dependencies it wires."""
    spec = project / SPEC
    spec.write_text(spec.read_text() + "\nqueueing: {}\n")
    new = "nodes: [dev-gpu-a100-1, dev-gpu-a100-2]"
    assert changed(project, "dev/spec.yaml", "nodes: [dev-gpu-a100-1]", new) == {"dev"}


def test_config_the_version_and_the_program_count(project):
    base = fingerprints(project)
    with_c = fingerprints(project, stack_inputs.run_config(CONFIG, {"skipAwait": "false"}, "gpupool"))
    assert all(with_c[s] != base[s] for s in ROLES)  # `-c skipAwait=false` is gpupool:skipAwait in project gpupool
    assert all(v != base[s] for s, v in fingerprints(project, version="0.2.0").items())
    (project / "__main__.py").write_text("# the team's program grew\n")
    assert all(v != base[s] for s, v in fingerprints(project).items())


def test_a_secret_counts_but_is_not_in_the_document_in_clear(project):
    secret = {**CONFIG, "gpupool:kubeconfig": ("apiVersion: v1\ntoken: hunter2", True)}
    inputs = stack_inputs.StackInputs(load_valid_spec(project / SPEC), project, "0.1.0")
    doc = json.dumps(inputs.document(PLATFORM, secret))
    assert "hunter2" not in doc and "secret" in doc
    rotated = {**CONFIG, "gpupool:kubeconfig": ("apiVersion: v1\ntoken: hunter3", True)}
    assert inputs.of_stack(PLATFORM, secret) != inputs.of_stack(PLATFORM, rotated)


def test_a_shard_document_holds_exactly_its_tenants_objects(project):
    inputs = stack_inputs.StackInputs(load_valid_spec(project / SPEC), project, "0.1.0")
    doc = inputs.document(SHARD1, stack_inputs.shard_config(CONFIG, ("tenants-1", False)))
    assert {o["component"] for o in doc["objects"]} == {"tenant:notebooks", "tenant:research"}
    assert doc["config"]["gpupool:shard"] == "tenants-1" and "chart" not in doc
    platform = inputs.document(PLATFORM, CONFIG)
    assert not any(o["component"].startswith("tenant:") for o in platform["objects"])
    assert platform["chart"]["name"] == "gpu-operator" and {"migSteps", "rekeyDrains"} <= set(platform)
    # each object with its options, not only its manifest
    assert {"manifest", "depends_on", "retain_on_delete", "ignore_changes", "patch"} <= set(doc["objects"][0])


def test_a_local_chart_s_files_count(project):
    chart = project / "charts" / "gpu-operator"
    shutil.copytree(REPO / "tests" / "charts" / "gpu-operator-stub", chart)
    config = {**CONFIG, "gpupool:operatorChartPath": ("charts/gpu-operator", False)}
    before = fingerprints(project, config)
    values = chart / "values.yaml"
    values.write_text(values.read_text() + "\n# vendored again\n")
    after = fingerprints(project, config)
    assert after["dev"] != before["dev"] and after["dev.tenants-1"] == before["dev.tenants-1"]


def test_short_names_the_algorithm_and_12_digits():
    assert stack_inputs.short("sha256:" + "ab" * 32) == "sha256:abababababab"
