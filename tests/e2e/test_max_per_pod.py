"""Per-pod GPU maximums end to end: gpupool's program through the real engine, then what the API server admits.

One small stack (8 whole GPUs on one node, 14 MIG 1g.10gb instances on another) with one tenant: its own
`maxPerPod: {nvidia.com/gpu: 2}` and its tier's default `nvidia.com/mig-1g.10gb: 2`. Every admission case
records (case, expected, got); set GPUPOOL_E2E_REPORT_DIR=DIR to have the table written there as JSON.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from .stack import E2EStack

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"
GPU, MIG = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
TENANT = "team-a"
POLICY = "gpupool-max-per-pod.team-a"
OWNER = {"as_user": "alice", "as_groups": ["team-a-admins"]}

SPEC = textwrap.dedent("""\
    apiVersion: gpupool.dev/v1alpha1
    kind: GpuPlatform
    cluster: {name: adm, gpuOperator: {namespace: gpu-operator}}
    nodePools:
      - {name: h100, gpu: H100-80GB, gpusPerNode: 8, nodes: [adm-h100-1, adm-h100-2]}
      - {name: a100, gpu: A100-80GB, gpusPerNode: 2, nodes: [adm-a100-1], sharing: {mig: {preset: all-1g.10gb}}}
    tiers:
      - {name: batch, priority: 1000, maxPerPod: {nvidia.com/mig-1g.10gb: 2}}
    tenantFiles: [tenants/]
    """)
TENANT_FILE = textwrap.dedent("""\
    name: team-a
    tier: batch
    gpus: {nvidia.com/gpu: 16, nvidia.com/mig-1g.10gb: 6}
    maxPerPod: {nvidia.com/gpu: 2}
    owners: [team-a-admins]
    """)

RESULTS: list[dict] = []


def _container(name: str, gpus: dict | None = None, restart: str | None = None) -> dict:
    c = {"name": name, "image": "registry.invalid/app:1"}
    if gpus:
        c["resources"] = {"limits": {k: str(v) for k, v in gpus.items()}}
    if restart:
        c["restartPolicy"] = restart
    return c


def _pod_spec(containers: list[dict], inits: list[dict] = ()) -> dict:
    spec = {"containers": containers}
    if inits:
        spec["initContainers"] = list(inits)
    return spec


def _message(obj) -> str:
    return obj.get("message", "") if isinstance(obj, dict) else str(obj)


@pytest.fixture(scope="module")
def control_plane(private_control_plane):
    """Its own API server: other modules' stacks leave retained objects (PriorityClasses, nodes) behind."""
    return private_control_plane


@pytest.fixture(scope="module")
def stack(control_plane, toolchain_bin, tmp_path_factory):
    for node in ("adm-h100-1", "adm-h100-2"):
        control_plane.create_gpu_node(node, {GPU: "8"})
    control_plane.create_gpu_node("adm-a100-1", {MIG: "14"})
    work = tmp_path_factory.mktemp("gpupool-adm")
    (work / "tenants").mkdir()
    (work / "spec.yaml").write_text(SPEC)
    (work / "tenants" / "team-a.yaml").write_text(TENANT_FILE)
    s = E2EStack(
        toolchain_bin, control_plane.kubeconfig, work, spec=work / "spec.yaml", chart=STUB_CHART, stack_name="adm"
    )
    assert s.up().summary.result == "succeeded"
    _wait_quota(control_plane)
    yield s
    s.close()
    if os.environ.get("GPUPOOL_E2E_REPORT_DIR"):
        (Path(os.environ["GPUPOOL_E2E_REPORT_DIR"]) / "max-per-pod.json").write_text(json.dumps(RESULTS, indent=2))


def _wait_quota(cp) -> None:
    cp.wait_for(lambda: cp.quota_synced(TENANT), timeout=60, what="gpu-quota status")


def _create(cp, kind_path: str, body: dict) -> tuple[int, dict]:
    return cp.api("POST", f"/{kind_path}/namespaces/{TENANT}/{body['kind'].lower()}s", body)


def _check(cp, case: str, kind_path: str, body: dict, admitted: bool, message: str = "") -> dict:
    status, obj = _create(cp, kind_path, body)
    got_admitted = status == 201
    got = "admitted" if got_admitted else f"rejected ({status}): {_message(obj)}"
    RESULTS.append({"case": case, "expected": "admitted" if admitted else f"rejected: {message}", "got": got})
    assert got_admitted == admitted, (case, status, obj)
    if not admitted:
        assert message in _message(obj), (case, _message(obj))
        assert f"ValidatingAdmissionPolicy '{POLICY}'" in _message(obj), _message(obj)
    return obj


def _pod(name: str, spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def over(n: int, resource: str = GPU, limit: int = 2, what: str = "this pod") -> str:
    return f"tenant {TENANT}: {what} requests {n} {resource}, above the per-pod maximum of {limit} (gpupool maxPerPod)"


def test_the_policy_and_binding_are_registered(stack, control_plane):
    policy = control_plane.get_json("validatingadmissionpolicy", POLICY)
    assert policy["spec"]["failurePolicy"] == "Fail" and policy["spec"]["validations"], policy["spec"]
    binding = control_plane.get_json("validatingadmissionpolicybinding", POLICY)
    assert binding["spec"]["policyName"] == POLICY and binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": TENANT
    }


def test_a_pod_over_the_maximum_is_rejected_and_one_at_it_admitted(stack, control_plane):
    cp = control_plane
    _check(
        cp,
        "1 container, 3 GPUs (max 2)",
        "api/v1",
        _pod("over", _pod_spec([_container("c", {GPU: 3})])),
        False,
        over(3),
    )
    _check(cp, "1 container, 2 GPUs (max 2)", "api/v1", _pod("at-max", _pod_spec([_container("c", {GPU: 2})])), True)


def test_a_pod_without_gpus_is_untouched(stack, control_plane):
    obj = _check(control_plane, "no GPU", "api/v1", _pod("cpu-only", _pod_spec([_container("c")])), True)
    resources = obj["spec"]["containers"][0].get("resources", {})
    names = set(resources.get("limits", {})) | set(resources.get("requests", {}))
    assert not [n for n in names if n.startswith("nvidia.com/")], resources


def test_containers_are_summed(stack, control_plane):
    cp = control_plane
    _check(
        cp,
        "2 containers, 1 + 2 GPUs",
        "api/v1",
        _pod("two-over", _pod_spec([_container("a", {GPU: 1}), _container("b", {GPU: 2})])),
        False,
        over(3),
    )
    _check(
        cp,
        "2 containers, 1 + 1 GPUs",
        "api/v1",
        _pod("two-ok", _pod_spec([_container("a", {GPU: 1}), _container("b", {GPU: 1})])),
        True,
    )


def test_init_containers_count_as_kubernetes_counts_them(stack, control_plane):
    cp = control_plane
    # An ordinary init container runs before the app containers: max(2, 2) = 2, not 2 + 2.
    _check(
        cp,
        "init 2 GPUs, then container 2 GPUs",
        "api/v1",
        _pod("init-ok", _pod_spec([_container("c", {GPU: 2})], [_container("i", {GPU: 2})])),
        True,
    )
    _check(
        cp,
        "init 3 GPUs, then container 1 GPU",
        "api/v1",
        _pod("init-over", _pod_spec([_container("c", {GPU: 1})], [_container("i", {GPU: 3})])),
        False,
        over(3),
    )
    # A sidecar (restartable init container) runs alongside the app containers: 1 + 2 = 3.
    _check(
        cp,
        "sidecar 1 GPU + container 2 GPUs",
        "api/v1",
        _pod("sidecar-over", _pod_spec([_container("c", {GPU: 2})], [_container("s", {GPU: 1}, "Always")])),
        False,
        over(3),
    )
    # Order matters: a sidecar started before an init container runs during it (1 + 2 = 3) ...
    _check(
        cp,
        "sidecar 1 GPU, then init 2 GPUs; container 1 GPU",
        "api/v1",
        _pod(
            "sidecar-first",
            _pod_spec([_container("c", {GPU: 1})], [_container("s", {GPU: 1}, "Always"), _container("i", {GPU: 2})]),
        ),
        False,
        over(3),
    )
    # ... one started after it does not: max(2 + 0, 1 + 1) = 2.
    _check(
        cp,
        "init 2 GPUs, then sidecar 1 GPU; container 1 GPU",
        "api/v1",
        _pod(
            "sidecar-after",
            _pod_spec([_container("c", {GPU: 1})], [_container("i", {GPU: 2}), _container("s", {GPU: 1}, "Always")]),
        ),
        True,
    )


def test_the_tier_default_applies_to_other_resources(stack, control_plane):
    cp = control_plane
    _check(
        cp,
        "3 MIG 1g.10gb (tier max 2)",
        "api/v1",
        _pod("mig-over", _pod_spec([_container("c", {MIG: 3})])),
        False,
        over(3, MIG),
    )
    _check(cp, "2 MIG 1g.10gb (tier max 2)", "api/v1", _pod("mig-ok", _pod_spec([_container("c", {MIG: 2})])), True)


def _deployment(name: str, spec: dict) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def test_workloads_whose_pods_would_be_rejected_are_rejected_themselves(stack, control_plane):
    cp = control_plane
    _check(
        cp,
        "Deployment, pod template 3 GPUs",
        "apis/apps/v1",
        _deployment("dep-over", _pod_spec([_container("c", {GPU: 3})])),
        False,
        over(3, what="each pod of this Deployment"),
    )
    _check(
        cp,
        "Deployment, pod template 2 GPUs",
        "apis/apps/v1",
        _deployment("dep-ok", _pod_spec([_container("c", {GPU: 2})])),
        True,
    )
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "cron-over"},
        "spec": {
            "schedule": "0 * * * *",
            "jobTemplate": {
                "spec": {"template": {"spec": {**_pod_spec([_container("c", {GPU: 4})]), "restartPolicy": "Never"}}}
            },
        },
    }
    _check(cp, "CronJob, pod template 4 GPUs", "apis/batch/v1", cron, False, over(4, what="each pod of this CronJob"))
    # Raising an admitted Deployment's template above the maximum is refused too.
    dep = cp.get_json("deployment", "dep-ok", "-n", TENANT)
    dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] = "3"
    status, obj = cp.api("PUT", f"/apis/apps/v1/namespaces/{TENANT}/deployments/dep-ok", dep)
    RESULTS.append(
        {
            "case": "Deployment update, template 2 -> 3 GPUs",
            "expected": f"rejected: {over(3, what='each pod of this Deployment')}",
            "got": "admitted" if status == 200 else f"rejected ({status}): {_message(obj)}",
        }
    )
    assert status != 200 and over(3, what="each pod of this Deployment") in _message(obj), obj


def test_the_tenant_owner_cannot_change_or_delete_the_policy_or_binding(stack, control_plane):
    cp = control_plane
    for kind in ("validatingadmissionpolicy", "validatingadmissionpolicybinding"):
        for verb in (
            ("delete", kind, POLICY),
            ("patch", kind, POLICY, "--type=merge", "-p", '{"metadata":{"labels":{"x":"y"}}}'),
        ):
            out = cp.kubectl(*verb, check=False, **OWNER)
            RESULTS.append(
                {
                    "case": f"owner: kubectl {verb[0]} {kind}",
                    "expected": "forbidden",
                    "got": "forbidden" if "forbidden" in out.stderr.lower() else out.stderr or out.stdout,
                }
            )
            assert out.returncode != 0 and "forbidden" in out.stderr.lower(), out.stderr
    # ... while the owner can run pods within the maximum.
    ok = cp.kubectl(
        "create",
        "-n",
        TENANT,
        "-f",
        "-",
        check=False,
        input=json.dumps(_pod("by-owner", _pod_spec([_container("c", {GPU: 1})]))),
        **OWNER,
    )
    assert ok.returncode == 0, ok.stderr


def test_removing_the_maximum_removes_the_enforcement(stack, control_plane):
    cp = control_plane
    stack.edit("tenants/team-a.yaml", "maxPerPod: {nvidia.com/gpu: 2}\n", "")
    stack.up()
    # The tier default still applies, so the tenant's policy stays, now without the GPU maximum.
    _check(
        cp, "maxPerPod removed: 3 GPUs", "api/v1", _pod("after-removal", _pod_spec([_container("c", {GPU: 3})])), True
    )
    _check(
        cp,
        "maxPerPod removed: 3 MIG (tier max 2 stays)",
        "api/v1",
        _pod("mig-still-over", _pod_spec([_container("c", {MIG: 3})])),
        False,
        over(3, MIG),
    )
    stack.edit("spec.yaml", ", maxPerPod: {nvidia.com/mig-1g.10gb: 2}", "")
    stack.up()
    gone = cp.kubectl("get", "validatingadmissionpolicy", POLICY, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stdout
    assert cp.kubectl("get", "validatingadmissionpolicybinding", POLICY, check=False).returncode != 0
    _check(
        cp,
        "tier default removed too: 3 MIG",
        "api/v1",
        _pod("mig-after-removal", _pod_spec([_container("c", {MIG: 3})])),
        True,
    )
