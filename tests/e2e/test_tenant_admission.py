"""What a tenant's namespace admits, on the real kube-apiserver v1.36.3: the priority guard and the container
defaults, as `gpupool render` writes them and `kubectl apply --server-side` applies them.

Proves (issue 19, items 1, 7, 6 and 4):
- the guard refuses every class above the tenant's tier, whoever made it: `system-node-critical` and
  `system-cluster-critical` (built into every API server, `pkg/apis/scheduling/v1/helpers.go`), gpupool's own
  higher tier and an unrelated third-party class; it admits the own tier, a lower tier, a third-party class
  below the tier and a pod with no class. The Priority plugin resolves any existing class for any namespace
  (`plugin/pkg/admission/priority/admission.go`, `admitPod`), so before this guard all four got in;
- the container defaults cannot break a GPU pod: a container asking for 16Gi without a limit, one with no
  resources and one whose limit is below the default request are all admitted with the requests they asked
  for (or the defaults) and no injected limit; a tenant whose spec names a default limit gets it (and the
  API server then refuses a request above it, as the README says);
- with failRequestsGreaterThanOne (time-slicing's default), a container asking for 2 shared units is refused
  at admission (the device plugin would fail it at kubelet Allocate, k8s-device-plugin `internal/rm/rm.go`,
  per container); two containers of one are admitted;
- a tier priority edit reaches the cluster through the render: a plain apply fails (value is immutable),
  `kubectl replace --force` of the tier's file (what `gpupool diff` tells the user to run) and then the apply
  succeed.

Uses the shared control plane: the tenants, tiers and third-party classes are named uniquely per run.
Only tenant and tier objects are applied (the node patches would create Node objects on a shared server).
"""

from __future__ import annotations

import json
import textwrap
import uuid

import pytest

from gpupool.cli.main import main

pytestmark = pytest.mark.e2e

GPU = "nvidia.com/gpu"
# Cluster-scoped names (PriorityClasses, namespaces) unique to this run: the control plane is shared.
RUN = f"g{uuid.uuid4().hex[:6]}"
LOW, MID, HIGH = f"{RUN}-low", f"{RUN}-mid", f"{RUN}-high"
TENANT, LIMITED = f"{RUN}-a", f"{RUN}-b"
VENDOR_HIGH, VENDOR_LOW = f"{RUN}-vendor-high", f"{RUN}-vendor-low"
OWNER = {"as_user": "alice", "as_groups": ["adm-guard-owners"]}

SPEC = textwrap.dedent(f"""\
    apiVersion: gpupool.dev/v1alpha1
    kind: GpuPlatform
    cluster: {{name: adm-guard, gpuOperator: {{namespace: adm-guard-gpu-operator}}}}
    nodePools:
      - {{name: h100, gpu: H100-80GB, gpusPerNode: 8, nodes: [adm-guard-h100-1, adm-guard-h100-2]}}
      - {{name: l4, gpu: L4, gpusPerNode: 4, nodes: [adm-guard-l4-1], sharing: {{timeSlicing: {{replicas: 4}}}}}}
    tiers:
      - {{name: {HIGH}, priority: 900000}}
      - {{name: {MID}, priority: 9000}}
      - {{name: {LOW}, priority: 90, preemptionPolicy: Never}}
    tenants:
      - name: {TENANT}
        tier: {MID}
        gpus: {{nvidia.com/gpu: 12, nvidia.com/gpu.shared: 8}}
        compute: {{cpu: "64", memory: 512Gi}}
        owners: [adm-guard-owners]
      - name: {LIMITED}
        tier: {MID}
        gpus: {{nvidia.com/gpu: 4}}
        containerDefaults: {{limits: {{memory: 4Gi}}}}
        owners: [adm-guard-owners]
    """)


@pytest.fixture(scope="module")
def applied(control_plane, tmp_path_factory):
    cp = control_plane
    work = tmp_path_factory.mktemp("adm-guard")
    (work / "spec.yaml").write_text(SPEC)
    out = work / "out"
    assert main(["render", str(work / "spec.yaml"), "--output-dir", str(out), "--operator", "values"]) == 0
    files = sorted(p for p in out.glob("*.yaml") if p.name.startswith(("tenant-", "tier-")))
    for batch in (
        [p for p in files if p.name.endswith("-ns.yaml")],
        [p for p in files if not p.name.endswith("-ns.yaml")],
    ):
        cp.kubectl("apply", "--server-side", "--force-conflicts", *(a for p in batch for a in ("-f", str(p))))
    for name, value in ((VENDOR_HIGH, 5_000_000), (VENDOR_LOW, 10)):
        cp.apply(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        )
    for ns in (TENANT, LIMITED):
        cp.wait_for(lambda ns=ns: cp.quota_synced(ns), timeout=60, what=f"{ns} gpu-quota status")
    # A new policy takes effect once the API server's policy informer has it: poll until a probe is refused.
    if any("priority-guard-policy" in p.name for p in files):
        cp.wait_for(
            lambda: _create(cp, TENANT, _pod("probe", "system-node-critical"), dry_run=True)[0] == 403,
            60,
            what="the priority guard to take effect",
        )
    return cp


def _pod(name: str, priority_class: str | None = None, resources: dict | None = None) -> dict:
    container = {"name": "c", "image": "registry.invalid/app:1", "resources": {"limits": {GPU: "1"}}}
    for part, values in (resources or {}).items():
        container["resources"].setdefault(part, {}).update(values)
    spec: dict = {"containers": [container]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _create(cp, ns: str, pod: dict, dry_run: bool = False) -> tuple[int, dict]:
    params = {"dryRun": "All"} if dry_run else None
    return cp.api("POST", f"/api/v1/namespaces/{ns}/pods", pod, params=params, **OWNER)


# Test ids are the case alone, not the run's random class names: the xdist workers must collect equal ids.
ABOVE = [
    ("system-node-critical", "system-node-critical"),
    ("system-cluster-critical", "system-cluster-critical"),
    ("a higher gpupool tier", HIGH),
    ("an unrelated third-party class", VENDOR_HIGH),
]
AT_OR_BELOW = [
    ("the own tier", MID, 9000),
    ("a lower tier", LOW, 90),
    ("a third-party class below the tier", VENDOR_LOW, 10),
    ("no class", None, 0),
]


@pytest.mark.parametrize("case,priority_class", ABOVE, ids=[c[0] for c in ABOVE])
def test_the_guard_refuses_every_class_above_the_tier(applied, case, priority_class):
    status, obj = _create(applied, TENANT, _pod(f"above-{priority_class}"[:63], priority_class))
    assert status == 403, (case, status, obj)
    message = obj.get("message", "")
    assert f"ValidatingAdmissionPolicy 'gpupool-priority-guard.{TENANT}'" in message, message
    assert f"above the tier {MID} (9000)" in message, message


@pytest.mark.parametrize("case,priority_class,priority", AT_OR_BELOW, ids=[c[0] for c in AT_OR_BELOW])
def test_the_guard_admits_the_own_tier_lower_ones_and_no_class(applied, case, priority_class, priority):
    status, obj = _create(applied, TENANT, _pod(f"ok-{priority_class or 'none'}", priority_class))
    assert status == 201, (case, status, obj)
    assert obj["spec"]["priority"] == priority, obj["spec"]


def _resources(obj: dict) -> dict:
    return obj["spec"]["containers"][0]["resources"]


def test_a_gpu_pod_asking_for_more_memory_than_any_default_without_a_limit_is_admitted(applied):
    status, obj = _create(applied, TENANT, _pod("big-request", resources={"requests": {"memory": "16Gi"}}))
    assert status == 201, obj
    assert _resources(obj)["requests"]["memory"] == "16Gi"
    assert "memory" not in _resources(obj)["limits"], _resources(obj)  # no limit injected to refuse it or OOM it


def test_a_gpu_pod_with_no_cpu_or_memory_gets_default_requests_and_no_limit(applied):
    status, obj = _create(applied, TENANT, _pod("bare"))
    assert status == 201, obj
    r = _resources(obj)
    assert (r["requests"]["cpu"], r["requests"]["memory"]) == ("100m", "256Mi"), r
    assert set(r["limits"]) == {GPU}, r


def test_a_limit_below_the_default_request_is_its_own_request(applied):
    status, obj = _create(applied, TENANT, _pod("small-limit", resources={"limits": {"memory": "128Mi"}}))
    assert status == 201, obj
    assert _resources(obj)["requests"]["memory"] == "128Mi", _resources(obj)


def test_a_default_limit_is_injected_only_where_the_spec_names_one(applied):
    status, obj = _create(applied, LIMITED, _pod("bare"))
    assert status == 201, obj
    assert _resources(obj)["limits"] == {GPU: "1", "memory": "4Gi"}, _resources(obj)
    status, obj = _create(applied, LIMITED, _pod("over-default", resources={"requests": {"memory": "16Gi"}}))
    assert status == 422 and "must be less than or equal to memory limit" in obj.get("message", ""), obj


def test_more_than_one_shared_unit_in_a_container_is_refused_and_one_per_container_admitted(applied):
    shared = "nvidia.com/gpu.shared"
    two = _pod("two-shared")
    two["spec"]["containers"][0]["resources"] = {"limits": {shared: "2"}}
    # Its policy was applied with the guard's; wait (bounded) until the API server enforces it too.
    applied.wait_for(lambda: _create(applied, TENANT, two, dry_run=True)[0] != 201, 60, what="the shared-unit check")
    status, obj = _create(applied, TENANT, two)
    assert status == 403, obj
    assert "at most one per container (failRequestsGreaterThanOne)" in obj.get("message", ""), obj
    pair = _pod("one-each")
    pair["spec"]["containers"] = [
        {"name": n, "image": "registry.invalid/app:1", "resources": {"limits": {shared: "1"}}} for n in ("a", "b")
    ]
    status, obj = _create(applied, TENANT, pair)
    assert status == 201, obj


def test_a_tier_priority_edit_applies_after_replacing_the_tiers_file(applied, tmp_path):
    cp = applied
    (tmp_path / "spec.yaml").write_text(SPEC.replace("priority: 9000}", "priority: 9500}"))
    out = tmp_path / "out"
    assert main(["render", str(tmp_path / "spec.yaml"), "--output-dir", str(out), "--operator", "values"]) == 0
    tier_file = out / f"tier-{MID}.yaml"
    uid = cp.get_json("priorityclass", MID)["metadata"]["uid"]
    ssa = ("apply", "--server-side", "--force-conflicts", "-f")
    plain = cp.kubectl(*ssa, str(tier_file), check=False)
    assert plain.returncode != 0 and "value: Forbidden: may not be changed in an update" in plain.stderr, plain
    cp.kubectl("replace", "--force", "-f", str(tier_file))
    files = [p for p in sorted(out.glob("*.yaml")) if p.name.startswith(("tenant-", "tier-"))]
    cp.kubectl("apply", "--server-side", "--force-conflicts", *(a for p in files for a in ("-f", str(p))))
    pc = cp.get_json("priorityclass", MID)
    assert pc["value"] == 9500 and pc["metadata"]["uid"] != uid


def test_between_a_tiers_class_and_its_guard_the_tiers_own_pods_stay_admitted(applied, tmp_path):
    """Proves: with the tier's class already at a new value and the tenant's guard still at the old one (the
    moment inside a tier edit's run, or a run that died there), a pod naming the tier is admitted at the class's
    value, and any other class above the guard's value is still refused."""
    cp = applied
    literal = cp.get_json("validatingadmissionpolicy", f"gpupool-priority-guard.{TENANT}")["spec"]["validations"]
    value = int(literal[0]["expression"].rsplit("<= ", 1)[1])
    raised = cp.get_json("priorityclass", MID)
    raised = {k: raised[k] for k in ("apiVersion", "kind", "preemptionPolicy")} | {
        "metadata": {"name": MID, "labels": raised["metadata"].get("labels", {})},
        "value": value + 400,
    }
    (tmp_path / "raised.json").write_text(json.dumps(raised))
    cp.kubectl("replace", "--force", "-f", str(tmp_path / "raised.json"))
    between = f"{RUN}-vendor-between"
    cp.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": between},
            "value": value + 200,
        }
    )
    # The Priority plugin reads classes from an informer: poll (bounded) until it resolves the new ones.
    own = cp.wait_for(
        lambda: (
            (r := _create(cp, TENANT, _pod("own-raised", MID), dry_run=True))[0] == 201
            and r[1]["spec"]["priority"] == value + 400
            and r
        ),
        timeout=60,
        what="the raised class to be resolved",
    )
    assert own[1]["spec"]["priority"] == value + 400
    refused = cp.wait_for(
        lambda: (
            (r := _create(cp, TENANT, _pod("between", between), dry_run=True))[0] == 403
            and "ValidatingAdmissionPolicy" in r[1].get("message", "")
            and r
        ),
        timeout=60,
        what="the guard to refuse the class between",
    )
    assert f"gpupool-priority-guard.{TENANT}" in refused[1]["message"], refused
