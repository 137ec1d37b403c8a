"""A DRA pool under Kueue: the bundled `stacks/dra` stack with `queueing: {}`, rendered, applied with `kubectl apply
--server-side` to a private kube-apiserver v1.36.3 with kube-scheduler v1.36.3, kube-controller-manager's job,
quota and resourceclaim controllers, and Kueue v0.19.2 (webhooks on, default feature gates) running with the
Configuration `gpupool render` wrote (`kueue/configuration.yaml`); the A100 node's devices published as NVIDIA's
DRA driver publishes them (tests/e2e/dra_driver_sim.py). No kubelet: a pod is done once bound.

Proves (issue 39, item 4):
- Kueue counts a Job whose pods take a device from a ResourceClaimTemplate of the tenant's class under the
  resource name the ClusterQueue holds (the rendered `deviceClassMappings`; without them Kueue finds the class
  unmapped and leaves the Job inadmissible: kueue v0.19.2 pkg/dra/claims.go), and a Job asking the name the
  same way: one quota for both forms;
- the admitted Jobs' pods are bound to the A100 node, each with a device of its class;
- a Job beyond what the quota has left waits in the queue (QuotaReserved False), suspended;
- a pod or Job naming a ResourceClaim directly, which Kueue would not count, is refused by the queue policy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main
from gpupool.k8s.render import KUEUE_CONFIG_FILE
from tests.e2e import kueue_harness
from tests.e2e.cluster import ControlPlane
from tests.e2e.conftest import _checked_bin_dir, _unavailable

from . import dra_driver_sim as driver

pytestmark = pytest.mark.e2e

WAIT = 300  # seconds, generous for a loaded runner; every wait ends as soon as its condition holds
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue-manager", "jobset-manager")
EXTRA_CONTROLLERS = ("job-controller", "resourceclaim-controller")  # the private_control_plane's
REPO = Path(__file__).resolve().parents[2]
A100_NODE, L4_NODE = "dev-gpu-a100-1", "dev-gpu-l4-1"
RESOURCE_API = "/apis/resource.k8s.io/v1"
MIG_1G = "nvidia.com/mig-1g.10gb"
CLASS_1G = "gpupool-a100-mig-mig-1g.10gb"  # docs/explanation/dra.md: gpupool-<pool>-<profile>
NS = "notebooks"
NOTEBOOKS = {"as_user": "nina", "as_groups": ["data-science"]}


@pytest.fixture(scope="module")
def env(private_control_plane, tmp_path_factory):
    bin_dir = _checked_bin_dir(BINARIES)
    for f in ("kueue-crds.yaml", "jobset-crds.yaml"):
        if not (bin_dir / f).is_file():
            _unavailable(f"missing {f} in {bin_dir} (toolchain/build.sh kueue-manager jobset-manager)")
    work = tmp_path_factory.mktemp("dra-kueue")
    stack = work / "dra"
    shutil.copytree(REPO / "stacks" / "dra", stack)
    (stack / "spec.yaml").write_text((stack / "spec.yaml").read_text() + "\nqueueing: {}\n")
    out = work / "out"
    assert main(["render", str(stack / "spec.yaml"), "--output-dir", str(out), "--operator", "values"]) == 0
    configuration = yaml.safe_load((out / KUEUE_CONFIG_FILE).read_text())
    cp = private_control_plane
    managers = []
    try:
        cp.start_scheduler()
        managers = kueue_harness.start(cp, bin_dir, WAIT, configuration)
        a100 = cp.create_gpu_node(A100_NODE)
        cp.create_gpu_node(L4_NODE, {"nvidia.com/gpu.shared": 16})
        cp.make_schedulable(A100_NODE, L4_NODE)
        cp.kubectl("apply", "--server-side", "-f", str(out), check=False)
        cp.kubectl("apply", "--server-side", "-f", str(out))
        cp.apply(driver.driver_classes())
        driver.publish(cp, a100, gpus=4)
        cp.wait_for(
            lambda: cp.quota_synced(NS) and _active(cp, "clusterqueue", NS), WAIT, what="notebooks' quota and queue"
        )
        yield cp
    finally:
        for m in managers:
            m.stop()


def _active(cp: ControlPlane, kind: str, name: str) -> bool:
    p = cp.kubectl("get", kind, name, "-o", "json", check=False)
    conditions = json.loads(p.stdout).get("status", {}).get("conditions", []) if p.returncode == 0 else []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


def _job(name: str, container: dict, claims: list[dict] | None = None) -> dict:
    spec: dict = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.invalid/app:1", **container}],
    }
    if claims:
        spec["resourceClaims"] = claims
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": spec}},
    }


def _template_job(name: str, template: str) -> dict:
    return _job(
        name, {"resources": {"claims": [{"name": "gpu"}]}}, [{"name": "gpu", "resourceClaimTemplateName": template}]
    )


def _template(name: str, count: int) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS_1G, "count": count}}]}
            }
        },
    }


def _post(cp, path: str, obj: dict) -> tuple[int, dict]:
    return cp.api("POST", path, obj, **NOTEBOOKS)


def _workload(cp, job: str) -> dict | None:
    items = cp.get_json("workloads", "-n", NS)["items"]
    return next((w for w in items if any(o["name"] == job for o in w["metadata"].get("ownerReferences", []))), None)


def _condition(cp, job: str, kind: str) -> dict | None:
    wl = _workload(cp, job)
    return next((c for c in (wl or {}).get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _usage(wl: dict) -> dict[str, str]:
    [assignment] = wl["status"]["admission"]["podSetAssignments"]
    return assignment["resourceUsage"]


def _bound_pod(cp, job: str) -> dict | None:
    pods = cp.get_json("pods", "-n", NS, "-l", f"job-name={job}")["items"]
    return pods[0] if pods and pods[0]["spec"].get("nodeName") else None


def _devices(cp, pod: dict) -> list[str]:
    """The devices allocated to the pod's claims (its template claim, or the scheduler's for its extended resources)."""
    names = [c["resourceClaimName"] for c in pod.get("status", {}).get("resourceClaimStatuses", [])]
    ext = pod.get("status", {}).get("extendedResourceClaimStatus")
    names += [ext["resourceClaimName"]] if ext else []
    out = []
    for name in names:
        status, claim = cp.api("GET", f"{RESOURCE_API}/namespaces/{NS}/resourceclaims/{name}")
        out += [
            r["device"] for r in claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
        ]
    return out


def test_templates_and_named_requests_draw_on_one_queue_quota(env):
    cp = env
    granted = yaml.safe_load((REPO / "stacks/dra/tenants/notebooks.yaml").read_text())["gpus"][MIG_1G]
    assert granted == 6, "the bundled stack changed: adjust this test"
    assert _post(cp, f"{RESOURCE_API}/namespaces/{NS}/resourceclaimtemplates", _template("one-1g", 1))[0] == 201
    assert _post(cp, f"{RESOURCE_API}/namespaces/{NS}/resourceclaimtemplates", _template("four-1g", 4))[0] == 201
    assert _post(cp, f"/apis/batch/v1/namespaces/{NS}/jobs", _template_job("by-template", "one-1g"))[0] == 201
    named = _job("by-name", {"resources": {"limits": {MIG_1G: "2"}}})
    assert _post(cp, f"/apis/batch/v1/namespaces/{NS}/jobs", named)[0] == 201
    wl = {}
    for job in ("by-template", "by-name"):
        cond = cp.wait_for(
            lambda job=job: (_condition(cp, job, "Admitted") or {}).get("status") == "True" and job,
            WAIT,
            what=f"{job} admitted",
        )
        wl[cond] = _workload(cp, job)
    # The template's device is counted under the resource name, as the name itself is (the mapping's work).
    assert _usage(wl["by-template"]) == {MIG_1G: "1"}
    assert _usage(wl["by-name"]) == {MIG_1G: "2"}
    devices = _slice_profiles(cp)
    for job, want in (("by-template", 1), ("by-name", 2)):
        pod = cp.wait_for(lambda job=job: _bound_pod(cp, job), WAIT, what=f"{job}'s pod bound")
        assert pod["spec"]["nodeName"] == A100_NODE
        got = _devices(cp, pod)
        assert len(got) == want and {devices[d] for d in got} == {"1g.10gb"}, got

    # 3 of 6 used: a Job wanting 4 more waits in the queue, suspended.
    assert _post(cp, f"/apis/batch/v1/namespaces/{NS}/jobs", _template_job("over", "four-1g"))[0] == 201
    cond = cp.wait_for(lambda: _condition(cp, "over", "QuotaReserved"), WAIT, what="over considered")
    assert cond["status"] == "False" and MIG_1G in cond["message"], cond
    assert cp.get_json("job", "over", "-n", NS)["spec"]["suspend"] is True


def _slice_profiles(cp) -> dict[str, str]:
    items = cp.get_json("resourceslices")["items"]
    return {d["name"]: d["attributes"]["profile"]["string"] for s in items for d in s["spec"]["devices"]}


def test_claims_named_directly_are_refused_with_queueing(env):
    """Kueue counts a pod's templates, not a ResourceClaim it names: the queue policy refuses both forms."""
    cp = env
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "direct"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS_1G}}]}},
    }
    assert _post(cp, f"{RESOURCE_API}/namespaces/{NS}/resourceclaims", claim)[0] == 201
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "direct"},
        "spec": {
            "containers": [
                {"name": "main", "image": "registry.invalid/app:1", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "direct"}],
        },
    }
    job = _job("direct", {"resources": {"claims": [{"name": "gpu"}]}}, [{"name": "gpu", "resourceClaimName": "direct"}])
    for what, path, obj in (
        ("pod", f"/api/v1/namespaces/{NS}/pods", pod),
        ("Job", f"/apis/batch/v1/namespaces/{NS}/jobs", job),
    ):
        status, answer = _post(cp, path, obj)
        assert status == 403, (what, status, answer)
        assert "gpupool-queue-policy" in answer["message"] and "resourceClaimName" in answer["message"], answer
