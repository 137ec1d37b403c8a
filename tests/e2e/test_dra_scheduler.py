"""A DRA pool on a real kube-scheduler: the bundled `stacks/dra` stack (plus a whole-GPU DRA pool) rendered, applied with `kubectl apply
--server-side` to a private kube-apiserver v1.36.3 with kube-scheduler v1.36.3 (its default profile and feature
gates, running as `system:kube-scheduler` with only its bootstrap roles) and kube-controller-manager's quota and
resourceclaim controllers; the A100 node's devices published as NVIDIA's DRA driver publishes them
(tests/e2e/dra_driver_sim.py). No kubelet: a pod is done once bound.

Proves (issue 39, item 5):
- tenants' pods keep their specs: `nvidia.com/mig-3g.40gb: 1` on a node that advertises no such resource is served
  through gpupool's DeviceClass (`extendedResourceName`), each pod bound to the A100 node with its own device of
  the profile it asked, from the driver's slice (kube-scheduler's extended-resource claim, v1.36.3
  pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go 184-205, 544-548);
- a whole-GPU DRA pool (added beside the bundled ones) serves `nvidia.com/gpu: 1` from its product's GPUs only,
  never a stray node's A10 of the same driver;
- a device-plugin pool beside it still serves its name from the node's allocatable (the migration path);
- a tenant's own claims and templates of its granted class are served too, and share the grant with the
  scheduler's claims (the class's quota key counts both: pkg/quota/v1/evaluator/core/resource_claims.go 269-285);
- a pod beyond its grant is refused at admission with the quota named, also when the tenant's own claims hold
  the rest of the grant (quota charges a claim under its class's extended resource name too);
- every bypass attempt by a tenant's own identity is refused (BYPASSES below), each naming the rule or quota.

Expected figures come from the stack's YAML files read here and the A100 layout in dra_driver_sim, not from
gpupool's model. Set GPUPOOL_E2E_REPORT_DIR=DIR to have the attempts table written there as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main

from . import dra_driver_sim as driver

pytestmark = pytest.mark.e2e

EXTRA_CONTROLLERS = ("resourceclaim-controller",)
REPO = Path(__file__).resolve().parents[2]
STACK = REPO / "stacks" / "dra"
A100_NODE, L4_NODE, H100_NODE, STRAY_NODE = "dev-gpu-a100-1", "dev-gpu-l4-1", "dev-gpu-h100-1", "stray-a10-1"
# Beside the bundled stack's pools, one of whole GPUs on DRA, and a tenant granted it: the whole-GPU class's CEL
# (type 'gpu' and the product) on the real scheduler. STRAY_NODE is in no pool; its driver publishes an A10, which
# the class must not select although it is a whole GPU of the same driver.
WHOLE_POOL = """
  - name: h100-dra
    gpu: H100-80GB
    gpusPerNode: 2
    nodes: [dev-gpu-h100-1]
    allocation: dra
"""
VISION = "name: vision\ntier: standard\ngpus: {nvidia.com/gpu: 2}\nowners: [vision-team]\n"
VISION_OWNER = {"as_user": "vic", "as_groups": ["vision-team"]}
RESOURCE_API = "/apis/resource.k8s.io/v1"
MIG_1G, MIG_2G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"
# The classes gpupool names for the a100-mig pool (docs/explanation/dra.md: gpupool-<pool>-<profile>).
CLASS_1G, CLASS_3G = "gpupool-a100-mig-mig-1g.10gb", "gpupool-a100-mig-mig-3g.40gb"
NOTEBOOKS = {"as_user": "nina", "as_groups": ["data-science"]}
INFERENCE = {"as_user": "ivan", "as_groups": ["inference-oncall"]}
RESEARCH = {"as_user": "rosa", "as_groups": ["research-students"]}
ATTEMPTS: list[dict] = []


def _tenant(name: str) -> dict:
    return yaml.safe_load((STACK / "tenants" / f"{name}.yaml").read_text())


def _pod(name: str, limits: dict | None = None, claim: dict | None = None) -> dict:
    container: dict = {"name": "c", "image": "registry.invalid/app:1"}
    if limits:
        container["resources"] = {"limits": {k: str(v) for k, v in limits.items()}}
    spec: dict = {"containers": [container]}
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", **claim}]
        container.setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _claim_spec(cls: str, count: int = 1, **exactly) -> dict:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, "count": count, **exactly}}]}}


def _claim(name: str, spec: dict, annotations: dict | None = None) -> dict:
    meta: dict = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": spec}


def _template(name: str, spec: dict, claim_annotations: dict | None = None) -> dict:
    inner: dict = {"spec": spec}
    if claim_annotations:
        inner["metadata"] = {"annotations": claim_annotations}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": inner,
    }


def _create(cp, ns: str, obj: dict, who: dict) -> tuple[int, dict]:
    path = (
        f"/api/v1/namespaces/{ns}/pods"
        if obj["kind"] == "Pod"
        else f"{RESOURCE_API}/namespaces/{ns}/"
        + ("resourceclaims" if obj["kind"] == "ResourceClaim" else "resourceclaimtemplates")
    )
    return cp.api("POST", path, obj, **who)


def _get(cp, path: str) -> dict:
    status, obj = cp.api("GET", path)
    assert status == 200, (path, obj)
    return obj


def _bound(cp, ns: str, pod: str) -> dict | None:
    obj = _get(cp, f"/api/v1/namespaces/{ns}/pods/{pod}")
    return obj if obj["spec"].get("nodeName") else None


def _scheduling_message(cp, ns: str, pod: str) -> str:
    obj = _get(cp, f"/api/v1/namespaces/{ns}/pods/{pod}")
    cond = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"]
    return cond[0].get("message", "") if cond and cond[0]["status"] == "False" else ""


def _slice_devices(cp) -> dict[str, dict]:
    items = _get(cp, f"{RESOURCE_API}/resourceslices")["items"]
    return {d["name"]: d for s in items if s["spec"]["nodeName"] == A100_NODE for d in s["spec"]["devices"]}


def _allocated(cp, ns: str, claim: str) -> list[dict]:
    obj = _get(cp, f"{RESOURCE_API}/namespaces/{ns}/resourceclaims/{claim}")
    return obj.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])


@pytest.fixture(scope="module")
def cluster(scheduler_bin, private_control_plane, tmp_path_factory):
    cp = private_control_plane
    work = tmp_path_factory.mktemp("dra")
    stack = work / "dra"
    shutil.copytree(STACK, stack)
    text = (stack / "spec.yaml").read_text()
    assert text.count("\nnodePools:\n") == 1
    text = text.replace("\nnodePools:\n", "\nnodePools:" + WHOLE_POOL, 1)
    # The driver is played by dra_driver_sim (its slices and classes), so the release is not rendered: a values
    # file cannot carry the chart's post-render patch that a whole-GPU DRA pool needs (tests/test_dra_install.py).
    assert "\ncluster:\n  name: dra\n" in text
    (stack / "spec.yaml").write_text(
        text.replace("\ncluster:\n  name: dra\n", "\ncluster:\n  name: dra\n  draDriver: {install: false}\n", 1)
    )
    (stack / "tenants" / "vision.yaml").write_text(VISION)
    cp.start_scheduler()
    # Nodes as their kubelets would register them: the A100 node advertises no MIG resource (the device plugin is
    # off on a DRA pool's nodes), the L4 node its time-sliced replicas.
    a100 = cp.create_gpu_node(A100_NODE)
    cp.create_gpu_node(L4_NODE, {"nvidia.com/gpu.shared": 16})
    h100, stray = cp.create_gpu_node(H100_NODE), cp.create_gpu_node(STRAY_NODE)
    cp.make_schedulable(A100_NODE, L4_NODE, H100_NODE, STRAY_NODE)
    out = work / "out"
    assert main(["render", str(stack / "spec.yaml"), "--output-dir", str(out), "--operator", "values"]) == 0
    # Applied twice as docs/reference/cli.md says (apply -f DIR goes by file name: a quota may come before its namespace).
    cp.kubectl("apply", "--server-side", "-f", str(out), check=False)
    cp.kubectl("apply", "--server-side", "-f", str(out))
    cp.apply(driver.driver_classes())
    driver.publish(cp, a100, gpus=4)
    driver.publish(cp, h100, devices=[driver.gpu_device(i, H100_NODE, "NVIDIA H100 80GB HBM3") for i in (0, 1)])
    driver.publish(cp, stray, devices=[driver.gpu_device(0, STRAY_NODE, "NVIDIA A10", "24Gi")])
    for ns in ("notebooks", "inference", "research", "vision"):
        cp.wait_for(lambda ns=ns: cp.quota_synced(ns), 60, what=f"{ns} gpu-quota status")
    # A new policy takes effect once the API server's policy informer has it: poll with a dry-run until refused.
    forged = _claim("probe", _claim_spec(CLASS_1G), {"resource.kubernetes.io/extended-resource-claim": "true"})
    cp.wait_for(
        lambda: (
            cp.api(
                "POST",
                f"{RESOURCE_API}/namespaces/notebooks/resourceclaims",
                forged,
                params={"dryRun": "All"},
                **NOTEBOOKS,
            )[0]
            == 403
        ),
        60,
        what="the DRA guard to take effect",
    )
    yield cp
    report = os.environ.get("GPUPOOL_E2E_REPORT_DIR")
    if report:
        Path(report).mkdir(parents=True, exist_ok=True)
        (Path(report) / "dra-attempts.json").write_text(json.dumps(ATTEMPTS, indent=2))
    if os.environ.get("GPUPOOL_E2E_KEEP"):
        shutil.copytree(cp.log_dir, Path(report or ".") / "dra-logs", dirs_exist_ok=True)


def test_the_dra_node_runs_no_device_plugin(cluster):
    labels = _get(cluster, f"/api/v1/nodes/{A100_NODE}")["metadata"]["labels"]
    assert labels.get("nvidia.com/gpu.deploy.device-plugin") == "false"
    assert "nvidia.com/gpu.deploy.device-plugin" not in _get(cluster, f"/api/v1/nodes/{L4_NODE}")["metadata"]["labels"]


def test_unchanged_pod_specs_get_a_device_of_their_profile(cluster):
    """Every pod inference's grant holds, asking its MIG names as it would from the device plugin, is bound to the
    A100 node with its own device of the profile it asked; one more is refused at admission, naming the quota."""
    cp = cluster
    grants = _tenant("inference")["gpus"]
    assert grants == {MIG_3G: 2, MIG_2G: 2}, "the bundled stack changed: adjust this test"
    pods = {f"{r.split('-', 1)[1]}-{i}": r for r, n in grants.items() for i in range(n)}
    for name, resource in pods.items():
        status, obj = _create(cp, "inference", _pod(name, {resource: 1}), INFERENCE)
        assert status == 201, obj
    seen: set[str] = set()
    devices = _slice_devices(cp)
    for name, resource in pods.items():
        pod = cp.wait_for(lambda name=name: _bound(cp, "inference", name), 60, what=f"pod {name} bound")
        assert pod["spec"]["nodeName"] == A100_NODE
        claim = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        [result] = _allocated(cp, "inference", claim)
        assert (result["driver"], result["pool"]) == (driver.DRIVER, A100_NODE)
        profile = devices[result["device"]]["attributes"]["profile"]["string"]
        assert f"nvidia.com/mig-{profile}" == resource
        seen.add(result["device"])
    assert len(seen) == len(pods)
    status, obj = _create(cp, "inference", _pod("3g-over", {MIG_3G: 1}), INFERENCE)
    assert status == 403 and "exceeded quota: gpu-quota" in obj["message"] and f"requests.{MIG_3G}" in obj["message"]


def test_whole_gpus_of_the_pools_product_only(cluster):
    """vision's two pods asking `nvidia.com/gpu: 1` get the H100 node's two GPUs through the pool's whole-GPU class,
    never the stray node's A10 (a whole GPU of the same driver, outside the class's product list)."""
    cp = cluster
    for i in range(2):
        status, obj = _create(cp, "vision", _pod(f"whole-{i}", {"nvidia.com/gpu": 1}), VISION_OWNER)
        assert status == 201, obj
    seen = set()
    for i in range(2):
        pod = cp.wait_for(lambda i=i: _bound(cp, "vision", f"whole-{i}"), 60, what=f"whole-{i} bound")
        assert pod["spec"]["nodeName"] == H100_NODE
        claim = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        [result] = _allocated(cp, "vision", claim)
        assert result["pool"] == H100_NODE and result["device"] in ("gpu-0", "gpu-1")
        seen.add(result["device"])
    assert seen == {"gpu-0", "gpu-1"}
    # The class itself, outside any tenant: a pod held to the stray node with a claim of the class stays unscheduled
    # (with the product left out of the CEL it would be bound there, to the A10).
    cp.kubectl("create", "namespace", "scratch")
    claim = _claim("one-h100", _claim_spec("gpupool-h100-dra-gpu"))
    assert cp.api("POST", f"{RESOURCE_API}/namespaces/scratch/resourceclaims", claim)[0] == 201
    pod = _pod("stray", claim={"resourceClaimName": "one-h100"})
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": STRAY_NODE}
    assert cp.api("POST", "/api/v1/namespaces/scratch/pods", pod)[0] == 201
    cp.wait_for(
        lambda: _scheduling_message(cp, "scratch", "stray") or _bound(cp, "scratch", "stray"),
        60,
        what="the stray pod bound or refused",
    )
    assert _bound(cp, "scratch", "stray") is None, "the whole-GPU class selected the stray node's A10"


def test_a_device_plugin_pool_beside_it_serves_from_allocatable(cluster):
    cp = cluster
    status, obj = _create(cp, "research", _pod("shared", {"nvidia.com/gpu.shared": 1}), RESEARCH)
    assert status == 201, obj
    pod = cp.wait_for(lambda: _bound(cp, "research", "shared"), 60, what="research pod bound")
    assert pod["spec"]["nodeName"] == L4_NODE
    assert "extendedResourceClaimStatus" not in pod.get("status", {})


def _with_admin_label(cp, ns: str, call):
    """`call()` while `ns` carries the label the API server wants before it admits adminAccess (v1.36.3
    pkg/apis/resource/validation: "admin access to devices requires ..."): a cluster admin's mistake, which the
    tenant cannot make (its owners' `edit` role cannot change namespaces)."""
    cp.kubectl("label", "namespace", ns, "resource.kubernetes.io/admin-access=true")
    try:
        return call()
    finally:
        cp.kubectl("label", "namespace", ns, "resource.kubernetes.io/admin-access-")


def _attempt(what: str, who: str, refused_by: str, status: int, message: str) -> None:
    ATTEMPTS.append({"attempt": what, "by": who, "status": status, "answer": message})
    assert status >= 400, f"{what}: admitted ({status})"
    assert refused_by in message, f"{what}: refused, but not by {refused_by}: {message}"


def test_claims_share_the_grant_and_bypasses_are_refused(cluster):
    """notebooks (6 x 1g.10gb) holds its grant through the scheduler's claims, a template and a claim of its own;
    the attempts around it are refused, and so is a pod beyond what the claims left of the grant."""
    cp = cluster
    assert _tenant("notebooks")["gpus"][MIG_1G] == 6, "the bundled stack changed: adjust this test"
    ns, who = "notebooks", NOTEBOOKS

    # Within the grant: three pods asking the name, one pod through a template, two through one claim of 2.
    for i in range(3):
        assert _create(cp, ns, _pod(f"named-{i}", {MIG_1G: 1}), who)[0] == 201
    assert _create(cp, ns, _template("one-1g", _claim_spec(CLASS_1G)), who)[0] == 201
    assert _create(cp, ns, _pod("templated", claim={"resourceClaimTemplateName": "one-1g"}), who)[0] == 201
    assert _create(cp, ns, _claim("two-1g", _claim_spec(CLASS_1G, 2)), who)[0] == 201
    assert _create(cp, ns, _pod("claimed", claim={"resourceClaimName": "two-1g"}), who)[0] == 201
    for name in ("named-0", "named-1", "named-2", "templated", "claimed"):
        pod = cp.wait_for(lambda name=name: _bound(cp, ns, name), 60, what=f"pod {name} bound")
        assert pod["spec"]["nodeName"] == A100_NODE
    assert len(_allocated(cp, ns, "two-1g")) == 2

    forged = {"resource.kubernetes.io/extended-resource-claim": "true"}
    attempts = [
        (
            "a claim carrying the scheduler's extended-resource annotation (kubernetes#135404)",
            "dra-forged-claim",
            lambda: _create(cp, ns, _claim("forged", _claim_spec(CLASS_1G), forged), who),
        ),
        (
            "a template whose claims would carry that annotation",
            "dra-forged-claim",
            lambda: _create(cp, ns, _template("forged", _claim_spec(CLASS_1G), forged), who),
        ),
        (
            "the annotation added to the tenant's own claim",
            "dra-forged-claim",
            lambda: cp.api(
                "PATCH",
                f"{RESOURCE_API}/namespaces/{ns}/resourceclaims/two-1g",
                {"metadata": {"annotations": forged}},
                content_type="application/merge-patch+json",
                **who,
            ),
        ),
        (
            "allocationMode: All of its own class",
            "dra-allocation-all",
            lambda: _create(
                cp,
                ns,
                _claim(
                    "all",
                    {
                        "devices": {
                            "requests": [
                                {"name": "gpu", "exactly": {"deviceClassName": CLASS_1G, "allocationMode": "All"}}
                            ]
                        }
                    },
                ),
                who,
            ),
        ),
        (
            "adminAccess: true on its own class",
            "requires the `resource.kubernetes.io/admin-access: true` label",
            lambda: _create(cp, ns, _claim("admin", _claim_spec(CLASS_1G, adminAccess=True)), who),
        ),
        (
            "adminAccess: true, the namespace labelled for admin access by a cluster admin",
            "dra-admin-access",
            lambda: _with_admin_label(
                cp, ns, lambda: _create(cp, ns, _claim("admin", _claim_spec(CLASS_1G, adminAccess=True)), who)
            ),
        ),
        (
            "another tenant's class (inference's 3g.40gb)",
            "dra-ungranted-class",
            lambda: _create(cp, ns, _claim("foreign", _claim_spec(CLASS_3G)), who),
        ),
        (
            "the driver's own class mig.nvidia.com",
            "dra-ungranted-class",
            lambda: _create(cp, ns, _claim("driver", _claim_spec("mig.nvidia.com")), who),
        ),
        (
            "a firstAvailable list reaching an ungranted class",
            "dra-ungranted-class",
            lambda: _create(
                cp,
                ns,
                _claim(
                    "first",
                    {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "firstAvailable": [
                                        {"name": "own", "deviceClassName": CLASS_1G},
                                        {"name": "big", "deviceClassName": CLASS_3G},
                                    ],
                                }
                            ]
                        }
                    },
                ),
                who,
            ),
        ),
        (
            "a claim template in another tenant's namespace",
            "forbidden",
            lambda: _create(cp, "inference", _template("borrowed", _claim_spec(CLASS_3G)), who),
        ),
        (
            "a pod asking a foreign class's implicit name",
            "exceeded quota: gpu-quota",
            lambda: _create(cp, ns, _pod("implicit", {f"deviceclass.resource.kubernetes.io/{CLASS_3G}": 1}), who),
        ),
        (
            "a claim of 7 devices of its own class (grant 6)",
            "exceeded quota: gpu-quota",
            lambda: _create(cp, ns, _claim("seven", _claim_spec(CLASS_1G, 7)), who),
        ),
        (
            "a tenant without a DRA grant claiming notebooks' class",
            "dra-ungranted-class",
            lambda: _create(cp, "research", _claim("stolen", _claim_spec(CLASS_1G)), RESEARCH),
        ),
    ]
    for what, refused_by, call in attempts:
        status, obj = call()
        _attempt(
            what,
            "research" if "without a DRA grant" in what else ns,
            refused_by,
            status,
            obj.get("message", "") if isinstance(obj, dict) else str(obj),
        )

    # A second pod on the claim of 2: admitted (a pod names claims freely), never bound: the scheduler's
    # reservation is refused by the guard (a PreBind error, retried with backoff: schedule_one.go 517-535).
    assert _create(cp, ns, _pod("sharing", claim={"resourceClaimName": "two-1g"}), who)[0] == 201
    cp.wait_for(
        lambda: _scheduling_message(cp, ns, "sharing") or _bound(cp, ns, "sharing"),
        60,
        what="the sharing pod bound or refused",
    )
    bound = _bound(cp, ns, "sharing")
    _attempt(
        "a second pod on the tenant's claim (sharing it)",
        ns,
        "dra-shared-claim",
        201 if bound else 400,
        _scheduling_message(cp, ns, "sharing"),
    )
    reserved = _get(cp, f"{RESOURCE_API}/namespaces/{ns}/resourceclaims/two-1g")["status"]["reservedFor"]
    assert [r["name"] for r in reserved] == ["claimed"]

    # The grant is used up (3 + 1 + 2 devices): a fourth pod asking the name is refused at admission. Quota charges
    # a claim of a class with the class's extended resource name as well (resource_claims.go 138-167, 291-292), so
    # requests.nvidia.com/mig-1g.10gb counts the tenant's own claims beside its pods, not the pods alone.
    status, obj = _create(cp, ns, _pod("named-3", {MIG_1G: 1}), who)
    _attempt(
        "a pod asking the name once the tenant's own claims hold the rest of the grant",
        ns,
        f"exceeded quota: gpu-quota, requested: requests.{MIG_1G}=1, used: requests.{MIG_1G}=6",
        status,
        obj.get("message", ""),
    )
    time.sleep(2)
    assert _bound(cp, ns, "sharing") is None
